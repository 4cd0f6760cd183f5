"""Telemetry queries scoped to the session's namespaces by construction, as prom-label-proxy and
Loki's tenant label enforcement scope a tenant on a shared cluster: the namespace matcher is
put inside every PromQL vector selector and every LogQL stream selector before the query leaves,
so what a query reads is only those namespaces' series and streams. Whatever the query does to
labels afterwards (label_replace, label_format, drop, line_format) works on that data alone and
cannot widen it; a query the scoping cannot be proven on is refused, never sent as written."""

from __future__ import annotations

import re
from typing import Any

from core.errors import ToolError

_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def _values_regex(namespaces: tuple[str, ...], *, unlabelled: bool) -> str:
    for ns in namespaces:  # DNS labels: no character a regular expression or a string reads specially
        if not _NAMESPACE.fullmatch(ns):
            raise ValueError(f"not a namespace name: {ns!r}")
    return "|".join([*namespaces, *([""] if unlabelled else [])])


def promql_matcher(namespaces: tuple[str, ...]) -> str:
    """Series of these namespaces, and those with no namespace at all (a node's own metrics:
    node_exporter, kubelet), which name no other namespace's objects."""
    return f'namespace=~"{_values_regex(namespaces, unlabelled=True)}"'


def logql_matcher(namespaces: tuple[str, ...]) -> str:
    """Streams of these namespaces only: the node-wide streams (a kubelet's journal) name every
    namespace's pods."""
    if len(namespaces) == 1 and _NAMESPACE.fullmatch(namespaces[0]):
        return f'namespace="{namespaces[0]}"'
    return f'namespace=~"{_values_regex(namespaces, unlabelled=False)}"'


def scope_promql(query: str, namespaces: tuple[str, ...]) -> str:
    """`query` with the namespace matcher inside each vector selector (those under range
    vectors, subqueries and functions included). Refused: a query that does not parse, metric
    names chosen by regular expression, and any query whose rewritten form does not carry the
    matcher in every selector."""
    import promql_parser

    try:
        expr = promql_parser.parse(query)
    except (ValueError, RuntimeError, TypeError) as exc:
        raise ToolError(f"invalid PromQL: {exc}") from None
    matcher = promql_matcher(namespaces)

    def visit(node: Any) -> Any:
        if isinstance(node, promql_parser.VectorSelector):
            if any(m.name == "__name__" and str(m.op) != str(promql_parser.MatchOp.Equal)
                   for m in node.matchers.matchers):
                raise ToolError("refused: select metrics by name (regular expressions over __name__ "
                                "are not available)")
            text = str(node)
            brace = text.find("{")
            if brace < 0:
                raise ToolError("refused: this query could not be limited to the incident's namespace")
            inner = brace + 1
            sep = "" if text[inner] == "}" else ","
            return promql_parser.parse(text[:inner] + matcher + sep + text[inner:])
        return None

    try:
        scoped = str(promql_parser.transform(expr, pre_visit=visit))
        _check_promql(promql_parser.parse(scoped), matcher)
    except ToolError:
        raise
    except (ValueError, RuntimeError, TypeError):
        raise ToolError("refused: this query could not be limited to the incident's namespace; "
                        "write it with plain selectors") from None
    return scoped


def _check_promql(expr: Any, matcher: str) -> None:
    import promql_parser

    name, _, value = matcher.partition("=~")
    missing: list[str] = []

    def visit(node: Any) -> Any:
        if isinstance(node, promql_parser.VectorSelector):
            if not any(m.name == name and str(m.op) == str(promql_parser.MatchOp.Re) and m.value == value.strip('"')
                       for m in node.matchers.matchers):
                missing.append(str(node))
        return None

    promql_parser.transform(expr, pre_visit=visit)
    if missing:
        raise ToolError(f"refused: {missing[0]} could not be limited to the incident's namespace")


# LogQL's lexical shapes: strings ("..." with escapes, `...` raw) are skipped whole; a `{` outside
# them opens a stream selector (nothing else in LogQL uses braces outside strings); a `#` outside
# them starts a comment that would hide the rest of its line from this scan.
_LOGQL_PART = re.compile(r'"(?:[^"\\]|\\.)*"|`[^`]*`|[{#"`]|[^{#"`]+', re.S)


def scope_logql(query: str, namespaces: tuple[str, ...]) -> str:
    """`query` with the namespace matcher first in every stream selector."""
    matcher = logql_matcher(namespaces)
    out: list[str] = []
    selectors = 0
    pos = 0
    while pos < len(query):
        part = _LOGQL_PART.match(query, pos)
        assert part is not None  # the alternatives cover every character
        text = part.group(0)
        pos = part.end()
        if text in ('"', "`"):
            raise ToolError("invalid LogQL: a string is not closed")
        if text == "#":
            raise ToolError("refused: LogQL comments ('#' outside a string) are not available")
        if text == "{":
            rest = query[pos:].lstrip()
            out.append("{" + matcher + ("" if rest.startswith("}") else ", "))
            selectors += 1
            continue
        out.append(text)
    if not selectors:
        raise ToolError("invalid LogQL: a query starts from a stream selector such as "
                        f'{{{matcher}, app="frontend"}}')
    return "".join(out)
