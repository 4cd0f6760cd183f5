"""`farm run`, the embedded default, as a user runs it: local workers on emulated clusters,
SQLite, local artifacts; a progress bar, a leaderboard, a CSV; a second run resumes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from sqlmodel import Session, select

from core.states import AttemptState, TrialState
from results.db import engine_for
from results.models import Attempt, Trial

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "hotel-smoke.yaml"

pytestmark = pytest.mark.slow


def farm(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "farm.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_farm_run_writes_a_leaderboard_and_resumes(tmp_path):
    out = tmp_path / "out"
    first = farm("run", str(EXAMPLE), "--workers", "2", "--out", str(out))
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "Leaderboard" in first.stdout
    frame = pd.read_csv(out / "leaderboard.csv")
    engine = engine_for(f"sqlite:///{out / 'farm.sqlite'}")
    with Session(engine) as s:
        trials = s.exec(select(Trial)).all()
        attempts = s.exec(select(Attempt)).all()
    assert trials and all(t.state == TrialState.FINISHED for t in trials)
    assert int(frame["n"].sum()) == len(trials)
    assert {a.state for a in attempts} == {AttemptState.RECORDED}
    # The figures in the CSV come from the rows.
    d_rate = sum(bool(t.diagnosis_passed) for t in trials) / len(trials)
    assert frame["diagnosis_rate"].iloc[0] == pytest.approx(d_rate)
    # Every recorded attempt left its artifacts in the local folder.
    for a in attempts:
        folder = Path(a.artifacts_uri.removeprefix("file://"))
        names = {p.name for p in folder.iterdir()}
        assert {"attempt.json", "tool_calls.json", "verdicts.json", "cluster_snapshot.json.gz"} <= names, names
        verdicts = json.loads((folder / "verdicts.json").read_text())
        assert "passed" in verdicts["mitigation"]

    second = farm("run", str(EXAMPLE), "--workers", "2", "--out", str(out))
    assert second.returncode == 0, second.stderr[-2000:]
    assert f"{len(trials)} already done, 0 to run" in second.stdout
    with Session(engine) as s:
        assert len(s.exec(select(Attempt)).all()) == len(attempts)


# -- the embedded runner on failing infrastructure and under a cost cap ---------------------------
# Local worker processes load the test plugins (a faulty emulated cluster) through FARM_PLUGINS, and
# the agents' processes the probe agent through FARM_AGENT_PLUGINS; run_sweep is called in-process so the test sees its database directly.

from tests.tasks import plugins  # noqa: E402  (registers the plugins in this process too)

PROBLEM = "hr-frontend-service-targetport-wrong"
PRICE = {"input_cost_per_token": 1e-4, "output_cost_per_token": 2e-4}


def _embedded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec_data: dict, cluster_ref: str = "sim",
              faults: str | None = None, workers: int = 1) -> tuple[object, dict[str, int]]:
    from farm import dispatcher
    from farm.runner import run_sweep
    from farm.spec import SweepSpec

    monkeypatch.setenv("FARM_PLUGINS", plugins.__name__)
    monkeypatch.setenv("FARM_AGENT_PLUGINS", "tests.fakes.probe_agent")  # runs in the agent's process only
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    url = f"sqlite:///{out / 'farm.sqlite'}"
    engine = engine_for(url)
    sub = dispatcher.submit(engine, SweepSpec.model_validate(spec_data))
    options = {"faults": faults} if faults is not None else {}
    counts = run_sweep(sub.sweep_id, url, out, workers, lease_s=15, cluster_ref=cluster_ref, cluster_options=options)
    return engine, counts


def _attempts(engine, sweep: str) -> list[Attempt]:
    with Session(engine) as s:
        return list(s.exec(select(Attempt).join(Trial, Trial.id == Attempt.trial_id).where(Trial.sweep_id == sweep)
                           .order_by(Attempt.id)))


def test_embedded_infrastructure_failures_are_retried_and_reported_apart(tmp_path, monkeypatch):
    from farm import dispatcher
    from results import leaderboard

    spec = {"name": "emb-infra", "problems": {"ids": [PROBLEM]}, "agents": ["baseline"], "seeds": 2,
            "max_infra_attempts": 2, "limits": {"wall_time_s": 120}}
    # One worker: the first trial's deploy fails and so does the reset after it (the cluster is
    # replaced), the second trial's injection fails; each runs again and records.
    engine, counts = _embedded(tmp_path, monkeypatch, spec, "faulty:emb", "deploy:1,inject:1,reset:1")
    assert counts[TrialState.FINISHED] == 2, counts
    attempts = _attempts(engine, "emb-infra")
    assert sorted((a.state, a.error_phase) for a in attempts) == sorted(
        [(AttemptState.INFRA_ERROR, "deploy"), (AttemptState.INFRA_ERROR, "inject"),
         (AttemptState.RECORDED, None), (AttemptState.RECORDED, None)])
    info = dispatcher.infra_summary(engine, "emb-infra")
    assert info["infra_errors"] == {"deploy": 1, "inject": 1}
    assert info["infra_events"] == {"reset_failed": 1, "cluster_replaced": 1}
    (row,) = leaderboard.compute(engine, "emb-infra")
    assert (row["n"], row["infra_failed"], row["reset_failures"]) == (2, 0, 1)


def test_embedded_infra_failed_trial_runs_again_on_resubmission(tmp_path, monkeypatch):
    from results import leaderboard

    spec = {"name": "emb-broken", "problems": {"ids": [PROBLEM]}, "agents": ["baseline"], "seeds": 1,
            "max_infra_attempts": 2, "limits": {"wall_time_s": 120}}
    engine, counts = _embedded(tmp_path, monkeypatch, spec, "faulty:emb", "deploy")  # every deploy fails
    assert counts[TrialState.INFRA_FAILED] == 1, counts
    assert [a.state for a in _attempts(engine, "emb-broken")] == [AttemptState.INFRA_ERROR] * 2
    (row,) = leaderboard.compute(engine, "emb-broken")
    assert (row["n"], row["infra_failed"]) == (0, 1)
    # The same sweep again, on a cluster that works now: the trial is not finished, so it runs.
    engine, counts = _embedded(tmp_path, monkeypatch, spec, "faulty:emb", "")
    assert counts[TrialState.FINISHED] == 1, counts
    assert [a.state for a in _attempts(engine, "emb-broken")] == [AttemptState.INFRA_ERROR] * 2 + [
        AttemptState.RECORDED]
    (row,) = leaderboard.compute(engine, "emb-broken")
    assert (row["n"], row["infra_failed"]) == (1, 0)


def test_embedded_cost_cap_and_concurrency_are_shared_by_local_workers(tmp_path, monkeypatch):
    from farm.llm.scripted import ScriptedLLM
    from results import leaderboard
    from results.ledger import sweep_cost

    def respond(request: dict) -> dict:
        time.sleep(0.3)  # long enough for two workers' calls to overlap, were they not limited
        return {"content": "looking", "usage": {"prompt_tokens": 1000, "completion_tokens": 100}}

    per_call = 1000 * PRICE["input_cost_per_token"] + 100 * PRICE["output_cost_per_token"]  # $0.12
    with ScriptedLLM(respond) as llm:
        spec = {"name": "emb-cap", "problems": {"ids": [PROBLEM]}, "seeds": 6, "models": ["openai/scripted-model"],
                "agents": [{"name": "probe", "options": {"api_base": llm.url, "price": PRICE, "rounds": 2}}],
                "concurrency": {"openai/scripted-model": 1}, "cost_cap_usd": 0.5, "limits": {"wall_time_s": 120}}
        engine, counts = _embedded(tmp_path, monkeypatch, spec, workers=2)
        assert llm.max_in_flight == 1, "the model's concurrency limit of 1 was not shared by the two workers"
        calls = len(llm.requests)
    assert counts[TrialState.SKIPPED_COST_CAP] >= 1 and counts[TrialState.FINISHED] >= 1, counts
    assert counts[TrialState.FINISHED] + counts[TrialState.SKIPPED_COST_CAP] == 6
    spent = sweep_cost(engine, "emb-cap")
    assert spent == pytest.approx(calls * per_call)
    # The cap stops the sweep: the model was not called past the cap by more than the calls the
    # two workers' sessions already under way could make (the client refuses calls over the cap).
    assert spent < 0.5 + 2 * per_call
    started = {a.trial_id for a in _attempts(engine, "emb-cap")}
    assert len(started) <= 4, f"{len(started)} trials started for a cap of two trials' cost"
    (row,) = leaderboard.compute(engine, "emb-cap")
    assert row["n"] == counts[TrialState.FINISHED] and row["cost_capped"] == counts[TrialState.SKIPPED_COST_CAP]

    # A resumed run counts what SQL already records: nothing more is started, nothing more spent.
    with ScriptedLLM(respond) as llm:
        spec["agents"][0]["options"]["api_base"] = llm.url
        engine, counts = _embedded(tmp_path, monkeypatch, spec, workers=2)
        assert llm.requests == []
    assert {a.trial_id for a in _attempts(engine, "emb-cap")} == started
    assert counts[TrialState.SKIPPED_COST_CAP] == 6 - sum(1 for t in started if _finished(engine, t))


def _finished(engine, trial_id: str) -> bool:
    with Session(engine) as s:
        return s.get(Trial, trial_id).state == TrialState.FINISHED


def test_shared_limits_folder_starts_at_the_recorded_spend(tmp_path, monkeypatch, sqlite_url):
    from farm import dispatcher
    from farm.llm.limits import SHARED_DIR_ENV, SweepLedger
    from farm.runner import _shared_limits
    from farm.spec import SweepSpec
    from results import ledger

    monkeypatch.delenv("FARM_BROKER_URL", raising=False)
    engine = engine_for(sqlite_url)
    sub = dispatcher.submit(engine, SweepSpec.model_validate(
        {"name": "seeded", "problems": {"ids": [PROBLEM]}, "agents": ["baseline"], "seeds": 2, "cost_cap_usd": 1}))
    c = ledger.claim(engine, sub.to_run[0], "w", "sim:sim")
    ledger.record(engine, c, ledger.AttemptResult(cost_usd=0.25, judge_cost_usd=0.05))
    folder = _shared_limits(engine, "seeded")
    monkeypatch.setenv(SHARED_DIR_ENV, folder)
    book = SweepLedger("seeded", 1.0)
    assert book.spent() == pytest.approx(0.30)
    assert SweepLedger("seeded", None).add(0.5) == pytest.approx(0.80)  # another process's view
    assert book.spent() == pytest.approx(0.80)


def _hold_slot(folder: str, hold_s: float, out: object) -> None:
    import os as _os
    import time as _time

    _os.environ["FARM_LIMITS_DIR"] = folder
    from farm.llm.limits import LocalSemaphore

    with LocalSemaphore("openai/scripted-model", 1).acquire(timeout=30):
        start = _time.monotonic()
        out.put(("held", start, start))  # type: ignore[attr-defined]
        _time.sleep(hold_s)
        out.put(("span", start, _time.monotonic()))  # type: ignore[attr-defined]


def test_local_workers_share_a_model_slot(tmp_path):
    """What `farm run` gives its worker processes (FARM_LIMITS_DIR): a concurrency limit of one
    holds across processes, and a holder that dies frees its slot."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_hold_slot, args=(str(tmp_path), 0.5, out)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    spans = sorted(m[1:] for m in (out.get(timeout=5) for _ in range(2 * len(procs))) if m[0] == "span")
    assert len(spans) == 3
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:], strict=False)), spans
    # A holder killed while holding: the kernel drops its lock, the slot is free again. (Each gets
    # a queue of its own: a process killed mid-put can leave a shared queue's lock taken.)
    held = ctx.Queue()
    killed = ctx.Process(target=_hold_slot, args=(str(tmp_path), 60, held))
    killed.start()
    assert held.get(timeout=60)[0] == "held"
    killed.kill()
    killed.join()
    fresh = ctx.Queue()
    survivor = ctx.Process(target=_hold_slot, args=(str(tmp_path), 0.0, fresh))
    survivor.start()
    survivor.join(timeout=30)
    assert survivor.exitcode == 0 and fresh.get(timeout=5)[0] == "held"
