"""Cluster providers (sim, kind, eks) behind one handle: Kubernetes API access, observability
endpoints, a clock, credentials for the agent, reset. `kubesim` is the emulated cluster."""

from clusters.handle import (
    ClusterHandle,
    ClusterHealth,
    ClusterProvider,
    Endpoints,
    open_cluster,
    parse_cluster_ref,
    providers,
)

__all__ = [
    "ClusterHandle",
    "ClusterHealth",
    "ClusterProvider",
    "Endpoints",
    "open_cluster",
    "parse_cluster_ref",
    "providers",
]
