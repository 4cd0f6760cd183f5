"""Chaos Mesh's controllers for PodChaos, NetworkChaos, IOChaos, StressChaos, TimeChaos and
KernelChaos (chaos-mesh.org/v1alpha1): the shared selector (namespaces, labelSelectors,
expressionSelectors, annotationSelectors, pods, nodes, nodeSelectors, podPhaseSelectors), mode
(one, all, fixed, fixed-percent, random-max-percent) and value, duration, the `chaos-mesh/records`
finalizer and status records/conditions as the real one writes them. Deleting the resource
recovers. The effects are read by the network, kubelet, workload and store models."""

from __future__ import annotations

import copy
import fnmatch
import math
import re
from typing import TYPE_CHECKING, Any

from kubesim.controllers.common import delete_pod
from kubesim.quantity import parse_quantity
from kubesim.store import Obj, StoreError, match_labels
from kubesim.view import ControlPlane

if TYPE_CHECKING:
    from kubesim.controllers.kubelet import Kubelet
    from kubesim.nodes import NodeFleet

FINALIZER = "chaos-mesh/records"
KINDS = ("podchaos", "networkchaos", "iochaos", "stresschaos", "timechaos", "kernelchaos")
CHAOS_MANAGER = "chaos-controller-manager"  # Chaos Mesh's User-Agent, its field manager
PAUSE = "gcr.io/google-containers/pause:latest"


def parse_duration(text: str | None) -> float | None:
    """Go durations: `30s`, `5m`, `1h30m`, `100ms`, `-10m`."""
    if text in (None, ""):
        return None
    s = str(text).strip()
    sign = -1.0 if s.startswith("-") else 1.0
    s = s.lstrip("+-")
    total = 0.0
    for num, unit in re.findall(r"([0-9.]+)(ns|us|µs|ms|s|m|h)", s):
        total += float(num) * {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}[unit]
    if not total and s.replace(".", "").isdigit():
        total = float(s)
    return sign * total


def parse_size(text: Any, limit: float) -> float:
    s = str(text or "0").strip()
    if s.endswith("%"):
        return float(s[:-1]) / 100.0 * (limit or 16 * 2**30)
    m = re.match(r"([0-9.]+)\s*([KMGT]?)(i?)B?$", s, re.I)
    if m:
        mult = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[m.group(2).upper()]
        if m.group(3):
            mult = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[m.group(2).upper()]
        return float(m.group(1)) * mult
    return parse_quantity(s)


class ChaosController:
    """Chaos Mesh's controller manager: it reads pods' memory limits from the `kubelet` and writes
    its disk and kernel faults' lines through the `nodes`."""

    def __init__(self, control: ControlPlane, kubelet: Kubelet, nodes: NodeFleet) -> None:
        self.control = control
        self.kubelet = kubelet
        self.nodes = nodes
        self.state: dict[str, Any] = {"effects": {}, "images": {}}

    # -- reconcile ------------------------------------------------------------------------------
    def reconcile(self, now: float) -> None:
        store = self.control.store
        effects: dict[str, list[dict[str, Any]]] = {}
        for kind in KINDS:
            key = f"{kind}.chaos-mesh.org"
            if key not in store.types:
                continue
            for obj in store.list(key):
                try:
                    self._sync(key, kind, obj, now, effects)
                except StoreError:
                    continue
        self.state["effects"] = effects

    def _sync(self, key: str, kind: str, obj: Obj, now: float, effects: dict[str, list[dict[str, Any]]]) -> None:
        store = self.control.store
        meta = obj["metadata"]
        ns, name = meta["namespace"], meta["name"]
        status = copy.deepcopy(obj.get("status") or {})
        exp = status.setdefault("experiment", {})
        records = exp.setdefault("containerRecords", [])
        if meta.get("deletionTimestamp"):
            self._recover(kind, obj, records, now)
            uids = self.state.get("uids", {})
            for k in [k for k in uids if k.startswith(f"{meta.get('uid')}|")]:
                del uids[k]
            obj2 = store.get(key, ns, name)
            obj2["metadata"]["finalizers"] = [f for f in obj2["metadata"].get("finalizers") or [] if f != FINALIZER]
            obj2["metadata"].pop("resourceVersion", None)
            store.replace(key, obj2, check_rv=False)
            return
        if FINALIZER not in (meta.get("finalizers") or []):
            def fin(o: Obj) -> None:
                o["metadata"].setdefault("finalizers", []).append(FINALIZER)
            store.mutate(key, ns, name, fin)
            self.control.events.record(obj, "Normal", "FinalizerInited", "Finalizer has been inited", "initFinalizers")
            obj = store.get(key, ns, name)
        spec = obj.get("spec") or {}
        start = _ts(meta.get("creationTimestamp"))
        duration = parse_duration(spec.get("duration"))
        paused = (meta.get("annotations") or {}).get("experiment.chaos-mesh.org/pause") == "true"
        expired = duration is not None and now >= start + duration
        if expired and duration is not None:
            pass
        elif duration is not None:
            self.control.wake_at(start + duration)
        want_run = not expired and not paused
        if not records and want_run:
            targets = self._select(ns, spec.get("selector") or {}, spec.get("mode", "one"), spec.get("value"))
            for pod in targets:
                rid = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
                if kind == "podchaos" and spec.get("action") == "container-kill":
                    for c in spec.get("containerNames") or [pod["spec"]["containers"][0]["name"]]:
                        records.append(self._record(f"{rid}/{c}", ".", now))
                else:
                    records.append(self._record(rid, ".", now))
            if kind == "networkchaos" and spec.get("target"):
                tgt = spec["target"]
                for pod in self._select(ns, tgt.get("selector") or {}, tgt.get("mode", "all"), tgt.get("value")):
                    records.append(self._record(f"{pod['metadata']['namespace']}/{pod['metadata']['name']}", ".Target", now))
            for rec in records:
                self._apply(kind, obj, rec, now)
            exp["desiredPhase"] = "Run"
            # Selected once, at the start: the very pods (by uid) the experiment holds. A pod
            # created later, even one with the same name (a StatefulSet's), is never injected.
            for pod in store.list("pods"):
                pid = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
                if any(r["id"].startswith(pid + "/") or r["id"] == pid for r in records):
                    self.state.setdefault("uids", {})[f"{meta.get('uid')}|{pid}"] = pod["metadata"].get("uid")
        elif records and not want_run and exp.get("desiredPhase") != "Stop":
            self._recover(kind, obj, records, now)
            exp["desiredPhase"] = "Stop"
        if want_run and records:
            exp["desiredPhase"] = "Run"
            for rec in records:
                if rec["phase"] == "Injected" and self._same_pod(meta, rec):
                    effects.setdefault(rec["id"], []).append({"kind": kind, "spec": spec, "selectorKey": rec["selectorKey"],
                                                              "chaos": f"{ns}/{name}"})
        stamp = self.control.clock.rfc3339(now)
        injected = bool(records) and all(r["phase"] == "Injected" for r in records)
        recovered = bool(records) and all(r["phase"] == "Not Injected" for r in records)
        status["conditions"] = [
            {"type": "Selected", "status": "True" if records else "False"},
            {"type": "AllInjected", "status": "True" if injected else "False"},
            {"type": "AllRecovered", "status": "True" if recovered else "False"},
            {"type": "Paused", "status": "True" if paused else "False"}]
        if obj.get("status") != status:
            def put(o: Obj, st: dict[str, Any] = status) -> None:
                o["status"] = st
            store.mutate(key, ns, name, put, subresource="status", manager=CHAOS_MANAGER)
        del stamp

    def _same_pod(self, chaos_meta: Obj, rec: dict[str, Any]) -> bool:
        """The record's pod is still the one selected at the start (not a replacement)."""
        pid = "/".join(rec["id"].split("/")[:2])
        selected = self.state.get("uids", {}).get(f"{chaos_meta.get('uid')}|{pid}")
        if selected is None:
            return True  # selected before uids were kept (an older checkpoint)
        ns, name = pid.split("/", 1)
        pod = self.control.store.try_get("pods", ns, name)
        return pod is not None and pod["metadata"].get("uid") == selected

    def _record(self, rid: str, selector_key: str, now: float) -> dict[str, Any]:
        return {"id": rid, "selectorKey": selector_key, "phase": "Not Injected", "injectedCount": 0, "recoveredCount": 0,
                "events": []}

    def _apply(self, kind: str, chaos: Obj, rec: dict[str, Any], now: float) -> None:
        store, kubelet = self.control.store, self.kubelet
        spec = chaos.get("spec") or {}
        parts = rec["id"].split("/")
        ns, pod_name = parts[0], parts[1]
        stamp = self.control.clock.rfc3339(now)
        pod = store.try_get("pods", ns, pod_name)
        if pod is not None:
            if kind == "podchaos" and spec.get("action") == "pod-kill":
                delete_pod(store, pod, int(spec.get("gracePeriod") or 0))  # Chaos Mesh's default: 0, at once
            elif kind == "podchaos" and spec.get("action") == "container-kill":
                kubelet.terminate(ns, pod_name, parts[2], 137, "Error")
            elif kind == "podchaos" and spec.get("action") == "pod-failure":
                originals = {c["name"]: c["image"] for c in pod["spec"]["containers"]}
                self.state["images"][rec["id"]] = originals

                def pause(o: Obj) -> None:
                    for c in o["spec"]["containers"]:
                        c["image"] = PAUSE
                store.mutate("pods", ns, pod_name, pause)
        rec["phase"] = "Injected"
        rec["injectedCount"] += 1
        rec["events"].append({"operation": "Apply", "timestamp": stamp, "type": "Succeeded"})
        self.control.events.record(chaos, "Normal", "Applied", f"Successfully apply chaos for {rec['id']}", "records")
        if kind == "kernelchaos":
            self._kernel_lines(chaos, rec)

    def _recover(self, kind: str, chaos: Obj, records: list[dict[str, Any]], now: float) -> None:
        store = self.control.store
        spec = chaos.get("spec") or {}
        stamp = self.control.clock.rfc3339(now)
        for rec in records:
            if rec["phase"] != "Injected":
                continue
            ns, pod_name = rec["id"].split("/")[:2]
            if kind == "podchaos" and spec.get("action") == "pod-failure":
                originals = self.state["images"].pop(rec["id"], {})
                if store.try_get("pods", ns, pod_name) is not None and originals and self._same_pod(
                        chaos["metadata"], rec):
                    def restore(o: Obj, originals: dict[str, str] = originals) -> None:
                        for c in o["spec"]["containers"]:
                            c["image"] = originals.get(c["name"], c["image"])
                    store.mutate("pods", ns, pod_name, restore)
            rec["phase"] = "Not Injected"
            rec["recoveredCount"] += 1
            rec["events"].append({"operation": "Recover", "timestamp": stamp, "type": "Succeeded"})
            self.control.events.record(chaos, "Normal", "Recovered", f"Successfully recover chaos for {rec['id']}", "records")
        # the finalizer path writes the records back before dropping it
        key = f"{chaos['kind'].lower()}.chaos-mesh.org"
        try:
            def put(o: Obj) -> None:
                o.setdefault("status", {}).setdefault("experiment", {})["containerRecords"] = records
                o["status"]["experiment"]["desiredPhase"] = "Stop"
            store.mutate(key, chaos["metadata"]["namespace"], chaos["metadata"]["name"], put, subresource="status",
                             manager=CHAOS_MANAGER)
        except StoreError:
            pass

    # -- selection ------------------------------------------------------------------------------
    def _select(self, chaos_ns: str, sel: dict[str, Any], mode: str, value: Any) -> list[Obj]:
        store = self.control.store
        namespaces = sel.get("namespaces")
        candidates = []
        explicit = sel.get("pods") or {}
        for pod in store.list("pods"):
            m = pod["metadata"]
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") or m.get("deletionTimestamp"):
                continue
            if explicit:
                if m["name"] not in (explicit.get(m["namespace"]) or []):
                    continue
            elif namespaces and m["namespace"] not in namespaces:
                continue
            elif not namespaces and m["namespace"] != chaos_ns:
                continue
            if sel.get("labelSelectors") and not match_labels(sel["labelSelectors"], m.get("labels")):
                continue
            if sel.get("expressionSelectors") and not match_labels({"matchExpressions": sel["expressionSelectors"]},
                                                                   m.get("labels")):
                continue
            if sel.get("annotationSelectors") and not match_labels(sel["annotationSelectors"], m.get("annotations")):
                continue
            if sel.get("nodes") and pod["spec"].get("nodeName") not in sel["nodes"]:
                continue
            if sel.get("nodeSelectors"):
                node = store.try_get("nodes", "", pod["spec"].get("nodeName", "")) or {"metadata": {}}
                if not match_labels(sel["nodeSelectors"], node["metadata"].get("labels")):
                    continue
            if sel.get("podPhaseSelectors") and (pod.get("status") or {}).get("phase") not in sel["podPhaseSelectors"]:
                continue
            candidates.append(pod)
        candidates.sort(key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]))
        rng = self.control.rng
        n = len(candidates)
        if not n:
            return []
        # pkg/selector/pod: a value out of range selects nothing (the experiment stays unselected).
        try:
            number = int(str(value)) if mode in ("fixed", "fixed-percent", "random-max-percent") else 0
        except ValueError:
            return []
        if mode == "all":
            k = n
        elif mode == "fixed":
            k = min(n, number)
        elif mode in ("fixed-percent", "random-max-percent"):
            if not 0 < number <= 100 and not (mode == "random-max-percent" and number == 0):
                return []
            # random-max-percent draws the percentage in [0, value], then floors like fixed-percent
            percent = rng.randint(0, number) if mode == "random-max-percent" else number
            k = int(math.floor(n * percent / 100.0))
        else:
            k = 1
        if k <= 0:
            return []
        return sorted(rng.sample(candidates, k), key=lambda p: p["metadata"]["name"])

    # -- effects the models ask about ---------------------------------------------------------------
    def _effects_for(self, namespace: str, pod: str) -> list[dict[str, Any]]:
        return self.state["effects"].get(f"{namespace}/{pod}", [])

    @staticmethod
    def _applies_to_container(spec: dict[str, Any], container: str) -> bool:
        names = spec.get("containerNames")
        return not names or container in names

    def net_effect(self, client: Obj | None, target: Obj) -> dict[str, float]:
        out = {"loss": 0.0, "delay_ms": 0.0, "corrupt": 0.0, "partition": 0.0}
        if not self.state["effects"]:
            return out
        ckey = f"{client['metadata']['namespace']}/{client['metadata']['name']}" if client else None
        tkey = f"{target['metadata']['namespace']}/{target['metadata']['name']}"
        chaos_names = {e["chaos"] for k in (ckey, tkey) if k for e in self.state["effects"].get(k, [])
                       if e["kind"] == "networkchaos"}
        for chaos in chaos_names:
            recs = {k: e for k, es in self.state["effects"].items() for e in es if e["chaos"] == chaos}
            any_eff = next(iter(recs.values()))
            spec = any_eff["spec"]
            has_target = bool(spec.get("target"))
            src = recs.get(ckey) if ckey else None
            dst = recs.get(tkey)
            direction = spec.get("direction", "to")
            hit = False
            if not has_target:
                hit = (src is not None and src["selectorKey"] == ".") or (dst is not None and dst["selectorKey"] == ".")
            else:
                fwd = src is not None and src["selectorKey"] == "." and dst is not None and dst["selectorKey"] == ".Target"
                rev = dst is not None and dst["selectorKey"] == "." and src is not None and src["selectorKey"] == ".Target"
                hit = (direction in ("to", "both") and fwd) or (direction in ("from", "both") and rev) or \
                    (direction == "to" and rev and spec.get("action") != "partition")
            if not hit:
                continue
            action = spec.get("action")
            if action == "partition":
                out["partition"] = 1.0
            elif action == "loss":
                out["loss"] = max(out["loss"], float((spec.get("loss") or {}).get("loss", "0") or 0) / 100.0)
            elif action == "corrupt":
                out["corrupt"] = max(out["corrupt"], float((spec.get("corrupt") or {}).get("corrupt", "0") or 0) / 100.0)
            elif action == "delay":
                d = spec.get("delay") or {}
                out["delay_ms"] += (parse_duration(d.get("latency")) or 0.0) * 1000.0 + \
                    (parse_duration(d.get("jitter")) or 0.0) * 500.0
            elif action == "bandwidth":
                rate = str((spec.get("bandwidth") or {}).get("rate", "1mbps")).lower()
                m = re.match(r"([0-9.]+)\s*([kmg]?)bps", rate)
                bps = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] if m else 1e6
                out["delay_ms"] += min(30000.0, 8 * 20000 / max(bps, 1.0) * 1000.0)
        return out

    def io_error(self, pod: Obj, container: str, path: str, op: str, count: float = 1.0) -> int:
        """errno an I/O of `op` under `path` fails with (0 = none); IOChaos fault/mistake, KernelChaos bio."""
        if not pod or not self.state["effects"]:
            return 0
        for e in self._effects_for(pod["metadata"]["namespace"], pod["metadata"]["name"]):
            spec = e["spec"]
            if e["kind"] == "iochaos" and self._applies_to_container(spec, container):
                vol = spec.get("volumePath", "/")
                if not (path == vol or path.startswith(vol.rstrip("/") + "/") or vol.startswith(path)):
                    continue
                if spec.get("path") and not fnmatch.fnmatch(path, spec["path"]) and not spec["path"].startswith(vol):
                    continue
                methods = spec.get("methods") or []
                ops = {"read": {"read", "open", "readdir", "getattr", "lseek"},
                       "write": {"write", "fsync", "flush", "create", "mkdir", "truncate", "fallocate", "open"}}[op]
                if methods and not ops & set(methods):
                    continue
                percent = float(spec.get("percent", 100) or 100) / 100.0
                if self.control.rng.random() >= 1 - (1 - percent) ** max(1.0, count):
                    continue
                action = spec.get("action")
                if action == "fault":
                    return int(spec.get("errno", 5) or 5)
                if action == "mistake":
                    return -31802
            if e["kind"] == "kernelchaos":
                req = spec.get("failKernRequest") or {}
                if op not in kernel_callchain_ops(req):
                    continue
                prob = float(req.get("probability", 100) or 100) / 100.0
                if self.control.rng.random() < 1 - (1 - prob) ** max(1.0, count):
                    failtype = int(req.get("failtype", 0))
                    if failtype != 0:
                        self._kernel_lines_for(pod, op)
                    # slab (0) allocations fail with ENOMEM; page (1) and bio (2) failures surface as EIO
                    return 12 if failtype == 0 else 5
        return 0

    def io_delay(self, pod: Obj, container: str, path: str) -> float:
        """Seconds IOChaos `latency` adds to each I/O under `path` (percent of I/Os, averaged)."""
        if not pod or not self.state["effects"]:
            return 0.0
        total = 0.0
        for e in self._effects_for(pod["metadata"]["namespace"], pod["metadata"]["name"]):
            spec = e["spec"]
            if e["kind"] != "iochaos" or spec.get("action") != "latency" or not self._applies_to_container(spec, container):
                continue
            vol = spec.get("volumePath", "/")
            if path == vol or path.startswith(vol.rstrip("/") + "/") or vol.startswith(path):
                total += (parse_duration(spec.get("delay")) or 0.0) * float(spec.get("percent", 100) or 100) / 100.0
        return total

    def stress(self, namespace: str, pod: str, container: str) -> dict[str, float]:
        out: dict[str, float] = {}
        if not self.state["effects"]:
            return out
        for e in self._effects_for(namespace, pod):
            if e["kind"] != "stresschaos" or not self._applies_to_container(e["spec"], container):
                continue
            st = e["spec"].get("stressors") or {}
            if "cpu" in st:
                cpu = st["cpu"] or {}
                out["cpu"] = out.get("cpu", 0.0) + int(cpu.get("workers", 1)) * float(cpu.get("load", 100)) / 100.0
            if "memory" in st:
                mem = st["memory"] or {}
                p = self.control.store.try_get("pods", namespace, pod)
                limit = self.kubelet.memory_limit(p, container) if p else 0.0
                out["memory"] = out.get("memory", 0.0) + int(mem.get("workers", 1)) * parse_size(mem.get("size", "256MB"), limit)
        return out

    def time_offset(self, pod: Obj, container: str) -> float:
        if not self.state["effects"] or not pod:
            return 0.0
        total = 0.0
        for e in self._effects_for(pod["metadata"]["namespace"], pod["metadata"]["name"]):
            if e["kind"] == "timechaos" and self._applies_to_container(e["spec"], container):
                total += parse_duration(e["spec"].get("timeOffset")) or 0.0
        return total

    def _kernel_lines(self, chaos: Obj, rec: dict[str, Any]) -> None:
        ns, name = rec["id"].split("/")[:2]
        pod = self.control.store.try_get("pods", ns, name)
        req = ((chaos.get("spec") or {}).get("failKernRequest") or {})
        if pod is not None and int(req.get("failtype", 0)) == 0:
            self.nodes.kernel_log(pod["spec"].get("nodeName", ""), [
                "FAULT_INJECTION: forcing a failure.", "name failslab, interval 1, probability 0, space 0, times -1"])

    def _kernel_lines_for(self, pod: Obj, op: str) -> None:
        node = pod.get("spec", {}).get("nodeName")
        if node:
            self.nodes.io(node, op, 4096, 1.0)
            n = self.nodes.get(node)
            if n is not None:
                self.nodes.log_io_errors(n, n.disks[0], {"sectorStart": 2099200, "sectorCount": 8}, op, "mongod", 1)


def kernel_callchain_ops(req: dict[str, Any]) -> set[str]:
    """The file operations a KernelChaos call chain sits under: a chain through a write path
    (ext4_file_write_iter, vfs_write, ...) fails writes only, a read path reads only."""
    names = " ".join(str((f or {}).get("funcname", "")) for f in req.get("callchain") or [])
    ops = {op for op in ("read", "write") if op in names}
    return ops or {"read", "write"}


def _ts(stamp: str | None) -> float:
    from datetime import UTC, datetime
    if not stamp:
        return 0.0
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
