"""The scripted incident session (kubesim/sre_session.py) against hotel-reservation on the
emulated cluster as a process: 67 SRE commands (kubectl as a real process, PromQL, LogQL, the
Loki tail WebSocket, Jaeger) pass with kubectl 1.20 and, where it is installed, 1.33."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusters.emulated import SimHandle
from kubesim.sre_session import INCIDENT, SESSION, SessionRunner, Step, has
from farm.pytest_plugin import SimClusters
from tests.kubesim.apptools import KUBECTL, NEEDS_KUBECTL

KUBECTL_133 = Path(__file__).resolve().parents[2] / ".tools" / "kubectl-v33" / "kubectl"
pytestmark = NEEDS_KUBECTL


@pytest.fixture
def sim(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served("hotel-reservation", seed=5)


@pytest.mark.parametrize("kubectl", [
    KUBECTL,
    pytest.param(KUBECTL_133, marks=pytest.mark.skipif(not KUBECTL_133.exists(), reason="kubectl 1.33 not in .tools")),
], ids=["kubectl-1.20", "kubectl-1.33"])
def test_the_incident_session_passes(sim: object, kubectl: Path) -> None:
    assert sum(s.tool != "advance" for s in SESSION) >= 40
    results = SessionRunner(sim, kubectl).run(INCIDENT + SESSION)
    failed = [f"{r.step.tool} {r.step.command}: {r.detail[:300]}" for r in results if not r.ok]
    assert failed == []


def test_a_step_fails_when_the_cluster_does_not_show_what_it_checks(sim: object) -> None:
    # before the incident nothing fails, so the session's symptom checks must not pass
    runner = SessionRunner(sim, KUBECTL)
    symptom = next(s for s in SESSION if s.why == "clients fail")
    assert runner.run_step(symptom).ok is False
    env_check = next(s for s in SESSION if s.command.startswith("rollout history deployment/frontend --revision"))
    assert runner.run_step(env_check).ok is False
    bad = runner.run_step(Step("kubectl", "get deploy no-such-deployment", has("no-such-deployment")))
    assert not bad.ok and "NotFound" in bad.detail
