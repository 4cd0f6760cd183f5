"""The emulator's runtime contract, its bottom floor above the clock and the store: the records
of a container and a pod as the kubelet runs them (`Ctr`, `PodRt`), what a container's process
does when started (`Started`, `Exited`), the outcome of dialing from a pod (`Conn`, `Target`) and
the addresses and port range it dials with, a node's hardware and OS records (`NodeState`), and
the names the cluster's own components write under (field managers, the Kubernetes version).
The kubelet, the network, the nodes, the application models and the userland all speak these;
none of them is defined where one of those parts lives, so each part imports the contract and
not the others (tests/architecture/test_kubesim_floors.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubesim.store import Obj

# The field managers kube-apiserver records for the cluster's own components (their User-Agents)
KUBELET = "kubelet"
CONTROLLER_MANAGER = "kube-controller-manager"
SCHEDULER = "kube-scheduler"
KUBELET_VERSION = "v1.29.2"


@dataclass
class Started:
    """The process is up: it logged `lines`, listens on `ports`, is ready after `ready_after` s."""

    lines: list[str]
    ports: set[int]
    instance: Any = None
    ready_after: float = 0.0
    stderr: list[str] = field(default_factory=list)
    memory: float = 0.0  # bytes it left in tmpfs (its cgroup is charged for them) beyond its own


@dataclass
class Exited:
    """The process ends `after` seconds after start with `code` (reason Error/Completed/OOMKilled)."""

    code: int
    lines: list[str]
    after: float = 0.0
    reason: str = ""
    stderr: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.reason:
            self.reason = "Completed" if self.code == 0 else "Error"



@dataclass
class Ctr:
    name: str
    init: bool
    image: str
    state: str = "waiting"  # waiting | running | terminated
    reason: str = "ContainerCreating"
    message: str = ""
    stage: str = "pull"  # pull | pulling | create | run | exit | backoff | done
    next_at: float = 0.0
    restarts: int = 0
    started_at: float | None = None
    finished_at: float | None = None
    exit_code: int = 0
    last: dict[str, Any] | None = None
    backoff: float = 0.0
    pull_backoff: float = 0.0
    crashes: int = 0
    ports: set[int] = field(default_factory=set)
    ready_at: float | None = None
    ready: bool = False
    instance: Any = None
    model: str = ""
    pending_exit: Exited | None = None
    container_id: str = ""
    probe_fail: dict[str, int] = field(default_factory=dict)
    probe_next: dict[str, float] = field(default_factory=dict)
    started_probe_ok: bool = True
    cpu_seconds: float = 0.0
    cpu_throttled_periods: float = 0.0
    cpu_periods: float = 0.0
    memory: float = 0.0
    oom_events: int = 0
    net_rx: float = 0.0
    net_tx: float = 0.0
    config_error: str = ""
    ephemeral: bool = False  # a `kubectl debug` container: runs once, never restarts, no readiness
    # A native sidecar (an init container with restartPolicy Always, KEP-753): the next container
    # starts once it has started, it restarts whatever the pod's policy, and the kubelet stops it
    # when the pod's own containers have all exited.
    sidecar: bool = False
    sidecar_started: bool = False  # it has started once: later restarts no longer hold the pod's containers back


@dataclass
class PodRt:
    namespace: str
    name: str
    uid: str
    node: str
    ip: str
    start: float
    containers: dict[str, Ctr] = field(default_factory=dict)
    init_order: list[str] = field(default_factory=list)
    mount_ok: bool = False
    mount_next: float = 0.0
    mount_backoff: float = 0.0
    mount_failed_since: float | None = None
    volumes: dict[str, Any] = field(default_factory=dict)  # mountPath → data key
    evicted: str = ""  # the eviction message once the kubelet has evicted the pod
    render_key: Any = None  # what the last status was rendered from (see Kubelet._render)


KUBE_DNS = "10.96.0.10"
NODE_RESOLVER = "172.18.0.1"
DOMAIN = "cluster.local"
PORT_RANGE_SYSCTL = "net.ipv4.ip_local_port_range"
DEFAULT_PORT_RANGE = (32768, 60999)  # the kernel's default


def local_port_range(pod: Obj | None) -> tuple[int, int]:
    """The ephemeral port range of the pod's network namespace: its securityContext's sysctl (a
    safe, namespaced one the kubelet always allows), else the kernel's default."""
    for item in ((pod or {}).get("spec", {}).get("securityContext") or {}).get("sysctls") or []:
        if item.get("name") == PORT_RANGE_SYSCTL:
            try:
                lo, hi = (int(x) for x in str(item.get("value", "")).split())
            except ValueError:
                continue  # the kubelet refuses to start such a pod; the model keeps the default
            return lo, max(lo, hi)
    return DEFAULT_PORT_RANGE


def ephemeral_ports(pod: Obj | None) -> int:
    """How many connections the pod can hold open to one destination (ip:port): connect() picks a
    local port from the range, unique per 4-tuple."""
    lo, hi = local_port_range(pod)
    return hi - lo + 1

@dataclass
class Target:
    pod: Obj
    port: int
    error: str | None = None  # per-target failure (refused, timeout)
    loss: float = 0.0
    delay_ms: float = 0.0


@dataclass
class Conn:
    """The outcome of dialing host:port from a pod: `targets` share the traffic evenly."""

    host: str
    port: int
    error: str | None = None
    targets: list[Target] = field(default_factory=list)
    service: Obj | None = None

    @property
    def ok_share(self) -> float:
        if self.error or not self.targets:
            return 0.0
        return sum(1 for t in self.targets if not t.error) / len(self.targets)

    def first_error(self) -> str | None:
        if self.error:
            return self.error
        for t in self.targets:
            if t.error:
                return t.error
        return None

    @property
    def loss(self) -> float:
        ok = [t for t in self.targets if not t.error]
        return sum(t.loss for t in ok) / len(ok) if ok else 0.0

    @property
    def delay_ms(self) -> float:
        ok = [t for t in self.targets if not t.error]
        return sum(t.delay_ms for t in ok) / len(ok) if ok else 0.0


@dataclass
class Disk:
    device: str = "sda"
    partition: str = "sda1"
    size_bytes: float = 107374182400.0
    used_bytes: float = 21474836480.0
    reads: float = 0.0
    writes: float = 0.0
    read_bytes: float = 0.0
    written_bytes: float = 0.0
    io_time: float = 0.0
    errors: int = 0


@dataclass
class Nic:
    device: str = "eth0"
    rx_bytes: float = 0.0
    tx_bytes: float = 0.0
    rx_packets: float = 0.0
    tx_packets: float = 0.0
    rx_drop: float = 0.0
    tx_drop: float = 0.0
    rx_errs: float = 0.0


@dataclass
class NodeState:
    name: str
    ip: str
    index: int
    control_plane: bool = False
    cpu: float = 4.0
    memory: float = 16 * 2**30
    disks: list[Disk] = field(default_factory=lambda: [Disk()])
    nics: list[Nic] = field(default_factory=lambda: [Nic()])
    next_ip: int = 2
    cpu_seconds: float = 0.0
    fd_allocated: float = 2304.0
    fd_max: float = 9223372036854775807.0
    pids: float = 310.0
    pid_max: float = 4194304.0
    kernel_seq: float = 0.0
    reported: dict[str, Any] = field(default_factory=dict)  # fault keys already logged → last time; per-concern state
