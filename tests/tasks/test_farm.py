"""The farm for real: `farm worker` processes (Celery on Redis), PostgreSQL, artifacts in a real
S3-compatible server (moto) — two workers finish a sweep with one final row per trial; a worker
SIGKILLed mid-trial loses nothing and records nothing twice; resubmission runs only what is left."""

from __future__ import annotations

import time
from pathlib import Path

import boto3
import pytest
import yaml
from sqlmodel import Session, func, select

from farm.states import AttemptState, TrialState
from results.db import engine_for
from results.models import Attempt, Trial
from tests.tasks.farmhelpers import farm_cmd, farm_env, kill_group, start_worker, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.postgres, pytest.mark.timeout(1200)]


def _spec(tmp: Path, name: str, agent: str, seeds: int, problems: list[str]) -> Path:
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump({
        "name": name, "problems": {"ids": problems}, "agents": [agent], "seeds": seeds,
        "limits": {"wall_time_s": 120},
    }))
    return p


def _counts(engine, sweep: str) -> dict[str, int]:
    with Session(engine) as s:
        return dict(s.exec(select(Trial.state, func.count()).where(Trial.sweep_id == sweep).group_by(Trial.state)).all())


def _final_rows(engine, sweep: str) -> tuple[list[Trial], list[Attempt]]:
    with Session(engine) as s:
        trials = s.exec(select(Trial).where(Trial.sweep_id == sweep)).all()
        attempts = s.exec(select(Attempt).join(Trial, Attempt.trial_id == Trial.id).where(Trial.sweep_id == sweep)).all()
    return list(trials), list(attempts)


@pytest.fixture()
def bucket(s3_env):
    s3 = boto3.client("s3")
    try:
        s3.create_bucket(Bucket="farm-test-artifacts")
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    return s3


@pytest.fixture()
def smoke_problems():
    from farm.problems.catalog import load_catalog

    hotel = [p.id for p in load_catalog().problems if p.app == "hotel-reservation" and p.layer == "application"]
    assert len(hotel) >= 2
    return hotel[:2]


def test_two_workers_complete_a_sweep_and_kill_loses_nothing(tmp_path, redis_prefix, pg_url, s3_endpoint, bucket,
                                                              smoke_problems):
    env = farm_env(redis_prefix, pg_url, s3_endpoint, tmp_path, FARM_TEST_AGENT_SLEEP="3")
    engine = engine_for(pg_url)
    spec = _spec(tmp_path, "farm-kill", "slow-baseline", 2, smoke_problems)  # 4 trials
    workers = {n: start_worker(env, n, tmp_path / f"{n}.log") for n in ("wa", "wb")}
    try:
        sub = farm_cmd(env, "sweep", "submit", str(spec))
        assert sub.returncode == 0, sub.stderr
        assert "4 queued" in sub.stdout

        # Kill worker wa while it is in the middle of a trial.
        def wa_mid_trial() -> bool:
            with Session(engine) as s:
                return s.exec(select(Attempt).where(Attempt.worker == "wa", Attempt.state == AttemptState.RUNNING,
                                                    Attempt.phase == "agent_session")).first() is not None

        wait_for(wa_mid_trial, 180, "worker wa to start an agent session")
        with Session(engine) as s:
            victim = s.exec(select(Attempt).where(Attempt.worker == "wa", Attempt.state == AttemptState.RUNNING)).one()
        kill_group(workers.pop("wa"))

        wait_for(lambda: _counts(engine, "farm-kill").get(TrialState.FINISHED, 0) == 4, 300,
                 "the sweep to finish on the surviving worker", detail=lambda: _counts(engine, "farm-kill"))
        trials, attempts = _final_rows(engine, "farm-kill")
        assert len(trials) == 4 and all(t.state == TrialState.FINISHED for t in trials)
        for t in trials:
            recorded = [a for a in attempts if a.trial_id == t.id and a.state == AttemptState.RECORDED]
            assert len(recorded) == 1, f"{t.key}: {len(recorded)} recorded attempts"
            assert t.final_attempt == recorded[0].token
        lost = next(a for a in attempts if a.id == victim.id)
        assert lost.state == AttemptState.LOST, lost.state
        assert any(a.trial_id == victim.trial_id and a.state == AttemptState.RECORDED and a.worker == "wb"
                   for a in attempts)

        # Artifacts are in S3 and their URIs in SQL.
        for a in attempts:
            if a.state == AttemptState.RECORDED:
                assert a.artifacts_uri and a.artifacts_uri.startswith("s3://farm-test-artifacts/runs/")
                key = a.artifacts_uri.removeprefix("s3://farm-test-artifacts/") + "/verdicts.json"
                body = bucket.get_object(Bucket="farm-test-artifacts", Key=key)["Body"].read()
                assert b"mitigation" in body

        # Resubmitting a finished sweep runs nothing.
        before = len(attempts)
        again = farm_cmd(env, "sweep", "submit", str(spec))
        assert again.returncode == 0 and "0 queued" in again.stdout, again.stdout
        time.sleep(3)
        assert len(_final_rows(engine, "farm-kill")[1]) == before

        # A widened sweep (one more seed) runs only the new trials.
        wider = _spec(tmp_path, "farm-kill", "slow-baseline", 3, smoke_problems)
        out = farm_cmd(env, "sweep", "submit", str(wider))
        assert "2 queued" in out.stdout, out.stdout
        wait_for(lambda: _counts(engine, "farm-kill").get(TrialState.FINISHED, 0) == 6, 300, "the widened sweep")
        trials, attempts = _final_rows(engine, "farm-kill")
        assert len(attempts) == before + 2

        status = farm_cmd(env, "sweep", "status", "farm-kill")
        assert "finished 6" in status.stdout
    finally:
        for proc in workers.values():
            kill_group(proc)
