"""The emulated cluster's clock: virtual by default (advance() moves it), or live (wall time
times a speed factor, for agents that think in wall time)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

# A fixed epoch makes a fixed seed replay the same timestamps; 2026-01-05T09:00:00Z.
DEFAULT_EPOCH = 1767603600.0


class VirtualClock:
    def __init__(self, start: float = DEFAULT_EPOCH) -> None:
        self._now = float(start)

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

    def __init__(self, start: float = DEFAULT_EPOCH, speed: float = 1.0) -> None:
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
