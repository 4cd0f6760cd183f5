"""The cluster handle: everything above `clusters/` reaches a cluster only through it, so the
emulated cluster and kind/EKS share every line of deploy, injectors, agent tools and oracles.

A provider turns a reference (`sim`, `sim:NAME`, `kind:NAME`, `eks:NAME`) into an open handle.
The handle gives
- `api_client()`: a kubernetes.client.ApiClient with the farm's own (admin) credentials;
- `agent_kubeconfig(namespace)`: a kubeconfig file whose token can only reach that namespace
  (no Chaos Mesh resources, no farm namespaces), for the agent's kubectl;
- `endpoints`: base URLs of the Kubernetes API, Prometheus, Loki and Jaeger query APIs;
- `now()` / `advance(seconds)`: the cluster's clock (virtual on the emulated cluster, where
  `advance` runs controllers and workload; wall time on real clusters, where it sleeps); a clock
  hook (`add_clock_hook`) stops the clock at the cluster times it names and runs in between;
- `capabilities`: what the cluster can do beyond the Kubernetes API (checkpoints, modelled node
  faults, tasks on a node's host, a virtual clock), declared so that callers ask, never probe;
- `reset()`: back to the state right after `open` (no application, no chaos), between trials;
- `health()` and `snapshot()`: for `farm cluster list` and the per-attempt artifact.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

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


@dataclass(frozen=True)
class Capabilities:
    """What a cluster can do beyond the Kubernetes API. The defaults are a real cluster's."""

    # checkpoint(name) / restore(name) rewind the whole cluster (objects, workload, clock).
    checkpoints: bool = False
    # Node hardware and OS faults are modelled as NodeFault objects (sim.farm.io) the cluster serves.
    node_faults: bool = False
    # A privileged task can run on a node's host (a machine with a kernel, a kubelet, a disk).
    node_tasks: bool = True
    # `advance` is instantaneous: cluster time passes only when asked, never by itself.
    virtual_clock: bool = False


class ClockHook(Protocol):
    """Something that must run at given cluster times while the clock advances (a noise's
    events): the clock stops at each boundary, then `tick` runs."""

    def boundaries(self) -> Iterable[float]: ...

    def tick(self) -> None: ...


# Metadata the snapshot leaves out: the server's field-ownership records (about half of a pod's
# JSON) and kubectl's copy of the last applied object (the spec again); no reader of the snapshot
# (the report's summary, a person reading the raw JSON for the end state) needs them.
SNAPSHOT_DROPPED_METADATA = ("managedFields",)
SNAPSHOT_DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


def snapshot_object(obj: dict[str, Any]) -> dict[str, Any]:
    """One object of a cluster snapshot: the server's JSON without SNAPSHOT_DROPPED_*."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta = {k: v for k, v in meta.items() if k not in SNAPSHOT_DROPPED_METADATA}
        notes = meta.get("annotations")
        if isinstance(notes, dict) and any(k in notes for k in SNAPSHOT_DROPPED_ANNOTATIONS):
            meta["annotations"] = {k: v for k, v in notes.items() if k not in SNAPSHOT_DROPPED_ANNOTATIONS}
        obj = {**obj, "metadata": meta}
    return obj


class ClusterHandle(abc.ABC):
    """An open cluster owned by one worker."""

    provider: str  # "sim", "kind", "eks"
    name: str
    endpoints: Endpoints
    kubeconfig: Path  # the farm's admin kubeconfig
    workdir: Path  # the handle's own folder (kubeconfigs it wrote, the emulated cluster's log)
    context: str | None = None  # the kubeconfig's context to use (None: its current one)
    capabilities: Capabilities = Capabilities()
    _clock_hooks: tuple[ClockHook, ...] = ()

    @property
    def ref(self) -> str:
        return f"{self.provider}:{self.name}"

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

    def advance(self, seconds: float) -> None:
        """Let `seconds` of cluster time pass, stopping at every clock hook's boundaries on the
        way to run the hooks."""
        if not self._clock_hooks:
            self._advance(seconds)
            return
        end = self.now() + seconds
        while True:
            now = self.now()
            if now >= end - 1e-9:
                return
            upcoming = [b for hook in self._clock_hooks for b in hook.boundaries() if now + 1e-9 < b < end]
            self._advance((min(upcoming) if upcoming else end) - now)
            for hook in self._clock_hooks:
                hook.tick()

    @abc.abstractmethod
    def _advance(self, seconds: float) -> None:
        """Let `seconds` of cluster time pass (the provider's own clock: virtual, or a sleep)."""

    def add_clock_hook(self, hook: ClockHook) -> None:
        self._clock_hooks = (*self._clock_hooks, hook)

    def remove_clock_hook(self, hook: ClockHook) -> None:
        self._clock_hooks = tuple(h for h in self._clock_hooks if h is not hook)

    def checkpoint(self, name: str) -> None:
        """Save the whole cluster under `name` (only where `capabilities.checkpoints`)."""
        raise ConfigurationError(f"{self.ref} cannot take checkpoints")

    def restore(self, name: str) -> None:
        """Return the whole cluster to checkpoint `name` (only where `capabilities.checkpoints`)."""
        raise ConfigurationError(f"{self.ref} cannot restore checkpoints")

    @abc.abstractmethod
    def reset(self) -> None:
        """Return to the freshly opened state; raises core.errors.ResetError."""

    @abc.abstractmethod
    def health(self) -> ClusterHealth: ...

    def snapshot(self, namespace: str) -> dict[str, Any]:
        """Objects of `namespace` as plain dicts, for the attempt's artifact: the API server's own
        JSON (never built into client models and back), without what only the server's
        bookkeeping needs (SNAPSHOT_DROPPED)."""
        from kubernetes import client

        api = self.api_client()
        core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
        out: dict[str, Any] = {}
        listers: tuple[tuple[str, Callable[..., Any]], ...] = (
            ("pods", core.list_namespaced_pod),
            ("services", core.list_namespaced_service),
            ("configmaps", core.list_namespaced_config_map),
            ("events", core.list_namespaced_event),
            ("deployments", apps.list_namespaced_deployment),
            ("statefulsets", apps.list_namespaced_stateful_set),
        )
        for kind, lister in listers:
            # _preload_content=False: the response's bytes, not the client's models of them.
            items = json.loads(lister(namespace, _preload_content=False).data).get("items") or []
            out[kind] = [snapshot_object(item) for item in items]
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
    "cluster provider", modules=["clusters.emulated", "clusters.kind", "clusters.eks"]
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
