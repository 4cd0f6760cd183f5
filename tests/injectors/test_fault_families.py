"""Injectors of the fault families the catalog validates on the emulated cluster, through the real
Kubernetes API against a deployed hotel-reservation: node faults take their NodeFault path there,
container-kill acts once (a trigger), a stressor ends with the pods it was put in, a taint stops
being the cause once the workload tolerates it."""

from __future__ import annotations

import pytest

from clusters.handle import ClusterHandle
from clusters.kube import Kube
from clusters.emulated import SimHandle
from farm.pytest_plugin import SimClusters
from injectors.injector import faults
from injectors.node_faults import SIM_GROUP

NS = "hotel-reservation"


@pytest.fixture
def cluster(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served("hotel-reservation", seed=7, warmup=60)


def pod_of(kube: Kube, service: str) -> dict:
    _, obj = kube.workload(NS, service)
    pods = [p for p in kube.pods_of(NS, obj) if not p["metadata"].get("deletionTimestamp")]
    return sorted(pods, key=lambda p: p["metadata"]["creationTimestamp"])[-1]


@pytest.mark.parametrize(("name", "params", "spec"), [
    ("kubelet-crash", {"service": "geo"}, {"kubeletStopped": True}),
    ("node-failure", {"service": "geo"}, {"nodeDown": True}),
    ("eviction-threshold-misconfigured", {"service": "geo", "memory_available": "90%"},
     {"evictionHard": {"memory.available": "90%"}}),
    ("node-disk-fill", {"service": "geo", "size": "50G"}, {"diskFillBytes": 50 * 2**30}),
])
def test_node_faults_are_node_faults_on_the_emulated_cluster(cluster: ClusterHandle, name: str, params: dict,
                                                             spec: dict) -> None:
    kube = Kube.of(cluster)
    node = pod_of(kube, "geo")["spec"]["nodeName"]
    injector = faults.create(name, **params)
    injection = injector.inject(cluster, NS)
    assert injection.saved["backend"] == "sim" and injection.saved["node"] == node
    obj = kube.request("GET", f"/apis/{SIM_GROUP[0]}/{SIM_GROUP[1]}/{SIM_GROUP[2]}/{injection.saved['nodefault']}")
    assert obj["spec"] == {"nodeName": node, **spec}
    assert injector.is_active(cluster, injection)
    injector.recover(cluster, injection)
    assert not injector.is_active(cluster, injection)
    cluster.advance(20)
    ready = next(c for c in kube.get("Node", "", node)["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"


def test_container_kill_acts_once_like_pod_kill(cluster: ClusterHandle) -> None:
    kube = Kube.of(cluster)
    consul = pod_of(kube, "consul")
    injector = faults.create("container-kill", service="consul", container="consul")
    assert injector.trigger
    injection = injector.inject(cluster, NS)
    assert not injector.is_active(cluster, injection)  # nothing of it lasts but what the restart exposed
    plural = "podchaos"
    items = kube.request("GET", f"/apis/chaos-mesh.org/v1alpha1/namespaces/chaos-mesh/{plural}")["items"]
    assert items == []
    cluster.advance(10)
    after = kube.get("Pod", NS, consul["metadata"]["name"])
    assert after["status"]["containerStatuses"][0]["restartCount"] == 1
    injector.recover(cluster, injection)  # harmless


def test_a_stressor_is_gone_with_the_pods_it_was_put_in(cluster: ClusterHandle) -> None:
    kube = Kube.of(cluster)
    injector = faults.create("stress-memory", service="recommendation", memory_size="64MB")
    injection = injector.inject(cluster, NS)
    cluster.advance(10)
    assert injector.affects(cluster, injection)
    stressed = pod_of(kube, "recommendation")
    kube.delete("Pod", NS, stressed["metadata"]["name"])  # what `rollout restart` amounts to
    cluster.advance(30)
    assert pod_of(kube, "recommendation")["metadata"]["name"] != stressed["metadata"]["name"]
    assert not injector.affects(cluster, injection)
    assert injector.is_active(cluster, injection)  # the experiment (out of the agent's sight) stays
    injector.recover(cluster, injection)


def test_a_taint_stops_being_the_cause_once_the_workload_tolerates_it(cluster: ClusterHandle) -> None:
    kube = Kube.of(cluster)
    injector = faults.create("node-taint-no-toleration", service="mongodb-rate", key="node.kubernetes.io/maintenance",
                             effect="NoExecute")
    injection = injector.inject(cluster, NS)
    node = injection.saved["ref"].split("/")[-1]
    assert injector.is_active(cluster, injection)
    kube.patch("Deployment", NS, "mongodb-rate", {"spec": {"template": {"spec": {"tolerations": [
        {"key": "node.kubernetes.io/maintenance", "operator": "Exists", "effect": "NoExecute"}]}}}})
    assert not injector.is_active(cluster, injection)  # the agent's fix is as good as removing the taint
    injector.recover(cluster, injection)
    assert not (kube.get("Node", "", node)["spec"].get("taints") or [])
