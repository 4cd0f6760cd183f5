"""`farm run` against a faulty model provider, as a user meets one: the react agent calls the
faulty provider (farm.llm.faulty, real HTTP on loopback, through litellm) from local worker
processes on emulated clusters. A provider that stays down or refuses the key leaves its trials
infra_failed with phase `provider`, outside n, and the run exits 3; a context-length error is the
agent's and is counted; the same command once the provider is mended runs exactly those trials
again, passes pre-flight, and exits 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from sqlmodel import Session, select

from core.states import END_CONTEXT_LENGTH, AttemptState, TrialState
from farm.llm.faulty import FaultyProvider
from farm.llm.scripted import tool_plan
from results.db import engine_for
from results.models import Attempt, Trial

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
PROBLEM = "hr-frontend-service-targetport-wrong"
PLAN = tool_plan([("kubectl", {"command": "get svc -n hotel-reservation"}),
                  ("submit_diagnosis", {"text": "The frontend Service's targetPort does not match the container port."})],
                 finish="Diagnosed.")


def farm_run(spec: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "FARM_DATABASE_URL"}
    return subprocess.run([sys.executable, "-m", "farm.cli", "run", str(spec), "--workers", "2", "--out", str(out),
                           *extra], cwd=ROOT, capture_output=True, text=True, timeout=900, env=env)


def _rows(out: Path) -> tuple[dict[str, Trial], list[Attempt]]:
    engine = engine_for(f"sqlite:///{out / 'farm.sqlite'}")
    with Session(engine) as s:
        return ({t.model: t for t in s.exec(select(Trial))}, list(s.exec(select(Attempt).order_by(Attempt.id))))


def test_provider_failures_are_infrastructure_and_a_rerun_retries_them(tmp_path: Path) -> None:
    with FaultyProvider(answer=PLAN) as fp:
        agent = {"name": "react", "options": {"api_base": fp.url, "max_backoff_retries": 1, "max_backoff_s": 0.05}}
        spec = tmp_path / "spec.yaml"
        spec.write_text(yaml.safe_dump({
            "name": "faulty-provider", "problems": {"ids": [PROBLEM]}, "agents": [agent],
            "models": ["openai/steady", "openai/down", "openai/locked", "openai/small"], "seeds": 1,
            "max_infra_attempts": 2, "limits": {"max_steps": 10, "wall_time_s": 120}}))
        out = tmp_path / "out"
        fp.set_schedule({"down": "unavailable", "locked": "auth", "small": "context_length"})
        first = farm_run(spec, out, "--no-preflight")
        assert first.returncode == 3, first.stdout[-3000:] + first.stderr[-3000:]
        assert "2 trial(s) failed on the model provider" in " ".join(first.stderr.split())
        # The progress bar's last state says them apart: provider failures, other infrastructure, agent errors.
        assert "provider-failed 2, infra-failed 0, agent errors 1" in first.stdout, first.stdout[-3000:]
        trials, attempts = _rows(out)
        by_trial = {m: [a for a in attempts if a.trial_id == t.id] for m, t in trials.items()}
        assert trials["openai/steady"].state == TrialState.FINISHED
        # The agent's own failure: counted, labelled.
        assert trials["openai/small"].state == TrialState.FINISHED
        assert trials["openai/small"].end_reason == END_CONTEXT_LENGTH
        # The provider's: infra_failed, phase provider; a 503 retried to the budget, a bad key given up at once.
        for model, tries in (("openai/down", 2), ("openai/locked", 1)):
            assert trials[model].state == TrialState.INFRA_FAILED, trials[model]
            assert [(a.state, a.error_phase) for a in by_trial[model]] == [(AttemptState.INFRA_ERROR, "provider")] * tries
        assert "overloaded" in (trials["openai/down"].error or "") and "credentials" in (trials["openai/locked"].error or "")
        board = pd.read_csv(out / "leaderboard.csv").set_index("model")
        assert board["n"].to_dict() == {"openai/down": 0, "openai/locked": 0, "openai/small": 1, "openai/steady": 1}
        assert int(board["provider_failed"].sum()) == 2 and int(board["agent_errors"].sum()) == 1

        fp.set_schedule({})  # the provider is mended
        second = farm_run(spec, out)
        assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
        said = " ".join(second.stdout.split())
        assert "pre-flight: 4 model(s) answered" in said and "2 already done, 2 to run" in said, said
        trials, attempts = _rows(out)
        assert all(t.state == TrialState.FINISHED for t in trials.values()), {m: t.state for m, t in trials.items()}
        recorded = [a for a in attempts if a.state == AttemptState.RECORDED]
        assert len(recorded) == 4 and len(attempts) == 4 + 3  # the failed attempts stay on record
        board = pd.read_csv(out / "leaderboard.csv")
        assert int(board["n"].sum()) == 4 and int(board["provider_failed"].sum()) == 0
