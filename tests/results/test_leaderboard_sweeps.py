"""The leaderboard never pools two sweeps, names the sweep of every row, and carries pass@k,
pass^k and problem-clustered intervals computed from the recorded rows; an unpriced model is
marked; `farm leaderboard` refuses an unknown sweep."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from sqlmodel import Session

from core.states import TrialState
from results import leaderboard
from results.db import engine_for
from results.models import Sweep, Trial
from results.stats import cluster_bootstrap, pass_at_k, pass_hat_k

ROOT = Path(__file__).resolve().parents[2]


def _fill(engine, sweep: str, models: list[object], seeds: int = 3, problems: int = 6, seed: int = 1) -> list[Trial]:
    rng = random.Random(seed)
    now = time.time()
    trials = []
    with Session(engine, expire_on_commit=False) as s:
        spec = {"name": sweep, "problems": {"apps": ["hotel-reservation"]}, "agents": ["react"], "models": models}
        s.add(Sweep(id=sweep, spec_json=json.dumps(spec), created_at=now, updated_at=now))
        labels = [m if isinstance(m, str) else (m.get("label") or m["name"]) for m in models]  # type: ignore[union-attr]
        for model in labels:
            for p in range(problems):
                skill = rng.random()  # a problem's own difficulty: its seeds agree more than chance
                for sd in range(seeds):
                    d, m = rng.random() < skill, rng.random() < skill
                    t = Trial(id=f"{sweep}-{model}-{p}-{sd}", sweep_id=sweep, key=f"{p}|react|{model}|{sd}|quiet",
                              problem_id=f"p{p}", app="hotel-reservation", layer="application",
                              composition="single", agent="react", model=model, seed=sd, noise=False,
                              state=TrialState.FINISHED, diagnosis_passed=d, mitigation_passed=m, e2e_passed=d and m,
                              tokens_in=100, tokens_out=10, cost_usd=0.0, judge_offline=True)
                    trials.append(t)
                    s.add(t)
        s.commit()
    return trials


def test_pass_at_k_and_clustered_intervals_come_from_the_rows(db_url: str) -> None:
    engine = engine_for(db_url)
    trials = _fill(engine, "sw", ["openai/gpt-4o"])
    (row,) = leaderboard.compute(engine, "sw", "agent,model")
    assert row["sweep"] == "sw" and row["k"] == 3 and row["problems"] == 6
    per_problem: dict[str, list[Trial]] = {}
    for t in trials:
        per_problem.setdefault(t.problem_id, []).append(t)
    e2e = [(len(ts), sum(bool(t.e2e_passed) for t in ts)) for ts in per_problem.values()]
    assert row["e2e_pass_at_k"] == pytest.approx(sum(pass_at_k(n, c, 3) for n, c in e2e) / 6)
    assert row["e2e_pass_hat_k"] == pytest.approx(sum(pass_hat_k(n, c, 3) for n, c in e2e) / 6)
    assert (row["e2e_cluster_lo"], row["e2e_cluster_hi"]) == pytest.approx(
        cluster_bootstrap([(c, n) for n, c in e2e], seed=leaderboard.BOOTSTRAP_SEED))
    assert row["priced"] is True  # litellm's table prices gpt-4o
    (k2,) = leaderboard.compute(engine, "sw", "agent,model", k=2)
    assert k2["k"] == 2 and k2["e2e_pass_at_k"] == pytest.approx(sum(pass_at_k(n, c, 2) for n, c in e2e) / 6)


def test_two_sweeps_are_never_pooled_and_unpriced_models_are_marked(sqlite_url: str, tmp_path: Path) -> None:
    engine = engine_for(sqlite_url)
    _fill(engine, "first", ["openai/gpt-4o"], seed=1)
    _fill(engine, "second", ["openai/gpt-4o", {"name": "openai/my-local", "label": "mine"},
                             {"name": "openai/priced-local", "price": {"input_per_mtok": 0, "output_per_mtok": 0}}],
          seed=2)
    rows = leaderboard.compute(engine, None, "agent,model")
    assert sorted((r["sweep"], r["model"]) for r in rows) == [
        ("first", "openai/gpt-4o"), ("second", "mine"), ("second", "openai/gpt-4o"), ("second", "openai/priced-local")]
    assert all(r["n"] == 18 for r in rows), "a row pooled two sweeps"
    priced = {(r["sweep"], r["model"]): r["priced"] for r in rows}
    assert priced[("second", "mine")] is False and priced[("second", "openai/priced-local")] is True
    by_sweep = leaderboard.compute(engine, None, "sweep")
    assert sorted((r["sweep"], r["n"]) for r in by_sweep) == [("first", 18), ("second", 54)]
    assert by_sweep[1]["priced"] is False  # a group holding an unpriced model
    path = leaderboard.write_csv(rows, "agent,model", tmp_path / "lb.csv")
    frame = pd.read_csv(path)
    assert list(frame.columns) == leaderboard.header("agent,model") and list(frame.columns)[0] == "sweep"


def test_farm_leaderboard_refuses_an_unknown_sweep(sqlite_url: str) -> None:
    engine = engine_for(sqlite_url)
    _fill(engine, "known", ["openai/gpt-4o"], problems=2, seeds=1)
    proc = subprocess.run([sys.executable, "-m", "farm.cli", "leaderboard", "--db", sqlite_url, "--sweep", "nope"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and "no sweep 'nope'" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "farm.cli", "leaderboard", "--db", sqlite_url, "--by", "sweep"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and "known" in proc.stdout
