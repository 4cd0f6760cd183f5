"""Limits that hold across the whole farm: a per-model concurrency semaphore (Redis sorted set of
leases, so a dead process frees its slot when its lease expires) and a sweep-wide cost ledger
(a Redis counter keyed by sweep id). Both fall back to in-process equivalents without Redis."""

from __future__ import annotations

import os
import threading
import time
import uuid
from typing import Any

from farm.errors import ConfigurationError, LimitReached
from farm.states import LIMIT_SWEEP_COST

# One acquire, atomically: drop expired leases, take a slot if one is free. Redis's own clock is the
# only clock, so workers on machines with skewed clocks agree on what "expired" means.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
  redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])) * 4)
  return 1
end
return 0
"""
_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[1]), ARGV[2])
  return 1
end
return 0
"""


def redis_url_from(options: dict[str, Any] | None = None) -> str | None:
    """options["redis_url"], else FARM_BROKER_URL when it is a redis:// URL, else None."""
    url = (options or {}).get("redis_url")
    if url:
        return str(url)
    broker = os.environ.get("FARM_BROKER_URL", "")
    return broker if broker.startswith(("redis://", "rediss://")) else None


def _redis(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5)


class Slot:
    """A held concurrency slot; release() is idempotent."""

    def __init__(self, release: Any) -> None:
        self._release = release
        self._done = False

    def release(self) -> None:
        if not self._done:
            self._done = True
            self._release()

    def __enter__(self) -> Slot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class RedisSemaphore:
    """At most `limit` holders of `name` across every process that shares the Redis server.
    A holder renews its lease every lease_s/3 from a daemon thread; a process that dies stops
    renewing, and its slot is free again at most lease_s later."""

    def __init__(self, url: str, name: str, limit: int, lease_s: float = 30.0) -> None:
        if limit < 1:
            raise ConfigurationError(f"concurrency limit for '{name}' must be at least 1, got {limit}")
        self.key = f"farm:llm:slots:{name}"
        self.limit, self.lease_s = limit, lease_s
        self._r = _redis(url)
        self._acquire = self._r.register_script(_ACQUIRE)
        self._renew = self._r.register_script(_RENEW)

    def holders(self) -> int:
        now = time.time()
        return int(self._r.zcount(self.key, now, "+inf"))

    def acquire(self, timeout: float | None = None) -> Slot:
        token = f"{os.getpid()}:{uuid.uuid4().hex}"
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.02
        while not self._acquire(keys=[self.key], args=[self.limit, self.lease_s, token]):
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"no free slot of {self.key} (limit {self.limit}) within {timeout}s")
            time.sleep(pause)
            pause = min(pause * 1.5, 0.5)
        stop = threading.Event()

        def heartbeat() -> None:
            while not stop.wait(self.lease_s / 3):
                try:
                    if not self._renew(keys=[self.key], args=[self.lease_s, token]):
                        return  # lease already expired and was reaped: nothing to keep alive
                except Exception:  # a Redis hiccup: try again next beat, the lease has slack
                    continue

        threading.Thread(target=heartbeat, name=f"lease-{self.key}", daemon=True).start()

        def release() -> None:
            stop.set()
            try:
                self._r.zrem(self.key, token)
            except Exception:  # unreachable Redis: the lease expires on its own
                pass

        return Slot(release)


class LocalSemaphore:
    """The in-process fallback: a bounded semaphore shared by every client in this process."""

    _shared: dict[tuple[str, int], threading.BoundedSemaphore] = {}
    _lock = threading.Lock()

    def __init__(self, name: str, limit: int) -> None:
        if limit < 1:
            raise ConfigurationError(f"concurrency limit for '{name}' must be at least 1, got {limit}")
        with self._lock:
            self._sem = self._shared.setdefault((name, limit), threading.BoundedSemaphore(limit))
        self.limit = limit

    def acquire(self, timeout: float | None = None) -> Slot:
        if not self._sem.acquire(timeout=timeout if timeout is not None else -1):
            raise TimeoutError(f"no free slot (limit {self.limit}) within {timeout}s")
        return Slot(self._sem.release)


class SweepLedger:
    """Spend of one sweep, shared by every trial of it; over the cap, every further call raises
    LimitReached(limit_sweep_cost)."""

    _local: dict[str, float] = {}
    _lock = threading.Lock()

    def __init__(self, sweep_id: str, cap_usd: float | None, redis_url: str | None = None) -> None:
        self.sweep_id, self.cap_usd = sweep_id, cap_usd
        self.key = f"farm:sweep:{sweep_id}:cost_usd"
        self._r = _redis(redis_url) if redis_url else None

    @classmethod
    def uncapped(cls, ledger: SweepLedger) -> SweepLedger:
        """The same counter with no cap: for spend that must happen anyway (the judge's)."""
        other = cls.__new__(cls)
        other.sweep_id, other.cap_usd, other.key, other._r = ledger.sweep_id, None, ledger.key, ledger._r
        return other

    def spent(self) -> float:
        if self._r is not None:
            v = self._r.get(self.key)
            return float(v) if v is not None else 0.0
        with self._lock:
            return self._local.get(self.key, 0.0)

    def add(self, cost_usd: float) -> float:
        if cost_usd <= 0:
            return self.spent()
        if self._r is not None:
            return float(self._r.incrbyfloat(self.key, cost_usd))
        with self._lock:
            self._local[self.key] = self._local.get(self.key, 0.0) + cost_usd
            return self._local[self.key]

    def check(self) -> None:
        if self.cap_usd is not None and (spent := self.spent()) >= self.cap_usd:
            raise LimitReached(LIMIT_SWEEP_COST, f"sweep {self.sweep_id} spent ${spent:.4f} of ${self.cap_usd:.4f}")


def sweep_ledger(options: dict[str, Any] | None) -> SweepLedger | None:
    """The ledger of the sweep named in an agent's options (sweep_id, sweep_cost_cap, redis_url),
    or None outside a sweep."""
    opts = options or {}
    if not opts.get("sweep_id"):
        return None
    cap = opts.get("sweep_cost_cap")
    return SweepLedger(str(opts["sweep_id"]), float(cap) if cap is not None else None, redis_url_from(opts))


def model_slots(options: dict[str, Any] | None, model: str, lease_s: float = 30.0
                ) -> RedisSemaphore | LocalSemaphore | None:
    """The farm-wide concurrency semaphore for `model` from an agent's options (concurrency: an int,
    or {model: int}; redis_url), or None when the sweep sets no limit for it."""
    opts = options or {}
    conc = opts.get("concurrency")
    if isinstance(conc, dict):
        conc = conc.get(model)
    if conc is None:
        return None
    url = redis_url_from(opts)
    return RedisSemaphore(url, model, int(conc), lease_s=lease_s) if url else LocalSemaphore(model, int(conc))

