"""A helper of the injector tests (no tests here): where a test pod may be pinned."""

from __future__ import annotations

from clusters.handle import ClusterHandle


def worker_node(cluster: ClusterHandle) -> str:
    """A schedulable node of the cluster (not the control plane)."""
    from clusters.kube import Kube

    nodes = Kube.of(cluster).list("Node")
    names = [n["metadata"]["name"] for n in nodes
             if "node-role.kubernetes.io/control-plane" not in (n["metadata"].get("labels") or {})]
    return sorted(names)[0]
