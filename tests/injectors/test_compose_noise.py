"""ProblemInjection (order, per-fault checks, recovery, trigger replay, resolved ground truth) and
NoiseRunner (seeded schedule driven by the cluster clock, every trace removed on stop), against the
emulated cluster's real API."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.handle import ClusterHandle
from clusters.kube import Kube
from core.problem import NoiseSpec
from farm.problems.catalog import parse_problem
from farm.pytest_plugin import SimClusters
from injectors.compose import NoiseRunner, ProblemInjection
from injectors.fault import CHAOS_NAMESPACE
from tests.injectors.nodes import worker_node

NS = "shop"


def dep(name: str, replicas: int = 1) -> dict[str, Any]:
    labels = {"app": name}
    return {"metadata": {"name": name}, "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {
        "metadata": {"labels": labels}, "spec": {"containers": [{"name": name, "image": "shop:1", "ports": [{"containerPort": 8080}],
                                                                  "env": [{"name": "RETRIES", "value": "2"}]}]}}}}


@pytest.fixture(scope="module")
def shop(sim_clusters: SimClusters) -> ClusterHandle:
    api_cluster = sim_clusters.served(seed=3)
    kube = Kube.of(api_cluster)
    kube.ensure_namespace(NS)
    for name in ("cart", "checkout", "ads", "load-generator"):
        kube.create("Deployment", NS, dep(name))
        kube.create("Pod", NS, {"metadata": {"name": f"{name}-5c7d-x1", "labels": {"app": name}},
                                "spec": {"nodeName": worker_node(api_cluster), "containers": [{"name": name, "image": "shop:1"}]}})
    return api_cluster


def problem(**extra: Any):  # type: ignore[no-untyped-def]
    data = {
        "id": "t-meta", "app": "hotel-reservation", "layer": "application", "composition": "metastable",
        "description": "d", "oracle": {"replay_trigger": True},
        "faults": [{"injector": "load-spike", "params": {"load_generator": "load-generator", "duration_seconds": 20}},
                   {"injector": "retry-amplification", "params": {"service": "checkout", "settings": {"RETRIES": "9"}}}],
        "mitigation": [{"kubectl": "set env deployment/checkout RETRIES=2"}],
        "ground_truth": {"component": "checkout", "component_kind": "Deployment", "fault_type": "retry-storm",
                         "mechanism": "m", "details": {"RETRIES": "9"}, "symptom": "s"},
    }
    data.update(extra)
    return parse_problem(data, None)


def env(kube: Kube, name: str) -> list[dict[str, str]]:
    return kube.get("Deployment", NS, name)["spec"]["template"]["spec"]["containers"][0]["env"]


def test_sustaining_faults_go_in_before_the_trigger_and_come_out_in_reverse(shop: ClusterHandle) -> None:
    kube = Kube.of(shop)
    pi = ProblemInjection(problem())
    records = pi.inject(shop, NS)
    # Reported in the problem's order; the retry policy was in place when the spike ran.
    assert [r.injector for r in records] == ["load-spike", "retry-amplification"]
    assert records[1].injected_at <= records[0].injected_at
    assert env(kube, "checkout") == [{"name": "RETRIES", "value": "9"}]
    assert pi.active(shop) == [False, True]  # the trigger is over; the loop's cause is in place
    t0 = shop.now()
    pi.replay_trigger(shop, NS, 15)
    assert shop.now() - t0 >= 15
    assert kube.get("Deployment", NS, "load-generator")["spec"]["replicas"] == 1
    pi.recover(shop)
    assert env(kube, "checkout") == [{"name": "RETRIES", "value": "2"}]
    assert pi.injectors == []


def test_a_failed_injection_undoes_what_went_in(shop: ClusterHandle) -> None:
    kube = Kube.of(shop)
    bad = problem(composition="concurrent", oracle={}, faults=[
        {"injector": "env-var-wrong", "params": {"service": "cart", "var": "RETRIES", "value": "7"}},
        {"injector": "env-var-wrong", "params": {"service": "no-such-service", "var": "X", "value": "1"}}],
        ground_truth={"component": "cart", "component_kind": "Deployment", "fault_type": "x", "mechanism": "m",
                      "details": {"a": "b"}, "symptom": "s", "also": [
                          {"component": "x", "component_kind": "Deployment", "fault_type": "x", "mechanism": "m",
                           "details": {"a": "b"}, "symptom": "s"}]})
    from core.errors import InjectionError

    with pytest.raises(InjectionError, match="no-such-service"):
        ProblemInjection(bad).inject(shop, NS)
    assert env(kube, "cart") == [{"name": "RETRIES", "value": "2"}]


def test_ground_truth_names_the_node_the_fault_landed_on(shop: ClusterHandle) -> None:
    p = problem(composition="single", oracle={}, layer="hardware",
                faults=[{"injector": "nic-packet-loss", "params": {"service": "ads", "percent": 20}}],
                mitigation=[{"kubectl": "cordon {node}"}],
                ground_truth={"component": "node/{node}", "component_kind": "Node", "fault_type": "network-hardware",
                              "mechanism": "The NIC of {node} drops packets.", "details": {"node": "{node}"}, "symptom": "s"})
    pi = ProblemInjection(p)
    pi.inject(shop, NS)
    try:
        truth = pi.ground_truth()
        node = worker_node(shop)
        assert truth.component == f"node/{node}" and truth.details["node"] == node
        assert "{node}" in p.ground_truth.mechanism  # the catalog's own copy is untouched
    finally:
        pi.recover(shop)


def chaos_names(cluster: ClusterHandle) -> list[str]:
    from kubernetes import client

    api = client.CustomObjectsApi(cluster.api_client())
    out = []
    for plural in ("networkchaos", "stresschaos"):
        out += [i["metadata"]["name"] for i in
                api.list_namespaced_custom_object("chaos-mesh.org", "v1alpha1", CHAOS_NAMESPACE, plural)["items"]]
    return out


def test_noise_follows_the_cluster_clock_and_stop_removes_every_trace(shop: ClusterHandle) -> None:
    kube = Kube.of(shop)
    Kube.of(shop).ensure_namespace(CHAOS_NAMESPACE)
    specs = [NoiseSpec(kind="latency-burst", intensity=1.0, params={"targets": ["ads"], "window_seconds": 100}),
             NoiseSpec(kind="failing-cronjob", params={"job_namespace": "ops-batch"}),
             NoiseSpec(kind="pod-kill", intensity=1.0, params={"targets": ["ads"], "window_seconds": 100})]
    runner = NoiseRunner(specs, seed=7)
    runner.start(shop, NS)
    plan = relative_plan(runner)
    assert kube.find("CronJob", "ops-batch", "nightly-report") is not None  # fires at start
    seen_chaos = set()
    for _ in range(12):  # time passes only through advance; events fire at their own times
        shop.advance(10)
        seen_chaos |= set(chaos_names(shop))
    assert seen_chaos, "a latency burst should have run within its window"
    assert not runner.errors
    runner.stop(shop)
    assert [r["injector"] for r in runner.records()] == ["noise:latency-burst", "noise:failing-cronjob", "noise:pod-kill"]
    assert chaos_names(shop) == []
    assert kube.find("Namespace", "", "ops-batch") is None
    assert "advance" not in vars(shop)  # the clock hook is gone
    # The same seed plans the same disturbances (relative to its start); another seed does not.
    for seed, same in ((7, True), (8, False)):
        again = NoiseRunner(specs, seed=seed)
        again.start(shop, NS)
        replan = relative_plan(again)
        again.stop(shop)
        assert (replan == plan) is same


def relative_plan(runner: NoiseRunner) -> list[tuple[str, float, float, str]]:
    return [(inj.injector, round(e["at"] - inj.injected_at, 6), round(e["until"] - inj.injected_at, 6), e["target"])
            for _, inj in runner.running for e in inj.saved["events"]]
