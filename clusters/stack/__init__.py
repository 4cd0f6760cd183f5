"""The observability and chaos stack of a real cluster (Chaos Mesh, Prometheus with
kube-state-metrics and node-exporter, Loki with promtail, Jaeger): pinned versions, values, install."""

from clusters.stack.install import StackReport, install_stack
from clusters.stack.releases import MANIFESTS, RELEASES, HelmRelease
from clusters.stack.services import QUERY_SERVICES, ServiceTarget
from core.namespaces import CHAOS_NAMESPACE, STACK_NAMESPACE

__all__ = [
    "CHAOS_NAMESPACE",
    "MANIFESTS",
    "QUERY_SERVICES",
    "RELEASES",
    "STACK_NAMESPACE",
    "HelmRelease",
    "ServiceTarget",
    "StackReport",
    "install_stack",
]
