"""Agents run out of the worker's process (farm/agents/process.py, farm/trial/session.py): an agent
plugin, loaded the real way (FARM_AGENT_PLUGINS), runs whole trials on an emulated cluster and
cannot change its scores, read the catalog, the worker's environment or its context's secrets, or
keep working past its limit. The hostile plugins are tests/security/agent_plugins.py."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select

from core.states import END_AGENT_STOPPED, LIMIT_STEPS
from farm.dispatcher import submit
from farm.oracles import judge as diagnosis
from farm.oracles import mitigation
from farm.pytest_plugin import SimClusters
from farm.spec import SweepSpec
from farm.trial import run_all, start_run
from results import ledger
from results.artifact_store import LocalArtifactStore
from results.db import engine_for
from results.models import Attempt, Trial
from tests.security import agent_plugins

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]
PROBLEM = "hr-geo-image-tag-wrong"
ROOT = Path(__file__).resolve().parents[2]
SECRET_DB = "postgresql://farm:db-password-never-seen@127.0.0.1:5432/farm"


@pytest.fixture(autouse=True)
def _plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FARM_AGENT_PLUGINS", agent_plugins.__name__)
    monkeypatch.setenv("FARM_DATABASE_URL", SECRET_DB)  # what the worker holds, the agent must not


def _trial(sim_clusters: SimClusters, tmp_path: Path, name: str, agent: dict[str, Any],
           **limits: Any) -> tuple[Trial, Attempt, Any]:
    engine = engine_for(f"sqlite:///{tmp_path / f'{name}.sqlite'}")
    store = LocalArtifactStore(tmp_path / f"artifacts-{name}")
    cluster = sim_clusters.served(seed=3)
    spec = SweepSpec(name=name, problems={"ids": [PROBLEM]}, agents=[agent],
                     limits={"wall_time_s": 600, **limits})
    sub = submit(engine, spec)
    claim = ledger.claim(engine, sub.to_run[0], f"{name}-worker", cluster.ref)
    assert claim is not None
    run = start_run(engine, claim, cluster, store)
    assert run is not None
    assert run_all(run) == "recorded", run.events[-3:]
    with Session(engine) as s:
        return s.exec(select(Trial)).one(), s.exec(select(Attempt)).one(), run


def _scores(a: Attempt) -> tuple[Any, ...]:
    return a.diagnosis_passed, a.diagnosis_score, a.mitigation_passed, a.mitigation_success_rate


def test_the_scorer_patch_works_in_the_workers_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: run in the worker's process, the plugin's patch does replace both scorers."""
    monkeypatch.setattr(diagnosis, "judge_diagnosis", diagnosis.judge_diagnosis)
    monkeypatch.setattr(mitigation.MitigationOracle, "evaluate", mitigation.MitigationOracle.evaluate)
    before = (diagnosis.judge_diagnosis, mitigation.MitigationOracle.evaluate)
    assert agent_plugins.patch_scorers() == ["judge_diagnosis", "MitigationOracle.evaluate"]
    assert (diagnosis.judge_diagnosis, mitigation.MitigationOracle.evaluate) != before


def test_an_agent_plugin_that_patches_the_scorers_changes_no_score(sim_clusters: SimClusters, tmp_path: Path) -> None:
    judge, evaluate = diagnosis.judge_diagnosis, mitigation.MitigationOracle.evaluate
    # Few steps: the baseline has no time to mitigate, so a score the patch forced would show.
    _, honest, _ = _trial(sim_clusters, tmp_path, "honest", {"name": "baseline"}, max_steps=6)
    _, patched, run = _trial(sim_clusters, tmp_path, "patched", {"name": "scorer-patcher"}, max_steps=6)
    # the honest baseline does not pass everything here, so a working patch would show
    assert not (honest.diagnosis_passed and honest.mitigation_passed), _scores(honest)
    assert _scores(patched) == _scores(honest)
    assert (diagnosis.judge_diagnosis, mitigation.MitigationOracle.evaluate) == (judge, evaluate)
    # it ran, as the baseline, and found nothing to patch in its own process
    assert patched.tool_calls == honest.tool_calls > 0
    assert {"kind": "note", "text": "patched: []"} in run.agent_result.transcript


def test_an_agent_reads_no_catalog_no_worker_environment_and_no_secret(sim_clusters: SimClusters, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-provider-key-never-seen")
    with socket.socket() as listening:  # a service of the worker's on its loopback
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        options = {"project": str(ROOT), "worker_pid": os.getpid(), "api_base": "http://provider.invalid/v1",
                   "ports": [port, 5432, 6379, 5672]}
        trial, attempt, run = _trial(sim_clusters, tmp_path, "snoop", {"name": "snoop", "options": options})
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass  # not vacuous: the worker reaches it
    assert trial.end_reason == END_AGENT_STOPPED
    found = run.agent_result.transcript[0]
    assert found["kind"] == "found"
    assert found["catalog"] == [] and found["project"] == []  # the project's folders are not there
    assert "imported" not in found  # neither are the oracles, the catalog, the ledger, the trial runner
    assert found["worker_environ"] is None and str(os.getpid()) not in found["processes"]
    assert found["reachable"] == []  # no local service of the worker's, no internet: only its two endpoints
    own = {"FARM_AGENT_PLUGINS", "FARM_AGENT_RELAY"}  # the sandbox's own plumbing, none of the worker's settings
    assert not any(k.startswith("FARM_") and k not in own for k in found["env"]), found["env"]
    shown = json.dumps(found)
    for secret in (SECRET_DB, "db-password-never-seen", "sk-provider-key-never-seen", "provider.invalid"):
        assert secret not in shown
    assert found["context"]["mcp_token"]  # its own MCP token is all it holds
    assert (ROOT / "farm" / "problems" / "catalog").is_dir()  # not vacuous: the catalog is there, outside


def test_an_agent_that_loops_past_its_step_limit_is_stopped(sim_clusters: SimClusters, tmp_path: Path) -> None:
    trial, attempt, run = _trial(sim_clusters, tmp_path, "looper", {"name": "looper"}, max_steps=5)
    assert trial.end_reason == attempt.end_reason == LIMIT_STEPS
    assert trial.steps == attempt.tool_calls == 5  # the refusals after the limit are no steps
    calls, refused = run.interface.record.tool_calls, run.interface.record.refused_late
    assert len(calls) == 5 and refused  # it kept calling; the calls were refused and kept apart
    assert all((c.error or "").startswith("session ended: limit_steps") for c in refused)
    assert run.agent_result.transcript == [] and run.agent_result.error is None  # killed, not finished
