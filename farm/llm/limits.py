"""Limits that hold across the whole farm: a per-model concurrency semaphore (Redis sorted set of
leases, so a dead process frees its slot when its lease expires) and a sweep-wide cost ledger
(a Redis counter keyed by sweep id). Without Redis, both are shared through files in
FARM_LIMITS_DIR when it is set (the embedded runner's local worker processes), else in-process."""

from __future__ import annotations

import os
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from core.errors import ConfigurationError, LimitReached
from core.states import LIMIT_SWEEP_COST

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


# Processes on one machine without Redis (`farm run`'s local workers) share limits through files
# here: a flock-guarded cost counter per sweep, one lock file per concurrency slot. The kernel drops
# a dead process's flock, as Redis drops a dead holder's lease.
SHARED_DIR_ENV = "FARM_LIMITS_DIR"


def _shared_file(key: str, suffix: str, folder: str | None = None) -> Path | None:
    folder = folder or os.environ.get(SHARED_DIR_ENV)
    if not folder:
        return None
    return Path(folder) / (re.sub(r"[^A-Za-z0-9._-]", "_", key) + suffix)


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
        # With FARM_LIMITS_DIR, the slots are lock files shared by every process on the machine.
        self._files = [f for i in range(limit) if (f := _shared_file(f"farm:llm:slots:{name}", f".slot{i}"))]

    def acquire(self, timeout: float | None = None) -> Slot:
        if self._files:
            return self._acquire_file(timeout)
        if not self._sem.acquire(timeout=timeout if timeout is not None else -1):
            raise TimeoutError(f"no free slot (limit {self.limit}) within {timeout}s")
        return Slot(self._sem.release)

    def _acquire_file(self, timeout: float | None) -> Slot:
        import fcntl

        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.02
        while True:
            for path in self._files:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue

                def release(fd: int = fd) -> None:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    os.close(fd)

                return Slot(release)
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"no free slot (limit {self.limit}) within {timeout}s")
            time.sleep(pause)
            pause = min(pause * 1.5, 0.5)


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
        if (path := _shared_file(self.key, ".cost")) is not None:
            return self._file_add(path, 0.0)
        with self._lock:
            return self._local.get(self.key, 0.0)

    def add(self, cost_usd: float) -> float:
        if cost_usd <= 0:
            return self.spent()
        if self._r is not None:
            return float(self._r.incrbyfloat(self.key, cost_usd))
        if (path := _shared_file(self.key, ".cost")) is not None:
            return self._file_add(path, cost_usd)
        with self._lock:
            self._local[self.key] = self._local.get(self.key, 0.0) + cost_usd
            return self._local[self.key]

    @staticmethod
    def _file_add(path: Path, cost_usd: float) -> float:
        """Add to the counter in `path` under an exclusive flock; returns the new total."""
        import fcntl

        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            raw = os.pread(fd, 64, 0).strip()
            total = (float(raw) if raw else 0.0) + cost_usd
            if cost_usd:
                data = repr(total).encode()
                os.ftruncate(fd, 0)
                os.pwrite(fd, data, 0)
            return total
        finally:
            os.close(fd)  # closing drops the flock

    def check(self) -> None:
        if self.cap_usd is not None and (spent := self.spent()) >= self.cap_usd:
            raise LimitReached(LIMIT_SWEEP_COST, f"sweep {self.sweep_id} spent ${spent:.4f} of ${self.cap_usd:.4f}")


def preload_spend(folder: str, sweep_id: str, spent_usd: float) -> None:
    """Start the sweep's file ledger in `folder` at what it already spent (a resumed run)."""
    path = _shared_file(SweepLedger(sweep_id, None).key, ".cost", folder)
    assert path is not None
    SweepLedger._file_add(path, spent_usd)


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

