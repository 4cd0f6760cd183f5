"""The ledger's guarantees, on SQLite and on PostgreSQL: one claim wins, a lost lease is
reaped and requeued, a zombie attempt cannot record a second result, claims stop at the sweep's
cost cap."""

from __future__ import annotations

import threading
import time

import pytest
from sqlmodel import Session, select

from core.states import LIMIT_SWEEP_COST, AttemptState, TrialState
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


def _capped_sweep(engine, cap: float, n: int = 3) -> list[str]:
    ids = _seed(engine, n)
    with Session(engine) as s:
        sweep = s.get(Sweep, "sw")
        sweep.cost_cap_usd = cap
        s.add(sweep)
        s.commit()
    return ids


def test_claims_stop_at_the_sweep_cost_cap(db_url):
    engine = engine_for(db_url)
    ids = _capped_sweep(engine, cap=1.0, n=4)
    first = ledger.claim(engine, ids[0], "w", "sim:sim")
    ledger.record(engine, first, AttemptResult(diagnosis_passed=True, mitigation_passed=True, cost_usd=0.5,
                                               judge_cost_usd=0.1))
    second = ledger.claim(engine, ids[1], "w", "sim:sim")
    assert second is not None  # $0.60 of $1.00
    # A running session's checkpoint reaches SQL: its spend counts before it records.
    ledger.set_phase(engine, second, "agent_session", partial=AttemptResult(cost_usd=0.45))
    assert ledger.sweep_cost(engine, "sw") == pytest.approx(1.05)
    assert ledger.claim(engine, ids[2], "w", "sim:sim") is None
    with Session(engine) as s:
        states = {t.id: t.state for t in s.exec(select(Trial))}
        skipped = s.get(Trial, ids[3])
    assert states == {ids[0]: TrialState.FINISHED, ids[1]: TrialState.RUNNING,
                      ids[2]: TrialState.SKIPPED_COST_CAP, ids[3]: TrialState.SKIPPED_COST_CAP}
    assert "$1.0500 of its $1.0000 cost cap" in skipped.error
    assert ledger.claim_next(engine, "sw", "w", "sim:sim") is None
    # The running trial still records: the cap stops new trials, not the one under way.
    assert ledger.record(engine, second, AttemptResult(diagnosis_passed=False, mitigation_passed=True, cost_usd=0.5))


def test_a_live_ledger_counts_spend_sql_has_not_seen(db_url):
    engine = engine_for(db_url)
    ids = _capped_sweep(engine, cap=1.0)
    assert ledger.claim(engine, ids[0], "w", "sim:sim", spend=lambda sweep: 0.2) is not None

    def unreachable(sweep: str) -> float:
        raise ConnectionError("redis is down")

    assert ledger.claim(engine, ids[1], "w", "sim:sim", spend=unreachable) is not None  # SQL alone: $0
    seen: list[str] = []

    def live(sweep: str) -> float:
        seen.append(sweep)
        return 1.2

    assert ledger.claim(engine, ids[2], "w", "sim:sim", spend=live) is None and seen == ["sw"]
    with Session(engine) as s:
        assert s.get(Trial, ids[2]).state == TrialState.SKIPPED_COST_CAP


def test_a_session_cut_by_the_sweep_cap_is_kept_apart(db_url):
    engine = engine_for(db_url)
    (tid,) = _capped_sweep(engine, cap=5.0, n=1)
    c = ledger.claim(engine, tid, "w", "sim:sim")
    cut = AttemptResult(end_reason=LIMIT_SWEEP_COST, tokens_in=900, tokens_out=80, cost_usd=0.7, tool_calls=4,
                        diagnosis_passed=False, mitigation_passed=False)
    assert ledger.record(engine, c, cut)
    with Session(engine) as s:
        trial = s.get(Trial, tid)
        attempt = s.exec(select(Attempt)).one()
    assert trial.state == TrialState.SKIPPED_COST_CAP and trial.final_attempt is None
    assert trial.diagnosis_passed is None and trial.end_reason == LIMIT_SWEEP_COST  # no agent result
    assert attempt.state == AttemptState.COST_CAPPED and attempt.tokens_in == 900 and attempt.tool_calls == 4
    assert ledger.sweep_cost(engine, "sw") == pytest.approx(0.7)


def test_infra_events_are_recorded_with_their_attempt(db_url):
    from results.models import InfraEvent

    engine = engine_for(db_url)
    (tid,) = _seed(engine)
    c = ledger.claim(engine, tid, "w", "sim:sim")
    ledger.infra_event(engine, "reset_failed", "w", "sim:sim", "restore failed", c)
    ledger.infra_event(engine, "cluster_replaced", "w", "sim:sim")
    with Session(engine) as s:
        events = s.exec(select(InfraEvent).order_by(InfraEvent.id)).all()
    assert [(e.kind, e.sweep_id, e.trial_id, e.attempt_id) for e in events] == [
        ("reset_failed", "sw", tid, c.attempt_id), ("cluster_replaced", None, None, None)]
