"""Starting real `farm worker` processes on Redis + PostgreSQL + moto S3 for the farm tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def farm_env(redis_prefix: str, db_url: str, s3_endpoint: str, tmp: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "FARM_BROKER_URL": "redis://127.0.0.1:6379/9",
        "FARM_BROKER_KEYPREFIX": f"{redis_prefix}{tmp.name}:",
        "FARM_DATABASE_URL": db_url,
        "FARM_ARTIFACTS": "s3://farm-test-artifacts/runs",
        "AWS_ENDPOINT_URL": s3_endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "FARM_LEASE_S": "8",
        "FARM_AGENT_PLUGINS": "tests.fakes.slow_agent",
        "PYTHONPATH": str(ROOT),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    })
    env.update(extra)
    return env


def start_worker(env: dict[str, str], name: str, log: Path, cluster: str = "sim") -> subprocess.Popen:
    fh = log.open("w")
    return subprocess.Popen(
        [sys.executable, "-m", "farm.cli", "worker", "--cluster", cluster, "--name", name, "--loglevel", "INFO"],
        env=env, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
    )


def farm_cmd(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "farm.cli", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def kill_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


def wait_for(pred: Callable[[], bool], timeout: float, what: str, interval: float = 0.2,
             detail: Callable[[], object] | None = None) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(interval)
    extra = f" (now: {detail()})" if detail else ""
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{extra}")
