"""The cluster handle: everything above `clusters/` reaches a cluster only through it, so the
emulated cluster and kind/EKS share every line of deploy, injectors, agent tools and oracles.

A provider turns a reference (`sim`, `sim:NAME`, `kind:NAME`, `eks:NAME`) into an open handle.
The handle gives
- `api_client()`: a kubernetes.client.ApiClient with the farm's own (admin) credentials;
- `agent_kubeconfig(namespace)`: a kubeconfig file whose token can only reach that namespace
  (no Chaos Mesh resources, no farm namespaces), for the agent's kubectl;
- `endpoints`: base URLs of the Kubernetes API, Prometheus, Loki and Jaeger query APIs;
- `now()` / `advance(seconds)`: the cluster's clock (virtual on the emulated cluster, where
  `advance` runs controllers and workload; wall time on real clusters, where it sleeps);
- `reset()`: back to the state right after `open` (no application, no chaos), between trials;
- `health()` and `snapshot()`: for `farm cluster list` and the per-attempt artifact.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from core.errors import ConfigurationError
from core.registry import Registry


class Endpoints(BaseModel):
    """Base URLs, without a trailing slash. `control` exists on the emulated cluster only."""

    kubernetes: str
    prometheus: str
    loki: str
    jaeger: str
    control: str | None = None


class ClusterHealth(BaseModel):
    ok: bool
    detail: str = ""


class ClusterHandle(abc.ABC):
    """An open cluster owned by one worker."""

    provider: str  # "sim", "kind", "eks"
    name: str
    endpoints: Endpoints
    kubeconfig: Path  # the farm's admin kubeconfig

    @property
    def ref(self) -> str:
        return f"{self.provider}:{self.name}"

    @property
    def virtual_time(self) -> bool:
        """True when `advance` is instantaneous (emulated clock)."""
        return False

    @abc.abstractmethod
    def api_client(self) -> Any:
        """A kubernetes.client.ApiClient with the farm's credentials."""

    @abc.abstractmethod
    def agent_kubeconfig(self, namespace: str, also: Sequence[str] = ()) -> Path:
        """A kubeconfig scoped to `namespace` for the agent (created on first call); its account is
        granted the same rights in `also`, the application's other namespaces (an operator's)."""

    @abc.abstractmethod
    def now(self) -> float:
        """Cluster time, seconds since the epoch."""

    @abc.abstractmethod
    def advance(self, seconds: float) -> None:
        """Let `seconds` of cluster time pass."""

    @abc.abstractmethod
    def reset(self) -> None:
        """Return to the freshly opened state; raises core.errors.ResetError."""

    @abc.abstractmethod
    def health(self) -> ClusterHealth: ...

    def snapshot(self, namespace: str) -> dict[str, Any]:
        """Objects of `namespace` as plain dicts, for the attempt's artifact."""
        from kubernetes import client

        api = self.api_client()
        core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
        out: dict[str, Any] = {}
        for kind, lister in (
            ("pods", core.list_namespaced_pod),
            ("services", core.list_namespaced_service),
            ("configmaps", core.list_namespaced_config_map),
            ("events", core.list_namespaced_event),
            ("deployments", apps.list_namespaced_deployment),
            ("statefulsets", apps.list_namespaced_stateful_set),
        ):
            items = lister(namespace).items
            out[kind] = [api.sanitize_for_serialization(item) for item in items]
        return out

    def close(self) -> None:  # noqa: B027  (optional hook: most handles hold nothing)
        """Release what the handle holds (the emulated cluster's process, tunnels)."""

    def __enter__(self) -> ClusterHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ClusterProvider(abc.ABC):
    """Creates or attaches clusters of one kind by name."""

    @abc.abstractmethod
    def open(self, name: str, **options: Any) -> ClusterHandle: ...

    def delete(self, name: str) -> None:
        """Tear a cluster down, on explicit request only."""
        raise ConfigurationError(f"{type(self).__name__} cannot delete clusters")


providers: Registry[ClusterProvider] = Registry(
    "cluster provider", modules=["clusters.sim.provider", "clusters.kind", "clusters.eks"]
)


def parse_cluster_ref(ref: str) -> tuple[str, str]:
    """`sim` → ("sim", "sim"), `kind:farm-1` → ("kind", "farm-1")."""
    kind, _, name = ref.partition(":")
    if not kind:
        raise ConfigurationError(f"cluster reference '{ref}' is empty; use sim, kind:NAME or eks:NAME")
    if kind != "sim" and not name:
        raise ConfigurationError(f"cluster reference '{ref}' needs a name: {kind}:NAME")
    return kind, name or kind


def open_cluster(ref: str, **options: Any) -> ClusterHandle:
    kind, name = parse_cluster_ref(ref)
    try:
        provider = providers.create(kind)
    except KeyError as exc:
        raise ConfigurationError(str(exc.args[0])) from None
    return provider.open(name, **options)
