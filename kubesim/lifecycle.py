"""The node and container lifecycle transitions that are data, declared as records, as kwok declares
its stages (a selector, a delay, and what the transition writes): the node lifecycle controller's
NotReady/Unknown and the kubelet's Ready, the eviction manager's pressure signals, and the waiting
reasons of a container whose image cannot be pulled. The code that applies them (kubesim/nodes.py,
kubesim/controllers/kubelet.py) decides when a record applies; the record says what a client then
sees. tests/kubesim/test_lifecycle_golden.py renders every transition and pins it.

Wording, reasons and timings are the real components' (kubelet and kube-controller-manager v1.29,
containerd's pull errors), so an agent that learnt on real clusters reads the same lines."""

from __future__ import annotations

from dataclasses import dataclass

from kubesim.runtime import CONTROLLER_MANAGER, KUBELET


@dataclass(frozen=True)
class ConditionPatch:
    """What a transition writes into one node condition; type "*" is every condition the node has."""

    type: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True)
class NodeStage:
    """One readiness transition of a node: `selects` says when it applies (evaluated by
    NodeFleet), `delay` how long that must hold first; it patches the conditions as `manager`,
    sets or clears the `taint_key` taints, and records `event` ({node} filled in). A transition the
    node controller makes also marks the node's pods unready and tells each of them (`pod_event`)."""

    name: str
    selects: str
    delay: float
    manager: str
    conditions: tuple[ConditionPatch, ...]
    heartbeat: bool  # the kubelet writing is a heartbeat; the node controller's Unknown is not
    taint_key: str
    taint_effects: tuple[str, ...]  # () clears the key's taints
    event: tuple[str, str, str]  # type, reason, message
    pod_event: tuple[str, str, str] | None = None
    pod_conditions_false: tuple[str, ...] = ()

    def patch_for(self, condition_type: str) -> ConditionPatch | None:
        return next((p for p in self.conditions if p.type in (condition_type, "*")), None)


UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
NODE_MONITOR_GRACE = 40.0  # kube-controller-manager --node-monitor-grace-period

NODE_READY = NodeStage(
    name="node-ready",
    selects="the kubelet posts the node's status (again)",
    delay=0.0,
    manager=KUBELET,
    conditions=(
        ConditionPatch("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ConditionPatch("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ConditionPatch("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        ConditionPatch("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ),
    heartbeat=True,
    taint_key=UNREACHABLE_TAINT,
    taint_effects=(),
    event=("Normal", "NodeReady", "Node {node} status is now: NodeReady"),
)

NODE_UNREACHABLE = NodeStage(
    name="node-unreachable",
    selects="the kubelet has posted nothing (stopped, or the machine is off)",
    delay=NODE_MONITOR_GRACE,
    manager=CONTROLLER_MANAGER,
    conditions=(ConditionPatch("*", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."),),
    heartbeat=False,
    taint_key=UNREACHABLE_TAINT,
    taint_effects=("NoSchedule", "NoExecute"),
    event=("Normal", "NodeNotReady", "Node {node} status is now: NodeNotReady"),
    pod_event=("Warning", "NodeNotReady", "Node is not ready"),
    pod_conditions_false=("Ready", "ContainersReady"),
)


@dataclass(frozen=True)
class PressureSignal:
    """One eviction signal of the kubelet's eviction manager: the condition it sets while the
    signal is below its threshold, the NoSchedule taint the node lifecycle controller adds for
    that condition, the node events of each edge, and the resource its evictions reclaim."""

    signal: str
    condition: str
    taint_key: str
    under: tuple[str, str]  # reason, message while under pressure
    clear: tuple[str, str]  # reason, message once the signal is clear
    events: tuple[str, str]  # the node event's reason on entering, on leaving
    resource: str


PRESSURE_SIGNALS: dict[str, PressureSignal] = {
    "disk": PressureSignal("disk", "DiskPressure", "node.kubernetes.io/disk-pressure",
                           ("KubeletHasDiskPressure", "kubelet has disk pressure"),
                           ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                           ("NodeHasDiskPressure", "NodeHasNoDiskPressure"), "ephemeral-storage"),
    "memory": PressureSignal("memory", "MemoryPressure", "node.kubernetes.io/memory-pressure",
                             ("KubeletHasInsufficientMemory", "kubelet has insufficient memory available"),
                             ("KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                             ("NodeHasInsufficientMemory", "NodeHasSufficientMemory"), "memory"),
}


@dataclass(frozen=True)
class PullFailure:
    """A container left waiting because its image cannot be had: the waiting reason and message
    kubectl shows, the events the kubelet records (in order; {image}, {error} and {message} filled
    in), and when the kubelet tries again (`retry` seconds; None: after the pull back-off)."""

    reason: str
    message: str
    events: tuple[tuple[str, str, str], ...]
    retry: float | None

    def render(self, image: str, error: str = "") -> tuple[str, list[tuple[str, str, str]]]:
        message = self.message.format(image=image, error=error)
        return message, [(t, r, m.format(image=image, error=error, message=message)) for t, r, m in self.events]


PULL_FAILURES: dict[str, PullFailure] = {
    "InvalidImageName": PullFailure(
        "InvalidImageName",
        'Failed to apply default image tag "{image}": couldn\'t parse image reference "{image}": invalid reference format',
        (("Warning", "InspectFailed", "{message}"), ("Warning", "Failed", "Error: InvalidImageName")), 30.0),
    "ErrImageNeverPull": PullFailure(
        "ErrImageNeverPull", 'Container image "{image}" is not present with pull policy of Never',
        (("Warning", "ErrImageNeverPull", "{message}"),), 30.0),
    "ErrImagePull": PullFailure(
        "ErrImagePull", "{error}",
        (("Warning", "Failed", 'Failed to pull image "{image}": {error}'), ("Warning", "Failed", "Error: ErrImagePull")),
        1.0),
    "ImagePullBackOff": PullFailure(
        "ImagePullBackOff", 'Back-off pulling image "{image}"',
        (("Normal", "BackOff", 'Back-off pulling image "{image}"'), ("Warning", "Failed", "Error: ImagePullBackOff")),
        None),
}
