"""What the cluster's parts see of the whole: the controllers, the workload model, the application
models and the userland reach the API store, the clock, the random generator and one another
through the cluster they are built into. `ClusterView` says what that is, so they depend on an
interface instead of `SimCluster`, the class that assembles them (kubesim/cluster.py).

Each part the view hands out is itself a Protocol here (what the others call on the kubelet, the
network, the nodes, the workload, chaos, the Event recorder and the container logs), so the view
sits on the floor just above the runtime contract and the observability stores, below every part
that uses it: a part names its neighbours through this module, never by importing their classes."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from kubesim.clock import VirtualClock
from kubesim.observability import Observability
from kubesim.runtime import Conn, Ctr, NodeState, PodRt, Target
from kubesim.store import Obj, Store


class EventRecorderView(Protocol):
    """core/v1 Events as kubectl describe shows them (kubesim.cluster.EventRecorder)."""

    def record(self, obj: Obj, type_: str, reason: str, message: str, component: str,
               host: str | None = None, field_path: str | None = None) -> None: ...

    def expire(self, now: float) -> None: ...


class ContainerLogsView(Protocol):
    """The containers' own output, as `kubectl logs` and Loki read it (kubesim.cluster.ContainerLogs)."""

    def write(self, pod: Obj, container: str, lines: str | list[str], t: float | None = None,
              stream: str = "stdout") -> None: ...

    def rotate(self, namespace: str, pod: str, container: str) -> None: ...

    def read(self, namespace: str, pod: str, container: str, previous: bool = False) -> list[tuple[float, str]]: ...

    def drop_pod(self, namespace: str, pod: str) -> None: ...


@dataclass(frozen=True)
class ControlPlane:
    """What a controller works with, rather than the whole cluster: the store, the cluster's clock
    and seeded random source, its Event recorder, a way to be woken later, and the pass's change
    flag (`touch` it after changing what controllers read outside the store; `touched` tells
    whether anything changed since the pass began)."""

    store: Store
    clock: VirtualClock
    rng: random.Random
    events: EventRecorderView
    wake_at: Callable[[float], None]
    touch: Callable[[], None]
    touched: Callable[[], bool]


class KubeletView(Protocol):
    """The kubelet of every node as the others use it (kubesim.controllers.kubelet.Kubelet): its
    runtime records and the container exits others cause."""

    state: dict[str, Any]
    volumes: Any  # its volume binder (kubesim.controllers.volumes.VolumeBinder), set when the controllers are built

    def runtime(self, pod: Obj) -> PodRt | None: ...

    def running(self) -> list[tuple[PodRt, Ctr]]: ...

    def volume_data(self, key: str) -> dict[str, Any]: ...

    def terminate(self, namespace: str, pod: str, container: str, code: int, reason: str = "",
                  lines: list[str] | None = None, stderr: list[str] | None = None) -> None: ...

    def reconcile(self, now: float) -> None: ...

    def listening(self, pod: Obj) -> set[int]: ...

    def reconcile_memory(self, now: float) -> None: ...

    def _model_by_name(self, name: str) -> Any: ...


class NetworkView(Protocol):
    """Cluster DNS and kube-proxy's connections (kubesim.controllers.network.Network)."""

    def lookup(self, pod: Obj | None, host: str) -> tuple[Obj | None, str | None]: ...

    def connect(self, pod: Obj | None, host: str, port: int) -> Conn: ...

    def connect_pod(self, pod: Obj | None, target: Obj, port: int) -> Target: ...

    def _resolver(self, pod: Obj | None) -> tuple[str, list[str]]: ...

    def _kube_dns_up(self) -> bool: ...


class NodeFleetView(Protocol):
    """The nodes and their hardware and OS state (kubesim.nodes.NodeFleet)."""

    state: dict[str, Any]

    def __iter__(self) -> Iterator[NodeState]: ...

    def get(self, name: str) -> NodeState | None: ...

    def allocate_pod_ip(self, node: str) -> str: ...

    def kubelet_stopped(self, node: str | None) -> bool: ...

    def powered_off(self, node: str | None) -> bool: ...

    def fault(self, node: str | None, kind: str) -> Any: ...

    def clock_offset(self, node: str | None) -> float: ...

    def cpu_factor(self, node: str | None) -> float: ...

    def io(self, node: str | None, op: str, nbytes: float, count: float = 1.0, comm: str = "mongod") -> float: ...

    def fd_exhausted(self, node: str | None) -> bool: ...

    def pid_exhausted(self, node: str | None) -> bool: ...

    def link(self, node: str | None) -> dict[str, float]: ...

    def kernel_log(self, node: str, lines: list[str]) -> None: ...

    def account_cpu(self, node: str, seconds: float) -> None: ...

    def reconcile(self, now: float) -> None: ...


class WorkloadView(Protocol):
    """The applications' load, connections and state (kubesim.workload.Workload), as the
    application models and the call-graph flow that works inside it (kubesim.apps.callgraph) use it."""

    cluster: ClusterView
    state: dict[str, Any]
    graphs: Any  # the call-graph flow (kubesim.apps.callgraph.CallGraphFlow), whose `state` the userland reads
    _conn_cache: dict[Any, Any]

    def charge(self, rt: Any, c: Any, served: float, used: float, dt: float, rx_bytes: float, tx_bytes: float) -> None: ...

    def observe(self, metric: str, labels: tuple, buckets: tuple, n: float, mean: float, floor: float,
                scale: float = 1.0) -> None: ...

    def _pod(self, ns: str, name: str) -> dict | None: ...

    def _connect_pod(self, pod: dict, target: dict, port: int) -> Any: ...

    def _cores(self, rt: PodRt, c: Ctr) -> float: ...

    def _slowdown(self, rt: PodRt, c: Ctr) -> float: ...

    def instance_of(self, pod: dict, port: int) -> Any: ...

    def inc(self, metric: str, labels: tuple, v: float) -> None: ...

    def gauge(self, metric: str, labels: tuple, v: float) -> None: ...

    def flush_histograms(self) -> None: ...

    def _connect(self, pod: dict, host: str, port: int) -> Any: ...

    def _log_once(self, key: str, every: float, now: float) -> bool: ...

    def consul_register(self, consul_pod: dict, name: str, pod: dict, port: int) -> None: ...

    def consul_reset(self, namespace: str, pod: str) -> None: ...


class ChaosView(Protocol):
    """Chaos Mesh's effects on pods and containers (kubesim.chaos.ChaosController)."""

    state: dict[str, Any]

    def time_offset(self, pod: Obj, container: str) -> float: ...

    def net_effect(self, client: Obj | None, target: Obj) -> dict[str, float]: ...

    def stress(self, namespace: str, pod: str, container: str) -> dict[str, float]: ...

    def io_error(self, pod: Obj, container: str, path: str, op: str, count: float = 1.0) -> int: ...

    def io_delay(self, pod: Obj, container: str, path: str) -> float: ...

    def reconcile(self, now: float) -> None: ...


class ClusterView(Protocol):
    """One emulated cluster as its parts use it."""

    seed: int
    clock: VirtualClock
    store: Store
    rng: random.Random
    obs: Observability  # the stack's stores: metrics, logs, traces, rules

    # The parts, read-only: a part uses its neighbours, the cluster alone builds and replaces them.
    @property
    def events(self) -> EventRecorderView: ...
    @property
    def control(self) -> ControlPlane:
        """What every controller writes through."""
        ...
    @property
    def logs(self) -> ContainerLogsView:
        """The containers' own output."""
        ...
    @property
    def nodes(self) -> NodeFleetView: ...
    @property
    def network(self) -> NetworkView: ...
    @property
    def workload(self) -> WorkloadView:
        """The applications' load, connections and state."""
        ...
    @property
    def kubelet(self) -> KubeletView: ...
    @property
    def chaos(self) -> ChaosView: ...

    def now(self) -> float: ...

    def raw(self, key: str, namespace: str, name: str) -> Obj | None:
        """The stored object itself (no copy): read, never written."""
        ...

    def touch(self) -> None:
        """Something changed outside the store: the controllers run at the next step."""
        ...


__all__ = [
    "ChaosView",
    "ClusterView",
    "ContainerLogsView",
    "ControlPlane",
    "EventRecorderView",
    "KubeletView",
    "NetworkView",
    "NodeFleetView",
    "WorkloadView",
]
