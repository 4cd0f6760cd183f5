"""kube-system as on a kind cluster: CoreDNS, kube-proxy and kindnet on every node, the control
plane's static pods as mirror pods owned by their Node, all Running and Ready, one Kubernetes
version throughout, and node agents that neither the scheduler places nor taints keep away."""

from __future__ import annotations

from kubesim.api.discovery import SERVER_VERSION
from farm.pytest_plugin import SimClusters


def test_kube_system_holds_what_a_kind_cluster_runs(sim_clusters: SimClusters) -> None:
    cluster = sim_clusters.in_process(seed=4)
    nodes = cluster.nodes.names
    pods = cluster.store.list("pods", "kube-system")
    by_node: dict[str, set[str]] = {}
    for p in pods:
        assert p["status"]["phase"] == "Running", p["metadata"]["name"]
        assert all(s["ready"] for s in p["status"]["containerStatuses"]), p["metadata"]["name"]
        app = p["metadata"]["labels"].get("k8s-app") or p["metadata"]["labels"].get("component")
        by_node.setdefault(p["spec"]["nodeName"], set()).add(app)
    for node in nodes:  # the DaemonSets tolerate the control plane's taint too
        assert {"kube-proxy", "kindnet"} <= by_node[node]
    control_plane = next(n.name for n in cluster.nodes if n.control_plane)
    assert {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} <= by_node[control_plane]
    mirror = {p["metadata"]["name"]: p for p in pods if "kubernetes.io/config.mirror" in p["metadata"].get("annotations", {})}
    assert set(mirror) == {f"{c}-{control_plane}" for c in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")}
    assert all(p["metadata"]["ownerReferences"][0]["kind"] == "Node" for p in mirror.values())
    assert all(p["status"]["podIP"] == p["status"].get("hostIP", p["status"]["podIP"]) for p in mirror.values())
    for ds in cluster.store.list("daemonsets.apps", "kube-system"):
        assert ds["status"]["desiredNumberScheduled"] == ds["status"]["numberReady"] == len(nodes), ds["metadata"]["name"]
    version = SERVER_VERSION["gitVersion"]
    images = {c["image"] for p in pods for c in p["spec"]["containers"]}
    assert {f"registry.k8s.io/{c}:{version}" for c in ("kube-apiserver", "kube-proxy", "kube-scheduler")} <= images
    assert {n["status"]["nodeInfo"]["kubeletVersion"] for n in cluster.store.list("nodes")} == {version}
