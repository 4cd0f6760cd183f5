"""`farm sweep status --watch`'s figures: counts, rates so far, cost against the cap and the ETA
at the pace of the current submission, read from rows the ledger wrote."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import update
from sqlmodel import Session

from core.states import TrialState
from results import ledger, progress
from results.db import engine_for
from results.ledger import AttemptResult
from results.models import Sweep, Trial


def test_snapshot_counts_rates_cost_and_eta(sqlite_url):
    engine = engine_for(sqlite_url)
    t0 = time.time() - 100
    with Session(engine) as s:
        s.add(Sweep(id="w", spec_json="{}", created_at=t0 - 1000, updated_at=t0, cost_cap_usd=2.0))
        for i in range(10):
            s.add(Trial(id=f"t{i}", sweep_id="w", key=str(i), problem_id="p", app="a", layer="os",
                        composition="single", agent="react", model="m", seed=i, noise=False))
        s.commit()
    for i in range(4):
        claim = ledger.claim(engine, f"t{i}", "w1", "sim:sim")
        ledger.record(engine, claim, AttemptResult(diagnosis_passed=i < 3, mitigation_passed=i < 1, cost_usd=0.25))
    # One trial done before this submission does not count towards its pace.
    with Session(engine) as s:
        s.execute(update(Trial).where(Trial.id == "t0").values(finished_at=t0 - 500))
        s.commit()
    running = ledger.claim(engine, "t4", "w1", "sim:sim")
    assert running is not None
    snap = progress.snapshot(engine, "w", now=t0 + 30)
    assert (snap["total"], snap["done"], snap["finished"]) == (10, 4, 4)
    assert snap["counts"][TrialState.RUNNING] == 1 and snap["counts"][TrialState.PENDING] == 5
    assert snap["rates"]["diagnosis"]["rate"] == pytest.approx(0.75) and snap["rates"]["e2e"]["rate"] == 0.25
    assert snap["cost_usd"] == pytest.approx(1.0) and snap["cost_cap_usd"] == 2.0
    assert snap["eta_s"] == pytest.approx(6 / (3 / 30))  # 3 done in 30 s of this submission, 6 to go
    text = progress.render(snap)
    assert "4/10 done" in text and "of a $2.0000 cap (50%)" in text and "ETA 1m00s" in text
    assert not snap["settled"]


def test_watch_stops_when_the_sweep_is_settled(sqlite_url):
    engine = engine_for(sqlite_url)
    now = time.time()
    with Session(engine) as s:
        s.add(Sweep(id="w", spec_json="{}", created_at=now, updated_at=now))
        s.add(Trial(id="t", sweep_id="w", key="k", problem_id="p", app="a", layer="os", composition="single",
                    agent="baseline", model="-", seed=0, noise=False))
        s.commit()
    shown, sleeps = [], []

    def finish_after_two(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 2:
            ledger.record(engine, ledger.claim(engine, "t", "w1", "sim:sim"),
                          AttemptResult(diagnosis_passed=True, mitigation_passed=True))

    last = progress.watch(engine, "w", 0.5, shown.append, sleep=finish_after_two)
    assert len(shown) == 3 and sleeps == [0.5, 0.5]
    assert last["settled"] and "finished" in progress.render(last)
    assert not shown[0]["settled"]
    with pytest.raises(KeyError):
        progress.snapshot(engine, "nope")


def test_provider_failures_and_agent_errors_show_apart(sqlite_url):
    from core.states import END_AGENT_ERROR, END_CONTEXT_LENGTH

    engine = engine_for(sqlite_url)
    now = time.time()
    with Session(engine) as s:
        s.add(Sweep(id="pf", spec_json="{}", created_at=now, updated_at=now))
        for i in range(4):
            s.add(Trial(id=f"p{i}", sweep_id="pf", key=str(i), problem_id="p", app="a", layer="os",
                        composition="single", agent="react", model="m", seed=i, noise=False))
        s.commit()
    for tid, phase in (("p0", "provider"), ("p1", "deploy")):
        ledger.infra_failure(engine, ledger.claim(engine, tid, "w1", "sim:sim"), phase, "down", max_attempts=1)
    for tid, end in (("p2", END_AGENT_ERROR), ("p3", END_CONTEXT_LENGTH)):
        ledger.record(engine, ledger.claim(engine, tid, "w1", "sim:sim"), AttemptResult(end_reason=end))
    snap = progress.snapshot(engine, "pf")
    assert snap["failures"] == {"provider_failed": 1, "infra_failed_other": 1, "agent_errors": 2, "context_length": 1}
    text = progress.render(snap)
    assert "provider failures 1 (not counted; re-run to retry)" in text
    assert "agent errors 2 (counted, 1 of them context length)" in text
