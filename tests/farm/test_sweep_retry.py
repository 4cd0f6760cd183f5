"""`farm sweep retry SWEEP [--errors]`, as a user runs it against the farm's database and broker
(SQLite and Redis under a key prefix of the test's own): the trials that ended without a result
(a provider failure among them) are queued again from the spec on record; with --errors, so are the
finished trials whose session ended in an agent error, their result withdrawn and their attempts
kept."""

from __future__ import annotations

from pathlib import Path

from sqlmodel import Session, select

from core.states import END_AGENT_ERROR, END_CONTEXT_LENGTH, END_SUBMITTED, TrialState
from farm import dispatcher
from farm.spec import SweepSpec
from results import ledger
from results.db import engine_for
from results.models import Attempt, Trial
from tests.tasks.farmhelpers import farm_cmd, farm_env


def test_retry_queues_provider_failures_and_with_errors_agent_errors(tmp_path: Path, redis_prefix: str) -> None:
    url = f"sqlite:///{tmp_path / 'farm.sqlite'}"
    engine = engine_for(url)
    spec = SweepSpec.model_validate({"name": "retry-me", "problems": {"ids": ["hr-frontend-service-targetport-wrong"]},
                                     "agents": ["baseline"], "seeds": 4})
    ids = dispatcher.submit(engine, spec).to_run
    outcomes = {ids[0]: "provider", ids[1]: END_AGENT_ERROR, ids[2]: END_CONTEXT_LENGTH, ids[3]: END_SUBMITTED}
    for tid, how in outcomes.items():
        claim = ledger.claim(engine, tid, "w", "sim:sim")
        assert claim is not None
        if how == "provider":
            ledger.infra_failure(engine, claim, "provider", "openai/x: overloaded", max_attempts=1)
        else:
            ledger.record(engine, claim, ledger.AttemptResult(end_reason=how, diagnosis_passed=True))
    env = farm_env(redis_prefix, url, "http://127.0.0.1:1", tmp_path)

    plain = farm_cmd(env, "sweep", "retry", "retry-me")
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "3 already done, 1 queued" in plain.stdout

    again = farm_cmd(env, "sweep", "retry", "retry-me", "--errors")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "1 trial(s) that ended in an agent error will run again" in again.stdout
    assert "2 already done, 2 queued" in again.stdout
    with Session(engine) as s:
        trials = {t.id: t for t in s.exec(select(Trial))}
        attempts = list(s.exec(select(Attempt)))
    assert {tid: trials[tid].state for tid in ids} == {
        ids[0]: TrialState.QUEUED, ids[1]: TrialState.QUEUED, ids[2]: TrialState.FINISHED, ids[3]: TrialState.FINISHED}
    # The withdrawn result is gone from the trial row, its attempt stays on record.
    withdrawn = trials[ids[1]]
    assert (withdrawn.end_reason, withdrawn.diagnosis_passed, withdrawn.final_attempt) == (None, None, None)
    assert len(attempts) == 4
    assert trials[ids[0]].publishes == 2 and trials[ids[1]].publishes == 1  # claims sent to the broker

    missing = farm_cmd(env, "sweep", "retry", "no-such-sweep")
    assert missing.returncode == 2 and "no sweep 'no-such-sweep'" in missing.stderr
