"""A PromQL expression from promql-parser, copied once into plain Python nodes: each attribute read
of a parser node converts its whole subtree from Rust again, and a rule's tree is walked at every
evaluation, so the evaluator walks these copies instead (same field names as the parser's)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import promql_parser as pp

from kubesim.observability.prometheus.tsdb import Matcher


def _secs(d: timedelta | None) -> float:
    return d.total_seconds() if d is not None else 0.0


class Node:
    __slots__ = ()


class VectorSelector(Node):
    """`name{matchers}`; `groups` are the TSDB matcher lists it selects by (one per `or` branch,
    the metric name added to each), `key` its text, which an evaluation caches its series under."""

    __slots__ = ("name", "matchers", "groups", "at", "offset", "key")

    def __init__(self, vs: pp.VectorSelector) -> None:
        m = vs.matchers
        self.name: str | None = vs.name
        self.matchers = [Matcher.from_parser(x) for x in m.matchers]
        self.groups: list[list[Matcher]] = []
        for group in [m.matchers] + list(m.or_matchers or []):
            matchers = [Matcher.from_parser(x) for x in group]
            if vs.name:
                matchers.append(Matcher("__name__", "=", vs.name))
            if matchers:
                self.groups.append(matchers)
        self.at: pp.AtModifier | None = vs.at
        self.offset = _secs(vs.offset)
        self.key = str(vs)


class MatrixSelector(Node):
    __slots__ = ("vector_selector", "range")

    def __init__(self, ms: pp.MatrixSelector) -> None:
        self.vector_selector = VectorSelector(ms.vector_selector)
        self.range = ms.range.total_seconds()


class SubqueryExpr(Node):
    __slots__ = ("expr", "range", "step", "at", "offset")

    def __init__(self, sq: pp.SubqueryExpr) -> None:
        self.expr = compile_expr(sq.expr)
        self.range = _secs(sq.range)
        self.step = _secs(sq.step)
        self.at: pp.AtModifier | None = sq.at
        self.offset = _secs(sq.offset)


class ParenExpr(Node):
    __slots__ = ("expr",)

    def __init__(self, e: pp.ParenExpr) -> None:
        self.expr = compile_expr(e.expr)


class UnaryExpr(Node):
    """`-expr` (the parser keeps no other unary operator)."""

    __slots__ = ("expr",)

    def __init__(self, e: pp.UnaryExpr) -> None:
        self.expr = compile_expr(e.expr)


class NumberLiteral(Node):
    __slots__ = ("val",)

    def __init__(self, n: pp.NumberLiteral) -> None:
        self.val: float = n.val


class StringLiteral(Node):
    __slots__ = ("val",)

    def __init__(self, s: pp.StringLiteral) -> None:
        self.val: str = s.val


class Call(Node):
    __slots__ = ("name", "args")

    def __init__(self, c: pp.Call) -> None:
        self.name: str = c.func.name
        self.args: list[Any] = [compile_expr(a) for a in c.args]


class AggregateExpr(Node):
    """`op by/without (labels) (param, expr)`: `by` or `without` is None when not given."""

    __slots__ = ("op", "expr", "param", "by", "without")

    def __init__(self, a: pp.AggregateExpr) -> None:
        self.op = str(a.op)
        self.expr = compile_expr(a.expr)
        self.param = compile_expr(a.param) if a.param is not None else None
        mod = a.modifier
        self.by: list[str] | None = None
        self.without: set[str] | None = None
        if mod is not None:
            if mod.type == pp.AggModifierType.By:
                self.by = list(mod.labels)
            else:
                self.without = set(mod.labels)


class BinaryExpr(Node):
    """`lhs op rhs` with its modifier: `on` says whether `match_labels` come from on() (else from
    ignoring()), `include` the group_left/group_right labels."""

    __slots__ = ("op", "lhs", "rhs", "return_bool", "card", "on", "match_labels", "include")

    def __init__(self, b: pp.BinaryExpr) -> None:
        self.op = str(b.op)
        self.lhs = compile_expr(b.lhs)
        self.rhs = compile_expr(b.rhs)
        mod = b.modifier
        self.return_bool = bool(mod and mod.return_bool)
        self.card = mod.card if mod is not None else pp.VectorMatchCardinality.OneToOne
        matching = mod.matching if mod is not None else None
        self.on = matching is not None and matching.type == pp.LabelModifierType.Include
        self.match_labels: list[str] = list(matching.labels) if matching is not None else []
        self.include: list[str] = list(mod.group_labels or []) if mod is not None else []


class Unsupported(Node):
    """A node kind the evaluator does not know: evaluating it is the error, not parsing it."""

    __slots__ = ("kind",)

    def __init__(self, e: Any) -> None:
        self.kind = type(e).__name__


_KINDS: dict[type, Callable[[Any], Node]] = {
    pp.VectorSelector: VectorSelector, pp.MatrixSelector: MatrixSelector, pp.SubqueryExpr: SubqueryExpr,
    pp.ParenExpr: ParenExpr, pp.UnaryExpr: UnaryExpr, pp.NumberLiteral: NumberLiteral,
    pp.StringLiteral: StringLiteral, pp.Call: Call, pp.AggregateExpr: AggregateExpr, pp.BinaryExpr: BinaryExpr,
}


def compile_expr(e: Any) -> Node:
    return _KINDS.get(type(e), Unsupported)(e)
