"""The numeric side of PromQL, shared by the PromQL and LogQL evaluators: operators with Go's
float semantics, Prometheus's extrapolated rate, quantiles, histogram_quantile's bucket
interpolation, *_over_time reducers and the aggregation operators' value functions."""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable


# --- arithmetic -------------------------------------------------------------------------------
def _div(a: float, b: float) -> float:
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1, b)
    return a / b


def _mod(a: float, b: float) -> float:
    if b == 0 or math.isinf(a) or math.isnan(a) or math.isnan(b):
        return math.nan
    return math.fmod(a, b)


def _pow(a: float, b: float) -> float:
    try:
        return math.pow(a, b)
    except OverflowError:
        return math.inf
    except ValueError:
        return math.nan


ARITH: dict[str, Callable[[float, float], float]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": _div,
    "%": _mod,
    "^": _pow,
    "atan2": math.atan2,
}
COMPARE: dict[str, Callable[[float, float], bool]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
}
SET_OPS = ("and", "or", "unless")


# --- range functions --------------------------------------------------------------------------
def extrapolated_rate(ts: list[float], vs: list[float], start: float, end: float, counter: bool, per_second: bool) -> float | None:
    """Prometheus's extrapolatedRate (promql/functions.go) for rate, increase and delta."""
    n = len(ts)
    if n < 2:
        return None
    result = vs[-1] - vs[0]
    if counter and any(map(operator.gt, vs, vs[1:])):
        prev = vs[0]
        for v in vs[1:]:
            if v < prev:
                result += prev
            prev = v
    sampled = ts[-1] - ts[0]
    to_start = ts[0] - start
    to_end = end - ts[-1]
    avg = sampled / (n - 1)
    if counter and result > 0 and vs[0] >= 0:
        to_zero = sampled * (vs[0] / result)
        if to_zero < to_start:
            to_start = to_zero
    threshold = avg * 1.1
    interval = sampled
    interval += to_start if to_start < threshold else avg / 2
    interval += to_end if to_end < threshold else avg / 2
    result *= interval / sampled
    if per_second:
        result /= end - start
    return result


def instant_delta(ts: list[float], vs: list[float], is_rate: bool) -> float | None:
    if len(ts) < 2:
        return None
    last, prev = vs[-1], vs[-2]
    dv = last - prev
    if is_rate and last < prev:
        dv = last
    if not is_rate:
        return dv
    dt = ts[-1] - ts[-2]
    return dv / dt if dt else None


def _beyond(q: float) -> float:
    """What Prometheus's quantiles give for a φ outside [0, 1]: -Inf below, +Inf above."""
    return -math.inf if q < 0 else math.inf


def quantile(q: float, values: list[float]) -> float:
    """Prometheus's quantile(): linear interpolation between closest ranks."""
    if not values:
        return math.nan
    if q < 0 or q > 1:
        return _beyond(q)
    vals = sorted(values)
    n = len(vals)
    rank = q * (n - 1)
    lo = max(0, math.floor(rank))
    hi = min(n - 1, lo + 1)
    w = rank - math.floor(rank)
    return vals[lo] * (1 - w) + vals[hi] * w


def linear_regression(ts: list[float], vs: list[float], intercept_t: float) -> tuple[float, float]:
    n = len(ts)
    sx = sy = sxy = sxx = 0.0
    for t, v in zip(ts, vs, strict=True):
        x = t - intercept_t
        sx += x
        sy += v
        sxy += x * v
        sxx += x * x
    cov = sxy - sx * sy / n
    var = sxx - sx * sx / n
    slope = cov / var if var else math.nan
    icpt = sy / n - slope * sx / n
    return slope, icpt


def _stdvar(values: list[float]) -> float:
    n = len(values)
    mean = sum(values) / n
    return sum((v - mean) ** 2 for v in values) / n


OVER_TIME: dict[str, Callable[[list[float]], float]] = {
    "avg_over_time": lambda vs: sum(vs) / len(vs),
    "sum_over_time": lambda vs: sum(vs),
    "min_over_time": lambda vs: min(vs),
    "max_over_time": lambda vs: max(vs),
    "count_over_time": lambda vs: float(len(vs)),
    "last_over_time": lambda vs: vs[-1],
    "stddev_over_time": lambda vs: math.sqrt(_stdvar(vs)),
    "stdvar_over_time": _stdvar,
    "present_over_time": lambda vs: 1.0,
}


def changes(vs: list[float]) -> float:
    c = 0
    for a, b in zip(vs, vs[1:], strict=False):
        if a != b and not (math.isnan(a) and math.isnan(b)):
            c += 1
    return float(c)


def resets(vs: list[float]) -> float:
    return float(sum(1 for a, b in zip(vs, vs[1:], strict=False) if b < a))


# --- instant-vector functions ------------------------------------------------------------------
def round_to(v: float, to: float = 1.0) -> float:
    if math.isnan(v) or math.isinf(v):
        return v
    inv = 1.0 / to
    return math.floor(v * inv + 0.5) / inv


MATH_FUNCS: dict[str, Callable[[float], float]] = {
    "abs": abs,
    "ceil": lambda v: float(math.ceil(v)) if math.isfinite(v) else v,
    "floor": lambda v: float(math.floor(v)) if math.isfinite(v) else v,
    "exp": lambda v: _safe(math.exp, v),
    "ln": lambda v: _safe(math.log, v),
    "log2": lambda v: _safe(math.log2, v),
    "log10": lambda v: _safe(math.log10, v),
    "sqrt": lambda v: _safe(math.sqrt, v),
    "sgn": lambda v: math.copysign(1.0, v) if v != 0 and not math.isnan(v) else v,
    "deg": math.degrees,
    "rad": math.radians,
}


def _safe(f: Callable[[float], float], v: float) -> float:
    try:
        return f(v)
    except OverflowError:
        return math.inf
    except ValueError:
        if v == 0 and f in (math.log, math.log2, math.log10):
            return -math.inf
        return math.nan


def go_expand(template: str, m: re.Match[str]) -> str:
    """Go's regexp Expand for label_replace: $1, ${1}, $name; unknown groups expand to ""."""

    def sub(x: re.Match[str]) -> str:
        if x.group(0) == "$$":
            return "$"
        name = x.group(1) or x.group(2)
        try:
            g = m.group(int(name)) if name.isdigit() else m.group(name)
        except IndexError:
            return ""
        return g or ""

    return re.sub(r"\$\$|\$\{(\w+)\}|\$(\w+)", sub, template)


def bucket_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """Prometheus's bucketQuantile over (upper bound, cumulative count) pairs."""
    if math.isnan(q):
        return math.nan
    if q < 0 or q > 1:
        return _beyond(q)
    buckets = sorted(buckets)
    if not buckets or not math.isinf(buckets[-1][0]):
        return math.nan
    merged: list[list[float]] = []
    for ub, c in buckets:
        if merged and merged[-1][0] == ub:
            merged[-1][1] += c
        else:
            merged.append([ub, c])
    # Counts can be non-monotonic when buckets are scraped at slightly different times.
    mx = -math.inf
    for bk in merged:
        if bk[1] < mx:
            bk[1] = mx
        mx = bk[1]
    if len(merged) < 2:
        return math.nan
    observations = merged[-1][1]
    if observations == 0:
        return math.nan
    rank = q * observations
    idx = next(i for i, bk in enumerate(merged) if bk[1] >= rank)
    if idx == len(merged) - 1:
        return merged[-2][0]
    if idx == 0 and merged[0][0] <= 0:
        return merged[0][0]
    start, end, count = 0.0, merged[idx][0], merged[idx][1]
    if idx > 0:
        start = merged[idx - 1][0]
        count -= merged[idx - 1][1]
        rank -= merged[idx - 1][1]
    return start + (end - start) * (rank / count)


def aggregate_values(op: str, vals: list[float], param: float | None = None) -> float:
    """The value of sum/avg/min/max/count/group/stddev/stdvar/quantile over one group."""
    if op == "sum":
        return math.fsum(vals) if all(math.isfinite(v) for v in vals) else sum(vals)
    if op == "avg":
        return sum(vals) / len(vals)
    if op in ("min", "max"):
        real = [v for v in vals if not math.isnan(v)]
        return (min(real) if op == "min" else max(real)) if real else math.nan
    if op == "count":
        return float(len(vals))
    if op == "group":
        return 1.0
    if op == "stddev":
        return math.sqrt(_stdvar(vals))
    if op == "stdvar":
        return _stdvar(vals)
    if op == "quantile":
        return quantile(param if param is not None else math.nan, vals)
    raise ValueError(f"aggregation {op!r} is not supported")
