"""End to end: a plugin agent (tests/security/agent_plugins.py, in its own sandboxed process) that tries to learn which problem it was given (the answer key of
the catalog) runs a whole trial on the emulated cluster. It reads its context and environment,
probes the sandbox's filesystem and /proc through every kubectl flag that reads files, walks
every API path and telemetry source it can reach, and greps everything it was shown for the
catalog's problem ids and a canary planted in the worker's folders. It finds none of them, and
the refusals it got say why."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
from sqlmodel import Session, select

from farm.dispatcher import submit
from farm.problems.catalog import load_catalog
from farm.pytest_plugin import SimClusters
from farm.spec import SweepSpec
from farm.trial import run_all, start_run
from results import ledger
from results.artifact_store import LocalArtifactStore
from results.db import engine_for
from results.models import Attempt
from tests.security import agent_plugins
from tests.security.agent_plugins import PROBES

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]
PROBLEM = "hr-geo-image-tag-wrong"
CANARY = f"CANARY-{secrets.token_hex(8)}"

def test_a_finder_agent_learns_nothing_of_its_problem(sim_clusters: SimClusters, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FARM_AGENT_PLUGINS", agent_plugins.__name__)  # loaded in the agent's process only
    engine = engine_for(f"sqlite:///{tmp_path / 'farm.sqlite'}")
    store = LocalArtifactStore(tmp_path / "artifacts")
    (tmp_path / "artifacts").mkdir(exist_ok=True)
    (tmp_path / "artifacts" / "canary.txt").write_text(CANARY)
    cluster = sim_clusters.served(seed=5)
    (cluster.workdir / "canary.txt").write_text(CANARY)
    spec = SweepSpec(name="redteam-finder", problems={"ids": [PROBLEM]}, agents=[{"name": "redteam-finder", "options": {
                         # the catalog is public: which of these is mine? and is the canary within reach?
                         "ids": [p.id for p in load_catalog().problems], "canary": CANARY}}],
                     limits={"max_steps": 60, "wall_time_s": 300})
    sub = submit(engine, spec)
    claim = ledger.claim(engine, sub.to_run[0], "redteam-worker", cluster.ref)
    assert claim is not None
    run = start_run(engine, claim, cluster, store)
    assert run is not None
    assert run_all(run) == "recorded", run.events[-3:]
    sandbox = run.interface.record.sandbox
    FOUND = run.agent_result.transcript[0] if run.agent_result.transcript else {}
    assert FOUND.get("kind") == "finder", "the finder agent did not run"
    assert FOUND["ids"] == [] and FOUND["canary"] is False, FOUND["ids"]
    assert "get all -o yaml" in FOUND["shown"] and "geo" in FOUND["shown"]["get all -o yaml"]  # it did look
    for command in PROBES[:7]:  # every file, credential and verbosity probe was refused, saying why
        assert "refused" in FOUND["refused"].get(command, ""), command
    assert sandbox == "bwrap"
    with Session(engine) as s:
        attempt = s.exec(select(Attempt)).one()
    assert attempt.diagnosis_submitted and attempt.diagnosis_passed is False
