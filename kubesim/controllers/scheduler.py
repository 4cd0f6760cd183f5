"""The default scheduler: filters (unschedulable, taints, node affinity/selector, resources,
volume binding and volume node affinity, pod anti-affinity) in kube-scheduler's order, the
`0/N nodes are available: ...` FailedScheduling message with its preemption suffix, and binding."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from kubesim.controllers.common import is_active, set_condition
from kubesim.quantity import parse_quantity
from kubesim.runtime import SCHEDULER
from kubesim.store import Obj, StoreError, expression_holds, match_labels
from kubesim.view import ControlPlane

if TYPE_CHECKING:
    from kubesim.controllers.volumes import VolumeBinder

RETRY = 60.0  # unschedulable pods are retried at least this often (plus on every cluster change)
UNRESOLVABLE = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"


def pod_requests(pod: Obj) -> dict[str, float]:
    spec = pod.get("spec") or {}
    out = {"cpu": 0.0, "memory": 0.0}
    for c in spec.get("containers") or []:
        req = (c.get("resources") or {}).get("requests") or {}
        lim = (c.get("resources") or {}).get("limits") or {}
        for r in out:
            v = req.get(r, lim.get(r))
            if v is not None:
                out[r] += parse_quantity(v)
    for c in spec.get("initContainers") or []:
        req = (c.get("resources") or {}).get("requests") or {}
        for r in out:
            if r in req:
                out[r] = max(out[r], parse_quantity(req[r]))
    return out


def scoring_requests(pod: Obj) -> tuple[float, float]:
    """(CPU cores, memory bytes) as kube-scheduler's NonZeroRequested counts them for scoring."""
    cpu = mem = 0.0
    for c in (pod.get("spec") or {}).get("containers") or []:
        req = (c.get("resources") or {}).get("requests") or {}
        cpu += parse_quantity(req["cpu"]) if "cpu" in req else 0.1
        mem += parse_quantity(req["memory"]) if "memory" in req else 200 * 2**20
    return cpu, mem


def _tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for t in tolerations or []:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        op = t.get("operator", "Equal")
        if op == "Exists" and (not t.get("key") or t.get("key") == taint.get("key")):
            return True
        if op == "Equal" and t.get("key") == taint.get("key") and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _node_term_matches(term: dict[str, Any], node: Obj) -> bool:
    labels = node["metadata"].get("labels") or {}
    for expr in term.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        have = labels.get(key)
        if not expression_holds(expr, labels):
            return False
        if op in ("Gt", "Lt"):  # a node selector's own operators, on integer label values
            if have is None:
                return False
            try:
                a, b = int(have), int(values[0])
            except (TypeError, ValueError, IndexError):
                return False
            if (op == "Gt" and not a > b) or (op == "Lt" and not a < b):
                return False
    for expr in term.get("matchFields") or []:
        if expr.get("key") == "metadata.name":
            inside = node["metadata"]["name"] in (expr.get("values") or [])
            if (expr.get("operator") == "In") != inside:
                return False
    return True


def node_affinity_ok(pod: Obj, node: Obj) -> bool:
    spec = pod.get("spec") or {}
    labels = node["metadata"].get("labels") or {}
    for k, v in (spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    req = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
           .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = req.get("nodeSelectorTerms") or []
    return not terms or any(_node_term_matches(t, node) for t in terms)


class Scheduler:
    def __init__(self, cp: ControlPlane, volumes: VolumeBinder) -> None:
        self.store, self.clock, self.events, self.wake_at, self.touched = \
            cp.store, cp.clock, cp.events, cp.wake_at, cp.touched
        self.volumes = volumes  # claims bind when their pod is placed (WaitForFirstConsumer)
        self.retry_at: dict[str, float] = {}

    def __call__(self, now: float) -> None:
        store = self.store
        with store.lock:
            pending = [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in store.iter_raw("pods")
                       if not (p.get("spec") or {}).get("nodeName") and is_active(p)
                       and (p.get("spec") or {}).get("schedulerName", "default-scheduler") == "default-scheduler"]
        if not pending:
            return
        nodes = self.store.scan("nodes")
        pods = [p for p in self.store.scan("pods") if (p.get("spec") or {}).get("nodeName") and is_active(p)]
        for ns, name in sorted(pending, key=lambda k: self._priority(k)):
            pod = store.try_get("pods", ns, name)
            if pod is None:
                continue
            node, reasons = self.place(pod, nodes, pods)
            if node is None:
                self._unschedulable(pod, reasons, len(nodes), now)
                continue
            self._bind(pod, node, now)
            pod["spec"]["nodeName"] = node["metadata"]["name"]
            pods.append(pod)

    def _priority(self, key: tuple[str, str]) -> tuple[int, str, str]:
        pod = self.store.try_get("pods", *key) or {}
        return (-int((pod.get("spec") or {}).get("priority", 0) or 0), pod.get("metadata", {}).get("creationTimestamp", ""), key[1])

    # -- filtering -------------------------------------------------------------------------
    def place(self, pod: Obj, nodes: list[Obj], pods: list[Obj]) -> tuple[Obj | None, dict[str, Any]]:
        pre = self._prefilter_volumes(pod)
        if pre:
            return None, {"prefilter": pre}
        fits: list[Obj] = []
        per_node: dict[str, list[str]] = {}
        for node in nodes:
            why = self._filter(pod, node, pods)
            if why:
                per_node[node["metadata"]["name"]] = why
            else:
                fits.append(node)
        if not fits:
            return None, {"nodes": per_node}
        return self._score(pod, fits, pods), {}

    def _filter(self, pod: Obj, node: Obj, pods: list[Obj]) -> list[str]:
        spec = pod.get("spec") or {}
        nname = node["metadata"]["name"]
        if spec.get("nodeName") and spec["nodeName"] != nname:
            return ["node(s) didn't match the requested node name"]
        if (node.get("spec") or {}).get("unschedulable"):
            tol = any(t.get("key") == "node.kubernetes.io/unschedulable" for t in spec.get("tolerations") or [])
            if not tol:
                return ["node(s) were unschedulable"]
        for taint in (node.get("spec") or {}).get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(spec.get("tolerations") or [], taint):
                return [f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"]
        if not node_affinity_ok(pod, node):
            return ["node(s) didn't match Pod's node affinity/selector"]
        ports = {(p.get("hostPort"), p.get("protocol", "TCP")) for c in spec.get("containers") or []
                 for p in c.get("ports") or [] if p.get("hostPort")}
        if ports:
            used = {(p.get("hostPort"), p.get("protocol", "TCP")) for o in pods if o["spec"].get("nodeName") == nname
                    for c in o["spec"].get("containers") or [] for p in c.get("ports") or [] if p.get("hostPort")}
            if ports & used:
                return ["node(s) didn't have free ports for the requested pod ports"]
        alloc = (node.get("status") or {}).get("allocatable") or {}
        on_node = [o for o in pods if o["spec"].get("nodeName") == nname]
        want = pod_requests(pod)
        reasons = []
        if len(on_node) + 1 > int(parse_quantity(alloc.get("pods", "110"))):
            reasons.append("Too many pods")
        requested = {"cpu": 0.0, "memory": 0.0}
        for o in on_node:
            for r, v in pod_requests(o).items():
                requested[r] += v
        for r in ("cpu", "memory"):
            if want[r] > 0 and requested[r] + want[r] > parse_quantity(alloc.get(r, "0")) + 1e-9:
                reasons.append(f"Insufficient {r}")
        if reasons:
            return reasons
        vol = self._volume_node_conflict(pod, node)
        if vol:
            return [vol]
        anti = self._anti_affinity(pod, node, pods)
        if anti:
            return [anti]
        return []

    def _prefilter_volumes(self, pod: Obj) -> str | None:
        for claim_name, claim in self.volumes.pod_claims(pod):
            if claim is None:
                return f'persistentvolumeclaim "{claim_name}" not found'
            if claim.get("status", {}).get("phase") == "Bound":
                continue
            sc = self.volumes.storage_class(claim)
            if sc is not None and sc.get("volumeBindingMode") == "WaitForFirstConsumer":
                continue
            return "pod has unbound immediate PersistentVolumeClaims"
        return None

    def _volume_node_conflict(self, pod: Obj, node: Obj) -> str | None:
        store = self.store
        for _, claim in self.volumes.pod_claims(pod):
            if not claim:
                continue
            pv_name = (claim.get("spec") or {}).get("volumeName")
            if not pv_name:
                continue
            pv = store.try_get("persistentvolumes", "", pv_name)
            terms = ((((pv or {}).get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms")
            if terms and not any(_node_term_matches(t, node) for t in terms):
                return "node(s) had volume node affinity conflict"
        return None

    def _anti_affinity(self, pod: Obj, node: Obj, pods: list[Obj]) -> str | None:
        spec = pod.get("spec") or {}
        ns = pod["metadata"]["namespace"]
        labels = node["metadata"].get("labels") or {}

        def same_domain(other: Obj, key: str) -> bool:
            onode = self.store.try_get("nodes", "", other["spec"].get("nodeName", "")) or {}
            return key in labels and (onode.get("metadata", {}).get("labels") or {}).get(key) == labels.get(key)

        aff = spec.get("affinity") or {}
        for term in ((aff.get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []):
            namespaces = term.get("namespaces") or [ns]
            for other in pods:
                if other["metadata"]["namespace"] in namespaces and \
                        match_labels(term.get("labelSelector") or {}, other["metadata"].get("labels")) and \
                        same_domain(other, term.get("topologyKey", "kubernetes.io/hostname")):
                    return "node(s) didn't match pod anti-affinity rules"
        for other in pods:
            oaff = (other.get("spec") or {}).get("affinity") or {}
            for term in ((oaff.get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []):
                namespaces = term.get("namespaces") or [other["metadata"]["namespace"]]
                if ns in namespaces and match_labels(term.get("labelSelector") or {}, pod["metadata"].get("labels")) \
                        and same_domain(other, term.get("topologyKey", "kubernetes.io/hostname")):
                    return "node(s) didn't satisfy existing pods anti-affinity rules"
        for term in ((aff.get("podAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []):
            namespaces = term.get("namespaces") or [ns]
            if not any(other["metadata"]["namespace"] in namespaces
                       and match_labels(term.get("labelSelector") or {}, other["metadata"].get("labels"))
                       and same_domain(other, term.get("topologyKey", "kubernetes.io/hostname")) for other in pods):
                return "node(s) didn't match pod affinity rules"
        return None

    def _score(self, pod: Obj, nodes: list[Obj], pods: list[Obj]) -> Obj:
        """Spread pods of the same owner, then least-allocated over CPU and memory as kube-scheduler
        scores them (a container without requests counts as 100m / 200Mi, so request-less pods
        spread too); equal scores are broken pseudo-randomly, as kube-scheduler does, but seeded
        by the pod and node names so the same trial schedules the same way."""
        owner = ((pod["metadata"].get("ownerReferences") or [{}])[0]).get("uid")
        incoming = scoring_requests(pod)

        def key(node: Obj) -> tuple[int, float, str]:
            nname = node["metadata"]["name"]
            # A DaemonSet's pods (kube-proxy, kindnet) stand on every node alike and static pods
            # on the control plane, which application pods do not use: they change no node's
            # rank, and leaving them out keeps the rounded score below from flipping ties.
            on = [o for o in pods if o["spec"].get("nodeName") == nname
                  and ((o["metadata"].get("ownerReferences") or [{}])[0]).get("kind") not in ("DaemonSet", "Node")]
            alloc = node["status"]["allocatable"]
            cpu = (sum(scoring_requests(o)[0] for o in on) + incoming[0]) / max(0.1, parse_quantity(alloc["cpu"]))
            mem = (sum(scoring_requests(o)[1] for o in on) + incoming[1]) / max(1.0, parse_quantity(alloc.get("memory", "8Gi")))
            same = sum(1 for o in on if ((o["metadata"].get("ownerReferences") or [{}])[0]).get("uid") == owner)
            tie = hashlib.sha256(f"{pod['metadata']['name']}/{nname}".encode()).hexdigest()
            return (same, round((cpu + mem) / 2, 2), tie)
        return min(nodes, key=key)

    # -- results ---------------------------------------------------------------------------
    def _bind(self, pod: Obj, node: Obj, now: float) -> None:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        nname = node["metadata"]["name"]
        stamp = self.clock.rfc3339(now)

        def bind(o: Obj) -> None:
            o["spec"]["nodeName"] = nname
            st = o.setdefault("status", {})
            set_condition(st, "PodScheduled", "True", "", "", stamp)
            for c in st["conditions"]:
                if c["type"] == "PodScheduled":
                    c.pop("reason", None)
                    c.pop("message", None)
        try:
            self.store.mutate("pods", ns, name, bind)
        except StoreError:
            return
        self.volumes.bind_for_pod(pod, nname)
        self.retry_at.pop(pod["metadata"]["uid"], None)
        self.events.record(pod, "Normal", "Scheduled", f"Successfully assigned {ns}/{name} to {nname}",
                                   "default-scheduler")

    def _unschedulable(self, pod: Obj, reasons: dict[str, Any], n: int, now: float) -> None:
        uid = pod["metadata"]["uid"]
        if now < self.retry_at.get(uid, -1.0) and not self.touched():
            return
        message = failed_scheduling_message(reasons, n)
        stamp = self.clock.rfc3339(now)
        cur = next((c for c in (pod.get("status") or {}).get("conditions") or [] if c["type"] == "PodScheduled"), None)
        due = now >= self.retry_at.get(uid, -1.0)
        if cur is None or cur.get("message") != message or due:
            def mark(o: Obj) -> None:
                st = o.setdefault("status", {})
                st["phase"] = "Pending"
                set_condition(st, "PodScheduled", "False", "Unschedulable", message, stamp)
            try:
                self.store.mutate("pods", pod["metadata"]["namespace"], pod["metadata"]["name"], mark,
                                  subresource="status", manager=SCHEDULER)
            except StoreError:
                return
            self.events.record(pod, "Warning", "FailedScheduling", message, "default-scheduler")
            self.retry_at[uid] = now + RETRY
            self.wake_at(now + RETRY)


def failed_scheduling_message(reasons: dict[str, Any], n: int) -> str:
    if n == 0:
        return "no nodes available to schedule pods"
    if "prefilter" in reasons:
        return (f"0/{n} nodes are available: {reasons['prefilter']}. preemption: 0/{n} nodes are available: "
                f"{n} {UNRESOLVABLE}.")
    counts: dict[str, int] = {}
    victims = {"unresolvable": 0, "victims": 0}
    for why in reasons["nodes"].values():
        for r in why:
            counts[r] = counts.get(r, 0) + 1
        if all(r.startswith("Insufficient") or r == "Too many pods" for r in why):
            victims["victims"] += 1
        else:
            victims["unresolvable"] += 1
    parts = ", ".join(sorted(f"{c} {r}" for r, c in counts.items()))  # FitError sorts "count reason" strings
    pre = []
    if victims["unresolvable"]:
        pre.append(f"{victims['unresolvable']} {UNRESOLVABLE}")
    if victims["victims"]:
        pre.append(f"{victims['victims']} {NO_VICTIMS}")
    return f"0/{n} nodes are available: {parts}. preemption: 0/{n} nodes are available: {', '.join(pre)}."
