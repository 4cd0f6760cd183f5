"""Go's text/template as LogQL's `line_format` and `label_format` run it (Loki 3.x): actions with
pipelines, `if`/`else if`/`else`/`end`, trim markers, comments, the labels as `.name`, `__line__`
and `__timestamp__`, and Loki's function map (string, regex, math, date and encoding helpers).
A template that does not parse raises TemplateError with Go's message, which Loki returns as a
400; a function that fails at run time gives the line Loki would (the stage's __error__)."""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class TemplateError(Exception):
    """A template Go's parser rejects, or a call that fails while executing."""


@dataclass
class GoTime:
    """A time.Time: nanoseconds since the epoch, shown in UTC as Go prints it."""

    ns: int

    def __str__(self) -> str:
        return format_layout(self, "2006-01-02 15:04:05.999999999 -0700 MST")


NO_VALUE = "<no value>"  # what Go prints for a map key that is not there


# --- Go's time layouts ----------------------------------------------------------------------------
_LAYOUT = re.compile(r"January|Jan|Monday|Mon|MST|2006|Z07:00|Z0700|Z07|-07:00|-0700|-07|"
                     r"[.,](?:0+|9+)(?!\d)|01|02|_2|03|04|05|06|15|PM|pm|1|2|3|4|5")


def _dt(t: GoTime) -> dt.datetime:
    return dt.datetime.fromtimestamp(t.ns // 1_000_000_000, dt.UTC)


def format_layout(t: GoTime, layout: str) -> str:
    d, frac = _dt(t), t.ns % 1_000_000_000

    def token(m: re.Match[str]) -> str:
        tok = m.group(0)
        if tok[0] in ".," and len(tok) > 1:
            digits = f"{frac:09d}"[: len(tok) - 1]
            if tok[1] == "9":
                digits = digits.rstrip("0")
                return tok[0] + digits if digits else ""
            return tok[0] + digits
        return {
            "January": d.strftime("%B"), "Jan": d.strftime("%b"), "Monday": d.strftime("%A"), "Mon": d.strftime("%a"),
            "MST": "UTC", "2006": f"{d.year:04d}", "06": f"{d.year % 100:02d}", "01": f"{d.month:02d}",
            "1": str(d.month), "02": f"{d.day:02d}", "2": str(d.day), "_2": f"{d.day:2d}", "15": f"{d.hour:02d}",
            "03": f"{(d.hour % 12) or 12:02d}", "3": str((d.hour % 12) or 12), "04": f"{d.minute:02d}",
            "4": str(d.minute), "05": f"{d.second:02d}", "5": str(d.second), "PM": d.strftime("%p"),
            "pm": d.strftime("%p").lower(), "Z07:00": "Z", "Z0700": "Z", "Z07": "Z", "-07:00": "+00:00",
            "-0700": "+0000", "-07": "+00",
        }[tok]
    return _LAYOUT.sub(token, layout)


_PARSE_RX = {
    "January": r"(?P<B>[A-Za-z]+)", "Jan": r"(?P<b>[A-Za-z]{3})", "Monday": r"[A-Za-z]+", "Mon": r"[A-Za-z]{3}",
    "MST": r"[A-Z]{3,4}", "2006": r"(?P<Y>\d{4})", "06": r"(?P<y>\d{2})", "01": r"(?P<m>\d{2})", "1": r"(?P<m>\d{1,2})",
    "02": r"(?P<d>\d{2})", "2": r"(?P<d>\d{1,2})", "_2": r" ?(?P<d>\d{1,2})", "15": r"(?P<H>\d{2})",
    "03": r"(?P<I>\d{2})", "3": r"(?P<I>\d{1,2})", "04": r"(?P<M>\d{2})", "4": r"(?P<M>\d{1,2})",
    "05": r"(?P<S>\d{2})", "5": r"(?P<S>\d{1,2})", "PM": r"(?P<p>AM|PM)", "pm": r"(?P<p>am|pm)",
    "Z07:00": r"(?P<z>Z|[+-]\d{2}:\d{2})", "Z0700": r"(?P<z>Z|[+-]\d{4})", "Z07": r"(?P<z>Z|[+-]\d{2})",
    "-07:00": r"(?P<z>[+-]\d{2}:\d{2})", "-0700": r"(?P<z>[+-]\d{4})", "-07": r"(?P<z>[+-]\d{2})",
}


def parse_layout(layout: str, text: str) -> GoTime:
    """time.Parse(layout, text), in UTC unless the text carries an offset."""
    parts, pos = [], 0
    seen: set[str] = set()
    for m in _LAYOUT.finditer(layout):
        parts.append(re.escape(layout[pos:m.start()]))
        tok = m.group(0)
        part = r"(?:[.,](?P<f>\d+))?" if tok[0] in ".," and len(tok) > 1 else _PARSE_RX[tok]
        group = re.search(r"\(\?P<(\w+)>", part)
        if group and group.group(1) in seen:  # a field given twice: match it, keep the first
            part = part.replace(f"?P<{group.group(1)}>", "?:")
        elif group:
            seen.add(group.group(1))
        parts.append(part)
        pos = m.end()
    parts.append(re.escape(layout[pos:]))
    rx = "".join(parts)
    m2 = re.fullmatch(rx, text)
    if not m2:
        raise TemplateError(f'parsing time "{text}" as "{layout}": cannot parse')
    g = {k: v for k, v in m2.groupdict().items() if v}
    year = int(g["Y"]) if "Y" in g else (2000 + int(g["y"]) if "y" in g else 0)
    month = int(g["m"]) if "m" in g else (dt.datetime.strptime(g.get("b") or g.get("B", "Jan")[:3], "%b").month)
    hour = int(g.get("H", 0))
    if "I" in g:
        hour = int(g["I"]) % 12 + (12 if g.get("p", "").lower() == "pm" else 0)
    d = dt.datetime(max(year, 1), month, int(g.get("d", 1)), hour, int(g.get("M", 0)), int(g.get("S", 0)), tzinfo=dt.UTC)
    z = g.get("z", "Z")
    if z != "Z":
        sign = -1 if z[0] == "-" else 1
        digits = z[1:].replace(":", "")
        d -= sign * dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or 0))
    frac = int((g.get("f", "") + "000000000")[:9])
    return GoTime(int(d.timestamp()) * 1_000_000_000 + frac)


# --- printing -------------------------------------------------------------------------------------
def show(v: Any) -> str:
    """fmt.Sprint of a value, as the template prints it."""
    if v is None:
        return NO_VALUE
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _go_float(v)
    return str(v)


def _go_float(v: float) -> str:
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if math.isnan(v):
        return "NaN"
    if v == int(v) and abs(v) < 1e21:
        return str(int(v))
    text = repr(v)
    if "e" in text:
        mant, exp = text.split("e")
        return f"{mant}e{'-' if exp.startswith('-') else '+'}{abs(int(exp)):02d}"
    return text


_VERB = re.compile(r"%([-+# 0]*)(\d+|\*)?(?:\.(\d+))?([a-zA-Z%])")


def sprintf(fmt: str, *args: Any) -> str:
    """Go's fmt.Sprintf for the verbs templates use (%s %v %d %f %g %e %q %x %t %%)."""
    out, i = [], 0
    pos = 0
    for m in _VERB.finditer(fmt):
        out.append(fmt[pos:m.start()])
        pos = m.end()
        flags, width, prec, verb = m.group(1), m.group(2) or "", m.group(3), m.group(4)
        if verb == "%":
            out.append("%")
            continue
        if i >= len(args):
            out.append(f"%!{verb}(MISSING)")
            continue
        a = args[i]
        i += 1
        spec = flags + width + (f".{prec}" if prec is not None else "")
        if verb in "sv":
            text = show(a)
            out.append(("%" + spec + "s") % (text[: int(prec)] if prec is not None and verb == "s" else text)
                       if verb == "s" else ("%" + flags + width + "s") % text)
        elif verb == "q":
            out.append(("%" + flags + width + "s") % json.dumps(show(a)))
        elif verb == "t":
            out.append(show(bool(a)))
        elif verb in "dxXobfeEgG":
            integer = verb in "dxXob"
            try:
                x = int(a) if integer else float(a)
            except (TypeError, ValueError):
                out.append(f"%!{verb}({type(a).__name__}={show(a)})")
                continue
            if integer:
                out.append(format(x, flags.replace("#", "") + width + verb) if verb != "d" else ("%" + spec + "d") % x)
            else:
                out.append(("%" + spec + verb) % x if prec is not None or verb not in "gG" else _go_float(x))
        else:
            out.append(f"%!{verb}({show(a)})")
    out.append(fmt[pos:])
    if i < len(args):
        out.append("%!(EXTRA " + ", ".join(f"{type(a).__name__}={show(a)}" for a in args[i:]) + ")")
    return "".join(out)


# --- Loki's function map --------------------------------------------------------------------------
def _num(v: Any) -> float:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v
    try:
        return float(str(v))
    except ValueError:
        return 0.0


def _int(v: Any) -> int:
    if isinstance(v, GoTime):
        return v.ns
    try:
        return int(_num(v))
    except (ValueError, OverflowError):
        return 0


def _truthy(v: Any) -> bool:
    if v is None:
        return False
    if isinstance(v, str):
        return v != ""
    if isinstance(v, (int, float)):
        return v != 0
    return bool(v)


def _trunc(n: Any, s: Any) -> str:
    s, n = show(s), _int(n)
    return s[:n] if n >= 0 else s[n:]


def _substr(start: Any, end: Any, s: Any) -> str:
    s, a, b = show(s), _int(start), _int(end)
    if a < 0:
        return s[:b]
    if b < 0 or b > len(s):
        return s[a:]
    return s[a:b]


def _regex(pattern: Any) -> re.Pattern[str]:
    try:
        return re.compile(show(pattern))
    except re.error as exc:
        raise TemplateError(f"error parsing regexp: {exc}") from exc


def _go_repl(repl: str) -> str:
    """A Go replacement template ($1, ${name}) as Python's (\\1, \\g<name>)."""
    return re.sub(r"\$(\d+|\{\w+\}|\w+)", lambda m: f"\\g<{m.group(1).strip('{}')}>", repl.replace("\\", "\\\\"))


def _date(layout: Any, t: Any) -> str:
    if not isinstance(t, GoTime):
        t = GoTime(_int(t) * 1_000_000_000)
    return format_layout(t, show(layout))


def _default(default: Any, *given: Any) -> Any:
    return given[0] if given and _truthy(given[0]) else default


def _compare(op: str) -> Callable[..., bool]:
    def cmp(a: Any, *bs: Any) -> bool:
        if not bs:
            raise TemplateError(f"wrong number of args for {op}: want at least 1 got 0")
        for b in bs:
            x: Any
            y: Any
            if type(a) is type(b):
                x, y = a, b
            elif isinstance(a, str) or isinstance(b, str):
                x, y = show(a), show(b)
            else:
                x, y = _num(a), _num(b)
            ok = {"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y}[op]
            if op == "eq" and ok:
                return True
            if op != "eq" and not ok:
                return False
        return op != "eq"
    return cmp


def _bytes(s: Any) -> int:
    from kubesim.observability.loki.logql import _parse_bytes

    return int(_parse_bytes(show(s)))


def _duration(s: Any) -> float:
    from kubesim.observability.formats import parse_go_duration

    return parse_go_duration(show(s))


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "ToLower": lambda s: show(s).lower(), "ToUpper": lambda s: show(s).upper(),
    "lower": lambda s: show(s).lower(), "upper": lambda s: show(s).upper(),
    "title": lambda s: show(s).title(), "Title": lambda s: show(s).title(),
    "Replace": lambda s, old, new, n: show(s).replace(show(old), show(new), _int(n) if _int(n) >= 0 else -1),
    "replace": lambda old, new, s: show(s).replace(show(old), show(new)),
    "Trim": lambda s, cut: show(s).strip(show(cut)), "TrimLeft": lambda s, cut: show(s).lstrip(show(cut)),
    "TrimRight": lambda s, cut: show(s).rstrip(show(cut)), "TrimSpace": lambda s: show(s).strip(),
    "TrimPrefix": lambda s, p: show(s).removeprefix(show(p)), "TrimSuffix": lambda s, p: show(s).removesuffix(show(p)),
    "trim": lambda s: show(s).strip(), "trimAll": lambda cut, s: show(s).strip(show(cut)),
    "trimPrefix": lambda p, s: show(s).removeprefix(show(p)), "trimSuffix": lambda p, s: show(s).removesuffix(show(p)),
    "trunc": _trunc, "substr": _substr,
    "contains": lambda sub, s: show(sub) in show(s),
    "hasPrefix": lambda p, s: show(s).startswith(show(p)), "hasSuffix": lambda p, s: show(s).endswith(show(p)),
    "indent": lambda n, s: "\n".join(" " * _int(n) + ln for ln in show(s).split("\n")),
    "nindent": lambda n, s: "\n" + "\n".join(" " * _int(n) + ln for ln in show(s).split("\n")),
    "repeat": lambda n, s: show(s) * max(0, _int(n)),
    "alignLeft": lambda n, s: show(s)[:_int(n)].ljust(_int(n)), "alignRight": lambda n, s: show(s)[-_int(n):].rjust(_int(n)),
    "regexReplaceAll": lambda rx, s, repl: _regex(rx).sub(_go_repl(show(repl)), show(s)),
    "regexReplaceAllLiteral": lambda rx, s, repl: _regex(rx).sub(lambda _m: show(repl), show(s)),
    "count": lambda rx, s: len(_regex(rx).findall(show(s))),
    "urlencode": lambda s: urllib.parse.quote_plus(show(s)), "urldecode": lambda s: urllib.parse.unquote_plus(show(s)),
    "b64enc": lambda s: base64.b64encode(show(s).encode()).decode(),
    "b64dec": lambda s: base64.b64decode(show(s).encode() + b"==").decode(errors="replace"),
    "default": _default,
    "fromJson": lambda s: json.loads(show(s)),
    "date": _date, "toDate": lambda layout, s: parse_layout(show(layout), show(s)),
    "unixEpoch": lambda t: t.ns // 1_000_000_000 if isinstance(t, GoTime) else _int(t),
    "unixEpochMillis": lambda t: t.ns // 1_000_000 if isinstance(t, GoTime) else _int(t),
    "unixEpochNanos": lambda t: t.ns if isinstance(t, GoTime) else _int(t),
    "unixToTime": lambda s: GoTime(_int(s) * (1 if len(show(s)) > 16 else 1_000_000_000 if len(show(s)) <= 10
                                              else 1_000_000 if len(show(s)) <= 13 else 1000)),
    "bytes": _bytes, "duration": _duration, "duration_seconds": _duration,
    "int": _int, "float64": lambda v: float(_num(v)),
    "add": lambda *a: sum(_int(x) for x in a), "sub": lambda a, b: _int(a) - _int(b),
    "mul": lambda *a: math.prod(_int(x) for x in a), "div": lambda a, b: int(_int(a) / _int(b)) if _int(b) else 0,
    "mod": lambda a, b: int(math.fmod(_int(a), _int(b))) if _int(b) else 0,
    "addf": lambda *a: float(sum(_num(x) for x in a)), "subf": lambda a, *b: float(_num(a) - sum(_num(x) for x in b)),
    "mulf": lambda *a: float(math.prod(_num(x) for x in a)),
    "divf": lambda a, *b: float(_num(a) / math.prod(_num(x) for x in b)) if all(_num(x) for x in b) else math.inf,
    "max": lambda *a: max(_int(x) for x in a), "min": lambda *a: min(_int(x) for x in a),
    "maxf": lambda *a: float(max(_num(x) for x in a)), "minf": lambda *a: float(min(_num(x) for x in a)),
    "ceil": lambda v: float(math.ceil(_num(v))), "floor": lambda v: float(math.floor(_num(v))),
    "round": lambda v, p=0, r=0.5: float(round(_num(v), _int(p))),
    "printf": lambda f, *a: sprintf(show(f), *a), "print": lambda *a: "".join(show(x) for x in a),
    "println": lambda *a: " ".join(show(x) for x in a) + "\n",
    "len": lambda v: len(v) if isinstance(v, (str, list, dict)) else len(show(v)),
    "index": lambda v, *keys: _index(v, keys),
    "not": lambda v: not _truthy(v),
    "eq": _compare("eq"), "ne": _compare("ne"), "lt": _compare("lt"), "le": _compare("le"),
    "gt": _compare("gt"), "ge": _compare("ge"),
    "html": lambda *a: "".join(show(x) for x in a).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    .replace('"', "&#34;").replace("'", "&#39;"),
    "js": lambda *a: json.dumps("".join(show(x) for x in a))[1:-1],
    "urlquery": lambda *a: urllib.parse.quote_plus("".join(show(x) for x in a)),
}


def _index(v: Any, keys: tuple[Any, ...]) -> Any:
    for k in keys:
        v = v.get(show(k)) if isinstance(v, dict) else None
    return v


# --- lexing and parsing ---------------------------------------------------------------------------
_ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.S)
_ATOM = re.compile(r"""\s*(?:
      (?P<str>"(?:[^"\\]|\\.)*")|(?P<raw>`[^`]*`)|(?P<num>[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
     |(?P<field>\.[A-Za-z_]\w*|\.)|(?P<var>\$\w*)|(?P<ident>[A-Za-z_]\w*)|(?P<punct>[|()])|(?P<bad>\S))""", re.X)


@dataclass
class Text:
    text: str


@dataclass
class Action:
    pipeline: list[list[Any]]  # commands; each a list of operands


@dataclass
class If:
    branches: list[tuple[list[list[Any]], list[Any]]]  # (condition, body)
    otherwise: list[Any] = field(default_factory=list)


def _lex_pipeline(src: str, name: str) -> list[list[Any]]:
    toks: list[tuple[str, str]] = []
    pos = 0
    while pos < len(src):
        m = _ATOM.match(src, pos)
        if not m or m.end() == pos:
            break
        pos = m.end()
        kind = m.lastgroup or ""
        if kind == "bad":
            raise TemplateError(f"template: {name}:1: unexpected \"{m.group(kind)}\" in command")
        toks.append((kind, m.group(kind)))
    items, _ = _pipeline(toks, 0, name)
    if not items or not items[0]:
        raise TemplateError(f"template: {name}:1: missing value for command")
    return items


def _pipeline(toks: list[tuple[str, str]], i: int, name: str) -> tuple[list[list[Any]], int]:
    commands: list[list[Any]] = [[]]
    while i < len(toks):
        kind, text = toks[i]
        if text == ")":
            return commands, i
        i += 1
        if text == "|":
            if not commands[-1]:
                raise TemplateError(f"template: {name}:1: missing command")
            commands.append([])
        elif text == "(":
            sub, i = _pipeline(toks, i, name)
            if i >= len(toks):
                raise TemplateError(f"template: {name}:1: unclosed left paren")
            i += 1
            commands[-1].append(("pipe", sub))
        elif kind == "str":
            try:
                commands[-1].append(("lit", json.loads(text)))
            except ValueError:
                raise TemplateError(f"template: {name}:1: invalid syntax: {text}") from None
        elif kind == "raw":
            commands[-1].append(("lit", text[1:-1]))
        elif kind == "num":
            commands[-1].append(("lit", float(text) if any(c in text for c in ".eE") else int(text)))
        elif kind == "field":
            commands[-1].append(("field", text[1:]))
        elif kind == "var":
            commands[-1].append(("lit", None))
        elif text in ("true", "false"):
            commands[-1].append(("lit", text == "true"))
        elif text == "nil":
            commands[-1].append(("lit", None))
        elif text in ("__line__", "__timestamp__") or text in FUNCTIONS or text in ("and", "or"):
            commands[-1].append(("fn", text))
        else:
            raise TemplateError(f'template: {name}:1: function "{text}" not defined')
    if not commands[-1] and len(commands) > 1:
        raise TemplateError(f"template: {name}:1: missing command")
    return commands, i


def compile_template(src: str, name: str = "line") -> list[Any]:
    """Parse a template into nodes; TemplateError with Go's message when it does not parse."""
    nodes: list[Any] = []
    stack: list[tuple[If, list[Any]]] = []
    current = nodes
    pos = 0
    pending_trim = False
    for m in _ACTION.finditer(src):
        text = src[pos:m.start()]
        if pending_trim:
            text = text.lstrip()
        if m.group(1):
            text = text.rstrip()
        if text:
            current.append(Text(text))
        pos = m.end()
        pending_trim = bool(m.group(3))
        body = m.group(2).strip()
        if body.startswith("/*"):
            continue
        word = body.split(None, 1)[0] if body else ""
        if word == "if":
            node = If([(_lex_pipeline(body[2:], name), [])])
            current.append(node)
            stack.append((node, current))
            current = node.branches[0][1]
        elif word == "else":
            if not stack:
                raise TemplateError(f"template: {name}:1: unexpected {{{{else}}}}")
            node = stack[-1][0]
            rest = body[4:].strip()
            if rest.startswith("if "):
                node.branches.append((_lex_pipeline(rest[3:], name), []))
                current = node.branches[-1][1]
            else:
                current = node.otherwise
        elif word == "end":
            if not stack:
                raise TemplateError(f"template: {name}:1: unexpected {{{{end}}}}")
            _, current = stack.pop()
        elif word in ("range", "with", "define", "template", "block"):
            raise TemplateError(f"template: {name}:1: {word} is not supported here")
        else:
            current.append(Action(_lex_pipeline(body, name)))
    if stack:
        raise TemplateError(f"template: {name}:1: unexpected EOF")
    tail = src[pos:]
    if pending_trim:
        tail = tail.lstrip()
    if "{{" in tail:
        raise TemplateError(f"template: {name}:1: unclosed action")
    if tail:
        nodes_tail = Text(tail)
        current.append(nodes_tail)
    return nodes


# --- execution ------------------------------------------------------------------------------------
@dataclass
class Scope:
    labels: dict[str, str]
    line: str
    ts_ns: int


def _operand(op: tuple[str, Any], scope: Scope) -> Any:
    kind, v = op
    if kind == "lit":
        return v
    if kind == "field":
        return scope.labels if v == "" else scope.labels.get(v)
    if kind == "pipe":
        return _run_pipeline(v, scope)
    return _call(v, [], scope)


def _call(name: str, args: list[Any], scope: Scope) -> Any:
    if name == "__line__":
        return scope.line
    if name == "__timestamp__":
        return GoTime(scope.ts_ns)
    if name == "now":
        return GoTime(scope.ts_ns)
    if name == "and":
        for a in args:
            if not _truthy(a):
                return a
        return args[-1] if args else None
    if name == "or":
        for a in args:
            if _truthy(a):
                return a
        return args[-1] if args else None
    try:
        return FUNCTIONS[name](*args)
    except TemplateError:
        raise
    except TypeError as exc:
        raise TemplateError(f"template: line:1: wrong number of args for {name}: {exc}") from None
    except (ValueError, ArithmeticError, KeyError) as exc:
        raise TemplateError(f"template: line:1: error calling {name}: {exc}") from None


def _run_pipeline(pipeline: list[list[Any]], scope: Scope) -> Any:
    value: Any = None
    for n, command in enumerate(pipeline):
        head = command[0]
        args = [_operand(op, scope) for op in command[1:]]
        if n:
            args.append(value)
        if head[0] == "fn":
            value = _call(head[1], args, scope)
        elif args:
            raise TemplateError("template: line:1: can't give argument to non-function")
        else:
            value = _operand(head, scope)
    return value


def _render(nodes: list[Any], scope: Scope, out: list[str]) -> None:
    for node in nodes:
        if isinstance(node, Text):
            out.append(node.text)
        elif isinstance(node, Action):
            out.append(show(_run_pipeline(node.pipeline, scope)))
        else:
            for cond, body in node.branches:
                if _truthy(_run_pipeline(cond, scope)):
                    _render(body, scope, out)
                    break
            else:
                _render(node.otherwise, scope, out)


def render(nodes: list[Any], labels: dict[str, str], line: str, ts_ns: int) -> str:
    out: list[str] = []
    _render(nodes, Scope(labels, line, ts_ns), out)
    return "".join(out)
