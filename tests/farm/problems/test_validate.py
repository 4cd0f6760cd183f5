"""Validation: the symptom comparison and the leak check on the real API (stand-in cluster), and
harmless changes that must not validate. The whole catalog on the full emulated cluster (slow) is in
test_catalog_validates_kubectl_1_20.py and _1_33.py (catalog_validation.py)."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.handle import ClusterHandle
from clusters.kube import Kube, Obj
from core.problem import Problem
from farm.problems.catalog import load_catalog
from farm.problems.validate import (
    AgentView,
    Evidence,
    is_error_line,
    leaks,
    oracle_blind_to,
    symptom_differences,
    symptom_evidence,
)
from injectors.injector import Injection, faults
from injectors.fault import Fault, Mutation, WorkloadParams
from injectors.objects import Ref

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


def test_latency_needs_a_baseline_with_traces() -> None:
    # After a restore the baseline window once held no traces: "39 ms (was 0 ms)" is no symptom.
    empty = {**QUIET, "p95_ms": 0.0, "traces": 0}
    after = {**QUIET, "p95_ms": 39.0, "traces": 96}
    assert symptom_differences(empty, after) == []
    assert symptom_differences({**QUIET, "p95_ms": 39.0, "traces": 3}, {**after, "p95_ms": 400.0}) == []
    assert symptom_differences({**QUIET, "p95_ms": 39.0, "traces": 96}, {**after, "p95_ms": 400.0}) == [
        "p95 latency 400 ms (was 39 ms)"]


def test_alerts_of_normal_load_are_no_symptom() -> None:
    assert symptom_differences(QUIET, {**QUIET, "alerts": ["HighRequestRate", "Watchdog"]}) == []
    assert symptom_differences(QUIET, {**QUIET, "alerts": ["HighRequestRate", "KubePodNotReady"]}) == [
        "firing alerts: KubePodNotReady"]


def test_error_lines_are_error_reports() -> None:
    # flagd's init container prints its flag file on every restart: words, not errors.
    assert not is_error_line('      "description": "Fail ad service",')
    assert not is_error_line('    "adFailure": {')
    assert not is_error_line('{"level":"info","msg":"configuration updated","flags":["adFailure","cartFailure"]}')
    assert not is_error_line("2026-01-05T09:00:00Z INF cmd/geo/main.go:40 > retry policy: on failure")
    assert is_error_line('{"level":"error","msg":"PlaceOrder: EmptyCart failed: Wasn\'t able to connect to redis"}')
    assert is_error_line("2026-01-05T09:00:00Z ERR services/search/server.go:171 > rate GetRates failed")
    assert is_error_line('panic: environment variable "MONGO_URL" not set')
    assert is_error_line('{"t":{"$date":"2026-01-05T09:00:00Z"},"s":"E","c":"STORAGE","msg":"WiredTiger error"}')


def test_a_container_burning_cores_is_a_symptom() -> None:
    before = {**QUIET, "cpu": {"ad-1/ad": 0.02, "cart-1/cart": 0.3}}
    # adHighCpu: four spinning threads; kubectl top shows the cores, nothing else changes.
    assert symptom_differences(before, {**before, "cpu": {"ad-1/ad": 1.9, "cart-1/cart": 0.3}}) == [
        "container ad-1/ad uses 1.90 CPU cores (was 0.02)"]
    # Busier but not a jump (under +0.5 cores, or under threefold): load, not a fault.
    assert symptom_differences(before, {**before, "cpu": {"ad-1/ad": 0.4, "cart-1/cart": 0.85}}) == []
    # A container with no earlier reading (a new pod) has nothing to compare with.
    assert symptom_differences(before, {**before, "cpu": {"ad-2/ad": 1.9}}) == []


def test_the_fault_check_alone_is_enough_only_for_latent_faults() -> None:
    only_fault = {"traffic": True, "client_success_rate": True, "workloads_ready": True, "fault_resolved": False}
    crash = symptom_evidence(QUIET, {**QUIET, "pods": {"geo-1": {"phase": "Running", "ready": False, "restarts": 4,
                                                                  "waiting": ["CrashLoopBackOff"]}}})
    assert oracle_blind_to(only_fault, crash) == ["pod geo-1 waiting: CrashLoopBackOff", "1 fewer ready pods"]
    assert oracle_blind_to({**only_fault, "workloads_ready": False}, crash) == []
    latent = [Evidence("warning events: FailedMount:geo-1", False), Evidence("40 error log lines (was 2)", False)]
    assert oracle_blind_to(only_fault, latent) == []
    # Clients below the problem's own threshold are the oracle's to see; above it, they are not.
    dip = {**QUIET, "success": 0.90}
    assert oracle_blind_to(only_fault, symptom_evidence({**QUIET, "success": 1.0}, dip, 0.95))
    assert not oracle_blind_to(only_fault, symptom_evidence({**QUIET, "success": 1.0}, dip, 0.85))


def test_leak_check_sees_what_the_agent_sees(sim_api: ClusterHandle) -> None:
    kube = Kube.of(sim_api)
    ns = "leaky"
    kube.ensure_namespace(ns)
    problem = load_catalog().get("hr-geo-network-delay")
    view = AgentView(sim_api, ns, "frontend")
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


def test_leak_check_catches_an_agent_that_reaches_the_farm_namespace(sim_api: ClusterHandle) -> None:
    from clusters.access import AGENT_ACCOUNT
    from injectors.fault import CHAOS_NAMESPACE

    kube = Kube.of(sim_api)
    ns = "overreach"
    kube.ensure_namespace(ns)
    kube.ensure_namespace(CHAOS_NAMESPACE)
    view = AgentView(sim_api, ns, "frontend")
    problem = load_catalog().get("hr-geo-network-delay")
    try:
        kube.create("Pod", CHAOS_NAMESPACE, {"metadata": {"name": "helper"},
                                             "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
        assert leaks(view, problem) == []  # the agent's role stops at its namespace
        kube.create("Role", CHAOS_NAMESPACE, {"metadata": {"name": "peek"}, "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]})
        kube.create("RoleBinding", CHAOS_NAMESPACE, {
            "metadata": {"name": "peek"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                      "name": "peek"},
            "subjects": [{"kind": "ServiceAccount", "name": AGENT_ACCOUNT, "namespace": ns}]})
        assert leaks(view, problem) == [f"the agent can list objects in {CHAOS_NAMESPACE}: pods/helper"]
    finally:
        view.close()
        for kind in ("RoleBinding", "Role", "Pod"):
            kube.delete(kind, CHAOS_NAMESPACE, "peek" if kind != "Pod" else "helper")


# -- harmless changes must not validate -----------------------------------------------------
# Each "fault" below changes nothing the application uses; its own check still says "in place",
# which alone once made oracle_fails pass. Validation must stop at symptom_visible.


class _Annotate(Mutation):
    """An annotation on the deployment (no rollout)."""

    Params = WorkloadParams

    def path(self, obj: Obj) -> list[Any]:
        return ["metadata", "annotations", "example.com/owner"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        return "team-search"


class _ScaleToSame(Fault):
    """`kubectl scale --replicas=N` to the count it already has."""

    Params = WorkloadParams

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        kube = Kube.of(cluster)
        kind, obj = kube.workload(namespace, self.p.service, None)
        ref = Ref(kind, namespace, obj["metadata"]["name"])
        replicas = int(obj["spec"].get("replicas", 1))
        kube.request("PATCH", kube.path(kind, namespace, ref.name) + "/scale", {"spec": {"replicas": replicas}},
                     "application/merge-patch+json")
        return self.record(cluster, namespace, touched=[ref], ref=str(ref), replicas=replicas)

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        pass

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        ref = Ref.parse(injection.saved["ref"])
        return int(Kube.of(cluster).get(ref.kind, ref.namespace, ref.name)["spec"].get("replicas", 1)) == \
            injection.saved["replicas"]


def _harmless(app: str, service: str, injector: str, **params: Any) -> Problem:
    return Problem.model_validate({
        "id": f"harmless-{injector}", "app": app, "layer": "application", "description": "changes nothing used",
        "faults": [{"injector": injector, "params": {"service": service, **params}}],
        "mitigation": [{"recover": 0, "wait": 30}],
        "ground_truth": {"component": service, "component_kind": "Deployment", "fault_type": "none",
                         "mechanism": "none", "details": {}, "symptom": "none"}})


HARMLESS = [
    ("astronomy-shop", "ad", "env-var-wrong", {"var": "HARMLESS_UNUSED", "value": "1"}),
    ("astronomy-shop", "ad", "test-annotate", {}),
    ("astronomy-shop", "ad", "test-scale-to-same", {}),
    ("hotel-reservation", "geo", "env-var-wrong", {"var": "HARMLESS_UNUSED", "value": "1"}),
    ("hotel-reservation", "search", "test-annotate", {}),
    ("hotel-reservation", "search", "test-scale-to-same", {}),
]


@pytest.mark.slow
@pytest.mark.parametrize(("app", "service", "injector", "params"), HARMLESS,
                         ids=[f"{a}-{s}-{i}" for a, s, i, _ in HARMLESS])
def test_a_harmless_change_fails_at_symptom_visible(validator, monkeypatch: pytest.MonkeyPatch, app: str,  # type: ignore[no-untyped-def]
                                                    service: str, injector: str, params: dict[str, Any]) -> None:
    faults.names()  # the built-in injectors first
    monkeypatch.setitem(faults._factories, "test-annotate", _Annotate)
    monkeypatch.setitem(faults._factories, "test-scale-to-same", _ScaleToSame)
    result = validator.validate(_harmless(app, service, injector, **params))
    failed = next((s for s in result.steps if not s.ok), None)
    assert not result.passed
    assert failed is not None and failed.name == "symptom_visible", [f"{s.name}: {s.detail[:200]}" for s in result.steps]
    assert result.steps[-1].name == "recover_clean" and result.steps[-1].ok


@pytest.mark.slow
@pytest.mark.parametrize("problem_id", ["as-cart-valkey-addr-missing", "hr-geo-image-tag-wrong"])
def test_a_real_fault_still_validates(validator, problem_id: str) -> None:  # type: ignore[no-untyped-def]
    result = validator.validate(load_catalog().get(problem_id))
    assert result.passed, [f"{s.name}: {s.detail[:300]}" for s in result.steps if not s.ok]


@pytest.mark.slow
def test_non_fixes_are_generated_from_the_faulted_workload_and_fail(validator) -> None:  # type: ignore[no-untyped-def]
    result = validator.validate(load_catalog().get("hr-geo-image-tag-wrong"))
    (step,) = [s for s in result.steps if s.name == "non_fixes"]
    assert step.ok, step.detail
    for name in ("scale geo to zero", "delete deployment geo", "pause geo with its previous pods serving",
                 "rename geo's container", "stop the load generator", "reorder the lists of frontend, geo",
                 "a second Service frontend-direct and an own wrk2-load x3 against it"):
        assert name in step.detail, step.detail


def _check_by_list_position(monkeypatch: pytest.MonkeyPatch) -> None:
    """The targetPort check as it was: the port at the index it was planted at."""
    from injectors.app_config import ServiceWrongTargetPort
    from injectors.fault import Mutation

    monkeypatch.setattr(ServiceWrongTargetPort, "is_active", Mutation.is_active)


def _client_figure_over_the_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client side as it was: every pod of the namespace that exports the metric."""
    import farm.oracles.mitigation

    monkeypatch.setattr(farm.oracles.mitigation, "scoped", lambda query, pods: query)


@pytest.mark.slow
@pytest.mark.parametrize(("weaken", "caught"), [
    (_check_by_list_position, "reorder the lists of frontend (the fault's own check lost the fault)"),
    (_client_figure_over_the_namespace,
     "own wrk2-load x3 against it (lifted the client success rate to 0.750; 0.000 without it)"),
], ids=["fault-check-by-list-position", "client-figure-over-the-namespace"])
def test_an_oracle_issue_23_fools_fails_validation(validator, monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
                                                  weaken: Any, caught: str) -> None:
    """Each hole of issue 23, put back, is caught by the non-fix made for it."""
    weaken(monkeypatch)
    result = validator.validate(load_catalog().get("hr-frontend-service-targetport-wrong"))
    failed = next(s for s in result.steps if not s.ok)
    assert failed.name == "non_fixes" and caught in failed.detail, failed


@pytest.mark.slow
def test_an_oracle_that_passes_a_non_fix_fails_validation(validator, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """The non-fix step is a check that can fail: an oracle fooled by silencing is caught."""
    from core.records import MitigationVerdict
    from farm.oracles.mitigation import MitigationOracle

    real = MitigationOracle.evaluate

    def fooled(self, cluster, namespace, baseline, injection, fail_fast=False):  # type: ignore[no-untyped-def]
        if fail_fast:
            return MitigationVerdict(passed=True, checks={"everything": True})
        return real(self, cluster, namespace, baseline, injection)

    monkeypatch.setattr(MitigationOracle, "evaluate", fooled)
    result = validator.validate(load_catalog().get("hr-geo-network-delay"))
    failed = next(s for s in result.steps if not s.ok)
    assert failed.name == "non_fixes" and "scale geo to zero" in failed.detail, failed

