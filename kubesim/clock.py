"""The emulated cluster's clock: virtual by default (advance() moves it), or live (wall time
times a speed factor, for agents that think in wall time). Either starts at the host's wall
clock, as a freshly created cluster does, so queries built from the host's `date` find its
telemetry; what a seed decides is relative to `start`, which a run records (and a test that
compares absolute timestamps passes explicitly, e.g. FIXED_EPOCH)."""

from __future__ import annotations

import math
import time
from calendar import timegm
from datetime import UTC, datetime
from functools import lru_cache

# A start for tests that compare absolute timestamps: 2026-01-05T09:00:00Z.
FIXED_EPOCH = 1767603600.0


def wall_start() -> float:
    """Now on the host's clock, to the whole second (timestamps then read as a real cluster's)."""
    return float(math.floor(time.time()))


class VirtualClock:
    def __init__(self, start: float | None = None) -> None:
        self.start = wall_start() if start is None else float(start)
        self._now = self.start

    def now(self) -> float:
        return self._now

    def set(self, t: float) -> None:
        self._now = max(self._now, float(t))

    def rewind(self, t: float) -> None:
        """Put the clock back to `t`: only a checkpoint restore may, since it puts back every
        timestamp of that moment with it."""
        self._now = float(t)

    def rfc3339(self, t: float | None = None) -> str:
        return rfc3339(self._now if t is None else t)


class LiveClock(VirtualClock):
    """Cluster time = start + speed × wall seconds since creation; `set` still jumps ahead."""

    def __init__(self, start: float | None = None, speed: float = 1.0) -> None:
        super().__init__(start)
        self.speed = speed
        self._wall0 = time.monotonic()
        self._offset = 0.0

    def now(self) -> float:
        return self._now + self._offset + (time.monotonic() - self._wall0) * self.speed

    def set(self, t: float) -> None:
        cur = self.now()
        if t > cur:
            self._offset += t - cur

    def rewind(self, t: float) -> None:
        self._now, self._offset, self._wall0 = float(t), 0.0, time.monotonic()


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@lru_cache(maxsize=65536)
def parse_time(text: str) -> float:
    """RFC 3339 (`Z` or an offset, optional fraction) → seconds since the epoch."""
    try:
        if text.endswith("Z") and "." not in text:
            return float(timegm(datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").timetuple()))
        head, frac = text.replace("Z", "+00:00"), ""
        if "." in head:
            base, rest = head.split(".", 1)
            digits = len(rest) - len(rest.lstrip("0123456789"))
            frac, head = rest[:digits], base + rest[digits:]
        stamp = datetime.fromisoformat(head)
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=UTC)
        return stamp.timestamp() + (float("0." + frac) if frac else 0.0)
    except ValueError:
        return 0.0
