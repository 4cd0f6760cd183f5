"""`farm run`, the embedded default, as a user runs it: local workers on emulated clusters,
SQLite, local artifacts; a progress bar, a leaderboard, a CSV; a second run resumes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from sqlmodel import Session, select

from farm.states import AttemptState, TrialState
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
        assert {"attempt.json", "tool_calls.json", "verdicts.json", "cluster_snapshot.json"} <= names, names
        verdicts = json.loads((folder / "verdicts.json").read_text())
        assert "passed" in verdicts["mitigation"]

    second = farm("run", str(EXAMPLE), "--workers", "2", "--out", str(out))
    assert second.returncode == 0, second.stderr[-2000:]
    assert f"{len(trials)} already done, 0 to run" in second.stdout
    with Session(engine) as s:
        assert len(s.exec(select(Attempt)).all()) == len(attempts)
