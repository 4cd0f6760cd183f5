"""Farm configuration from the environment, with the defaults a researcher would want."""

from __future__ import annotations

import os
from dataclasses import dataclass

SHARED_QUEUE = "farm.trials"


def worker_queue(worker_name: str) -> str:
    return f"farm.worker.{worker_name}"


@dataclass(frozen=True)
class FarmConfig:
    broker_url: str
    database_url: str | None
    artifacts: str | None
    lease_s: float
    soft_time_limit_s: int
    hard_time_limit_s: int
    key_prefix: str | None = None

    @property
    def visibility_timeout_s(self) -> int:
        # Above the hard limit, or Redis would redeliver a long task that is still running.
        return self.hard_time_limit_s + 600

    @property
    def redis_url(self) -> str | None:
        return self.broker_url if self.broker_url.startswith(("redis://", "rediss://")) else None


def from_env() -> FarmConfig:
    soft = int(os.environ.get("FARM_SOFT_TIME_LIMIT", "3600"))
    hard = int(os.environ.get("FARM_HARD_TIME_LIMIT", str(soft + 300)))
    return FarmConfig(
        broker_url=os.environ.get("FARM_BROKER_URL", "redis://127.0.0.1:6379/0"),
        database_url=os.environ.get("FARM_DATABASE_URL"),
        artifacts=os.environ.get("FARM_ARTIFACTS"),
        lease_s=float(os.environ.get("FARM_LEASE_S", "60")),
        soft_time_limit_s=soft,
        hard_time_limit_s=max(hard, soft + 1),
        key_prefix=os.environ.get("FARM_BROKER_KEYPREFIX") or None,
    )
