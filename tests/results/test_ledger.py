"""The ledger's guarantees, on SQLite and on PostgreSQL: one claim wins, a lost lease is
reaped and requeued, a zombie attempt cannot record a second result."""

from __future__ import annotations

import threading
import time

from sqlmodel import Session, select

from farm.states import AttemptState, TrialState
from results import ledger
from results.db import engine_for
from results.ledger import AttemptResult
from results.models import Attempt, Sweep, Trial


def _seed(engine, n: int = 1) -> list[str]:
    now = time.time()
    with Session(engine) as s:
        s.add(Sweep(id="sw", spec_json="{}", created_at=now, updated_at=now))
        s.commit()
        ids = []
        for i in range(n):
            t = Trial(id=f"t{i}", sweep_id="sw", key=f"p|baseline|-|{i}|quiet", problem_id="p", app="a",
                      layer="application", composition="single", agent="baseline", model="-", seed=i,
                      noise=False, state=TrialState.QUEUED, queued_at=now)
            s.add(t)
            ids.append(t.id)
        s.commit()
    return ids


def test_only_one_concurrent_claim_wins(db_url):
    engine = engine_for(db_url)
    (tid,) = _seed(engine)
    wins: list[object] = []

    def grab(i: int) -> None:
        got = ledger.claim(engine, tid, f"w{i}", "sim:sim")
        if got:
            wins.append(got)

    threads = [threading.Thread(target=grab, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    with Session(engine) as s:
        attempts = s.exec(select(Attempt).where(Attempt.trial_id == tid)).all()
        trial = s.get(Trial, tid)
    assert len(attempts) == 1 and trial.state == TrialState.RUNNING and trial.current_attempt == 1


def test_expired_lease_is_reaped_and_zombie_cannot_record(db_url):
    engine = engine_for(db_url)
    (tid,) = _seed(engine)
    first = ledger.claim(engine, tid, "w1", "sim:sim", lease_s=0.05)
    assert first is not None
    time.sleep(0.1)
    assert ledger.reap(engine) == [tid]
    assert not ledger.heartbeat(engine, first)  # the lost worker's heartbeat is refused
    second = ledger.claim(engine, tid, "w2", "sim:sim")
    assert second is not None and second.token == first.token + 1
    # The zombie wakes up and tries to record: it is superseded and writes nothing final.
    assert not ledger.record(engine, first, AttemptResult(diagnosis_passed=True, mitigation_passed=True))
    assert ledger.record(engine, second, AttemptResult(diagnosis_passed=False, mitigation_passed=True, tokens_in=5, tokens_out=1))
    with Session(engine) as s:
        trial = s.get(Trial, tid)
        states = {a.token: a.state for a in s.exec(select(Attempt).where(Attempt.trial_id == tid))}
    assert trial.state == TrialState.FINISHED and trial.final_attempt == second.token
    assert trial.diagnosis_passed is False and trial.e2e_passed is False and trial.tokens_in == 5
    assert states == {1: AttemptState.LOST, 2: AttemptState.RECORDED}
    # A finished trial cannot be claimed again.
    assert ledger.claim(engine, tid, "w3", "sim:sim") is None


def test_heartbeat_keeps_a_lease_alive(db_url):
    engine = engine_for(db_url)
    (tid,) = _seed(engine)
    c = ledger.claim(engine, tid, "w1", "sim:sim", lease_s=0.3)
    for _ in range(4):
        time.sleep(0.1)
        assert ledger.heartbeat(engine, c, lease_s=0.3)
    assert ledger.reap(engine) == []
    assert ledger.holds_lease(engine, c)


def test_infrastructure_failures_retry_then_give_up(db_url):
    engine = engine_for(db_url)
    (tid,) = _seed(engine)
    for attempt in (1, 2):
        c = ledger.claim(engine, tid, "w", "sim:sim")
        assert c.token == attempt
        assert ledger.infra_failure(engine, c, "deploy", "pods not ready", max_attempts=2) == (
            TrialState.QUEUED if attempt == 1 else TrialState.INFRA_FAILED)
    with Session(engine) as s:
        trial = s.get(Trial, tid)
        attempts = s.exec(select(Attempt).where(Attempt.trial_id == tid)).all()
    assert trial.state == TrialState.INFRA_FAILED and trial.infra_attempts == 2
    assert trial.diagnosis_passed is None  # never counted as an agent failure
    assert {a.state for a in attempts} == {AttemptState.INFRA_ERROR}
    assert all(a.error_phase == "deploy" for a in attempts)


def test_claim_next_drains_in_order_without_duplicates(sqlite_url):
    engine = engine_for(sqlite_url)
    ids = _seed(engine, 5)
    got = []
    while c := ledger.claim_next(engine, "sw", "w", "sim:sim"):
        got.append(c.trial_id)
    assert sorted(got) == sorted(ids)


def test_errors_are_scrubbed_of_secrets(sqlite_url, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-abcdefghijklmnopqrstuvwxyz")
    engine = engine_for(sqlite_url)
    (tid,) = _seed(engine)
    c = ledger.claim(engine, tid, "w", "sim:sim")
    ledger.record(engine, c, AttemptResult(error="auth failed for sk-test-abcdefghijklmnopqrstuvwxyz"))
    with Session(engine) as s:
        assert "sk-test" not in s.get(Trial, tid).error
        assert "sk-test" not in s.exec(select(Attempt)).one().error


def test_stale_queued_trials_are_returned_once_per_period(db_url):
    engine = engine_for(db_url)
    ids = _seed(engine, 3)
    running = ledger.claim(engine, ids[0], "w", "sim:sim")
    assert running is not None
    time.sleep(0.2)
    stale = ledger.stale_queued(engine, older_than_s=0.1)
    assert sorted(stale) == sorted(ids[1:])  # queued ones only, not the running one
    assert ledger.stale_queued(engine, older_than_s=0.1) == []  # stamped: not again at once
