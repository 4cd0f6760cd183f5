"""Nodes of the emulated cluster (kind-style names), with the hardware and OS state their faults
live in: disks with bad sector ranges, NICs with loss/corruption/delay, clock offset, file
descriptor and pid tables, CPU stress. Faults arrive as `NodeFault` objects (group sim.farm.io,
cluster scoped, out of an agent's reach) or from Chaos Mesh; their symptoms reach the apps through
`io()` / `link()` and leave kernel-log lines (Loki job="node-kernel", what `dmesg` shows) and
node_exporter metrics. The kubelet's own state lives here too: a stopped kubelet or a powered-off
node (NotReady, taint-based eviction), and the eviction manager's disk and memory signals against
its thresholds (a full disk, a misconfigured evictionHard)."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from kubesim.controllers.common import delete_pod
from kubesim.lifecycle import NODE_READY, NODE_UNREACHABLE, PRESSURE_SIGNALS, NodeStage
from kubesim.runtime import CONTROLLER_MANAGER, KUBELET, KUBELET_VERSION, Disk, NodeState
from kubesim.store import Obj
from kubesim.view import ControlPlane

if TYPE_CHECKING:
    from kubesim.controllers.kubelet import Kubelet
    from kubesim.observability.loki.logs import LogStore

KERNEL_VERSION = "5.15.0-1057-azure"  # block-layer error lines carry the blk_update_request prefix
SECTOR = 512
FS_BLOCK = 4096


def _faults(spec: dict[str, Any]) -> dict[str, Any]:
    return spec or {}


def _rfc3339(stamp: str) -> float:
    from datetime import UTC, datetime

    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


class NodeFleet:
    """The nodes and their hardware/OS state; `state` is what checkpoints copy. It writes its
    kernel and journal lines to Loki's `logs`, and acts through the `kubelet` (which is given the
    fleet, so the cluster attaches it once built) on the containers of a node that powers off or
    evicts."""

    kubelet: Kubelet

    def __init__(self, control: ControlPlane, logs: LogStore, workers: int = 3) -> None:
        self.control = control
        self.logs = logs
        names = ["sim-control-plane"] + ["sim-worker" + (str(i + 1) if i else "") for i in range(workers)]
        self.state: dict[str, Any] = {"nodes": {}, "faults": {}}
        for i, name in enumerate(names):
            self.state["nodes"][name] = NodeState(name=name, ip=f"172.18.0.{i + 2}", index=i,
                                                  control_plane=(i == 0))

    @property
    def names(self) -> list[str]:
        return list(self.state["nodes"])

    def get(self, name: str) -> NodeState | None:
        return self.state["nodes"].get(name)

    def __iter__(self):
        return iter(self.state["nodes"].values())

    def __len__(self) -> int:
        return len(self.state["nodes"])

    # -- objects -----------------------------------------------------------------------------
    def bootstrap(self) -> None:
        for node in self:
            self.control.store.create("nodes", self._node_object(node))

    def _node_object(self, n: NodeState) -> Obj:
        labels = {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                  "kubernetes.io/hostname": n.name, "kubernetes.io/os": "linux"}
        taints = []
        if n.control_plane:
            labels["node-role.kubernetes.io/control-plane"] = ""
            labels["node.kubernetes.io/exclude-from-external-load-balancers"] = ""
            taints = [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]
        digest = hashlib.sha256(n.name.encode()).hexdigest()
        mem_ki = int(n.memory // 1024)
        capacity = {"cpu": str(int(n.cpu)), "ephemeral-storage": "102625208Ki", "hugepages-1Gi": "0",
                    "hugepages-2Mi": "0", "memory": f"{mem_ki}Ki", "pods": "110"}
        stamp = self.control.clock.rfc3339()
        cond = [("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                ("Ready", "True", "KubeletReady", "kubelet is posting ready status")]
        return {
            "metadata": {"name": n.name, "labels": labels, "annotations": {
                "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock",
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
            "spec": {"podCIDR": f"10.244.{n.index}.0/24", "podCIDRs": [f"10.244.{n.index}.0/24"],
                     "providerID": f"kind://docker/sim/{n.name}", **({"taints": taints} if taints else {})},
            "status": {
                "capacity": capacity, "allocatable": dict(capacity),
                "conditions": [{"type": t, "status": s, "reason": r, "message": m, "lastHeartbeatTime": stamp,
                                "lastTransitionTime": stamp} for t, s, r, m in cond],
                "addresses": [{"type": "InternalIP", "address": n.ip}, {"type": "Hostname", "address": n.name}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {"architecture": "amd64", "bootID": digest[:8] + "-" + digest[8:12] + "-" + digest[12:16]
                             + "-" + digest[16:20] + "-" + digest[20:32], "containerRuntimeVersion": "containerd://1.7.13",
                             "kernelVersion": KERNEL_VERSION, "kubeProxyVersion": KUBELET_VERSION,
                             "kubeletVersion": KUBELET_VERSION, "machineID": digest[:32], "operatingSystem": "linux",
                             "osImage": "Debian GNU/Linux 12 (bookworm)", "systemUUID": digest[32:64]},
            },
        }

    def allocate_pod_ip(self, node: str) -> str:
        n = self.state["nodes"][node]
        ip = f"10.244.{n.index}.{n.next_ip}"
        n.next_ip = n.next_ip + 1 if n.next_ip < 254 else 2
        return ip

    # -- faults (NodeFault objects, re-read every pass so checkpoints stay consistent) ---------
    def reconcile(self, now: float) -> None:
        store = self.control.store
        faults: dict[str, dict[str, Any]] = {}
        with store.lock:
            for obj in store.iter_raw("nodefaults.sim.farm.io"):
                if obj["metadata"].get("deletionTimestamp"):
                    continue
                spec = obj.get("spec") or {}
                node = spec.get("nodeName")
                if isinstance(node, str) and node in self.state["nodes"]:
                    merged = faults.setdefault(node, {})
                    for k, v in spec.items():
                        if k != "nodeName":
                            merged[k] = v
        for node, merged in faults.items():
            fill = merged.get("diskFillBytes")
            if fill is not None and merged.get("diskFullPercent") is None:
                # A file of that size on the node's root disk: what df would then show as used.
                disk = self.state["nodes"][node].disks[0]
                merged["diskFullPercent"] = min(100.0, 100.0 * (disk.used_bytes + float(fill)) / disk.size_bytes)
        self.state["faults"] = faults
        for n in self:
            self._lifecycle(n, now)
            if not self.powered_off(n.name):
                self._fault_lines(n, now)

    # -- node lifecycle: kubelet heartbeats, the node controller, taint-based eviction ----------
    GRACE = NODE_UNREACHABLE.delay  # node-monitor-grace-period

    def kubelet_stopped(self, node: str | None) -> bool:
        return bool(self.fault(node, "kubeletStopped") or self.fault(node, "nodeDown"))

    def powered_off(self, node: str | None) -> bool:
        return bool(self.fault(node, "nodeDown"))

    def _lifecycle(self, n: NodeState, now: float) -> None:
        cl = self.control
        stopped = self.kubelet_stopped(n.name)
        life = n.reported.setdefault("life", {})
        if stopped and "since" not in life:
            life["since"] = now
            cl.wake_at(now + self.GRACE)
            if self.powered_off(n.name):
                self.kernel_log(n.name, ["reboot: Power down"])
                # Every process of the machine dies with it; the kubelet, once back, finds the
                # containers gone (Terminated, reason Unknown, exit 255) and starts them again.
                for rt in list(self.kubelet.state["pods"].values()):
                    if rt.node == n.name:
                        for c in list(rt.containers.values()):
                            self.kubelet.terminate(rt.namespace, rt.name, c.name, 255, "Unknown")
        if not stopped:
            self._pressure(n, now)
            self._report_status(n, now)
        if not stopped and "since" in life:
            was_unready = life.get("unready")
            life.clear()
            if was_unready:
                self._enter(n.name, NODE_READY, now)
        elif stopped and not life.get("unready") and now - life["since"] >= self.GRACE - 1e-9:
            life["unready"] = now
            self._enter(n.name, NODE_UNREACHABLE, now)
        self._taint_evictions(n, now)

    STATUS_REPORT_INTERVAL = 300.0  # kubelet nodeStatusReportFrequency: an unchanged status is re-posted this often

    def _report_status(self, n: NodeState, now: float) -> None:
        """The kubelet re-posting an unchanged node status, which moves every condition's
        lastHeartbeatTime (its Lease, renewed every 10 s, is a view: subresources.node_leases)."""
        last = n.reported.get("status_report")
        if last is not None and now - last < self.STATUS_REPORT_INTERVAL - 1e-9:
            return
        if last is not None:
            stamp = self.control.clock.rfc3339(now)

            def beat(o: Obj) -> None:
                for c in o["status"].get("conditions") or []:
                    c["lastHeartbeatTime"] = stamp
            self.control.store.mutate("nodes", "", n.name, beat, subresource="status", manager=KUBELET)
        n.reported["status_report"] = now
        self.control.wake_at(now + self.STATUS_REPORT_INTERVAL)

    EVICTION_INTERVAL = 10.0  # kubelet --eviction-monitoring-interval
    SYSTEM_MEMORY_SHARE = 0.1  # what the OS, kubelet and containerd hold: node_exporter's MemAvailable leaves it out
    def memory_available(self, n: NodeState) -> float:
        """memory.available as the kubelet computes it: capacity minus the node's working set."""
        used = sum(c.memory for rt in self.kubelet.state["pods"].values() if rt.node == n.name and not rt.evicted
                   for c in rt.containers.values())
        return max(0.0, n.memory * (1 - self.SYSTEM_MEMORY_SHARE) - used)

    def memory_threshold(self, n: NodeState) -> float:
        """evictionHard memory.available: the NodeFault's value, else the kubelet default 100Mi."""
        from kubesim.quantity import parse_quantity

        value = str((self.fault(n.name, "evictionHard") or {}).get("memory.available", "100Mi"))
        if value.endswith("%"):
            return n.memory * float(value[:-1]) / 100.0
        return parse_quantity(value)

    def _pressure(self, n: NodeState, now: float) -> None:
        """The eviction manager: nodefs.available<10% (DiskPressure) and memory.available below
        its evictionHard threshold (MemoryPressure), each with its condition, taint and one
        eviction per monitoring interval while the signal stays below the threshold."""
        full = float(self.fault(n.name, "diskFullPercent") or 0.0)
        self._signal(n, now, "disk", full >= 90.0)
        if self.fault(n.name, "evictionHard") or n.reported.get("pressure-memory", {}).get("on"):
            self._signal(n, now, "memory", self.memory_available(n) < self.memory_threshold(n))

    def _signal(self, n: NodeState, now: float, signal: str, under: bool) -> None:
        cl = self.control
        sig = PRESSURE_SIGNALS[signal]
        cond_type, taint_key, resource = sig.condition, sig.taint_key, sig.resource
        press = n.reported.setdefault("pressure" if signal == "disk" else f"pressure-{signal}", {})
        stamp = cl.clock.rfc3339(now)
        if under != bool(press.get("on")):
            press["on"] = under

            def report(o: Obj) -> None:
                for c in o["status"].get("conditions") or []:
                    if c["type"] == cond_type:
                        reason, message = sig.under if under else sig.clear
                        c.update(status="True" if under else "False", lastTransitionTime=stamp,
                                 reason=reason, message=message)

            def edit(o: Obj) -> None:  # the node lifecycle controller taints the node by its condition
                taints = [t for t in o["spec"].get("taints") or [] if t.get("key") != taint_key]
                if under:
                    taints.append({"key": taint_key, "effect": "NoSchedule", "timeAdded": stamp})
                if taints:
                    o["spec"]["taints"] = taints
                else:
                    o["spec"].pop("taints", None)
            cl.store.mutate("nodes", "", n.name, report, subresource="status", manager=KUBELET)
            obj = cl.store.mutate("nodes", "", n.name, edit, manager=CONTROLLER_MANAGER)
            word = sig.events[0] if under else sig.events[1]
            cl.events.record(obj, "Normal", word, f"Node {n.name} status is now: {word}", "kubelet", n.name)
        if not under or now - press.get("last", -1e18) < self.EVICTION_INTERVAL:
            if under:
                cl.wake_at(press.get("last", now) + self.EVICTION_INTERVAL)
            return
        press["last"] = now
        cl.wake_at(now + self.EVICTION_INTERVAL)
        cl.events.record(cl.store.get("nodes", "", n.name), "Warning", "EvictionThresholdMet",
                         f"Attempting to reclaim {resource}", "kubelet", n.name)
        victims = [p for p in cl.store.scan("pods") if p["spec"].get("nodeName") == n.name
                   and (p.get("status") or {}).get("phase") in ("Running", "Pending")
                   and not p["metadata"].get("deletionTimestamp")
                   and p["spec"].get("priorityClassName") not in ("system-node-critical", "system-cluster-critical")]
        if not victims:
            return
        if signal == "disk":
            order = {"BestEffort": 0, "Burstable": 1, "Guaranteed": 2}
            victim = min(victims, key=lambda p: (order.get((p.get("status") or {}).get("qosClass", "BestEffort"), 0),
                                                 p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]))
            disk = n.disks[0]
            avail = disk.size_bytes * max(0.0, 1 - float(self.fault(n.name, "diskFullPercent") or 0.0) / 100.0)
            self.kubelet.evict(victim, f"The node was low on resource: ephemeral-storage. Threshold quantity: "
                                     f"{int(disk.size_bytes * 0.1)}, available: {int(avail // 1024)}Ki. ")
            return
        self._evict_for_memory(n, victims)

    def _evict_for_memory(self, n: NodeState, victims: list[Obj]) -> None:
        """rankMemoryPressure: pods using more than they request first, then lower priority, then
        the usage above the request, largest first; the message names the container that used most."""
        from kubesim.quantity import parse_quantity

        kubelet = self.kubelet

        def usage(p: Obj) -> dict[str, float]:
            rt = kubelet.runtime(p)
            return {c.name: c.memory for c in rt.containers.values()} if rt is not None else {}

        def request(p: Obj) -> dict[str, float]:
            out = {}
            for c in p["spec"].get("containers") or []:
                v = ((c.get("resources") or {}).get("requests") or {}).get("memory")
                out[c["name"]] = parse_quantity(v) if v else 0.0
            return out

        def rank(p: Obj) -> tuple[int, int, float, str]:
            over = sum(usage(p).values()) - sum(request(p).values())
            return (0 if over > 0 else 1, int(p["spec"].get("priority") or 0), -over, p["metadata"]["name"])
        victim = min(victims, key=rank)
        used, req = usage(victim), request(victim)
        top = max(used, key=lambda k: used[k] - req.get(k, 0.0)) if used else ""
        cl_avail = self.memory_available(n)
        message = (f"The node was low on resource: memory. Threshold quantity: {int(self.memory_threshold(n))}, "
                   f"available: {int(cl_avail // 1024)}Ki. ")
        if top:
            message += (f"Container {top} was using {int(used[top] // 1024)}Ki, request is "
                        f"{int(req.get(top, 0.0)) if req.get(top) else 0}, has larger consumption of memory. ")
        kubelet.evict(victim, message)

    def _enter(self, node: str, stage: NodeStage, now: float) -> None:
        """Apply a readiness transition (kubesim/lifecycle.py): the conditions, the taints, the
        node's event, and, for the node controller's, its pods marked unready."""
        cl = self.control
        stamp = cl.clock.rfc3339(now)

        def report(o: Obj) -> None:
            for c in o["status"].get("conditions") or []:
                patch = stage.patch_for(c["type"])
                if patch is not None:
                    c["status"], c["reason"], c["message"] = patch.status, patch.reason, patch.message
                if stage.heartbeat:
                    c["lastHeartbeatTime"] = stamp
                c["lastTransitionTime"] = stamp

        def edit(o: Obj) -> None:
            taints = [t for t in (o["spec"].get("taints") or []) if t.get("key") != stage.taint_key]
            taints += [{"key": stage.taint_key, "effect": effect, "timeAdded": stamp} for effect in stage.taint_effects]
            if taints:
                o["spec"]["taints"] = taints
            else:
                o["spec"].pop("taints", None)
        cl.store.mutate("nodes", "", node, report, subresource="status", manager=stage.manager)
        obj = cl.store.mutate("nodes", "", node, edit, manager=CONTROLLER_MANAGER)
        type_, reason, message = stage.event
        cl.events.record(obj, type_, reason, message.format(node=node), "node-controller")
        if stage.pod_event is None:
            return
        for pod in cl.store.scan("pods"):
            if pod["spec"].get("nodeName") != node:
                continue
            cl.events.record(pod, *stage.pod_event, "node-controller")

            def unready(o: Obj) -> None:
                for c in o.get("status", {}).get("conditions") or []:
                    if c["type"] in stage.pod_conditions_false:
                        c["status"], c["lastTransitionTime"] = "False", stamp
                        c.pop("reason", None)
                        c.pop("message", None)
            try:
                cl.store.mutate("pods", pod["metadata"]["namespace"], pod["metadata"]["name"], unready,
                                subresource="status", manager=CONTROLLER_MANAGER)
            except Exception:
                pass

    def _taint_evictions(self, n: NodeState, now: float) -> None:
        """The taint-eviction controller: for every NoExecute taint of the node (the node
        controller's unreachable/not-ready ones, or anyone's), a pod that does not tolerate it is
        deleted (gracefully) at once, one that tolerates it for tolerationSeconds goes that long after the taint was
        added (timeAdded, else when this controller first saw it), one that tolerates it without a
        limit stays."""
        from kubesim.controllers.scheduler import _tolerates

        cl = self.control
        node = cl.store.raw("nodes", "", n.name) or {}
        taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("effect") == "NoExecute"]
        seen = n.reported.setdefault("noexecute", {})
        keys = {f"{t.get('key')}={t.get('value', '')}": t for t in taints}
        for k in [k for k in seen if k not in keys]:
            seen.pop(k)
        if not taints:
            return
        added: dict[str, float] = {}
        for k, t in keys.items():
            first = seen.setdefault(k, now)
            stamp = t.get("timeAdded")
            added[k] = _rfc3339(stamp) if stamp else first
        for pod in list(cl.store.scan("pods", None)):
            if pod["spec"].get("nodeName") != n.name or pod["metadata"].get("deletionTimestamp"):
                continue
            tolerations = pod["spec"].get("tolerations") or []
            due = float("inf")
            for k, taint in keys.items():
                matching = [t for t in tolerations if _tolerates([t], taint)]
                if not matching:
                    due = min(due, added[k])
                    continue
                limits = [float(t["tolerationSeconds"]) for t in matching if t.get("tolerationSeconds") is not None]
                if len(limits) == len(matching):
                    due = min(due, added[k] + max(0.0, min(limits)))
            if due == float("inf"):
                continue
            if now + 1e-9 < due:
                cl.wake_at(due)
                continue
            cl.events.record(pod, "Normal", "TaintManagerEviction",
                             f"Marking for deletion Pod {pod['metadata']['namespace']}/{pod['metadata']['name']}",
                             "taint-eviction-controller")
            delete_pod(cl.store, pod)  # Terminating; on a node whose kubelet is down it stays so until forced

    def fault(self, node: str | None, kind: str) -> Any:
        if not node:
            return None
        return (self.state["faults"].get(node) or {}).get(kind)

    def clock_offset(self, node: str | None) -> float:
        return float(self.fault(node, "clockOffsetSeconds") or 0.0)

    def fd_exhausted(self, node: str | None) -> bool:
        """A `fileMax` fault means the node's file table is full at that size (a leak filled it)."""
        return self.fault(node, "fileMax") is not None

    def pid_exhausted(self, node: str | None) -> bool:
        """A `pidMax` fault means every pid up to that limit is taken (a fork bomb or leak)."""
        return self.fault(node, "pidMax") is not None

    def cpu_factor(self, node: str | None) -> float:
        """Fraction of nominal CPU speed the node gives (thermal/firmware throttling)."""
        v = self.fault(node, "cpuThrottlePercent")
        return max(0.02, 1.0 - float(v) / 100.0) if v else 1.0

    def link(self, node: str | None) -> dict[str, float]:
        """Loss/corruption/delay of the node's NIC (fractions and ms)."""
        nic = self.fault(node, "nic") or {}
        return {"loss": float(nic.get("lossPercent", 0)) / 100.0, "corrupt": float(nic.get("corruptPercent", 0)) / 100.0,
                "delay_ms": float(nic.get("delayMs", 0)),
                "down": 1.0 if nic.get("down") or self.powered_off(node) else 0.0}

    def io(self, node: str | None, op: str, nbytes: float, count: float = 1.0, comm: str = "mongod") -> float:
        """Account `count` I/O operations of `nbytes` each on the node's disk; return the fraction
        that fail with EIO (bad sectors), logging the kernel lines the block layer prints."""
        if not node or node not in self.state["nodes"]:
            return 0.0
        n = self.state["nodes"][node]
        disk = n.disks[0]
        if op == "read":
            disk.reads += count
            disk.read_bytes += nbytes * count
        else:
            disk.writes += count
            disk.written_bytes += nbytes * count
        disk.io_time += count * 0.0002
        bad = self.fault(node, "disk") or {}
        frac = float(bad.get("errorPercent", 0)) / 100.0 if bad else 0.0
        if bad and not frac and bad.get("sectorCount"):
            frac = min(1.0, float(bad["sectorCount"]) / 2048.0)  # share of the hot data region
        if frac <= 0 or (bad.get("ops") and op not in bad["ops"]):
            return 0.0
        failed = count * frac
        if failed > 0:
            disk.errors += max(1, int(failed))
            self.log_io_errors(n, disk, bad, op, comm, max(1, min(3, int(failed + 0.999))))
        return min(1.0, frac)

    def log_io_errors(self, n: NodeState, disk: Disk, bad: dict[str, Any], op: str, comm: str, lines: int) -> None:
        now = self.control.clock.now()
        last = n.reported.get("io", -1e18)
        if now - last < 5.0:
            return
        n.reported["io"] = now
        start = int(bad.get("sectorStart", 1953792))
        count = max(1, int(bad.get("sectorCount", 8)))
        out = []
        for i in range(lines):
            sector = start + (i * 8) % count
            opname = "0x0:(READ)" if op == "read" else "0x1:(WRITE)"
            out.append(f"blk_update_request: I/O error, dev {disk.device}, sector {sector} op {opname} flags 0x80700 "
                       "phys_seg 1 prio class 0")
            block = (sector - 2048) * SECTOR // FS_BLOCK
            out.append(f"Buffer I/O error on dev {disk.partition}, logical block {block}, "
                       + ("async page read" if op == "read" else "lost async page write"))
        if op != "read":
            out.append(f"EXT4-fs warning (device {disk.partition}): ext4_end_bio:343: I/O error 10 writing to inode "
                       f"{int(bad.get('inode', 1311042))} starting block {start // 8})")
        self.kernel_log(n.name, out)

    def kernel_log(self, node: str, lines: list[str]) -> None:
        """Lines as the node's kernel ring buffer prints them (dmesg timestamps since boot)."""
        n = self.state["nodes"][node]
        now = self.control.clock.now()
        labels = {"job": "node-kernel", "node_name": node, "host": node, "unit": "kernel"}
        boot = 86400.0 * 3 + 1234.567
        for i, line in enumerate(lines):
            t = now - self.control.clock.now() + now
            up = boot + (now - self.control.clock.start) + i * 1e-5
            n.kernel_seq += 1
            self.logs.append(labels, t + i * 1e-4, f"[{up:12.6f}] {line}")

    def journal_log(self, node: str, unit: str, lines: list[str], pid: int) -> None:
        """Lines a systemd unit of the node writes to the journal (Loki job="node-journal")."""
        from datetime import UTC, datetime

        now = self.control.clock.now()
        labels = {"job": "node-journal", "node_name": node, "host": node, "unit": unit}
        stamp = datetime.fromtimestamp(now + self.clock_offset(node), UTC).strftime("%b %d %H:%M:%S")
        name = unit.removesuffix(".service")
        for i, line in enumerate(lines):
            self.logs.append(labels, now + i * 1e-4, f"{stamp} {node} {name}[{pid}]: {line}")

    # -- what the kernel prints while a fault is active ------------------------------------------
    NET_RATELIMIT_S = 60.0  # one `net_ratelimit: N callbacks suppressed` summary a minute
    THERMAL_RATELIMIT_S = 300.0  # therm_throt logs a CPU's throttling at most every 5 minutes

    def _fault_lines(self, n: NodeState, now: float) -> None:
        """Kernel-log lines for the node's active faults, the first when the fault starts and the
        repeats at the kernel's own rate limits; the all-clear lines when it ends."""
        lines: list[str] = []
        seen = n.reported.setdefault("klog", {})
        active = self.state["faults"].get(n.name) or {}
        cpus = max(1, int(n.cpu))
        # pids: the pids controller refuses forks in every container cgroup of the node, once per
        # cgroup (the kernel prints the first rejection of each cgroup only).
        if active.get("pidMax") is not None:
            done = seen.setdefault("pids", [])
            for rt in self.kubelet.state["pods"].values():
                if rt.node != n.name:
                    continue
                pod = self.control.store.raw("pods", rt.namespace, rt.name) or {}
                qos = ((pod.get("status") or {}).get("qosClass") or "BestEffort").lower()
                parent = "/kubepods" + ("" if qos == "guaranteed" else f"/{qos}") + f"/pod{rt.uid}"
                for c in rt.containers.values():
                    cid = c.container_id.removeprefix("containerd://")
                    if c.state != "running" or not cid or cid in done:
                        continue
                    done.append(cid)
                    lines.append(f"cgroup: fork rejected by pids controller in {parent}/{cid}")
        else:
            seen.pop("pids", None)
        nic = active.get("nic") or {}
        dev = n.nics[0].device
        loss, corrupt = float(nic.get("lossPercent", 0) or 0), float(nic.get("corruptPercent", 0) or 0)
        if loss or corrupt:
            first = "nic" not in seen
            last = seen.setdefault("nic", {"at": now})
            if first:
                if corrupt:
                    lines += [f"{dev}: hw csum failure",
                              f"CPU: 1 PID: 0 Comm: swapper/1 Not tainted {KERNEL_VERSION} #65-Ubuntu",
                              "Call Trace:", " <IRQ>", " dump_stack_lvl+0x4a/0x63", " netdev_rx_csum_fault.part.0+0x3d/0x41",
                              " __skb_checksum_complete+0xcf/0xe0", " tcp_v4_rcv+0x9a4/0xe90", " </IRQ>"]
                if loss:
                    lines += [f"NETDEV WATCHDOG: {dev} (hv_netvsc): transmit queue 0 timed out",
                              "WARNING: CPU: 0 PID: 0 at net/sched/sch_generic.c:477 dev_watchdog+0x21e/0x230"]
            elif now - last["at"] >= self.NET_RATELIMIT_S:
                # What the suppressed messages would have said, in proportion to the damage.
                suppressed = int(5 + (now - last["at"]) * (corrupt + loss) / 10.0)
                last["at"] = now
                lines.append(f"net_ratelimit: {suppressed} callbacks suppressed")
                if corrupt:
                    lines.append(f"{dev}: hw csum failure")
            self.control.wake_at(last["at"] + self.NET_RATELIMIT_S)
        else:
            seen.pop("nic", None)
        offset = float(active.get("clockOffsetSeconds") or 0.0)
        if offset and "clock" not in seen:
            seen["clock"] = now
            wd = int(now * 14318180) & 0xFFFFFFFF  # the HPET's 14.318 MHz counter
            cs = int((now + offset) * 2.4e9)  # the TSC at 2.4 GHz
            lines += ["clocksource: timekeeping watchdog on CPU0: Marking clocksource 'tsc' as unstable because the skew is too large:",
                      f"clocksource:                       'hpet' wd_nsec: 512000000 wd_now: {wd:x} wd_last: {(wd - 7331000) & 0xFFFFFFFF:x} mask: ffffffff",
                      f"clocksource:                       'tsc' cs_nsec: {int(512e6 + abs(offset) * 1e9)} cs_now: {cs:x} "
                      f"cs_last: {cs - 1228800000:x} mask: ffffffffffffffff",
                      "clocksource:                       'tsc' is current clocksource.",
                      "tsc: Marking TSC unstable due to clocksource watchdog",
                      "clocksource: Switched to clocksource hpet"]
            # Why nobody steps the clock back: the node's NTP client cannot reach its servers.
            self.journal_log(n.name, "systemd-timesyncd.service", [
                "Timed out waiting for reply from 185.125.190.57:123 (ntp.ubuntu.com).",
                "Timed out waiting for reply from 185.125.190.58:123 (ntp.ubuntu.com).",
                "Timed out waiting for reply from 91.189.91.157:123 (ntp.ubuntu.com)."], 612)
        elif not offset:
            seen.pop("clock", None)
        throttle = float(active.get("cpuThrottlePercent") or 0.0)
        if throttle:
            th = seen.setdefault("thermal", {"at": -1e18, "events": 0})
            if now - th["at"] >= self.THERMAL_RATELIMIT_S:
                # PROCHOT fires many times between two reports; the first report counts one.
                th["events"] = th["events"] + int(throttle) * 3 if th["events"] else 1
                th["at"] = now
                lines += [f"CPU{i}: Core temperature above threshold, cpu clock throttled (total events = {th['events']})"
                          for i in range(cpus)]
                lines += [f"CPU{i}: Package temperature above threshold, cpu clock throttled (total events = {th['events']})"
                          for i in range(cpus)]
            self.control.wake_at(th["at"] + self.THERMAL_RATELIMIT_S)
        elif seen.pop("thermal", None) is not None:
            lines += [f"CPU{i}: Core temperature/speed normal" for i in range(cpus)]
            lines += [f"CPU{i}: Package temperature/speed normal" for i in range(cpus)]
        if lines:
            self.kernel_log(n.name, lines)

    def account_cpu(self, node: str, seconds: float) -> None:
        self.state["nodes"][node].cpu_seconds += seconds
