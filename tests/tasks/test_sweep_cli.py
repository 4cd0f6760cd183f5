"""`farm sweep status|cancel` and `farm leaderboard` as a user types them: cancel stops what has not
run, status shows trial states, infrastructure errors and events and the cost against the cap, and
commands that only read never leave a fresh ./farm-out behind."""

from __future__ import annotations

import json

import pytest
from sqlmodel import Session, select
from typer.testing import CliRunner

from core.states import AttemptState, TrialState
from farm import dispatcher
from farm.cli import app
from farm.spec import SweepSpec
from results import ledger
from results.db import engine_for
from results.models import Attempt, Sweep, Trial

runner = CliRunner()


def _spec(name: str, **extra: object) -> SweepSpec:
    return SweepSpec.model_validate({"name": name, "problems": {"ids": ["hr-geo-image-tag-wrong"]},
                                     "agents": ["baseline"], "seeds": 4, **extra})


def test_sweep_cancel(db_url, monkeypatch):
    monkeypatch.setenv("FARM_DATABASE_URL", db_url)
    engine = engine_for(db_url)
    sub = dispatcher.submit(engine, _spec("to-cancel"))
    done = ledger.claim(engine, sub.to_run[0], "w", "sim:sim")
    ledger.record(engine, done, ledger.AttemptResult(diagnosis_passed=True, mitigation_passed=True))
    running = ledger.claim(engine, sub.to_run[1], "w", "sim:sim")

    out = runner.invoke(app, ["sweep", "cancel", "to-cancel"])
    assert out.exit_code == 0, out.output
    assert "sweep to-cancel: 3 trial(s) cancelled" in out.output
    with Session(engine) as s:
        states = sorted(t.state for t in s.exec(select(Trial)))
        assert s.get(Sweep, "to-cancel").cancelled
    assert states == sorted([TrialState.FINISHED] + [TrialState.CANCELLED] * 3)
    assert not ledger.holds_lease(engine, running)  # the running attempt stops at its next step
    assert ledger.claim(engine, sub.to_run[2], "w", "sim:sim") is None

    status = runner.invoke(app, ["sweep", "status", "to-cancel"])
    assert status.exit_code == 0 and "4 trials — finished 1, cancelled 3" in status.output, status.output

    missing = runner.invoke(app, ["sweep", "cancel", "no-such-sweep"])
    assert missing.exit_code == 2 and "no sweep 'no-such-sweep'" in missing.output


def test_sweep_status_shows_infrastructure_apart_and_the_cost_cap(sqlite_url, monkeypatch):
    monkeypatch.setenv("FARM_DATABASE_URL", sqlite_url)
    engine = engine_for(sqlite_url)
    sub = dispatcher.submit(engine, _spec("watched", cost_cap_usd=1.0))
    c = ledger.claim(engine, sub.to_run[0], "w", "sim:sim")
    ledger.infra_failure(engine, c, "deploy", "pods not ready", max_attempts=3)
    c = ledger.claim(engine, sub.to_run[0], "w", "sim:sim")
    ledger.record(engine, c, ledger.AttemptResult(diagnosis_passed=True, mitigation_passed=True, cost_usd=1.5))
    ledger.infra_event(engine, "reset_failed", "w", "sim:sim", "restore failed", c)
    ledger.infra_event(engine, "cluster_replaced", "w", "sim:sim", "", c)
    assert ledger.claim(engine, sub.to_run[1], "w", "sim:sim") is None  # over the cap: the rest skipped

    out = runner.invoke(app, ["sweep", "status", "watched"])
    assert out.exit_code == 0, out.output
    assert "4 trials — finished 1, skipped_cost_cap 3" in out.output
    assert "infrastructure errors (attempts retried or given up): deploy 1" in out.output
    assert "infrastructure events (trial results stand): cluster_replaced 1, reset_failed 1" in out.output
    assert "cost $1.5000 of a $1.0000 cap" in out.output
    data = json.loads(runner.invoke(app, ["sweep", "status", "watched", "--json"]).output)
    assert data["trials"]["skipped_cost_cap"] == 3 and data["infra_events"]["reset_failed"] == 1
    with Session(engine) as s:
        assert {a.state for a in s.exec(select(Attempt))} == {AttemptState.INFRA_ERROR, AttemptState.RECORDED}

    board = runner.invoke(app, ["leaderboard", "--sweep", "watched"])
    assert board.exit_code == 0, board.output
    assert "(+1 reset)" in board.output  # in the infra column, apart from n
    from results import leaderboard

    (row,) = leaderboard.compute(engine, "watched")
    assert (row["n"], row["cost_capped"], row["reset_failures"]) == (1, 3, 1)


@pytest.mark.parametrize("args", [["leaderboard"], ["leaderboard", "--sweep", "x"], ["sweep", "status", "x"],
                                  ["sweep", "cancel", "x"]], ids=" ".join)
def test_reading_without_a_database_creates_nothing(tmp_path, monkeypatch, args):
    monkeypatch.delenv("FARM_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    out = runner.invoke(app, args)
    assert out.exit_code == 2, out.output
    assert "no farm database: set FARM_DATABASE_URL" in out.output
    assert list(tmp_path.iterdir()) == [], "reading must not create ./farm-out"


def test_reading_finds_the_database_farm_run_wrote(tmp_path, monkeypatch):
    monkeypatch.delenv("FARM_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "farm-out").mkdir()
    engine = engine_for(f"sqlite:///{tmp_path / 'farm-out' / 'farm.sqlite'}")
    sub = dispatcher.submit(engine, _spec("local"))
    c = ledger.claim(engine, sub.to_run[0], "w", "sim:sim")
    ledger.record(engine, c, ledger.AttemptResult(diagnosis_passed=True, mitigation_passed=False))
    board = runner.invoke(app, ["leaderboard", "--sweep", "local", "--csv", "lb.csv"])
    assert board.exit_code == 0, board.output
    assert (tmp_path / "lb.csv").read_text().splitlines()[1].startswith("local,baseline,-,1,0,0,0,1.0")
    status = runner.invoke(app, ["sweep", "status", "local"])
    assert "4 trials — pending 3, finished 1" in status.output, status.output


def test_sweep_status_says_which_trials_wait_long_and_why(sqlite_url, monkeypatch):
    import time as _time

    from sqlalchemy import update

    monkeypatch.setenv("FARM_DATABASE_URL", sqlite_url)
    engine = engine_for(sqlite_url)
    sub = dispatcher.submit(engine, _spec("waiting"))
    dispatcher.mark_queued(engine, sub.to_run)
    ledger.note_published(engine, sub.to_run[:3])  # the fourth never reached the broker
    with Session(engine) as s:  # everything queued ten minutes ago
        s.execute(update(Trial).values(queued_at=_time.time() - 600))
        s.commit()

    out = runner.invoke(app, ["sweep", "status", "waiting"])
    assert out.exit_code == 0, out.output
    assert "queued for long: 4 trial(s), the oldest 600 s: 1 never sent to the broker" in out.output

    # The reaper re-sends all four claims (the fourth's first); no worker serves. The fourth,
    # just sent for the first time, waits its turn again; the three re-sent ones count as long.
    assert sorted(ledger.stale_queued(engine, older_than_s=60)) == sorted(sub.to_run)
    ledger.note_published(engine, sub.to_run)
    data = json.loads(runner.invoke(app, ["sweep", "status", "waiting", "--json"]).output)["queued_long"]
    assert (data["count"], data["republished"], data["never_published"]) == (3, 3, 0)
    assert data["why"] == "no healthy worker is serving (see `farm cluster list`)"

    ledger.register_worker(engine, "w", "sim:sim", "h", 1)
    ledger.worker_heartbeat(engine, "w", "busy", None)
    data = json.loads(runner.invoke(app, ["sweep", "status", "waiting", "--json"]).output)["queued_long"]
    assert data["why"].startswith("3 had a claim message lost and re-sent by the reaper; 1 healthy worker")
    fresh = runner.invoke(app, ["sweep", "status", "waiting", "--queued-long-s", "3600"])
    assert "queued for long: 3 trial(s)" in fresh.output  # the re-sent ones count whatever their age
