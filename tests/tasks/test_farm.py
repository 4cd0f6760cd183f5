"""The farm for real: `farm worker` processes (Celery on Redis), PostgreSQL, artifacts in a real
S3-compatible server (moto):
- two workers both record trials of one sweep, one final row per trial;
- a worker SIGKILLed mid-trial loses nothing, records nothing twice, and its lost attempt keeps
  the partial record its checkpoints saved; resubmission runs only what is left;
- deploy, inject and reset failures go through the Celery chain (`_step`) as infrastructure
  errors: retried, given up as infra_failed, reported apart; a resubmission runs the trial again;
- the sweep's cost cap stops the claims: the rest of the sweep is skipped_cost_cap, not run."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import boto3
import pytest
import redis
import yaml
from sqlmodel import Session, func, select

from core.states import AttemptState, TrialState
from results.db import engine_for
from results.models import Attempt, Trial, Worker
from tests.conftest import REDIS_URL
from tests.tasks.farmhelpers import farm_cmd, farm_env, kill_group, start_worker, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.postgres, pytest.mark.timeout(1200)]

PLUGINS = "tests.tasks.plugins"
AGENT_PLUGINS = "tests.fakes.slow_agent,tests.fakes.probe_agent"
PRICE = {"input_cost_per_token": 1e-4, "output_cost_per_token": 2e-4}
USAGE = {"prompt_tokens": 1000, "completion_tokens": 100}  # $0.12 a call at PRICE
PER_CALL = 1000 * PRICE["input_cost_per_token"] + 100 * PRICE["output_cost_per_token"]


def _spec(tmp: Path, name: str, agent: object, seeds: int, problems: list[str], **extra: object) -> Path:
    p = tmp / f"{name}-{seeds}.yaml"
    p.write_text(yaml.safe_dump({
        "name": name, "problems": {"ids": problems}, "agents": [agent], "seeds": seeds,
        "limits": {"wall_time_s": 120}, **extra,
    }))
    return p


def _counts(engine, sweep: str) -> dict[str, int]:
    with Session(engine) as s:
        return dict(s.exec(select(Trial.state, func.count()).where(Trial.sweep_id == sweep).group_by(Trial.state)).all())


def _final_rows(engine, sweep: str) -> tuple[list[Trial], list[Attempt]]:
    with Session(engine) as s:
        trials = s.exec(select(Trial).where(Trial.sweep_id == sweep)).all()
        attempts = s.exec(select(Attempt).join(Trial, Attempt.trial_id == Trial.id).where(Trial.sweep_id == sweep)
                          .order_by(Attempt.id)).all()
    return list(trials), list(attempts)


def _one_final_row_per_trial(trials: list[Trial], attempts: list[Attempt]) -> None:
    for t in trials:
        recorded = [a for a in attempts if a.trial_id == t.id and a.state == AttemptState.RECORDED]
        assert len(recorded) == 1, f"{t.key}: {len(recorded)} recorded attempts"
        assert t.final_attempt == recorded[0].token


def _workers_up(engine, names: list[str], timeout: float = 180) -> None:
    def up() -> bool:
        with Session(engine) as s:
            return {w.name for w in s.exec(select(Worker))} >= set(names)

    wait_for(up, timeout, f"workers {names} to register")


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
    assert len(hotel) >= 3
    return hotel[:3]


@pytest.fixture()
def llm():
    """A scripted model on loopback that every worker reaches; each call costs PER_CALL."""
    from farm.llm.scripted import ScriptedLLM

    with ScriptedLLM([{"content": "looking", "usage": USAGE}], repeat_last=True) as server:
        yield server


@pytest.fixture()
def sweep_name():
    """A sweep name of this run's own: the sweep's Redis cost ledger outlives the database."""
    name = f"farm-{uuid.uuid4().hex[:8]}"
    yield name
    redis.Redis.from_url(REDIS_URL).delete(f"farm:sweep:{name}:cost_usd")


def test_two_workers_both_record_trials_of_one_sweep(tmp_path, redis_prefix, pg_url, s3_endpoint, bucket,
                                                     smoke_problems):
    env = farm_env(redis_prefix, pg_url, s3_endpoint, tmp_path, FARM_TEST_AGENT_SLEEP="2", FARM_PLUGINS=PLUGINS, FARM_AGENT_PLUGINS=AGENT_PLUGINS)
    engine = engine_for(pg_url)
    workers = {n: start_worker(env, n, tmp_path / f"{n}.log") for n in ("wa", "wb")}
    try:
        _workers_up(engine, ["wa", "wb"])
        spec = _spec(tmp_path, "farm-pair", "slow-baseline", 2, smoke_problems)  # 6 trials
        sub = farm_cmd(env, "sweep", "submit", str(spec))
        assert sub.returncode == 0 and "6 queued" in sub.stdout, sub.stdout + sub.stderr
        wait_for(lambda: _counts(engine, "farm-pair").get(TrialState.FINISHED, 0) == 6, 420,
                 "both workers to finish the sweep", detail=lambda: _counts(engine, "farm-pair"))
        trials, attempts = _final_rows(engine, "farm-pair")
        assert len(trials) == 6 and all(t.state == TrialState.FINISHED for t in trials)
        _one_final_row_per_trial(trials, attempts)
        by_worker = {w: sum(1 for a in attempts if a.worker == w and a.state == AttemptState.RECORDED)
                     for w in ("wa", "wb")}
        assert all(n >= 1 for n in by_worker.values()), f"recorded trials per worker: {by_worker}"
        assert sum(by_worker.values()) == 6
    finally:
        for proc in workers.values():
            kill_group(proc)


def test_killed_worker_loses_nothing_and_its_lost_attempt_keeps_its_checkpoint(
        tmp_path, redis_prefix, pg_url, s3_endpoint, bucket, smoke_problems, llm, sweep_name):
    env = farm_env(redis_prefix, pg_url, s3_endpoint, tmp_path, FARM_PLUGINS=PLUGINS, FARM_AGENT_PLUGINS=AGENT_PLUGINS, FARM_CHECKPOINT_S="1")
    engine = engine_for(pg_url)
    probe = {"name": "probe", "options": {"api_base": llm.url, "price": PRICE, "rounds": 6, "pause_s": 1}}
    problems = smoke_problems[:2]
    spec = _spec(tmp_path, sweep_name, probe, 2, problems, models=["openai/scripted-model"])  # 4 trials
    workers = {n: start_worker(env, n, tmp_path / f"{n}.log") for n in ("wa", "wb")}
    try:
        _workers_up(engine, ["wa", "wb"])
        sub = farm_cmd(env, "sweep", "submit", str(spec))
        assert sub.returncode == 0, sub.stderr
        assert "4 queued" in sub.stdout

        # Kill worker wa in the middle of an agent session, once a checkpoint reached its row.
        def wa_checkpointed() -> bool:
            with Session(engine) as s:
                return s.exec(select(Attempt).where(Attempt.worker == "wa", Attempt.state == AttemptState.RUNNING,
                                                    Attempt.phase == "agent_session",
                                                    Attempt.tool_calls >= 1)).first() is not None

        wait_for(wa_checkpointed, 240, "worker wa to checkpoint an agent session")
        with Session(engine) as s:
            victim = s.exec(select(Attempt).where(Attempt.worker == "wa", Attempt.state == AttemptState.RUNNING)).one()
        kill_group(workers.pop("wa"))

        wait_for(lambda: _counts(engine, sweep_name).get(TrialState.FINISHED, 0) == 4, 400,
                 "the sweep to finish on the surviving worker", detail=lambda: _counts(engine, sweep_name))
        trials, attempts = _final_rows(engine, sweep_name)
        assert len(trials) == 4 and all(t.state == TrialState.FINISHED for t in trials)
        _one_final_row_per_trial(trials, attempts)
        lost = next(a for a in attempts if a.id == victim.id)
        assert lost.state == AttemptState.LOST, lost.state
        assert any(a.trial_id == victim.trial_id and a.state == AttemptState.RECORDED and a.worker == "wb"
                   for a in attempts)

        # The lost attempt kept what its session produced before the kill: in SQL and in S3.
        assert 1 <= lost.tool_calls < 6 and lost.steps >= 1
        assert lost.tokens_in >= USAGE["prompt_tokens"] and lost.cost_usd == pytest.approx(lost.steps * PER_CALL)
        assert lost.artifacts_uri and lost.artifacts_uri.startswith("s3://farm-test-artifacts/runs/")
        prefix = lost.artifacts_uri.removeprefix("s3://farm-test-artifacts/")

        def doc(name: str) -> object:
            return json.loads(bucket.get_object(Bucket="farm-test-artifacts", Key=f"{prefix}/{name}.json")["Body"].read())

        assert len(doc("tool_calls")) >= lost.tool_calls and doc("tool_calls")[0]["name"] == "kubectl"
        checkpoint = doc("checkpoint")
        assert checkpoint["phase"] == "agent_session" and checkpoint["llm"]["calls"] >= 1
        assert any("round" in str(m.get("content")) for m in checkpoint["llm"]["messages"])
        assert doc("attempt")["partial"] is True

        # Artifacts of recorded attempts are in S3 and their URIs in SQL.
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
        assert len(_final_rows(engine, sweep_name)[1]) == before

        # A widened sweep (one more seed) runs only the new trials.
        wider = _spec(tmp_path, sweep_name, probe, 3, problems, models=["openai/scripted-model"])
        out = farm_cmd(env, "sweep", "submit", str(wider))
        assert "2 queued" in out.stdout, out.stdout
        wait_for(lambda: _counts(engine, sweep_name).get(TrialState.FINISHED, 0) == 6, 300, "the widened sweep")
        trials, attempts = _final_rows(engine, sweep_name)
        assert len(attempts) == before + 2

        status = farm_cmd(env, "sweep", "status", sweep_name)
        assert "finished 6" in status.stdout
    finally:
        for proc in workers.values():
            kill_group(proc)


def test_infrastructure_errors_through_the_celery_chain(tmp_path, redis_prefix, pg_url, s3_endpoint, bucket):
    # The worker's cluster refuses the first deploy, the reset after it, and the next injection.
    env = farm_env(redis_prefix, pg_url, s3_endpoint, tmp_path, FARM_PLUGINS=PLUGINS, FARM_AGENT_PLUGINS=AGENT_PLUGINS,
                   FARM_TEST_CLUSTER_FAULTS="deploy:1,reset:1,inject:1")
    engine = engine_for(pg_url)
    spec = _spec(tmp_path, "farm-infra", "baseline", 1, ["hr-frontend-service-targetport-wrong"],
                 max_infra_attempts=2)
    worker = start_worker(env, "wi", tmp_path / "wi.log", cluster="faulty:wi")
    try:
        sub = farm_cmd(env, "sweep", "submit", str(spec))
        assert sub.returncode == 0 and "1 queued" in sub.stdout, sub.stdout + sub.stderr
        wait_for(lambda: _counts(engine, "farm-infra").get(TrialState.INFRA_FAILED, 0) == 1, 300,
                 "two infrastructure failures to give the trial up", detail=lambda: _counts(engine, "farm-infra"))
        (trial,), attempts = _final_rows(engine, "farm-infra")
        assert [(a.state, a.error_phase) for a in attempts] == [
            (AttemptState.INFRA_ERROR, "deploy"), (AttemptState.INFRA_ERROR, "inject")]
        assert trial.infra_attempts == 2 and trial.diagnosis_passed is None

        status = farm_cmd(env, "sweep", "status", "farm-infra")
        assert "infra_failed 1" in status.stdout, status.stdout
        assert "infrastructure errors (attempts retried or given up): deploy 1, inject 1" in status.stdout
        assert "infrastructure events (trial results stand): cluster_replaced 1, reset_failed 1" in status.stdout
        board = farm_cmd(env, "leaderboard", "--sweep", "farm-infra", "--csv", str(tmp_path / "lb.csv"))
        assert board.returncode == 0, board.stderr
        row = next(iter(_csv_rows(tmp_path / "lb.csv")))
        assert (row["n"], row["infra_failed"], row["reset_failures"]) == ("0", "1", "1")

        # infra_failed is not finished: resubmitting runs it again, and now the cluster works.
        again = farm_cmd(env, "sweep", "submit", str(spec))
        assert "0 already done, 1 queued" in again.stdout, again.stdout
        wait_for(lambda: _counts(engine, "farm-infra").get(TrialState.FINISHED, 0) == 1, 300, "the re-run")
        (trial,), attempts = _final_rows(engine, "farm-infra")
        assert [a.state for a in attempts] == [AttemptState.INFRA_ERROR] * 2 + [AttemptState.RECORDED]
        farm_cmd(env, "leaderboard", "--sweep", "farm-infra", "--csv", str(tmp_path / "lb.csv"))
        row = next(iter(_csv_rows(tmp_path / "lb.csv")))
        assert (row["n"], row["infra_failed"]) == ("1", "0")
    finally:
        kill_group(worker)


def test_cost_cap_stops_handing_out_trials(tmp_path, redis_prefix, pg_url, s3_endpoint, bucket, llm, sweep_name):
    from farm.llm.limits import SweepLedger

    env = farm_env(redis_prefix, pg_url, s3_endpoint, tmp_path, FARM_PLUGINS=PLUGINS, FARM_AGENT_PLUGINS=AGENT_PLUGINS)
    engine = engine_for(pg_url)
    probe = {"name": "probe", "options": {"api_base": llm.url, "price": PRICE, "rounds": 2}}
    # One trial costs two calls ($0.24): the first trial crosses the $0.20 cap, the other three never start.
    spec = _spec(tmp_path, sweep_name, probe, 4, ["hr-frontend-service-targetport-wrong"],
                 models=["openai/scripted-model"], cost_cap_usd=0.2)
    worker = start_worker(env, "wc", tmp_path / "wc.log")
    try:
        sub = farm_cmd(env, "sweep", "submit", str(spec))
        assert sub.returncode == 0 and "4 queued" in sub.stdout, sub.stdout + sub.stderr
        wait_for(lambda: sum(_counts(engine, sweep_name).get(s, 0)
                             for s in (TrialState.FINISHED, TrialState.SKIPPED_COST_CAP)) == 4, 300,
                 "the sweep to settle", detail=lambda: _counts(engine, sweep_name))
        assert _counts(engine, sweep_name) == {TrialState.FINISHED: 1, TrialState.SKIPPED_COST_CAP: 3}
        trials, attempts = _final_rows(engine, sweep_name)
        # Pre-flight's one tiny request, then the trial's two: nothing past the cap was deployed or run.
        assert len(attempts) == 1 and len(llm.requests) == 1 + 2
        assert SweepLedger(sweep_name, None, REDIS_URL).spent() == pytest.approx(2 * PER_CALL)
        status = farm_cmd(env, "sweep", "status", sweep_name)
        assert "finished 1, skipped_cost_cap 3" in status.stdout and "of a $0.2000 cap" in status.stdout
        board = farm_cmd(env, "leaderboard", "--sweep", sweep_name, "--csv", str(tmp_path / "lb.csv"))
        assert board.returncode == 0, board.stderr
        row = next(iter(_csv_rows(tmp_path / "lb.csv")))
        assert (row["n"], row["cost_capped"], row["infra_failed"]) == ("1", "3", "0")
    finally:
        kill_group(worker)


def _csv_rows(path: Path) -> list[dict[str, str]]:
    import csv

    with path.open() as fh:
        return list(csv.DictReader(fh))

