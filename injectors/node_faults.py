"""OS and hardware faults of one node. The node is named, or is the node running a given
workload's pod; Chaos Mesh experiments then select every application pod on that node.
Faults Chaos Mesh cannot express (kubelet, sysctl, disk fill, a dead node) run a privileged
task on the node itself on a real cluster; the emulated cluster models each of them as a
NodeFault (kubesim/nodes.py), so the same problem validates there."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from clusters.handle import ClusterHandle
from clusters.kube import Kube, KubeError, Obj
from core.errors import InjectionError
from injectors.fault import Chaos, Fault, Params, io_chaos, netem_share, neutral_name, require
from injectors.injector import Injection, faults
from injectors.jobs import run_on_node
from injectors.objects import Ref

# A cluster whose handle declares `node_faults` (the emulated one) models node hardware and OS
# state as cluster-scoped NodeFault objects (what a node agent would change on a real machine);
# the farm's credentials alone reach them.
SIM_GROUP = ("sim.farm.io", "v1alpha1", "nodefaults")


def runs_on_faulty_node(cluster: ClusterHandle, injection: Injection, service: str | None) -> bool:
    """A node fault affects the system while the faulted workload (every application pod when
    the fault names a node only) still runs on that node: a node's hardware and OS stay broken
    whatever the agent does, and the fix is to take the workload off it (cordon, then drain or
    delete its pods so that they land elsewhere). A pod being deleted no longer counts."""
    node = injection.saved.get("node")
    if not node:
        return False
    kube = Kube.of(cluster)
    if service:
        try:
            _, obj = kube.workload(injection.namespace, service)
        except (InjectionError, KubeError):  # the workload is gone: the oracle's presence check says so
            return False
        pods = kube.pods_of(injection.namespace, obj)
    else:
        pods = kube.list("Pod", injection.namespace)
    return any((p.get("spec") or {}).get("nodeName") == node and not p["metadata"].get("deletionTimestamp")
               and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed") for p in pods)


def workload_ref(cluster: ClusterHandle, namespace: str, service: str | None) -> str | None:
    if not service:
        return None
    kind, obj = Kube.of(cluster).workload(namespace, service)
    return str(Ref(kind, namespace, obj["metadata"]["name"]))


class OnNode:
    """Mixin of every node fault: judged by placement, restarted through its workload."""

    def affects(self, cluster: ClusterHandle, injection: Injection) -> bool:
        return runs_on_faulty_node(cluster, injection, getattr(self.p, "service", None))  # type: ignore[attr-defined]

    def restart_targets(self, injection: Injection) -> list[str]:
        workload = injection.saved.get("workload")
        return [workload] if workload else []


class SimNodeBackend(OnNode):
    """Mixin placed first in a node fault's bases: on the emulated cluster the fault is a
    NodeFault object with `sim_spec()`; elsewhere the class's own (real) path runs."""

    needs_real_cluster = False  # the emulated cluster models it

    def sim_spec(self) -> Obj | None:
        return None

    def _sim_path(self, name: str = "") -> str:
        g, v, plural = SIM_GROUP
        return f"/apis/{g}/{v}/{plural}" + (f"/{name}" if name else "")

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        spec = self.sim_spec()
        if spec is None or not cluster.capabilities.node_faults:
            return super().inject(cluster, namespace)  # type: ignore[misc]
        kube = Kube.of(cluster)
        node = resolve_node(kube, namespace, self.p)  # type: ignore[attr-defined]
        name = neutral_name(self.name, node, repr(sorted(spec.items())), prefix="node-")  # type: ignore[attr-defined]
        body = {"apiVersion": f"{SIM_GROUP[0]}/{SIM_GROUP[1]}", "kind": "NodeFault",
                "metadata": {"name": name}, "spec": {"nodeName": node, **spec}}
        kube.request("POST", self._sim_path(), body)
        return self.record(cluster, namespace, touched=[Ref("NodeFault", "", name), f"Node//{node}"],  # type: ignore[attr-defined]
                           backend="sim", nodefault=name, node=node, spec=spec,
                           workload=workload_ref(cluster, namespace, getattr(self.p, "service", None)))  # type: ignore[attr-defined]

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        if injection.saved.get("backend") != "sim":
            return super().recover(cluster, injection)  # type: ignore[misc]
        try:
            Kube.of(cluster).request("DELETE", self._sim_path(injection.saved["nodefault"]))
        except KubeError as exc:
            if exc.code != 404:
                raise

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        if injection.saved.get("backend") != "sim":
            return super().is_active(cluster, injection)  # type: ignore[misc]
        try:
            obj = Kube.of(cluster).request("GET", self._sim_path(injection.saved["nodefault"]))
        except KubeError as exc:
            if exc.code == 404:
                return False
            raise
        return not obj.get("metadata", {}).get("deletionTimestamp")


def seconds(text: str) -> float:
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    for unit in ("ms", "s", "m", "h"):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * units[unit]
    return float(text)


class NodeParams(Params):
    service: str | None = None  # the node that runs this workload's pod
    node: str | None = None  # or this node


def resolve_node(kube: Kube, namespace: str, p: Any) -> str:
    require(bool(p.service or p.node), "give service or node")
    return p.node or kube.node_of(namespace, p.service)


class NodeChaos(OnNode, Chaos):
    def spec(self, kube: Kube, namespace: str) -> Obj:
        node = resolve_node(kube, namespace, self.p)
        base: Obj = {"mode": "all", "selector": {"namespaces": [namespace], "nodes": [node]}}
        return {**base, **self.node_spec()}

    def node_spec(self) -> Obj:
        return {}

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        injection = super().inject(cluster, namespace)
        injection.saved["node"] = injection.saved["spec"]["selector"]["nodes"][0]
        injection.touched.append(f"Node//{injection.saved['node']}")
        return injection

    def target_service(self) -> str | None:
        return getattr(self.p, "service", None)


# -- OS layer -------------------------------------------------------------------------------


class ClockSkewParams(NodeParams):
    offset: str = Field("-10m", pattern=r"^-?\d+(ms|s|m|h)$")


@faults.register("node-clock-skew")
class NodeClockSkew(SimNodeBackend, NodeChaos):
    """The node's clock runs `offset` off true time: tokens, leases and TLS validity break."""

    Params = ClockSkewParams
    kind = "TimeChaos"

    def sim_spec(self) -> Obj | None:
        return {"clockOffsetSeconds": seconds(self.p.offset)}

    def node_spec(self) -> Obj:
        return {"timeOffset": self.p.offset, "clockIds": ["CLOCK_REALTIME"]}


class KernelParams(NodeParams):
    functions: list[str] = Field(["ext4_file_write_iter"], min_length=1)  # the call chain
    failtype: int = Field(0, ge=0, le=2)  # 0 kmalloc (slab), 1 alloc_page, 2 bio
    probability: int = Field(100, ge=1, le=100)


@faults.register("kernel-fault")
class KernelFault(NodeChaos):
    """KernelChaos: kernel allocations under the given call chain fail on the node."""

    Params = KernelParams
    kind = "KernelChaos"

    def node_spec(self) -> Obj:
        return {
            "failKernRequest": {
                "callchain": [{"funcname": f} for f in self.p.functions],
                "failtype": self.p.failtype,
                "probability": self.p.probability,
                "times": 0,
            }
        }


class VolumeFaultParams(NodeParams):
    volume_path: str = "/data/db"
    percent: int = Field(100, ge=1, le=100)


class VolumeChaos(NodeChaos):
    kind = "IOChaos"
    errno: ClassVar[int] = 0
    methods: ClassVar[list[str]] = []

    def node_spec(self) -> Obj:
        return io_chaos("fault", self.p.volume_path, self.p.percent, errno=self.errno, methods=list(self.methods))


@faults.register("volume-open-emfile")
class VolumeOpenEmfile(VolumeChaos):
    """Opening files on the data volume fails with EMFILE ("too many open files")."""

    Params = VolumeFaultParams
    errno = 24
    methods = ["open", "create"]


@faults.register("disk-full")
class DiskFull(VolumeChaos):
    """Writes to the node's data disk fail with ENOSPC: the disk is full."""

    Params = VolumeFaultParams
    errno = 28
    methods = ["write", "fsync", "flush", "create", "mkdir"]


class NodeTaskParams(NodeParams):
    heal_after_seconds: int = Field(1800, ge=60)  # a timer on the node undoes the fault by itself


class NodeTask(OnNode, Fault):
    """A fault planted by a privileged script on the node; the script arms a timer that undoes
    it, so a node whose kubelet is gone still heals; recover runs the undo now when possible."""

    needs_real_cluster = True
    break_script: ClassVar[str] = ""
    undo_script: ClassVar[str] = ""
    check_script: ClassVar[str] = ""  # prints "active" while the fault is in place

    def scripts(self) -> tuple[str, str, str]:
        return self.break_script, self.undo_script, self.check_script

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        kube = Kube.of(cluster)
        node = resolve_node(kube, namespace, self.p)
        brk, undo, _ = self.scripts()
        timer = f"systemd-run --on-active={self.p.heal_after_seconds} sh -c '{undo}'"
        run_on_node(cluster, node, neutral_name(self.name, node, prefix="node-task-"), f"{timer}; {brk}")
        return self.record(cluster, namespace, touched=[f"Node//{node}"], node=node,
                           workload=workload_ref(cluster, namespace, self.p.service))

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        _, undo, _ = self.scripts()
        node = injection.saved["node"]
        run_on_node(cluster, node, neutral_name(self.name, node, "undo", prefix="node-task-"), undo)

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        _, _, check = self.scripts()
        node = injection.saved["node"]
        out = run_on_node(cluster, node, neutral_name(self.name, node, "check", prefix="node-task-"), check)
        return "active" in out.split()


class NodeDownTask(NodeTask):
    """A fault that stops the node's kubelet: no pod can run there to undo or check it, so the
    node's Ready condition is the check and the armed timer is the undo."""

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        waited = 0.0
        while self.is_active(cluster, injection) and waited < self.p.heal_after_seconds + 120:
            cluster.advance(10)
            waited += 10

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        node = Kube.of(cluster).get("Node", "", injection.saved["node"])
        for cond in node.get("status", {}).get("conditions", []):
            if cond.get("type") == "Ready":
                return cond.get("status") != "True"
        return True


@faults.register("kubelet-crash")
class KubeletCrash(SimNodeBackend, NodeDownTask):
    """The kubelet's flags file gains an unknown flag and the kubelet crash-loops on restart:
    the node goes NotReady and its pods are evicted after the toleration period."""

    Params = NodeTaskParams
    break_script = (
        "cp /var/lib/kubelet/kubeadm-flags.env /var/lib/kubelet/kubeadm-flags.env.orig; "
        "sed -i 's/\"$/ --enable-legacy-cgroup-driver=true\"/' /var/lib/kubelet/kubeadm-flags.env; "
        "systemctl restart kubelet"
    )
    undo_script = "mv /var/lib/kubelet/kubeadm-flags.env.orig /var/lib/kubelet/kubeadm-flags.env; systemctl restart kubelet"

    def sim_spec(self) -> Obj | None:
        # The emulated kubelet stops posting status and syncing pods; containers keep running.
        return {"kubeletStopped": True}


@faults.register("node-failure")
class NodeFailure(SimNodeBackend, NodeDownTask):
    """The node stops: kubelet and container runtime halt, as when a machine dies."""

    Params = NodeTaskParams
    break_script = "systemctl stop kubelet containerd"
    undo_script = "systemctl start containerd kubelet"

    def sim_spec(self) -> Obj | None:
        return {"nodeDown": True}


class EvictionParams(NodeTaskParams):
    memory_available: str = Field("90%", pattern=r"^(\d+(\.\d+)?%|\d+(Ki|Mi|Gi)?)$")


@faults.register("eviction-threshold-misconfigured")
class EvictionThresholdMisconfigured(SimNodeBackend, NodeTask):
    """The kubelet's evictionHard memory.available threshold is set far above real headroom:
    the node reports MemoryPressure and evicts pods that fit comfortably."""

    Params = EvictionParams

    def scripts(self) -> tuple[str, str, str]:
        cfg = "/var/lib/kubelet/config.yaml"
        brk = (
            f"cp {cfg} {cfg}.orig; sed -i '/^evictionHard:/,/^[^ ]/{{/memory.available/d}}' {cfg}; "
            f"printf 'evictionHard:\\n  memory.available: \"{self.p.memory_available}\"\\n' >> {cfg}; "
            "systemctl restart kubelet"
        )
        undo = f"mv {cfg}.orig {cfg}; systemctl restart kubelet"
        check = f"test -f {cfg}.orig && echo active || echo clean"
        return brk, undo, check

    def sim_spec(self) -> Obj | None:
        return {"evictionHard": {"memory.available": self.p.memory_available}}


class SysctlParams(NodeTaskParams):
    value: int = Field(1024, ge=1)  # below what the node already uses


class SysctlTask(NodeTask):
    key: ClassVar[str] = ""

    def scripts(self) -> tuple[str, str, str]:
        saved = f"/var/lib/{self.key.replace('.', '-')}.orig"
        brk = f"sysctl -n {self.key} > {saved}; sysctl -w {self.key}={self.p.value}"
        undo = f"test -f {saved} && sysctl -w {self.key}=$(cat {saved}) && rm -f {saved}"
        check = f"test \"$(sysctl -n {self.key})\" = \"{self.p.value}\" && echo active || echo clean"
        return brk, undo, check


@faults.register("fd-exhaustion")
class FdExhaustion(SimNodeBackend, SysctlTask):
    """fs.file-max lowered under the node's use: every process there gets ENFILE/EMFILE
    ("too many open files") on open, accept and socket."""

    Params = SysctlParams
    key = "fs.file-max"

    def sim_spec(self) -> Obj | None:
        return {"fileMax": self.p.value}


@faults.register("pid-exhaustion")
class PidExhaustion(SimNodeBackend, SysctlTask):
    """kernel.pid_max lowered under the node's use: fork fails with EAGAIN, threads cannot start."""

    Params = SysctlParams
    key = "kernel.pid_max"

    def sim_spec(self) -> Obj | None:
        return {"pidMax": self.p.value}


class DiskFillParams(NodeTaskParams):
    path: str = "/var/lib/containerd"
    size: str = Field("200G", pattern=r"^\d+(\.\d+)?([KMGT](iB|B)?)?$")


@faults.register("node-disk-fill")
class NodeDiskFill(SimNodeBackend, NodeTask):
    """A large file fills the node's container disk: DiskPressure, image GC, evictions."""

    Params = DiskFillParams

    def scripts(self) -> tuple[str, str, str]:
        f = f"{self.p.path}/.snapshot-cache"
        return (f"fallocate -l {self.p.size} {f}", f"rm -f {f}", f"test -f {f} && echo active || echo clean")

    def sim_spec(self) -> Obj | None:
        return {"diskFillBytes": fallocate_bytes(self.p.size)}


def fallocate_bytes(size: str) -> float:
    """fallocate's -l: K, M, G, T (and KiB...) are powers of 1024, KB, MB, GB, TB powers of 1000."""
    import re

    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(i?B|B)?", size.strip(), re.I)
    require(m is not None, f"size '{size}' is not a length fallocate accepts")
    assert m is not None
    unit = m.group(2).upper()
    decimal = (m.group(3) or "").upper() == "B"
    mult = (1000 if decimal else 1024) ** " KMGT".index(unit or " ")
    return float(m.group(1)) * mult


# -- hardware layer -------------------------------------------------------------------------


class SectorParams(VolumeFaultParams):
    percent: int = Field(30, ge=1, le=100)
    ops: list[str] = Field(["read"], min_length=1)  # read and/or write
    sector_start: int = Field(1953792, ge=0)
    sector_count: int = Field(64, ge=1)


@faults.register("disk-latent-sector-errors")
class DiskLatentSectorErrors(SimNodeBackend, VolumeChaos):
    """Latent sector errors on the node's disk: a share of reads (and writes) return EIO."""

    Params = SectorParams
    errno = 5

    def node_spec(self) -> Obj:
        return {**super().node_spec(), "methods": list(self.p.ops)}

    def sim_spec(self) -> Obj | None:
        return {"disk": {"errorPercent": self.p.percent, "ops": list(self.p.ops),
                         "sectorStart": self.p.sector_start, "sectorCount": self.p.sector_count}}


class CorruptionParams(VolumeFaultParams):
    max_length: int = Field(64, ge=1)


@faults.register("disk-silent-corruption")
class DiskSilentCorruption(NodeChaos):
    """Silent data corruption: reads from the node's disk return random bytes, no error."""

    Params = CorruptionParams
    kind = "IOChaos"

    def node_spec(self) -> Obj:
        return io_chaos("mistake", self.p.volume_path, self.p.percent, methods=["read"],
                        mistake={"filling": "random", "maxOccurrences": 1, "maxLength": self.p.max_length})


class SlowDiskParams(VolumeFaultParams):
    delay: str = Field("800ms", pattern=r"^\d+(\.\d+)?(us|ms|s)$")


@faults.register("disk-degraded")
class DiskDegraded(NodeChaos):
    """A failing disk that retries internally: every I/O on the node's disk is slow."""

    Params = SlowDiskParams
    kind = "IOChaos"

    def node_spec(self) -> Obj:
        return io_chaos("latency", self.p.volume_path, self.p.percent, delay=self.p.delay)


class NicParams(NodeParams):
    percent: int = Field(30, ge=1, le=100)


class NicShareChaos(SimNodeBackend, NodeChaos):
    """A share of the node's packets mishandled by its NIC: a NetworkChaos `action` on a real
    cluster, the emulated node's `<action>Percent` in the emulator."""

    Params = NicParams
    kind = "NetworkChaos"
    action: ClassVar[str] = ""

    def node_spec(self) -> Obj:
        return {"action": self.action, "direction": "to", **netem_share(self.action, self.p.percent)}

    def sim_spec(self) -> Obj | None:
        return {"nic": {f"{self.action}Percent": self.p.percent}}


@faults.register("nic-packet-corruption")
class NicPacketCorruption(NicShareChaos):
    """The node's NIC corrupts a share of packets (bad checksums, retransmits, resets)."""

    action = "corrupt"


@faults.register("nic-packet-loss")
class NicPacketLoss(NicShareChaos):
    """The node's NIC drops a share of packets."""

    action = "loss"


class BandwidthParams(NodeParams):
    rate: str = Field("1mbps", pattern=r"^\d+(bps|kbps|mbps|gbps)$")
    delay_ms: float = Field(400, ge=1)  # the queueing delay the slow link adds


@faults.register("nic-link-degraded")
class NicLinkDegraded(SimNodeBackend, NodeChaos):
    """The node's link negotiated down to a fraction of its speed."""

    Params = BandwidthParams
    kind = "NetworkChaos"

    def node_spec(self) -> Obj:
        return {"action": "bandwidth", "direction": "to",
                "bandwidth": {"rate": self.p.rate, "limit": 20971520, "buffer": 10000}}

    def sim_spec(self) -> Obj | None:
        # A slow link shows as queueing delay on every packet.
        return {"nic": {"delayMs": self.p.delay_ms}}


class CpuThrottleParams(NodeTaskParams):
    percent: int = Field(80, ge=1, le=98)  # share of the nominal speed lost


@faults.register("cpu-throttling")
class CpuThrottling(SimNodeBackend, NodeTask):
    """The node's cores are throttled (a firmware thermal limit caps scaling_max_freq): every
    pod on the node runs at a fraction of its speed."""

    Params = CpuThrottleParams

    def scripts(self) -> tuple[str, str, str]:
        files = "/sys/devices/system/cpu/cpu*/cpufreq/scaling_max_freq"
        saved = "/var/lib/scaling_max_freq.orig"
        keep = 100 - self.p.percent
        brk = (f"cat {files} | head -1 > {saved}; "
               f"for f in {files}; do echo $(( $(cat {saved}) * {keep} / 100 )) > $f; done")
        undo = f"for f in {files}; do cat {saved} > $f; done; rm -f {saved}"
        check = f"test -f {saved} && echo active || echo clean"
        return brk, undo, check

    def sim_spec(self) -> Obj | None:
        return {"cpuThrottlePercent": self.p.percent}


class CpuContentionParams(NodeParams):
    workers: int = Field(4, ge=1)
    load: int = Field(100, ge=1, le=100)


@faults.register("node-cpu-contention")
class NodeCpuContention(NodeChaos):
    """CPU burners in every application pod of the node: they starve each other."""

    Params = CpuContentionParams
    kind = "StressChaos"

    def node_spec(self) -> Obj:
        return {"stressors": {"cpu": {"workers": self.p.workers, "load": self.p.load}}}
