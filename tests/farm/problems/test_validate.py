"""Validation: the symptom comparison and the leak check on the real API (stand-in cluster), and
the whole catalog of modelled applications on the full emulated cluster (slow)."""

from __future__ import annotations

import pytest

from clusters.base import ClusterHandle
from farm.problems.catalog import load_catalog
from farm.problems.validate import AgentView, leaks, symptom_differences
from injectors.kube import Kube

QUIET = {"pods": {"geo-1": {"phase": "Running", "ready": True, "restarts": 0, "waiting": []}},
         "warnings": [], "alerts": [], "error_lines": 2, "error_spans": 0}


def test_symptom_differences_name_what_got_worse() -> None:
    assert symptom_differences(QUIET, QUIET) == []
    crash = {**QUIET, "pods": {"geo-1": {"phase": "Running", "ready": False, "restarts": 4,
                                         "waiting": ["CrashLoopBackOff"]}}}
    assert symptom_differences(QUIET, crash) == ["pod geo-1 waiting: CrashLoopBackOff", "1 fewer ready pods"]
    alerts = {**QUIET, "alerts": ["KubePodCrashLooping"], "error_lines": 40, "warnings": ["BackOff:geo-1"]}
    found = symptom_differences(QUIET, alerts)
    assert "firing alerts: KubePodCrashLooping" in found and any("error log lines" in f for f in found)
    assert any("warning events" in f for f in found)
    gone = {**QUIET, "pods": {}}
    assert symptom_differences(QUIET, gone) == ["1 fewer ready pods (geo-1 gone)"]
    # A routine rollout (the pod replaced by a ready one) is not a symptom.
    rolled = {**QUIET, "pods": {"geo-2": {"phase": "Running", "ready": True, "restarts": 0, "waiting": []}}}
    assert symptom_differences(QUIET, rolled) == []


def test_leak_check_sees_what_the_agent_sees(api_cluster: ClusterHandle) -> None:
    kube = Kube(api_cluster)
    ns = "leaky"
    kube.ensure_namespace(ns)
    problem = load_catalog().get("hr-geo-network-delay")
    view = AgentView(api_cluster, ns, "frontend")
    try:
        assert leaks(view, problem) == []
        kube.create("ConfigMap", ns, {"metadata": {"name": "settings", "labels": {"chaos-experiment": "delay"}}})
        found = leaks(view, problem)
        assert found == ["configmaps/settings: 'chaos-experiment' contains 'chaos'"]
        kube.delete("ConfigMap", ns, "settings")
        kube.create("ConfigMap", ns, {"metadata": {"name": "x", "annotations": {"note": "hr-geo-network-delay"}}})
        assert any("hr-geo-network-delay" in f for f in leaks(view, problem))
    finally:
        view.close()


# Applications the emulated cluster models; every problem of theirs that needs no real cluster must validate.
MODELLED = ["hotel-reservation", "astronomy-shop", "social-network"]
PROBLEMS = [p.id for p in load_catalog().select(apps=MODELLED) if not p.needs_real_cluster]


@pytest.fixture(scope="module")
def validator(tmp_path_factory):  # type: ignore[no-untyped-def]
    from clusters.base import open_cluster
    from farm.problems.validate import Validator

    with open_cluster("sim", seed=1, workdir=tmp_path_factory.mktemp("validate")) as cluster:
        with Validator(cluster) as v:
            yield v


@pytest.mark.slow
@pytest.mark.parametrize("problem_id", PROBLEMS)
def test_every_modelled_problem_validates_on_the_emulated_cluster(validator, problem_id: str) -> None:  # type: ignore[no-untyped-def]
    result = validator.validate(load_catalog().get(problem_id))
    failed = [f"{s.name}: {s.detail[:300]}" for s in result.steps if not s.ok]
    assert result.passed, failed
