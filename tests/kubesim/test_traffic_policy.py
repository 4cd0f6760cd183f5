"""A Service's internalTrafficPolicy as kube-proxy applies it: Local sends a caller only to
endpoints on its own node and drops the connection (i/o timeout, no refusal) when there is none
there, while the endpoints stay populated; Cluster reaches every endpoint."""

from __future__ import annotations

from kubesim.cluster import SimCluster
from farm.pytest_plugin import SimClusters

NS = "demo"


def pinned(name: str, node: str) -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "nodeSelector": {"kubernetes.io/hostname": node},
                         "containers": [{"name": "web", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}]}}}}


def pod_of(cluster: SimCluster, app: str) -> dict:
    (pod,) = [p for p in cluster.store.list("pods", NS) if p["metadata"]["labels"].get("app") == app]
    return pod


def test_internal_traffic_policy_local_drops_callers_without_a_local_endpoint(sim_clusters: SimClusters) -> None:
    cluster = sim_clusters.in_process(seed=4)
    cluster.apply([
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        pinned("backend", "sim-worker"), pinned("near", "sim-worker"), pinned("far", "sim-worker2"),
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "backend", "namespace": NS},
         "spec": {"selector": {"app": "backend"}, "ports": [{"port": 80, "targetPort": 80}]}},
    ])
    cluster.advance(30)
    host = f"backend.{NS}.svc.cluster.local"
    assert cluster.network.connect(pod_of(cluster, "far"), host, 80).ok_share == 1.0
    svc = cluster.store.get("services", NS, "backend")

    def local(o: dict) -> None:
        o["spec"]["internalTrafficPolicy"] = "Local"
    cluster.store.mutate("services", NS, "backend", local)
    cluster.advance(5)
    far = cluster.network.connect(pod_of(cluster, "far"), host, 80)
    assert far.ok_share == 0.0 and far.error == f"dial tcp {svc['spec']['clusterIP']}:80: i/o timeout"
    near = cluster.network.connect(pod_of(cluster, "near"), host, 80)
    assert near.ok_share == 1.0 and [t.pod["spec"]["nodeName"] for t in near.targets] == ["sim-worker"]
    ep = cluster.store.get("endpoints", NS, "backend")
    assert [a["nodeName"] for s in ep["subsets"] for a in s["addresses"]] == ["sim-worker"]  # still populated
