"""What the cluster's parts see of the whole: the controllers, the workload model, the application
models and the userland reach the API store, the clock, the random generator and one another
through the cluster they are built into. `ClusterView` says what that is, so they depend on an
interface instead of `SimCluster`, the class that assembles them (kubesim/cluster.py)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Protocol

from kubesim.clock import VirtualClock
from kubesim.store import Obj, Store

if TYPE_CHECKING:
    from kubesim.chaos import ChaosController
    from kubesim.cluster import ContainerLogs, EventRecorder
    from kubesim.controllers.common import ControlPlane
    from kubesim.controllers.kubelet import Kubelet
    from kubesim.controllers.network import Network
    from kubesim.nodes import NodeFleet
    from kubesim.observability import Observability
    from kubesim.workload import Workload


class ClusterView(Protocol):
    """One emulated cluster as its parts use it."""

    seed: int
    clock: VirtualClock
    store: Store
    rng: random.Random
    obs: Observability  # the stack's stores: metrics, logs, traces, rules
    events: EventRecorder
    control: ControlPlane  # what every controller writes through
    logs: ContainerLogs  # the containers' own output
    nodes: NodeFleet
    network: Network
    workload: Workload  # the applications' load, connections and state
    kubelet: Kubelet
    chaos: ChaosController

    def now(self) -> float: ...

    def raw(self, key: str, namespace: str, name: str) -> Obj | None:
        """The stored object itself (no copy): read, never written."""
        ...

    def touch(self) -> None:
        """Something changed outside the store: the controllers run at the next step."""
        ...


__all__ = ["ClusterView"]
