"""Number, time and duration formats as the Go back ends print and parse them, so that the
emulated APIs' strings read exactly like Prometheus's, Loki's and Jaeger's."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from decimal import Decimal

_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, "y": 31536000.0}
_PROM_DURATION = re.compile(r"^((\d+)(ms|s|m|h|d|w|y))+$")
_PROM_PART = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_GO_DURATION = re.compile(r"^([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h)")
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def format_value(v: float) -> str:
    """A sample value as Prometheus's JSON prints it (Go's FormatFloat(v, 'f', -1, 64))."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v == int(v) and abs(v) < 1e21:
        return str(int(v)) if v != 0 or math.copysign(1, v) > 0 else "-0"
    return format(Decimal(repr(v)), "f")


def format_e(v: float) -> str:
    """Go's FormatFloat(v, 'e', -1, 64), which alert `value` strings use: 1e+00, 2.5e-01."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    for p in range(0, 18):
        s = f"{v:.{p}e}"
        if float(s) == v:
            break
    mant, exp = s.split("e")
    sign, digits = exp[0], exp[1:].lstrip("0")
    return f"{mant}e{sign}{digits.rjust(2, '0')}"


def format_time(t: float) -> float | int:
    """A timestamp in seconds for a Prometheus JSON body: millisecond precision, no '.0'."""
    ms = round(t * 1000)
    return ms // 1000 if ms % 1000 == 0 else ms / 1000


def rfc3339_nano(t: float) -> str:
    """RFC3339 with Go's trimmed nanoseconds, as in alert activeAt: 2026-01-05T09:00:15.5Z."""
    whole = math.floor(t)
    frac = round((t - whole) * 1e9)
    if frac >= 1_000_000_000:
        whole, frac = whole + 1, 0
    base = datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        base += "." + f"{frac:09d}".rstrip("0")
    return base + "Z"


def parse_rfc3339(s: str) -> float | None:
    try:
        text = s.replace("Z", "+00:00").replace("z", "+00:00")
        m = re.match(r"^(.*T\d\d:\d\d:\d\d)(\.\d+)?(.*)$", text)
        if not m:
            return None
        base = datetime.fromisoformat(m.group(1) + m.group(3))
        if base.tzinfo is None:
            return None
        frac = float(m.group(2)) if m.group(2) else 0.0
        return base.timestamp() + frac
    except ValueError:
        return None


def _finite_float(s: str) -> float | None:
    """`s` as a finite float (what both of Prometheus's parameter parsers try first), else None."""
    try:
        v = float(s)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def parse_prom_time(s: str) -> float:
    """Prometheus's parseTime: unix seconds (float) or RFC3339. Raises ValueError."""
    v = _finite_float(s)
    if v is not None:
        return v
    t = parse_rfc3339(s)
    if t is None:
        raise ValueError(f'cannot parse "{s}" to a valid timestamp')
    return t


def parse_prom_duration(s: str) -> float:
    """Prometheus's parseDuration for API params: float seconds or a duration like 1m30s."""
    v = _finite_float(s)
    if v is not None:
        return v
    if s and _PROM_DURATION.match(s):
        return sum(int(n) * _DURATION_UNITS[u] for n, u in _PROM_PART.findall(s))
    raise ValueError(f'cannot parse "{s}" to a valid duration')


def parse_go_duration(s: str) -> float:
    """Go's time.ParseDuration (Jaeger's minDuration=100ms, 1.5s, 1h30m). Raises ValueError."""
    rest, total, sign = s.strip(), 0.0, 1.0
    if rest.startswith("-"):
        sign, rest = -1.0, rest[1:]
    if not rest:
        raise ValueError(f'time: invalid duration "{s}"')
    if rest == "0":
        return 0.0
    while rest:
        m = _GO_DURATION.match(rest)
        if not m:
            raise ValueError(f'time: invalid duration "{s}"')
        total += float(m.group(1)) * _GO_UNITS[m.group(2)]
        rest = rest[m.end():]
    return sign * total


def parse_loki_time(s: str) -> float:
    """Loki's time params: integer ns epoch (or s if short), float seconds, or RFC3339."""
    if re.fullmatch(r"\d+", s):
        n = int(s)
        # Loki treats integers as seconds when they are too short to be nanoseconds.
        return n / 1e9 if len(s) > 10 else float(n)
    try:
        return float(s)
    except ValueError:
        pass
    t = parse_rfc3339(s)
    if t is None:
        raise ValueError(f'cannot parse "{s}" to a valid timestamp')
    return t


def humanize(v: float) -> str:
    """Prometheus's `humanize` template function (SI prefixes)."""
    if v == 0 or math.isnan(v) or math.isinf(v):
        return f"{v:.4g}"
    if abs(v) >= 1:
        prefixes = ["", "k", "M", "G", "T", "P", "E", "Z", "Y"]
        i = 0
        while abs(v) >= 1000 and i < len(prefixes) - 1:
            v /= 1000
            i += 1
        return f"{v:.4g}{prefixes[i]}"
    prefixes = ["", "m", "u", "n", "p", "f", "a", "z", "y"]
    i = 0
    while abs(v) < 1 and i < len(prefixes) - 1:
        v *= 1000
        i += 1
    return f"{v:.4g}{prefixes[i]}"


def humanize_duration(v: float) -> str:
    """Prometheus's `humanizeDuration`: 1d 2h 3m 4s."""
    if math.isnan(v) or math.isinf(v):
        return f"{v:.4g}"
    if v == 0:
        return "0s"
    if abs(v) < 1:
        return f"{v * 1000:.4g}ms"
    sign = "-" if v < 0 else ""
    v = abs(v)
    secs = int(v)
    days, rem = divmod(secs, 86400)
    hours, rem = divmod(rem, 3600)
    minutes, seconds = divmod(rem, 60)
    seconds_f = seconds + (v - secs)
    if days:
        return f"{sign}{days}d {hours}h {minutes}m {int(seconds_f)}s"
    if hours:
        return f"{sign}{hours}h {minutes}m {int(seconds_f)}s"
    if minutes:
        return f"{sign}{minutes}m {int(seconds_f)}s"
    return f"{sign}{seconds_f:.4g}s"
