"""tidb-operator and a TiDB cluster on the emulated cluster, over the real protocols: the cluster as
a process, tidb-cluster deployed by farm.deploy, the kubernetes client for the TidbCluster
and what the operator renders, kubectl for its table, Prometheus's HTTP API for go-ycsb's counters."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from clusters.emulated import SimHandle
from farm.pytest_plugin import SimClusters

NS, OPERATOR_NS = "tidb-cluster", "tidb-admin"
KUBECTL = Path(__file__).resolve().parents[2] / ".tools" / "kubectl-root" / "usr" / "bin" / "kubectl"
pytestmark = [pytest.mark.slow]


@pytest.fixture
def sim(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served("tidb-cluster", seed=5, warmup=120)  # go-ycsb's counters get a history


def tidbcluster(sim: Any) -> dict[str, Any]:
    api = client.CustomObjectsApi(sim.api_client())
    return api.get_namespaced_custom_object("pingcap.com", "v1alpha1", NS, "tidbclusters", "basic")


def patch_tidbcluster(sim: Any, spec: dict[str, Any]) -> None:
    api = client.CustomObjectsApi(sim.api_client())
    api.patch_namespaced_custom_object("pingcap.com", "v1alpha1", NS, "tidbclusters", "basic", {"spec": spec})


def statefulset(sim: Any, name: str) -> dict[str, Any]:
    api = sim.api_client()
    return api.sanitize_for_serialization(client.AppsV1Api(api).read_namespaced_stateful_set(name, NS))


def pods(sim: Any, component: str) -> dict[str, dict[str, Any]]:
    api = sim.api_client()
    listed = client.CoreV1Api(api).list_namespaced_pod(NS, label_selector=f"app.kubernetes.io/component={component}")
    return {p.metadata.name: api.sanitize_for_serialization(p) for p in listed.items}


def ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or [])


def tidbcluster_events(sim: Any) -> list[dict[str, Any]]:
    api = sim.api_client()
    listed = client.CoreV1Api(api).list_namespaced_event(NS, field_selector="involvedObject.name=basic")
    return [api.sanitize_for_serialization(e) for e in listed.items if e.involved_object.kind == "TidbCluster"]


def operator_log(sim: Any) -> str:
    core = client.CoreV1Api(sim.api_client())
    pod = core.list_namespaced_pod(OPERATOR_NS).items[0].metadata.name
    return core.read_namespaced_pod_log(pod, OPERATOR_NS)


def prom(sim: Any, query: str) -> float:
    url = sim.endpoints.prometheus + "/api/v1/query?" + urllib.parse.urlencode({"query": query, "time": sim.now()})
    with urllib.request.urlopen(url, timeout=30) as resp:
        result = json.loads(resp.read())["data"]["result"]
    return float(result[0]["value"][1]) if result else float("nan")


def success(sim: Any, window: str = "1m") -> float:
    return prom(sim, f'sum(rate(ycsb_operations_total{{namespace="{NS}",result="ok"}}[{window}])) / '
                     f'sum(rate(ycsb_operations_total{{namespace="{NS}"}}[{window}]))')


def test_the_operator_renders_statefulsets_services_and_status(sim: Any) -> None:
    tc = tidbcluster(sim)
    owner = {"apiVersion": "pingcap.com/v1alpha1", "kind": "TidbCluster", "name": "basic"}
    for comp, image, replicas in (("pd", "pingcap/pd:v7.5.0", 3), ("tikv", "pingcap/tikv:v7.5.0", 3),
                                  ("tidb", "pingcap/tidb:v7.5.0", 2)):
        sts = statefulset(sim, f"basic-{comp}")
        ref = sts["metadata"]["ownerReferences"][0]
        assert {k: ref[k] for k in owner} == owner and ref["uid"] == tc["metadata"]["uid"] and ref["controller"]
        labels = sts["spec"]["template"]["metadata"]["labels"]
        assert labels == {"app.kubernetes.io/component": comp, "app.kubernetes.io/instance": "basic",
                          "app.kubernetes.io/managed-by": "tidb-operator", "app.kubernetes.io/name": "tidb-cluster"}
        container = sts["spec"]["template"]["spec"]["containers"][0]
        assert container["image"] == image
        assert container["command"] == ["/bin/sh", f"/usr/local/bin/{comp}_start_script.sh"]
        assert sts["spec"]["replicas"] == replicas and sts["status"]["readyReplicas"] == replicas
        assert sts["spec"]["serviceName"] == f"basic-{comp}-peer"
        assert sts["spec"]["podManagementPolicy"] == "Parallel"
        assert sts["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": replicas}}
        assert tc["status"][comp]["phase"] == "Normal"
    tikv = statefulset(sim, "basic-tikv")
    claim = tikv["spec"]["volumeClaimTemplates"][0]
    assert claim["metadata"]["name"] == "tikv"
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    assert tikv["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "2Gi"}
    assert "volumeClaimTemplates" not in statefulset(sim, "basic-tidb")["spec"]
    core = client.CoreV1Api(sim.api_client())
    services = {s.metadata.name: s for s in core.list_namespaced_service(NS).items}
    assert [p.port for p in services["basic-pd"].spec.ports] == [2379]
    assert [p.port for p in services["basic-pd-peer"].spec.ports] == [2380, 2379]
    assert services["basic-pd-peer"].spec.cluster_ip == "None"
    assert services["basic-tikv-peer"].spec.cluster_ip == "None"
    assert [p.port for p in services["basic-tidb"].spec.ports] == [4000, 10080]
    assert [p.port for p in services["basic-discovery"].spec.ports] == [10261, 10262]
    assert sorted(tc["status"]["tikv"]["stores"]) == ["1", "4", "5"]
    assert all(s["state"] == "Up" for s in tc["status"]["tikv"]["stores"].values())
    assert all(m["health"] for m in tc["status"]["pd"]["members"].values())
    ready_cond = next(c for c in tc["status"]["conditions"] if c["type"] == "Ready")
    assert ready_cond["status"] == "True" and ready_cond["message"] == "TiDB cluster is fully up and running"
    reasons = {(e["reason"], e["message"]) for e in tidbcluster_events(sim)}
    assert ("SuccessfulCreate", "create StatefulSet basic-tikv in TidbCluster basic successful") in reasons
    tikv_log = core.read_namespaced_pod_log("basic-tikv-0", NS)
    assert '["TiKV is ready to serve"]' in tikv_log and tikv_log.splitlines()[1].startswith("[20")
    assert success(sim) > 0.99
    assert prom(sim, f'sum(rate(ycsb_operations_total{{namespace="{NS}"}}[1m]))') == pytest.approx(50, rel=0.1)


@pytest.mark.kubectl
@pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl 1.20 is installed by the test setup in .tools")
def test_kubectl_shows_the_tidbcluster_with_its_printer_columns(sim: Any) -> None:
    out = subprocess.run([str(KUBECTL), "--kubeconfig", str(sim.kubeconfig), "-n", NS, "get", "tc"],
                         capture_output=True, text=True, timeout=60,
                         env={"PATH": f"{KUBECTL.parent}:/usr/bin:/bin", "HOME": "/tmp"})
    assert out.returncode == 0, out.stderr
    header, row = out.stdout.splitlines()[:2]
    assert header.split() == ["NAME", "READY", "PD", "STORAGE", "READY", "DESIRE", "TIKV", "STORAGE", "READY",
                              "DESIRE", "TIDB", "READY", "DESIRE", "AGE"]
    assert row.split()[:13] == ["basic", "True", "pingcap/pd:v7.5.0", "1Gi", "3", "3", "pingcap/tikv:v7.5.0", "10Gi",
                                "3", "3", "pingcap/tidb:v7.5.0", "2", "2"]


def test_scaling_tikv_through_the_tidbcluster_adds_a_store_and_tombstones_it_on_the_way_back(sim: Any) -> None:
    patch_tidbcluster(sim, {"tikv": {"replicas": 4}})
    sim.advance(60)
    assert statefulset(sim, "basic-tikv")["spec"]["replicas"] == 4
    assert ready(pods(sim, "tikv")["basic-tikv-3"])
    stores = tidbcluster(sim)["status"]["tikv"]["stores"]
    new = next(sid for sid, s in stores.items() if s["podName"] == "basic-tikv-3")
    assert stores[new]["state"] == "Up"
    assert "scaling out tikv statefulset tidb-cluster/basic-tikv, ordinal: 3 (replicas: 4" in operator_log(sim)

    patch_tidbcluster(sim, {"tikv": {"replicas": 3}})
    sim.advance(90)
    assert statefulset(sim, "basic-tikv")["spec"]["replicas"] == 3
    assert "basic-tikv-3" not in pods(sim, "tikv")
    status = tidbcluster(sim)["status"]["tikv"]
    assert status["tombstoneStores"][new]["state"] == "Tombstone" and new not in status["stores"]
    assert f"tikv scale in: delete store {new} for tikv tidb-cluster/basic-tikv-3 successfully" in operator_log(sim)
    assert success(sim, "2m") > 0.99  # a store that leaves through PD takes no statement with it


def test_without_a_running_operator_pod_nothing_reconciles_the_tidbcluster(sim: Any) -> None:
    apps = client.AppsV1Api(sim.api_client())
    apps.patch_namespaced_deployment_scale("tidb-controller-manager", OPERATOR_NS, {"spec": {"replicas": 0}})
    sim.advance(30)
    patch_tidbcluster(sim, {"tidb": {"replicas": 3}})
    sim.advance(120)
    assert statefulset(sim, "basic-tidb")["spec"]["replicas"] == 2
    assert "basic-tidb-2" not in pods(sim, "tidb")

    apps.patch_namespaced_deployment_scale("tidb-controller-manager", OPERATOR_NS, {"spec": {"replicas": 1}})
    sim.advance(60)
    assert statefulset(sim, "basic-tidb")["spec"]["replicas"] == 3
    assert ready(pods(sim, "tidb")["basic-tidb-2"])


def test_an_invalid_toleration_is_refused_by_the_api_server_and_reported_by_the_operator(sim: Any) -> None:
    before = statefulset(sim, "basic-tikv")["spec"]["template"]
    patch_tidbcluster(sim, {"tikv": {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "tidb",
                                                       "effect": "NoExecuteAlways"}]}})
    sim.advance(60)
    refused = ('StatefulSet.apps "basic-tikv" is invalid: spec.template.spec.tolerations[0].effect: Unsupported '
               'value: "NoExecuteAlways": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"')
    warnings = [e for e in tidbcluster_events(sim) if e["type"] == "Warning"]
    assert [(e["reason"], e["message"]) for e in warnings] == [
        ("FailedUpdate", f"update StatefulSet basic-tikv in TidbCluster basic failed error: {refused}")]
    assert warnings[0]["source"]["component"] == "tidb-controller-manager"
    assert statefulset(sim, "basic-tikv")["spec"]["template"] == before
    log = operator_log(sim)
    assert ("] failed to update TidbCluster: [tidb-cluster/basic]'s StatefulSet: [tidb-cluster/basic-tikv], "
            f"error: {refused}") in log
    assert next(line for line in log.splitlines() if "failed to update" in line)[:1] == "E"
    assert all(ready(p) for p in pods(sim, "tikv").values())


def test_go_ycsb_fails_while_tikv_has_lost_its_majority_and_recovers_after(sim: Any) -> None:
    core = client.CoreV1Api(sim.api_client())
    core.create_namespace({"metadata": {"name": "chaos-mesh"}})
    chaos = client.CustomObjectsApi(sim.api_client())
    chaos.create_namespaced_custom_object("chaos-mesh.org", "v1alpha1", "chaos-mesh", "podchaos", {
        "apiVersion": "chaos-mesh.org/v1alpha1", "kind": "PodChaos", "metadata": {"name": "two-stores"},
        "spec": {"action": "pod-failure", "mode": "all", "duration": "3m",
                 "selector": {"pods": {NS: ["basic-tikv-0", "basic-tikv-1"]}}}})
    sim.advance(90)
    assert success(sim, "1m") < 0.05
    assert prom(sim, f'sum(rate(ycsb_operations_total{{namespace="{NS}",result="error"}}[1m]))') > 1
    stores = tidbcluster(sim)["status"]["tikv"]["stores"]
    assert sorted(s["state"] for s in stores.values()) == ["Disconnected", "Disconnected", "Up"]
    tidb_log = core.read_namespaced_pod_log("basic-tidb-0", NS)
    assert "[tikv:9005]Region is unavailable" in tidb_log
    sim.advance(180)  # the experiment's 3 minutes are over: both stores come back
    assert success(sim, "1m") > 0.99
