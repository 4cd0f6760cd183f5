"""LogQL evaluation over the LogStore: log queries (entries through the pipeline, newest or
oldest first, limited) and metric queries (range aggregations, vector aggregations, binary
operators) at one timestamp."""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterator
from typing import Any

from kubesim.observability.loki.logql import (
    BinOp,
    LogExpr,
    LogQLError,
    Number,
    RangeAgg,
    VectorAgg,
    numeric_value,
)
from kubesim.observability.loki.logs import LogStore, Stream, to_ns
from kubesim.observability.prometheus.promql_functions import ARITH, COMPARE, aggregate_values, quantile
from kubesim.observability.prometheus.tsdb import matches_all

Vector = list[tuple[dict[str, str], float]]


def _matching_streams(store: LogStore, log: LogExpr) -> list[Stream]:
    return [s for s in store.streams() if matches_all(s.labels, log.matchers)]


def select_logs(store: LogStore, log: LogExpr, start: float, end: float, limit: int, direction: str,
                end_inclusive: bool = False) -> tuple[list[tuple[dict[str, str], list[tuple[int, str]]]], int, int]:
    """Entries with start <= ts < end (or <= end) through the pipeline, the `limit` newest
    (backward) or oldest (forward) across all streams: (streams, lines scanned, bytes scanned).
    Streams are merged by timestamp lazily, so a query stops once it has `limit` entries."""
    s_ns, e_ns = to_ns(start), to_ns(end) + (1 if end_inclusive else 0)
    backward = direction == "backward"
    counters = [0, 0]

    def entries(s: Stream) -> Iterator[tuple[int, dict[str, str], str]]:
        i0, i1 = s.window(s_ns, e_ns)
        idx = range(i1 - 1, i0 - 1, -1) if backward else range(i0, i1)
        lines, ts, labels, run = s.lines, s.ts, s.labels, log.run
        for i in idx:
            line = lines[i]
            counters[0] += 1
            counters[1] += len(line)
            out = run(labels, line, ts[i])
            if out is not None:
                yield (-ts[i] if backward else ts[i]), out[0], out[1]

    merged = heapq.merge(*(entries(s) for s in _matching_streams(store, log)), key=lambda e: e[0])
    groups: dict[frozenset[tuple[str, str]], tuple[dict[str, str], list[tuple[int, str]]]] = {}
    for key_ts, labels, text in itertools.islice(merged, limit):
        groups.setdefault(frozenset(labels.items()), (labels, []))[1].append((abs(key_ts), text))
    ordered = sorted(groups.values(), key=lambda g: sorted(g[0].items()))
    return ordered, counters[0], counters[1]


class MetricEvaluator:
    def __init__(self, store: LogStore) -> None:
        self.store = store
        self._streams: dict[int, list[Stream]] = {}
        self.lines_scanned = 0
        self.bytes_scanned = 0

    def eval(self, node: Any, t: float) -> Vector | float:
        if isinstance(node, Number):
            return node.v
        if isinstance(node, RangeAgg):
            return self._range(node, t)
        if isinstance(node, VectorAgg):
            return self._vector_agg(node, t)
        if isinstance(node, BinOp):
            return self._binop(node, t)
        raise LogQLError("log queries are not supported as an instant query type, please change your query to "
                         "a range query type")

    def _range(self, node: RangeAgg, t: float) -> Vector:
        streams = self._streams.get(id(node.log))
        if streams is None:
            streams = self._streams[id(node.log)] = _matching_streams(self.store, node.log)
        end = t - node.offset
        start = end - node.range
        s_ns, e_ns = to_ns(start), to_ns(end)
        groups: dict[frozenset[tuple[str, str]], tuple[dict[str, str], list[float]]] = {}
        unwrap = node.log.unwrap
        for s in streams:
            i0, i1 = s.window_closed(s_ns, e_ns)
            for i in range(i0, i1):
                line = s.lines[i]
                self.lines_scanned += 1
                self.bytes_scanned += len(line)
                out = node.log.run(s.labels, line, s.ts[i])
                if out is None:
                    continue
                labels, text = out
                if unwrap is not None:
                    raw = labels.get(unwrap)
                    if raw is None:
                        continue
                    try:
                        kind = "duration" if node.log.unwrap_conv.startswith("duration") else \
                            "bytes" if node.log.unwrap_conv == "bytes" else "number"
                        value = numeric_value(raw, kind)
                    except ValueError:
                        continue
                    labels = {k: v for k, v in labels.items() if k != unwrap}
                else:
                    value = float(len(text.encode()))
                labels = {k: v for k, v in labels.items() if not k.startswith("__error_details")}
                if node.by is not None:
                    labels = {k: labels[k] for k in node.by if k in labels}
                elif node.without is not None:
                    labels = {k: v for k, v in labels.items() if k not in node.without}
                key = frozenset(labels.items())
                groups.setdefault(key, (labels, []))[1].append(value)
        f = node.func
        out_vec: Vector = []
        for labels, vals in groups.values():
            if f == "count_over_time":
                v = float(len(vals))
            elif f == "rate":
                v = (len(vals) if unwrap is None else sum(vals)) / node.range
            elif f == "bytes_over_time":
                v = sum(vals)
            elif f == "bytes_rate":
                v = sum(vals) / node.range
            elif f == "absent_over_time":
                continue
            elif f == "sum_over_time":
                v = sum(vals)
            elif f == "avg_over_time":
                v = sum(vals) / len(vals)
            elif f == "min_over_time":
                v = min(vals)
            elif f == "max_over_time":
                v = max(vals)
            elif f == "first_over_time":
                v = vals[0]
            elif f == "last_over_time":
                v = vals[-1]
            elif f in ("stddev_over_time", "stdvar_over_time"):
                mean = sum(vals) / len(vals)
                var = sum((x - mean) ** 2 for x in vals) / len(vals)
                v = math.sqrt(var) if f == "stddev_over_time" else var
            elif f == "quantile_over_time":
                v = quantile(node.param or 0.0, vals)
            elif f == "rate_counter":
                v = (vals[-1] - vals[0]) / node.range if len(vals) > 1 else 0.0
            else:
                raise LogQLError(f"unsupported range aggregation {f}")
            out_vec.append((labels, v))
        if f == "absent_over_time":
            if groups:
                return []
            return [({m.name: m.value for m in node.log.matchers if m.op == "="}, 1.0)]
        return out_vec

    def _vector_agg(self, node: VectorAgg, t: float) -> Vector:
        vec = self.eval(node.inner, t)
        if not isinstance(vec, list):
            raise LogQLError("parse error : expected a vector")
        groups: dict[frozenset[tuple[str, str]], tuple[dict[str, str], list[tuple[dict[str, str], float]]]] = {}
        for labels, v in vec:
            if node.by is not None:
                g = {k: labels[k] for k in node.by if k in labels}
            elif node.without is not None:
                g = {k: x for k, x in labels.items() if k not in node.without}
            else:
                g = {}
            groups.setdefault(frozenset(g.items()), (g, []))[1].append((labels, v))
        out: Vector = []
        for g, members in groups.values():
            vals = [v for _, v in members]
            if node.op in ("topk", "bottomk"):
                k = int(node.param or 0)
                out.extend(sorted(members, key=lambda s: -s[1] if node.op == "topk" else s[1])[:k])
                continue
            r = aggregate_values(node.op, vals)
            out.append((g, r))
        return out

    def _binop(self, node: BinOp, t: float) -> Vector | float:
        lhs, rhs = self.eval(node.lhs, t), self.eval(node.rhs, t)
        op = node.op
        if isinstance(lhs, float) and isinstance(rhs, float):
            return float(COMPARE[op](lhs, rhs)) if op in COMPARE else ARITH[op](lhs, rhs)
        if op in ("and", "or", "unless"):
            if not isinstance(lhs, list) or not isinstance(rhs, list):
                raise LogQLError("parse error : set operators need two vectors")
            rk = {frozenset(labels.items()) for labels, _ in rhs}
            if op == "and":
                return [s for s in lhs if frozenset(s[0].items()) in rk]
            if op == "unless":
                return [s for s in lhs if frozenset(s[0].items()) not in rk]
            lk = {frozenset(labels.items()) for labels, _ in lhs}
            return list(lhs) + [s for s in rhs if frozenset(s[0].items()) not in lk]
        out: Vector = []
        if isinstance(lhs, list) and isinstance(rhs, list):
            right = {frozenset(labels.items()): v for labels, v in rhs}
            pairs = [(labels, v, right[frozenset(labels.items())]) for labels, v in lhs
                     if frozenset(labels.items()) in right]
        elif isinstance(lhs, list):
            pairs = [(labels, v, rhs) for labels, v in lhs]  # type: ignore[misc]
        else:
            assert isinstance(rhs, list)
            pairs = [(labels, lhs, v) for labels, v in rhs]
        for labels, a, b in pairs:
            if op in COMPARE:
                hit = COMPARE[op](a, b)
                if node.return_bool:
                    out.append((labels, 1.0 if hit else 0.0))
                elif hit:
                    out.append((labels, a if isinstance(lhs, list) else b))
            else:
                out.append((labels, ARITH[op](a, b)))
        return out


