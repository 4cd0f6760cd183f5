"""A farm of real `farm worker` processes on services of its own (tests/reliability/services.py),
and the audit every reliability test and the chaos bench end with: each finished trial recorded
exactly once with its artifacts in S3, nothing lost, nothing stranded."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
BUCKET = "farm-reliability"
# Every recorded attempt writes these (farm.trial.artifacts.AttemptArtifacts.save).
RECORDED_DOCS = ("attempt", "events", "verdicts", "tool_calls", "transcript")


def hotel_problems(n: int) -> list[str]:
    from farm.problems.catalog import load_catalog

    hotel = [p.id for p in load_catalog().problems if p.app == "hotel-reservation" and p.layer == "application"]
    return hotel[:n]


def write_spec(folder: Path, name: str, problems: list[str], seeds: int, agent: str = "baseline") -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "problems": {"ids": problems}, "agents": [agent],
                                    "seeds": seeds, "noise": False,
                                    "limits": {"max_steps": 40, "wall_time_s": 120}}))
    return path


@dataclass
class Farm:
    folder: Path
    broker_url: str
    db_url: str
    s3_endpoint: str
    extra: dict[str, str] = field(default_factory=dict)
    workers: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({
            "FARM_BROKER_URL": self.broker_url,
            "FARM_DATABASE_URL": self.db_url,
            "FARM_ARTIFACTS": f"s3://{BUCKET}/runs",
            "FARM_SPOOL_DIR": str(self.folder / "spool"),
            "AWS_ENDPOINT_URL": self.s3_endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            # Short leases and re-send periods, so that a lost worker or message costs seconds.
            "FARM_LEASE_S": "4",
            "FARM_REPUBLISH_S": "12",
            "FARM_CHAIN_STALL_S": "12",
            "FARM_PLUGINS": "tests.tasks.plugins",
            "FARM_AGENT_PLUGINS": "tests.fakes.slow_agent,tests.fakes.probe_agent",
            "PYTHONPATH": str(ROOT),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        })
        env.update(self.extra)
        return env

    def engine(self) -> Any:
        from results.db import engine_for

        return engine_for(self.db_url)

    def make_bucket(self) -> None:
        import boto3

        s3 = boto3.client("s3", endpoint_url=self.s3_endpoint, aws_access_key_id="testing",
                          aws_secret_access_key="testing", region_name="us-east-1")
        try:
            s3.create_bucket(Bucket=BUCKET)
        except s3.exceptions.BucketAlreadyOwnedByYou:
            pass

    def log(self, name: str) -> Path:
        return self.folder / f"worker-{name}.log"

    def start_worker(self, name: str, cluster: str = "sim", **extra: str) -> subprocess.Popen:
        env = {**self.env, **extra}
        fh = self.log(name).open("a")
        proc = subprocess.Popen(
            [sys.executable, "-m", "farm.cli", "worker", "--cluster", cluster, "--name", name, "--loglevel", "INFO"],
            env=env, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        self.workers[name] = proc
        return proc

    def farm(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "farm.cli", *args], env=self.env, cwd=ROOT,
                              capture_output=True, text=True, timeout=timeout)

    def submit(self, spec: Path) -> subprocess.CompletedProcess:
        out = self.farm("sweep", "submit", str(spec))
        if out.returncode != 0:
            raise AssertionError(f"sweep submit failed: {out.stdout}{out.stderr}")
        return out

    def counts(self, sweep: str) -> dict[str, int]:
        from sqlmodel import Session, func, select

        from results.models import Trial

        try:
            with Session(self.engine()) as s:
                return dict(s.exec(select(Trial.state, func.count()).where(Trial.sweep_id == sweep)
                                   .group_by(Trial.state)).all())
        except Exception as exc:  # the database is being restarted by the test
            return {"unreadable": 1, "error": str(exc)[:80]}  # type: ignore[dict-item]

    def wait_settled(self, sweep: str, total: int, timeout: float,
                     tick: Callable[[float], None] | None = None) -> float:
        """Wait until every trial is done (finished or given up); returns the seconds it took.
        `tick(elapsed)` runs each round (the chaos schedule)."""
        from core.states import TRIAL_DONE

        t0 = time.time()
        while time.time() - t0 < timeout:
            if tick:
                tick(time.time() - t0)
            c = self.counts(sweep)
            if sum(n for st, n in c.items() if st in TRIAL_DONE) == total:
                return time.time() - t0
            time.sleep(0.5)
        return time.time() - t0

    def wait_workers(self, names: list[str], timeout: float) -> float:
        """Wait until every named worker serves the shared queue (it says so in its log)."""
        t0 = time.time()
        while time.time() - t0 < timeout:
            if all(self.log(n).exists() and "serves farm.trials" in self.log(n).read_text(errors="replace")
                   for n in names):
                return time.time() - t0
            time.sleep(0.3)
        raise AssertionError(f"workers {names} not serving after {timeout:.0f} s")

    def stop_all(self, sig: int | None = None) -> None:
        import signal as _signal

        from farm.testing.services import terminate

        for proc in self.workers.values():
            if proc.poll() is None:
                terminate(proc, sig or _signal.SIGKILL, timeout=30)
        self.workers.clear()

    def task_errors(self) -> list[str]:
        """Lines of the worker logs where a task failed or a worker process broke."""
        bad = ("raised unexpected", "Traceback", "UniqueViolation", "owns no cluster", "WorkerLostError")
        out = []
        for log in self.folder.glob("worker-*.log"):
            out += [f"{log.name}: {line}" for line in log.read_text(errors="replace").splitlines()
                    if any(b in line for b in bad)]
        return out


@dataclass
class Audit:
    trials: int
    finished: int
    recorded_once: int
    duplicates: int  # trials with more than one recorded attempt
    lost: int  # trials given up (infra_failed, cancelled, skipped) or finished without a record
    stranded: int  # trials not done when the wait ended (pending, queued, running)
    artifacts_missing: int  # documents of recorded attempts absent from S3
    attempts: int
    attempts_lost: int  # attempts of killed or stopped workers, kept on record

    def ok(self) -> bool:
        return (self.finished == self.trials == self.recorded_once and not self.duplicates and not self.lost
                and not self.stranded and not self.artifacts_missing)

    def row(self) -> dict[str, int]:
        return asdict(self)


def audit(farm: Farm, sweep: str) -> Audit:
    import boto3
    from sqlmodel import Session, col, select

    from core.states import TRIAL_DONE, AttemptState, TrialState
    from results.models import Attempt, Trial

    with Session(farm.engine()) as s:
        trials = list(s.exec(select(Trial).where(Trial.sweep_id == sweep)).all())
        attempts = list(s.exec(select(Attempt).join(Trial, col(Attempt.trial_id) == col(Trial.id))
                               .where(Trial.sweep_id == sweep)).all())
    s3 = boto3.client("s3", endpoint_url=farm.s3_endpoint, aws_access_key_id="testing",
                      aws_secret_access_key="testing", region_name="us-east-1")
    keys: set[str] = set()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"runs/{sweep}/"):
        keys |= {o["Key"] for o in page.get("Contents", [])}
    recorded: dict[str, list[Attempt]] = {}
    for a in attempts:
        if a.state == AttemptState.RECORDED:
            recorded.setdefault(a.trial_id, []).append(a)
    once = sum(1 for t in trials if t.state == TrialState.FINISHED and len(recorded.get(t.id, [])) == 1
               and t.final_attempt == recorded[t.id][0].token)
    missing = 0
    for group in recorded.values():
        for a in group:
            prefix = (a.artifacts_uri or "").removeprefix(f"s3://{BUCKET}/")
            missing += sum(1 for doc in RECORDED_DOCS if f"{prefix}/{doc}.json" not in keys)
    return Audit(
        trials=len(trials),
        finished=sum(1 for t in trials if t.state == TrialState.FINISHED),
        recorded_once=once,
        duplicates=sum(1 for g in recorded.values() if len(g) > 1),
        lost=sum(1 for t in trials if (t.state in TRIAL_DONE and t.state != TrialState.FINISHED)
                 or (t.state == TrialState.FINISHED and t.id not in recorded)),
        stranded=sum(1 for t in trials if t.state not in TRIAL_DONE),
        artifacts_missing=missing,
        attempts=len(attempts),
        attempts_lost=sum(1 for a in attempts if a.state == AttemptState.LOST),
    )


def wait_spools(farm: Farm, timeout: float) -> bool:
    """Wait until the workers' spools hold nothing (every artifact uploaded)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not any((farm.folder / "spool").rglob("*.spooled")):
            return True
        time.sleep(0.5)
    return False
