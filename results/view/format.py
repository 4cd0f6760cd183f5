"""Numbers as a person reads them: rates as percentages, dollars to 4 significant digits, times
in seconds, minutes and hours, counts with thousands separators. Every function takes None
(nothing recorded) and returns "–" for it."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

NONE = "–"


def pct(v: float | None, digits: int = 1) -> str:
    return NONE if v is None else f"{100 * v:.{digits}f}%"


def interval(lo: float | None, hi: float | None) -> str:
    return "" if lo is None or hi is None else f"{100 * lo:.0f}–{100 * hi:.0f}%"


def usd(v: float | None) -> str:
    """$ to 4 significant digits, never in exponent form: 0.11483750000000001 reads $0.1148."""
    if v is None:
        return NONE
    if v == 0:
        return "$0"
    if abs(v) >= 1000:
        return f"${v:,.0f}"
    decimals = max(0, 3 - math.floor(math.log10(abs(v))))
    return f"${v:.{decimals}f}"


def seconds(v: float | None) -> str:
    if v is None:
        return NONE
    if v < 60:
        return f"{v:.1f} s" if v < 10 else f"{v:.0f} s"
    m, s = divmod(int(round(v)), 60)
    if m < 60:
        return f"{m} min {s:02d} s"
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min"


def count(v: float | None) -> str:
    if v is None:
        return NONE
    return f"{v:,.0f}" if float(v).is_integer() or abs(v) >= 100 else f"{v:.1f}"


def when(ts: float | None) -> str:
    if ts is None:
        return NONE
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def verdict(v: Any) -> str:
    """A pass/fail flag as text: pass, fail, or – when not scored."""
    return NONE if v is None else ("pass" if v else "fail")


FILTERS = {"pct": pct, "usd": usd, "seconds": seconds, "count": count, "when": when, "verdict": verdict}
