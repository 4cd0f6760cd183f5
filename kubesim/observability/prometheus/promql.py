"""PromQL evaluation over the emulated TSDB: the real parser (promql-parser) gives the AST, this
module evaluates it with Prometheus's semantics (5-minute lookback and staleness, extrapolated
rate/increase with counter resets, vector matching, histogram_quantile)."""

from __future__ import annotations

import math
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import Any

import promql_parser as pp

from kubesim.observability.formats import format_value
from kubesim.observability.prometheus import promql_ast as ast
from kubesim.observability.prometheus.promql_functions import (
    ARITH,
    COMPARE,
    MATH_FUNCS,
    OVER_TIME,
    aggregate_values,
    bucket_quantile,
    changes,
    extrapolated_rate,
    go_expand,
    instant_delta,
    linear_regression,
    quantile,
    resets,
    round_to,
)
from kubesim.observability.prometheus.tsdb import TSDB, Series, is_stale

LOOKBACK = 300.0
DEFAULT_SUBQUERY_STEP = 60.0
MAX_POINTS = 11000

Labels = dict[str, str]
Sample = tuple[Labels, float]
Vector = list[Sample]


class PromQLError(Exception):
    """An error as the Prometheus API reports it: errorType (bad_data, execution) and text."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type, self.message = error_type, message


class Scalar:
    __slots__ = ("v",)

    def __init__(self, v: float) -> None:
        self.v = v


class String:
    __slots__ = ("s",)

    def __init__(self, s: str) -> None:
        self.s = s


class RangeVector:
    """Samples of each series within a window: [(labels, [t...], [v...])]."""

    __slots__ = ("series",)

    def __init__(self, series: list[tuple[Labels, list[float], list[float]]]) -> None:
        self.series = series


def parse(query: str) -> ast.Node:
    if not query.strip():
        raise PromQLError("bad_data", 'invalid parameter "query": parse error: no expression found in input')
    try:
        expr = pp.parse(query)
    except ValueError as e:
        raise PromQLError("bad_data", f'invalid parameter "query": parse error: {e}') from e
    return ast.compile_expr(expr)


def _drop_name(labels: Labels) -> Labels:
    if "__name__" in labels:
        labels = dict(labels)
        del labels["__name__"]
    return labels


def _key(labels: Labels) -> frozenset[tuple[str, str]]:
    return frozenset(labels.items())


def _fmt_labels(labels: Labels) -> str:
    name = labels.get("__name__", "")
    inner = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "__name__")
    return f"{name}{{{inner}}}"


class Evaluator:
    """Evaluates one parsed query at one or many timestamps. Series selection is done once per
    query (cached per selector node), sample lookup per timestamp is a bisect."""

    def __init__(self, tsdb: TSDB, start: float, end: float, lookback: float = LOOKBACK,
                 subquery_step: float = DEFAULT_SUBQUERY_STEP) -> None:
        self.tsdb = tsdb
        self.start, self.end = start, end
        self.lookback = lookback
        self.subquery_step = subquery_step
        self._selected: dict[str, list[Series]] = {}

    # --- selection ---------------------------------------------------------------------------
    def _series_for(self, vs: ast.VectorSelector) -> list[Series]:
        got = self._selected.get(vs.key)
        if got is None:
            if len(vs.groups) == 1:
                got = self.tsdb.select(vs.groups[0])
            else:
                seen: dict[int, Series] = {}
                for matchers in vs.groups:
                    for s in self.tsdb.select(matchers):
                        seen[id(s)] = s
                got = list(seen.values())
            self._selected[vs.key] = got
        return got

    def _at_time(self, at: pp.AtModifier | None, t: float) -> float:
        if at is None:
            return t
        if at.type == pp.AtModifierType.Start:
            return self.start
        if at.type == pp.AtModifierType.End:
            return self.end
        assert at.at is not None
        return at.at.timestamp()

    def _instant_select(self, vs: ast.VectorSelector, t: float) -> Vector:
        tt = self._at_time(vs.at, t) - vs.offset
        lo = tt - self.lookback
        out: Vector = []
        add = out.append
        for s in self._series_for(vs):
            ts = s.ts
            vals = s.vs
            # len(vals), not len(ts): a writer without the lock may have appended the time but not
            # yet the value; a rule evaluates at the newest sample, so no bisect is needed then
            n = len(vals)
            i = n - 1 if n and ts[n - 1] <= tt else min(bisect_right(ts, tt), n) - 1
            # Prometheus 2.x (what SREGym runs) includes a sample exactly lookback old
            if i >= 0 and ts[i] >= lo:
                v = vals[i]
                if v != v and is_stale(v):
                    continue
                add((s.labels, v))
        return out

    def _range_select(self, ms: ast.MatrixSelector, t: float) -> tuple[RangeVector, float, float]:
        vs = ms.vector_selector
        end = self._at_time(vs.at, t) - vs.offset
        start = end - ms.range
        out = []
        for s in self._series_for(vs):
            ts = s.ts
            i0 = bisect_left(ts, start)  # 2.x ranges are closed: [t - range, t]
            i1 = min(bisect_right(ts, end), len(s.vs))
            if i1 <= i0:
                continue
            # array slices, not lists: the reducers only iterate, index and sum them
            tl: Any = ts[i0:i1]
            vl: Any = s.vs[i0:i1]
            total = sum(vl)
            if total != total:  # a NaN somewhere (or inf - inf): look for staleness markers
                pairs = [(a, b) for a, b in zip(tl, vl, strict=True) if not (b != b and is_stale(b))]
                if not pairs:
                    continue
                tl = [a for a, _ in pairs]
                vl = [b for _, b in pairs]
            out.append((s.labels, tl, vl))
        return RangeVector(out), start, end

    def _subquery(self, sq: ast.SubqueryExpr, t: float) -> tuple[RangeVector, float, float]:
        end = self._at_time(sq.at, t) - sq.offset
        rng = sq.range
        step = sq.step or self.subquery_step
        start = end - rng
        first = math.floor(start / step) * step
        if first < start:
            first += step
        acc: dict[frozenset[tuple[str, str]], tuple[Labels, list[float], list[float]]] = {}
        at = first
        while at <= end + 1e-9:
            val = self.eval(sq.expr, at)
            if isinstance(val, Scalar):
                val = [({}, val.v)]
            if not isinstance(val, list):
                raise PromQLError("bad_data", "subquery is only allowed on instant vector or scalar expressions")
            for labels, v in val:
                entry = acc.get(_key(labels))
                if entry is None:
                    entry = acc[_key(labels)] = (labels, [], [])
                entry[1].append(at)
                entry[2].append(v)
            at += step
        return RangeVector(list(acc.values())), start, end

    def _range_arg(self, node: Any, t: float) -> tuple[RangeVector, float, float]:
        if isinstance(node, ast.MatrixSelector):
            return self._range_select(node, t)
        if isinstance(node, ast.SubqueryExpr):
            return self._subquery(node, t)
        if isinstance(node, ast.ParenExpr):
            return self._range_arg(node.expr, t)
        raise PromQLError("bad_data", "expected a range vector")

    # --- evaluation ----------------------------------------------------------------------------
    def eval(self, node: Any, t: float) -> Any:
        kind = node.__class__
        if kind is ast.VectorSelector:
            return self._instant_select(node, t)
        if kind is ast.BinaryExpr:
            return self._binary(node, t)
        if kind is ast.AggregateExpr:
            return self._aggregate(node, t)
        if kind is ast.Call:
            return self._call(node, t)
        if kind is ast.NumberLiteral:
            return Scalar(node.val)
        if kind is ast.ParenExpr:
            return self.eval(node.expr, t)
        if kind is ast.StringLiteral:
            return String(node.val)
        if kind is ast.UnaryExpr:
            val = self.eval(node.expr, t)
            if isinstance(val, Scalar):
                return Scalar(-val.v)
            return [(_drop_name(labels), -v) for labels, v in val]
        if kind is ast.MatrixSelector:
            return self._range_select(node, t)[0]
        if kind is ast.SubqueryExpr:
            return self._subquery(node, t)[0]
        raise PromQLError("bad_data", f"unsupported expression {getattr(node, 'kind', kind.__name__)}")

    def _vector(self, node: Any, t: float) -> Vector:
        val = self.eval(node, t)
        if not isinstance(val, list):
            raise PromQLError("bad_data", "expected an instant vector")
        return val

    def _scalar(self, node: Any, t: float) -> float:
        val = self.eval(node, t)
        if isinstance(val, Scalar):
            return val.v
        raise PromQLError("bad_data", "expected a scalar")

    # --- functions ------------------------------------------------------------------------------
    def _call(self, node: ast.Call, t: float) -> Any:
        name = node.name
        args = node.args
        if name in ("rate", "increase", "delta"):
            rv, start, end = self._range_arg(args[0], t)
            out = []
            for labels, ts, vs in rv.series:
                r = extrapolated_rate(ts, vs, start, end, counter=name != "delta", per_second=name == "rate")
                if r is not None:
                    out.append((_drop_name(labels), r))
            return out
        if name in ("irate", "idelta"):
            rv, _, _ = self._range_arg(args[0], t)
            out = []
            for labels, ts, vs in rv.series:
                r = instant_delta(ts, vs, is_rate=name == "irate")
                if r is not None:
                    out.append((_drop_name(labels), r))
            return out
        if name in OVER_TIME:
            rv, _, _ = self._range_arg(args[0], t)
            f = OVER_TIME[name]
            keep_name = name == "last_over_time"
            return [(labels if keep_name else _drop_name(labels), f(vs)) for labels, _, vs in rv.series]
        if name == "quantile_over_time":
            q = self._scalar(args[0], t)
            rv, _, _ = self._range_arg(args[1], t)
            return [(_drop_name(labels), quantile(q, vs)) for labels, _, vs in rv.series]
        if name in ("changes", "resets"):
            rv, _, _ = self._range_arg(args[0], t)
            f = changes if name == "changes" else resets
            return [(_drop_name(labels), f(vs)) for labels, _, vs in rv.series]
        if name in ("deriv", "predict_linear"):
            rv, _, _ = self._range_arg(args[0], t)
            ahead = self._scalar(args[1], t) if name == "predict_linear" else 0.0
            out = []
            for labels, ts, vs in rv.series:
                if len(ts) < 2:
                    continue
                slope, icpt = linear_regression(ts, vs, t)
                out.append((_drop_name(labels), slope if name == "deriv" else slope * ahead + icpt))
            return out
        if name in ("absent", "absent_over_time"):
            if name == "absent":
                present = bool(self._vector(args[0], t))
            else:
                present = bool(self._range_arg(args[0], t)[0].series)
            if present:
                return []
            return [(self._absent_labels(args[0]), 1.0)]
        if name in MATH_FUNCS:
            fn = MATH_FUNCS[name]
            return [(_drop_name(labels), fn(v)) for labels, v in self._vector(args[0], t)]
        if name == "round":
            to = self._scalar(args[1], t) if len(args) > 1 else 1.0
            return [(_drop_name(labels), round_to(v, to)) for labels, v in self._vector(args[0], t)]
        if name in ("clamp_min", "clamp_max", "clamp"):
            vec = self._vector(args[0], t)
            if name == "clamp":
                lo, hi = self._scalar(args[1], t), self._scalar(args[2], t)
                if lo > hi:
                    return []
                return [(_drop_name(labels), max(lo, min(hi, v))) for labels, v in vec]
            b = self._scalar(args[1], t)
            f = max if name == "clamp_min" else min
            return [(_drop_name(labels), f(v, b) if not math.isnan(v) else v) for labels, v in vec]
        if name == "time":
            return Scalar(t)
        if name == "vector":
            return [({}, self._scalar(args[0], t))]
        if name == "scalar":
            vec = self._vector(args[0], t)
            return Scalar(vec[0][1] if len(vec) == 1 else math.nan)
        if name == "timestamp":
            return self._timestamp(args[0], t)
        if name in ("sort", "sort_desc"):
            vec = self._vector(args[0], t)
            return sorted(vec, key=lambda s: s[1], reverse=name == "sort_desc")
        if name == "label_replace":
            return self._label_replace(args, t)
        if name == "label_join":
            vec = self._vector(args[0], t)
            dst, sep = args[1].val, args[2].val
            srcs = [a.val for a in args[3:]]
            out = []
            for labels, v in vec:
                out.append((_with_label(labels, dst, sep.join(labels.get(s, "") for s in srcs)), v))
            return out
        if name == "histogram_quantile":
            return self._histogram_quantile(self._scalar(args[0], t), self._vector(args[1], t))
        if name in ("minute", "hour", "day_of_week", "day_of_month", "day_of_year", "month", "year", "days_in_month"):
            return self._date_func(name, args, t)
        if name in ("pi",):
            return Scalar(math.pi)
        raise PromQLError("bad_data", f"function {name!r} is not supported by this Prometheus")

    def _absent_labels(self, node: Any) -> Labels:
        while isinstance(node, ast.ParenExpr):
            node = node.expr
        if isinstance(node, ast.MatrixSelector):
            node = node.vector_selector
        if not isinstance(node, ast.VectorSelector):
            return {}
        labels: Labels = {}
        dup: set[str] = set()
        for m in node.matchers:
            if m.op == "=" and m.name != "__name__":
                if m.name in labels:
                    dup.add(m.name)
                labels[m.name] = m.value
        for d in dup:
            labels.pop(d, None)
        return labels

    def _timestamp(self, node: Any, t: float) -> Vector:
        inner = node
        while isinstance(inner, ast.ParenExpr):
            inner = inner.expr
        if isinstance(inner, ast.VectorSelector):
            tt = self._at_time(inner.at, t) - inner.offset
            out = []
            for s in self._series_for(inner):
                i = min(bisect_right(s.ts, tt), len(s.vs)) - 1
                if i >= 0 and s.ts[i] >= tt - self.lookback and not is_stale(s.vs[i]):
                    out.append((_drop_name(s.labels), s.ts[i]))
            return out
        return [(_drop_name(labels), t) for labels, _ in self._vector(node, t)]

    def _label_replace(self, args: list[Any], t: float) -> Vector:
        vec = self._vector(args[0], t)
        dst, repl, src, regex = (a.val for a in args[1:5])
        try:
            rx = re.compile(regex)
        except re.error as e:
            raise PromQLError("bad_data", f'invalid regular expression in label_replace(): {regex}: {e}') from e
        out = []
        for labels, v in vec:
            m = rx.fullmatch(labels.get(src, ""))
            if m is None:
                out.append((labels, v))
                continue
            out.append((_with_label(labels, dst, go_expand(repl, m)), v))
        return out

    def _histogram_quantile(self, q: float, vec: Vector) -> Vector:
        groups: dict[frozenset[tuple[str, str]], tuple[Labels, list[tuple[float, float]]]] = {}
        for labels, v in vec:
            le = labels.get("le")
            if le is None:
                continue
            try:
                ub = float(le)
            except ValueError:
                continue
            base = {k: x for k, x in labels.items() if k not in ("le", "__name__")}
            g = groups.setdefault(_key(base), (base, []))
            g[1].append((ub, v))
        return [(base, bucket_quantile(q, buckets)) for base, buckets in groups.values()]

    def _date_func(self, name: str, args: list[Any], t: float) -> Vector:
        import calendar
        from datetime import UTC, datetime

        vec = self._vector(args[0], t) if args else [({}, t)]

        def f(v: float) -> float:
            d = datetime.fromtimestamp(v, UTC)
            return float({
                "minute": d.minute, "hour": d.hour, "day_of_week": (d.weekday() + 1) % 7,
                "day_of_month": d.day, "day_of_year": d.timetuple().tm_yday, "month": d.month,
                "year": d.year, "days_in_month": calendar.monthrange(d.year, d.month)[1],
            }[name])

        return [(_drop_name(labels), f(v)) for labels, v in vec]

    # --- aggregation -------------------------------------------------------------------------
    def _aggregate(self, node: ast.AggregateExpr, t: float) -> Vector:
        op = node.op
        vec = self._vector(node.expr, t)
        by, without = node.by, node.without
        param = None
        if node.param is not None:
            param = self.eval(node.param, t)

        def group_of(labels: Labels) -> Labels:
            if by is not None:
                return {k: labels[k] for k in by if labels.get(k, "") != ""}
            if without is not None:
                return {k: v for k, v in labels.items() if k not in without and k != "__name__"}
            return {}

        groups: dict[Any, tuple[Labels, list[Sample]]] = {}
        for s in vec:
            # With `by`, the values of the listed labels are the group (a missing label and an empty
            # one are the same, as group_of drops both): no label set built per sample.
            gk: Any = tuple([s[0].get(k, "") for k in by]) if by is not None else _key(group_of(s[0]))
            entry = groups.get(gk)
            if entry is None:
                entry = groups[gk] = (group_of(s[0]), [])
            entry[1].append(s)

        if op in ("topk", "bottomk"):
            assert isinstance(param, Scalar)
            k = int(param.v)
            out: Vector = []
            for _, members in groups.values():
                if k < 1:
                    continue
                ordered = sorted(members, key=lambda s: (math.isnan(s[1]), -s[1] if op == "topk" else s[1]))
                out.extend(ordered[:k])
            return out
        if op == "count_values":
            assert isinstance(param, String)
            counts: dict[frozenset[tuple[str, str]], list[Any]] = {}
            for g, members in groups.values():
                for _, v in members:
                    nl = dict(g)
                    nl[param.s] = format_value(v)
                    c = counts.setdefault(_key(nl), [nl, 0.0])
                    c[1] += 1
            return [(nl, c) for nl, c in counts.values()]

        q = param.v if isinstance(param, Scalar) else None
        try:
            return [(g, aggregate_values(op, [v for _, v in members], q)) for g, members in groups.values()]
        except ValueError as e:
            raise PromQLError("bad_data", f"{e} by this Prometheus") from e

    # --- binary operators ------------------------------------------------------------------------
    def _binary(self, node: ast.BinaryExpr, t: float) -> Any:
        op = node.op
        return_bool = node.return_bool
        lhs = self.eval(node.lhs, t)
        rhs = self.eval(node.rhs, t)
        if isinstance(lhs, Scalar) and isinstance(rhs, Scalar):
            if op in COMPARE:
                return Scalar(1.0 if COMPARE[op](lhs.v, rhs.v) else 0.0)
            return Scalar(ARITH[op](lhs.v, rhs.v))
        if op in ("and", "or", "unless"):
            return self._set_op(op, lhs, rhs, node)
        if isinstance(lhs, Scalar) or isinstance(rhs, Scalar):
            return self._vector_scalar(op, lhs, rhs, return_bool)
        return self._vector_vector(op, lhs, rhs, node, return_bool)

    def _vector_scalar(self, op: str, lhs: Any, rhs: Any, return_bool: bool) -> Vector:
        swap = isinstance(lhs, Scalar)
        vec: Vector = rhs if swap else lhs
        sc: float = lhs.v if swap else rhs.v
        out = []
        if op in COMPARE:
            cmp = COMPARE[op]
            for labels, v in vec:
                hit = cmp(sc, v) if swap else cmp(v, sc)
                if return_bool:
                    out.append((_drop_name(labels), 1.0 if hit else 0.0))
                elif hit:
                    out.append((labels, v))
            return out
        f = ARITH[op]
        for labels, v in vec:
            out.append((_drop_name(labels), f(sc, v) if swap else f(v, sc)))
        return out

    @staticmethod
    def _signature(node: ast.BinaryExpr) -> Callable[[Labels], frozenset[tuple[str, str]]]:
        if node.on:
            on = node.match_labels
            return lambda labels: frozenset((k, labels.get(k, "")) for k in on)
        ignoring = set(node.match_labels)
        ignoring.add("__name__")
        return lambda labels: frozenset((k, v) for k, v in labels.items() if k not in ignoring)

    def _set_op(self, op: str, lhs: Any, rhs: Any, node: ast.BinaryExpr) -> Vector:
        if not isinstance(lhs, list) or not isinstance(rhs, list):
            raise PromQLError("bad_data", f"set operator \"{op}\" not allowed in binary scalar expression")
        sig = self._signature(node)
        if op == "and":
            right = {sig(labels) for labels, _ in rhs}
            return [s for s in lhs if sig(s[0]) in right]
        if op == "unless":
            right = {sig(labels) for labels, _ in rhs}
            return [s for s in lhs if sig(s[0]) not in right]
        left = {sig(labels) for labels, _ in lhs}
        return list(lhs) + [s for s in rhs if sig(s[0]) not in left]

    def _vector_vector(self, op: str, lhs: Vector, rhs: Vector, node: ast.BinaryExpr, return_bool: bool) -> Vector:
        card = node.card
        on = node.on
        match_labels = node.match_labels
        include = node.include
        sig = self._signature(node)
        many, one = lhs, rhs
        swapped = card == pp.VectorMatchCardinality.OneToMany
        if swapped:
            many, one = rhs, lhs
        one_by_sig: dict[frozenset[tuple[str, str]], Sample] = {}
        for s in one:
            k = sig(s[0])
            if k in one_by_sig:
                side = "left" if swapped else "right"
                raise PromQLError(
                    "execution",
                    f"found duplicate series for the match group {_fmt_group(k)} on the {side} hand-side of the "
                    f"operation: [{_fmt_labels(one_by_sig[k][0])}, {_fmt_labels(s[0])}];many-to-many matching not "
                    "allowed: matching labels must be unique on one side",
                )
            one_by_sig[k] = s
        is_cmp = op in COMPARE
        drop_name = not is_cmp or return_bool
        seen: dict[frozenset[tuple[str, str]], Labels] = {}
        out: Vector = []
        for ms in many:
            k = sig(ms[0])
            os_ = one_by_sig.get(k)
            if os_ is None:
                continue
            lv, rv = (os_[1], ms[1]) if swapped else (ms[1], os_[1])
            if is_cmp:
                hit = COMPARE[op](lv, rv)
                if return_bool:
                    value = 1.0 if hit else 0.0
                elif not hit:
                    continue
                else:
                    value = lv
            else:
                value = ARITH[op](lv, rv)
            labels = dict(ms[0])
            if drop_name:
                labels.pop("__name__", None)
            if card == pp.VectorMatchCardinality.OneToOne:
                if on:
                    labels = {k2: v2 for k2, v2 in labels.items() if k2 in match_labels}
                else:
                    for ln in match_labels:
                        labels.pop(ln, None)
            for ln in include:
                v1 = os_[0].get(ln, "")
                if v1:
                    labels[ln] = v1
                else:
                    labels.pop(ln, None)
            rk = _key(labels)
            if card == pp.VectorMatchCardinality.OneToOne:
                if k in seen:
                    raise PromQLError(
                        "execution",
                        "multiple matches for labels: many-to-one matching must be explicit (group_left/group_right)",
                    )
                seen[k] = labels
            elif rk in seen:
                raise PromQLError("execution", "multiple matches for labels: grouping labels must ensure unique matches")
            else:
                seen[rk] = labels
            out.append((labels, value))
        return out

    # --- entry points --------------------------------------------------------------------------
    def instant(self, expr: ast.Node, t: float) -> Any:
        return self.eval(expr, t)


def _fmt_group(k: frozenset[tuple[str, str]]) -> str:
    return "{" + ", ".join(f'{a}="{b}"' for a, b in sorted(k)) + "}"


def instant_query(tsdb: TSDB, query: str, t: float, lookback: float = LOOKBACK) -> Any:
    """Evaluate `query` at `t`: a Vector (list of (labels, value)), Scalar, String or RangeVector."""
    expr = parse(query)
    return Evaluator(tsdb, t, t, lookback).eval(expr, t)


def range_query(tsdb: TSDB, query: str, start: float, end: float, step: float,
                lookback: float = LOOKBACK) -> list[tuple[Labels, list[tuple[float, float]]]]:
    """Evaluate `query` at start, start+step, ... end: [(labels, [(t, v), ...])] sorted by labels."""
    if step <= 0:
        raise PromQLError("bad_data", "zero or negative query resolution step widths are not accepted. "
                          "Try a positive integer")
    if end < start:
        raise PromQLError("bad_data", 'invalid parameter "end": end timestamp must not be before start time')
    if (end - start) / step > MAX_POINTS:
        raise PromQLError("bad_data", "exceeded maximum resolution of 11,000 points per timeseries. "
                          "Try decreasing the query resolution (?step=XX)")
    expr = parse(query)
    ev = Evaluator(tsdb, start, end, lookback)
    acc: dict[frozenset[tuple[str, str]], tuple[Labels, list[tuple[float, float]]]] = {}
    n = int(math.floor((end - start) / step + 1e-9))
    for i in range(n + 1):
        t = start + i * step
        val = ev.eval(expr, t)
        if isinstance(val, Scalar):
            val = [({}, val.v)]
        elif not isinstance(val, list):
            kind = "string" if isinstance(val, String) else "range vector"
            raise PromQLError("bad_data", f'invalid expression type "{kind}" for range query, must be Scalar or instant Vector')
        for labels, v in val:
            k = _key(labels)
            entry = acc.get(k)
            if entry is None:
                entry = acc[k] = (labels, [])
            entry[1].append((t, v))
    return sorted(acc.values(), key=lambda e: sorted(e[0].items()))


def _with_label(labels: dict[str, str], name: str, value: str) -> dict[str, str]:
    """A copy of `labels` with `name` set to `value`, or without it when `value` is empty (as
    label_replace and label_join leave it)."""
    out = dict(labels)
    if value:
        out[name] = value
    else:
        out.pop(name, None)
    return out
