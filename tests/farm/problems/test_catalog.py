"""The catalog loads whole, meets its coverage targets, and each kind of malformed definition is
one precise ProblemDefinitionError while the rest of its file still loads."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from core.states import COMPOSITIONS, LAYERS
from farm.problems.catalog import load_catalog
from injectors.injector import faults

GOOD = {
    "id": "t-good",
    "layer": "application",
    "tags": ["env"],
    "description": "frontend's TLS switch on",
    "faults": [{"injector": "env-var-wrong", "params": {"service": "frontend", "var": "TLS", "value": "1"}}],
    "mitigation": [{"kubectl": "set env deployment/frontend TLS-", "wait": 60}],
    "ground_truth": {
        "component": "frontend", "component_kind": "Deployment", "fault_type": "misconfiguration",
        "mechanism": "TLS=1 makes the frontend serve HTTPS to HTTP clients.", "details": {"env_var": "TLS"},
        "affected": [], "symptom": "every request fails",
    },
}


def write(tmp_path: Path, *problems: dict, name: str = "t.yaml", app: str = "hotel-reservation") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"app": app, "problems": list(problems)}))
    return path


def variant(pid: str, **changes: object) -> dict:
    out = yaml.safe_load(yaml.safe_dump(GOOD))
    out["id"] = pid
    for dotted, value in changes.items():
        node = out
        keys = dotted.split("__")
        for k in keys[:-1]:
            node = node[int(k)] if k.isdigit() else node[k]
        last = keys[-1]
        if value is None:
            del node[last]
        else:
            node[last] = value
    return out


def test_the_catalog_loads_without_errors_and_meets_its_targets() -> None:
    catalog = load_catalog()
    assert [str(e) for e in catalog.errors] == []
    problems = catalog.problems
    assert len(problems) >= 130
    layers = Counter(p.layer for p in problems)
    assert all(layers[layer] >= 10 for layer in LAYERS), layers
    comps = Counter(p.composition for p in problems)
    assert all(comps[c] >= 6 for c in COMPOSITIONS if c != "single"), comps
    apps = {p.app for p in problems}
    assert {"hotel-reservation", "social-network", "astronomy-shop", "train-ticket", "tidb-cluster"} <= apps
    assert len({p.id for p in problems}) == len(problems)


def test_every_problem_is_rich_enough_for_the_judge_and_has_a_mitigation() -> None:
    for p in load_catalog().problems:
        gt = p.ground_truth
        if p.no_fault:  # a control: nothing to localise, nothing to fix (test_no_fault.py)
            assert len(gt.mechanism.split()) >= 8 and gt.symptom and not p.faults and not p.mitigation, p.id
            continue
        assert gt.component and gt.component_kind and gt.fault_type, p.id
        assert len(gt.mechanism.split()) >= 12, p.id
        assert gt.details, p.id
        assert gt.symptom, p.id
        assert p.mitigation or p.diagnosis_only, p.id
        if p.composition == "concurrent":
            assert gt.also and all(a.mechanism and a.details for a in gt.also), p.id
        if p.composition == "metastable":
            assert p.oracle.replay_trigger, p.id
            assert any(getattr(faults.factory(f.injector), "trigger", False) for f in p.faults), p.id


def test_injectors_cover_the_issue_list() -> None:
    names = faults.names()
    assert len(names) >= 50
    for needed in ("env-var-missing", "service-wrong-target-port", "configmap-drift", "image-wrong-tag",
                   "probe-misconfigured", "init-container-hang", "sidecar-port-conflict", "memory-limit-too-low",
                   "anti-affinity-deadlock", "node-taint-no-toleration", "pvc-claim-mismatch",
                   "network-policy-block", "dns-config-stale", "db-user-removed", "db-tls-required",
                   "certificate-expired", "secret-rotated-stale-pods", "feature-flag-enabled",
                   "admission-webhook-outage", "rbac-role-rule-dropped", "tidb-replicas-beyond-capacity",
                   "tidb-operator-image-wrong", "fd-exhaustion", "pid-exhaustion", "node-clock-skew", "disk-full",
                   "kernel-fault", "kubelet-crash", "eviction-threshold-misconfigured",
                   "disk-latent-sector-errors", "disk-silent-corruption", "nic-packet-corruption", "nic-packet-loss",
                   "cpu-throttling", "node-failure", "load-spike", "retry-amplification", "gc-pressure"):
        assert needed in names


@pytest.mark.parametrize(
    ("bad", "field", "reason"),
    [
        (variant("t-unknown-injector", faults__0__injector="no-such-fault"), "faults[0].injector", "unknown injector"),
        (variant("t-missing-mechanism", ground_truth__mechanism=None), "ground_truth.mechanism", "Field required"),
        (variant("t-bad-param-type", faults__0__params={"service": "frontend", "var": "TLS", "value": ["1"]}),
         "faults[0].params.value", "valid string"),
        (variant("t-unknown-param", faults__0__params={"service": "frontend", "var": "TLS", "value": "1", "nope": 1}),
         "faults[0].params.nope", "Extra inputs"),
        (variant("t-bad-layer", layer="network"), "layer", "Input should be"),
        (variant("t-no-faults", faults=[]), "faults", "at least 1"),
        (variant("t-recover", mitigation=[{"recover": 0}]), "mitigation[0].recover", "recover is the farm's own"),
        (variant("t-no-fix", mitigation=[]), "problem", "needs a reference mitigation (or diagnosis_only"),
        (variant("t-unknown-noise", noises=[{"kind": "meteor"}]), "noises[0].kind", "unknown noise"),
        (variant("t-shell", mitigation=[{"kubectl": "get pods | grep geo"}]), "mitigation[0].kubectl", "no shell"),
        (variant("t-unknown-app", app="pet-store"), "app", "unknown application"),
        (variant("t-metastable-no-trigger", composition="metastable"), "faults", "trigger"),
    ],
)
def test_a_malformed_definition_is_one_precise_error(tmp_path: Path, bad: dict, field: str, reason: str) -> None:
    path = write(tmp_path, GOOD, bad)
    catalog = load_catalog(files=[path])
    assert [p.id for p in catalog.problems] == ["t-good"]  # the rest of the file still loads
    assert len(catalog.errors) == 1
    err = catalog.errors[0]
    assert (err.path, err.problem, err.field) == (str(path), bad["id"], field)
    assert reason in err.reason
    assert str(path) in str(err) and bad["id"] in str(err) and field in str(err)


def test_a_duplicate_id_names_both_files(tmp_path: Path) -> None:
    first = write(tmp_path, GOOD, name="a.yaml")
    second = write(tmp_path, GOOD, variant("t-other"), name="b.yaml")
    catalog = load_catalog(files=[first, second])
    assert sorted(p.id for p in catalog.problems) == ["t-good", "t-other"]
    (err,) = catalog.errors
    assert (err.path, err.problem, err.field) == (str(second), "t-good", "id")
    assert str(first) in err.reason


def test_a_broken_file_does_not_stop_the_others(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("problems: [\n  - id: x\n")
    good = write(tmp_path, GOOD, name="good.yaml")
    catalog = load_catalog(files=[broken, good])
    assert [p.id for p in catalog.problems] == ["t-good"]
    (err,) = catalog.errors
    assert err.path == str(broken) and err.field == "yaml"


def test_select_filters_by_layer_tag_and_app() -> None:
    catalog = load_catalog()
    hw = catalog.select(layers=["hardware"])
    assert hw and all(p.layer == "hardware" for p in hw)
    meta = catalog.select(tags=["metastable"], apps=["hotel-reservation"])
    assert meta and all("metastable" in p.tags and p.app == "hotel-reservation" for p in meta)
    assert [p.id for p in catalog.select(ids=["hr-geo-network-delay"])] == ["hr-geo-network-delay"]
    with pytest.raises(Exception, match="unknown problem"):
        catalog.get("no-such-problem")


def test_every_reference_mitigation_is_the_agents_own() -> None:
    """No reference mitigation takes a farm step (`recover`): each is kubectl through the agent's
    tool; a problem without a fix in the agent's scope says so (diagnosis_only, no steps)."""
    catalog = load_catalog()
    assert not catalog.errors
    privileged = [p.id for p in catalog.problems if any(s.recover is not None for s in p.mitigation)]
    assert privileged == []
    for p in catalog.problems:
        if p.diagnosis_only or p.no_fault:
            assert not p.mitigation, p.id
        else:
            assert p.mitigation and all(s.kubectl for s in p.mitigation), p.id


def test_few_problems_are_diagnosis_only() -> None:
    catalog = load_catalog()
    diagnosis_only = [p.id for p in catalog.problems if p.diagnosis_only]
    assert len(diagnosis_only) <= len(catalog.problems) // 10, diagnosis_only
