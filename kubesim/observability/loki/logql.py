"""LogQL for the emulated Loki: a recursive-descent parser for stream selectors, line filters
(|=, !=, |~, !~), parsers (json, logfmt, regexp, pattern), decolorize, label filters, line_format and
label_format with Go templates (observability/gotemplate.py), and metric
queries (count_over_time, rate, bytes_*, unwrapped *_over_time, sum/avg/... by, comparisons),
evaluated over the LogStore. Parse errors read like Loki's."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubesim.observability.formats import parse_go_duration, parse_prom_duration
from kubesim.observability.loki.gotemplate import TemplateError, compile_template, render
from kubesim.observability.prometheus.tsdb import Matcher


class LogQLError(Exception):
    """A query Loki would reject with HTTP 400 and this plain-text message."""


# --- tokens ---------------------------------------------------------------------------------------
_TOKEN = re.compile(
    r"""(?P<ws>\s+)
      |(?P<string>"(?:[^"\\]|\\.)*"|`[^`]*`)
      |(?P<op>\|=|\|~|!=|!~|=~|==|>=|<=|\|>|[{}()\[\],|=<>+\-*/%^])
      |(?P<duration>\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h|d|w|y)(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h|d|w|y))*(?![\w.]))
      |(?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?:[KMGTP]i?B|B)?(?![\w.]))
      |(?P<ident>[A-Za-z_][A-Za-z0-9_.:]*)
    """,
    re.VERBOSE,
)


@dataclass
class Tok:
    kind: str
    text: str
    col: int


def _unquote(s: str) -> str:
    if s.startswith("`"):
        return s[1:-1]
    try:
        return str(json.loads(s))
    except ValueError:
        return s[1:-1].encode().decode("unicode_escape")


def tokenize(q: str) -> list[Tok]:
    out, pos = [], 0
    while pos < len(q):
        m = _TOKEN.match(q, pos)
        if not m:
            raise LogQLError(f"parse error at line 1, col {pos + 1}: syntax error: unexpected character {q[pos]!r}")
        kind = m.lastgroup or ""
        if kind != "ws":
            out.append(Tok(kind, m.group(0), pos + 1))
        pos = m.end()
    out.append(Tok("eof", "", len(q) + 1))
    return out


# --- AST ------------------------------------------------------------------------------------------
Entry = tuple[dict[str, str], str]
StageFn = Callable[[dict[str, str], str], "Entry | None"]


@dataclass
class LogExpr:
    matchers: list[Matcher]
    stages: list[StageFn] = field(default_factory=list)
    unwrap: str | None = None
    unwrap_conv: str = ""
    ts_ns: int = 0  # the entry being run: what `__timestamp__` in a template reads

    def run(self, labels: dict[str, str], line: str, ts_ns: int = 0) -> Entry | None:
        self.ts_ns = ts_ns
        entry: Entry | None = (labels, line)
        for st in self.stages:
            assert entry is not None
            entry = st(*entry)
            if entry is None:
                return None
        return entry


@dataclass
class RangeAgg:
    func: str
    log: LogExpr
    range: float
    offset: float = 0.0
    param: float | None = None
    by: list[str] | None = None
    without: list[str] | None = None


@dataclass
class VectorAgg:
    op: str
    inner: Any
    by: list[str] | None = None
    without: list[str] | None = None
    param: float | None = None


@dataclass
class BinOp:
    op: str
    lhs: Any
    rhs: Any
    return_bool: bool = False


@dataclass
class Number:
    v: float


RANGE_FUNCS = {"count_over_time", "rate", "bytes_over_time", "bytes_rate", "absent_over_time"}
UNWRAP_FUNCS = {"sum_over_time", "avg_over_time", "min_over_time", "max_over_time", "first_over_time",
                "last_over_time", "stddev_over_time", "stdvar_over_time", "quantile_over_time", "rate_counter"}
VECTOR_AGGS = {"sum", "avg", "min", "max", "count", "topk", "bottomk", "stddev", "stdvar"}
_BIN_PRECEDENCE = {"or": 1, "and": 2, "unless": 2, "==": 3, "!=": 3, ">": 3, "<": 3, ">=": 3, "<=": 3,
                   "+": 4, "-": 4, "*": 5, "/": 5, "%": 5, "^": 6}


# --- stages ---------------------------------------------------------------------------------------
def _line_filter(op: str, values: list[str]) -> StageFn:
    if op in ("|=", "!=") and len(values) == 1:
        needle, want = values[0], op == "|="

        def contains_one(labels: dict[str, str], line: str) -> Entry | None:
            return (labels, line) if (needle in line) == want else None
        return contains_one
    if op in ("|=", "!="):
        def contains(labels: dict[str, str], line: str) -> Entry | None:
            hit = any(v in line for v in values)
            return (labels, line) if hit == (op == "|=") else None
        return contains
    try:
        rxs = [re.compile(v) for v in values]
    except re.error as e:
        raise LogQLError(f"parse error : invalid regular expression: {e}") from e

    def regex(labels: dict[str, str], line: str) -> Entry | None:
        hit = any(r.search(line) for r in rxs)
        return (labels, line) if hit == (op == "|~") else None
    return regex


_LABEL_BAD = re.compile(r"[^A-Za-z0-9_]")


def _add_extracted(labels: dict[str, str], extracted: dict[str, str]) -> dict[str, str]:
    out = dict(labels)
    for k, v in extracted.items():
        k = _LABEL_BAD.sub("_", k)
        if k and k[0].isdigit():
            k = "_" + k
        if k in labels:  # a parsed key never overwrites a stream label
            k = k + "_extracted"
        out[k] = v
    return out


def _flatten(prefix: str, obj: Any, into: dict[str, str]) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            _flatten(f"{prefix}_{k}" if prefix else str(k), v, into)
    elif isinstance(obj, list):
        return  # Loki's json parser skips arrays
    elif obj is None:
        into[prefix] = ""
    elif isinstance(obj, bool):
        into[prefix] = "true" if obj else "false"
    else:
        into[prefix] = str(obj) if not isinstance(obj, float) or not obj.is_integer() else str(int(obj))


def _json_stage(labels: dict[str, str], line: str) -> Entry | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return ({**labels, "__error__": "JSONParserErr", "__error_details__": "Value looks like object, but can't find closing '}' symbol"}, line)
    if not isinstance(obj, dict):
        return ({**labels, "__error__": "JSONParserErr"}, line)
    flat: dict[str, str] = {}
    _flatten("", obj, flat)
    return _add_extracted(labels, flat), line


_LOGFMT = re.compile(r'([^\s=]+)=("(?:[^"\\]|\\.)*"|\S*)')


def _logfmt_stage(labels: dict[str, str], line: str) -> Entry | None:
    pairs: dict[str, str] = {}
    for k, v in _LOGFMT.findall(line):
        pairs[k] = _unquote(v) if v.startswith('"') else v
    if not pairs and line.strip():
        return ({**labels, "__error__": "LogfmtParserErr"}, line)
    return _add_extracted(labels, pairs), line


def _regexp_stage(pattern: str) -> StageFn:
    try:
        rx = re.compile(re.sub(r"\(\?P?<", "(?P<", pattern))
    except re.error as e:
        raise LogQLError(f"parse error : invalid regular expression: {e}") from e
    if not rx.groupindex:
        raise LogQLError("parse error : at least one named capture must be supplied")

    def stage(labels: dict[str, str], line: str) -> Entry | None:
        m = rx.search(line)
        if not m:
            return labels, line
        return _add_extracted(labels, {k: v for k, v in m.groupdict().items() if v is not None}), line
    return stage


def _template(template: str, name: str) -> list[Any]:
    try:
        return compile_template(template, name)
    except TemplateError as e:
        raise LogQLError(f"parse error : {e}") from e


def _line_format_stage(template: str, expr: LogExpr) -> StageFn:
    nodes = _template(template, "line")

    def stage(labels: dict[str, str], line: str) -> Entry | None:
        try:
            return labels, render(nodes, labels, line, expr.ts_ns)
        except TemplateError:  # Loki keeps the line and flags it
            return {**labels, "__error__": "TemplateFormatErr"}, line
    return stage


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def _decolorize_stage(labels: dict[str, str], line: str) -> Entry | None:
    return labels, _ANSI.sub("", line)


def _parse_bytes(s: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGTP]?i?B)", s)
    if not m:
        raise ValueError(s)
    mult = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "PB": 1e15, "KiB": 1024, "MiB": 1024**2,
            "GiB": 1024**3, "TiB": 1024**4, "PiB": 1024**5}[m.group(2)]
    return float(m.group(1)) * mult


def numeric_value(text: str, kind: str) -> float:
    if kind == "duration":
        return parse_go_duration(text)
    if kind == "bytes":
        return _parse_bytes(text)
    return float(text)


_CMP: dict[str, Callable[[float, float], bool]] = {
    "==": lambda a, b: a == b, "=": lambda a, b: a == b, "!=": lambda a, b: a != b, ">": lambda a, b: a > b,
    "<": lambda a, b: a < b, ">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b,
}
LabelPred = Callable[[dict[str, str]], bool]


# --- parser ---------------------------------------------------------------------------------------
class Parser:
    def __init__(self, query: str) -> None:
        self.q = query
        self.toks = tokenize(query)
        self.i = 0

    def peek(self, k: int = 0) -> Tok:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def next(self) -> Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def fail(self, tok: Tok | None = None, expected: str = "") -> LogQLError:
        tok = tok or self.peek()
        what = {"eof": "end of input", "string": "STRING", "ident": "IDENTIFIER", "number": "NUMBER",
                "duration": "DURATION"}.get(tok.kind, tok.text)
        msg = f"parse error at line 1, col {tok.col}: syntax error: unexpected {what}"
        if expected:
            msg += f", expecting {expected}"
        return LogQLError(msg)

    def expect(self, text: str) -> Tok:
        t = self.next()
        if t.text != text:
            raise self.fail(t, text)
        return t

    def parse(self) -> Any:
        if self.peek().kind == "eof":
            raise LogQLError("parse error : syntax error: unexpected end of input")
        node = self.expr(0)
        if self.peek().kind != "eof":
            raise self.fail()
        return node

    # expressions: log queries or metric queries joined by binary operators
    def expr(self, min_prec: int) -> Any:
        lhs = self.primary()
        while True:
            t = self.peek()
            op = t.text
            prec = _BIN_PRECEDENCE.get(op)
            if prec is None or prec < min_prec or t.kind not in ("op", "ident"):
                return lhs
            if isinstance(lhs, LogExpr):
                raise self.fail(t)
            self.next()
            return_bool = False
            if self.peek().text == "bool":
                self.next()
                return_bool = True
            rhs = self.expr(prec + 1)
            if isinstance(rhs, LogExpr):
                raise self.fail(t)
            lhs = BinOp(op, lhs, rhs, return_bool)

    def primary(self) -> Any:
        t = self.peek()
        if t.text == "{":
            return self.log_expr()
        if t.text == "(":
            self.next()
            inner = self.expr(0)
            self.expect(")")
            return inner
        if t.kind == "number":
            self.next()
            return Number(float(t.text))
        if t.text == "-" and self.peek(1).kind == "number":
            self.next()
            return Number(-float(self.next().text))
        if t.kind == "ident" and (t.text in RANGE_FUNCS or t.text in UNWRAP_FUNCS):
            return self.range_agg()
        if t.kind == "ident" and t.text in VECTOR_AGGS:
            return self.vector_agg()
        raise self.fail(t)

    def log_expr(self) -> LogExpr:
        matchers = self.selector()
        expr = LogExpr(matchers)
        while True:
            t = self.peek()
            if t.text in ("|=", "!=", "|~", "!~"):
                self.next()
                values = [self.string()]
                while self.peek().text == "or":
                    self.next()
                    values.append(self.string())
                expr.stages.append(_line_filter(t.text, values))
            elif t.text == "|":
                self.next()
                self.stage(expr)
            else:
                return expr

    def string(self) -> str:
        t = self.next()
        if t.kind != "string":
            raise self.fail(t, "STRING")
        return _unquote(t.text)

    def selector(self) -> list[Matcher]:
        self.expect("{")
        matchers: list[Matcher] = []
        while self.peek().text != "}":
            name = self.next()
            if name.kind != "ident":
                raise self.fail(name, "IDENTIFIER")
            op = self.next()
            if op.text not in ("=", "!=", "=~", "!~"):
                raise self.fail(op, "=, !=, =~ or !~")
            value = self.string()
            try:
                matchers.append(Matcher(name.text, op.text, value))
            except re.error as e:
                raise LogQLError(f"parse error : error parsing regexp: {e}") from e
            if self.peek().text == ",":
                self.next()
            elif self.peek().text != "}":
                raise self.fail(None, "',' or '}'")
        self.next()
        if not matchers:
            raise LogQLError("parse error : queries require at least one regexp or equality matcher that does "
                             "not have an empty-compatible value. For instance, app=~\".*\" does not meet this "
                             "requirement, but app=~\".+\" will")
        if all(m.matches_empty() for m in matchers):
            raise LogQLError("parse error : queries require at least one regexp or equality matcher that does "
                             "not have an empty-compatible value. For instance, app=~\".*\" does not meet this "
                             "requirement, but app=~\".+\" will")
        return matchers

    def stage(self, expr: LogExpr) -> None:
        t = self.next()
        word = t.text
        if word == "json":
            # `| json a="x.y"` extracts chosen fields; a bare `| json` takes them all
            params = self._extraction_params()
            expr.stages.append(_json_stage if not params else self._json_fields(params))
        elif word == "logfmt":
            while self.peek().text.startswith("--"):
                self.next()
            expr.stages.append(_logfmt_stage)
        elif word == "regexp":
            expr.stages.append(_regexp_stage(self.string()))
        elif word == "pattern":
            expr.stages.append(_pattern_stage(self.string()))
        elif word == "line_format":
            expr.stages.append(_line_format_stage(self.string(), expr))
        elif word == "decolorize":
            expr.stages.append(_decolorize_stage)
        elif word == "unwrap":
            conv = ""
            name = self.next()
            if name.text in ("bytes", "duration", "duration_seconds") and self.peek().text == "(":
                self.next()
                conv = name.text
                name = self.next()
                self.expect(")")
            if name.kind != "ident":
                raise self.fail(name, "IDENTIFIER")
            expr.unwrap, expr.unwrap_conv = name.text, conv
        elif word in ("drop", "keep"):
            names = [self.next().text]
            while self.peek().text == ",":
                self.next()
                names.append(self.next().text)
            expr.stages.append(_drop_keep(word, names))
        elif word == "label_format":
            expr.stages.append(self._label_format(expr))
        elif t.kind == "ident" or t.text == "(":
            self.i -= 1
            pred = self.label_or()
            expr.stages.append(lambda labels, line: (labels, line) if pred(labels) else None)
        else:
            raise self.fail(t)

    def _extraction_params(self) -> list[tuple[str, str]]:
        params = []
        while self.peek().kind == "ident" and self.peek(1).text == "=" and self.peek(2).kind == "string":
            name = self.next().text
            self.next()
            params.append((name, self.string()))
            if self.peek().text == ",":
                self.next()
        return params

    @staticmethod
    def _json_fields(params: list[tuple[str, str]]) -> StageFn:
        def stage(labels: dict[str, str], line: str) -> Entry | None:
            try:
                obj = json.loads(line)
            except ValueError:
                return ({**labels, "__error__": "JSONParserErr"}, line)
            got = {}
            for name, path in params:
                cur: Any = obj
                for part in re.findall(r"[^.\[\]\"]+", path):
                    cur = cur.get(part) if isinstance(cur, dict) else None
                if cur is not None and not isinstance(cur, (dict, list)):
                    got[name] = str(cur)
            return _add_extracted(labels, got), line
        return stage

    def _label_format(self, expr: LogExpr) -> StageFn:
        renames: list[tuple[str, Any, bool]] = []
        while True:
            dst = self.next().text
            self.expect("=")
            t = self.next()
            if t.kind == "string":
                renames.append((dst, _template(_unquote(t.text), "label"), True))
            else:
                renames.append((dst, t.text, False))
            if self.peek().text != ",":
                break
            self.next()

        def stage(labels: dict[str, str], line: str) -> Entry | None:
            out = dict(labels)
            for dst, src, is_template in renames:
                if is_template:
                    try:
                        out[dst] = render(src, labels, line, expr.ts_ns)
                    except TemplateError:
                        out["__error__"] = "TemplateFormatErr"
                else:
                    out[dst] = labels.get(src, "")
                    out.pop(src, None)
            return out, line
        return stage

    def label_or(self) -> LabelPred:
        left = self.label_and()
        while self.peek().text == "or":
            self.next()
            right = self.label_and()
            left = (lambda a, b: lambda labels: a(labels) or b(labels))(left, right)
        return left

    def label_and(self) -> LabelPred:
        left = self.label_atom()
        while self.peek().text in ("and", ","):
            self.next()
            right = self.label_atom()
            left = (lambda a, b: lambda labels: a(labels) and b(labels))(left, right)
        return left

    def label_atom(self) -> LabelPred:
        if self.peek().text == "(":
            self.next()
            pred = self.label_or()
            self.expect(")")
            return pred
        name = self.next()
        if name.kind != "ident":
            raise self.fail(name, "IDENTIFIER")
        op = self.next()
        if op.text not in ("=", "!=", "=~", "!~", "==", ">", "<", ">=", "<="):
            raise self.fail(op)
        val = self.next()
        label = name.text
        if val.kind == "string":
            if op.text in ("=", "!=", "=~", "!~"):
                m = Matcher(label, op.text, _unquote(val.text))
                return lambda labels: m.matches(labels.get(label, ""))
            if op.text == "==":
                s = _unquote(val.text)
                return lambda labels: labels.get(label, "") == s
            raise self.fail(val, "NUMBER")
        if val.kind in ("number", "duration"):
            kind = "duration" if val.kind == "duration" else "bytes" if val.text.endswith("B") else "number"
            target = numeric_value(val.text, kind)
            cmp = _CMP[op.text]

            def numeric(labels: dict[str, str]) -> bool:
                raw = labels.get(label)
                if raw is None:
                    return False
                try:
                    return cmp(numeric_value(raw, kind), target)
                except ValueError:
                    return False
            return numeric
        raise self.fail(val, "STRING or NUMBER")

    def range_spec(self) -> tuple[float, float]:
        self.expect("[")
        t = self.next()
        if t.kind != "duration":
            raise self.fail(t, "DURATION")
        rng = parse_prom_duration(t.text) if re.fullmatch(r"(\d+(ms|s|m|h|d|w|y))+", t.text) else parse_go_duration(t.text)
        self.expect("]")
        offset = 0.0
        if self.peek().text == "offset":
            self.next()
            o = self.next()
            offset = parse_go_duration(o.text) if o.kind == "duration" else 0.0
        return rng, offset

    def range_agg(self) -> RangeAgg:
        func = self.next().text
        self.expect("(")
        param = None
        if func == "quantile_over_time":
            t = self.next()
            if t.kind != "number":
                raise self.fail(t, "NUMBER")
            param = float(t.text)
            self.expect(",")
        if self.peek().text == "(":
            self.next()
            log = self.log_expr()
            self.expect(")")
        else:
            log = self.log_expr()
        rng, offset = self.range_spec()
        self.expect(")")
        if func in UNWRAP_FUNCS and log.unwrap is None:
            raise LogQLError(f"parse error : invalid aggregation {func} without unwrap")
        if func in RANGE_FUNCS and log.unwrap is not None and func != "rate":
            raise LogQLError(f"parse error : invalid aggregation {func} with unwrap")
        agg = RangeAgg(func, log, rng, offset, param)
        if func in UNWRAP_FUNCS:
            agg.by, agg.without = self.grouping()
        return agg

    def grouping(self) -> tuple[list[str] | None, list[str] | None]:
        if self.peek().text not in ("by", "without"):
            return None, None
        word = self.next().text
        self.expect("(")
        names = []
        while self.peek().text != ")":
            names.append(self.next().text)
            if self.peek().text == ",":
                self.next()
        self.next()
        return (names, None) if word == "by" else (None, names)

    def vector_agg(self) -> VectorAgg:
        op = self.next().text
        by, without = self.grouping()
        self.expect("(")
        param = None
        if op in ("topk", "bottomk"):
            t = self.next()
            if t.kind != "number":
                raise self.fail(t, "NUMBER")
            param = float(t.text)
            self.expect(",")
        inner = self.expr(0)
        if isinstance(inner, LogExpr):
            raise LogQLError(f"parse error : syntax error: unexpected log query in {op}, expecting a metric query")
        self.expect(")")
        if by is None and without is None:
            by, without = self.grouping()
        return VectorAgg(op, inner, by, without, param)


def _drop_keep(word: str, names: list[str]) -> StageFn:
    keep = set(names)

    def stage(labels: dict[str, str], line: str) -> Entry | None:
        if word == "drop":
            return {k: v for k, v in labels.items() if k not in keep}, line
        return {k: v for k, v in labels.items() if k in keep}, line
    return stage


def _pattern_stage(pattern: str) -> StageFn:
    parts = re.split(r"<(\w+|_)>", pattern)
    rx = "".join(re.escape(p) if i % 2 == 0 else (f"(?P<{p}>.*?)" if p != "_" else ".*?") for i, p in enumerate(parts))
    # The last capture, when the pattern ends with one, takes the rest of the line, as Loki's does.
    compiled = re.compile("^" + rx + ("" if parts[-1] else "$"))

    def stage(labels: dict[str, str], line: str) -> Entry | None:
        m = compiled.search(line)
        if not m:
            return labels, line
        return _add_extracted(labels, m.groupdict()), line
    return stage


def parse(query: str) -> Any:
    return Parser(query).parse()


def is_log_query(node: Any) -> bool:
    return isinstance(node, LogExpr)


__all__ = ["LogQLError", "parse", "is_log_query", "LogExpr", "RangeAgg", "VectorAgg", "BinOp", "Number"]
