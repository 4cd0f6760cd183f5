"""Where the stack's query APIs live inside a cluster: the in-cluster Services that the worker
reaches (through `kubectl port-forward` or a configured URL). Names follow what SREGym deploys,
so an agent trained against SREGym finds the same services."""

from __future__ import annotations

from dataclasses import dataclass

from core.namespaces import STACK_NAMESPACE


@dataclass(frozen=True)
class ServiceTarget:
    namespace: str
    service: str
    port: int


QUERY_SERVICES: dict[str, ServiceTarget] = {
    "prometheus": ServiceTarget(STACK_NAMESPACE, "prometheus-server", 80),
    "loki": ServiceTarget(STACK_NAMESPACE, "loki", 3100),
    "jaeger": ServiceTarget(STACK_NAMESPACE, "jaeger-out", 16686),
}
