"""Workload controllers: ReplicaSet, Deployment (rolling update with maxSurge/maxUnavailable,
Recreate, revisions, rollback by template match), StatefulSet (ordered, PVC templates), DaemonSet,
Job and CronJob — with the Events and status fields their real controllers write."""

from __future__ import annotations

import copy
import random
from datetime import UTC, datetime
from typing import Any

from core.namespaces import STACK_NAMESPACE
from kubesim.controllers.common import (
    condition,
    controller_uid,
    delete_pod,
    int_or_percent,
    is_active,
    is_ready,
    is_terminal,
    normalized,
    owner_ref,
    pod_from_template,
    random_suffix,
    ready_since,
    set_condition,
    template_hash,
)
from kubesim.runtime import CONTROLLER_MANAGER
from kubesim.store import Obj, Store, StoreError, match_labels
from kubesim.view import ControlPlane

REVISION = "deployment.kubernetes.io/revision"


def _ts(stamp: str | None) -> float:
    if not stamp:
        return 0.0
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def _owned(objs: list[Obj], owner: Obj) -> list[Obj]:
    uid = owner["metadata"]["uid"]
    return [o for o in objs if controller_uid(o) == uid]


def _scan_sorted(store: Store, key: str, namespace: str | None = None) -> list[Obj]:
    """`store.list(key, namespace)` without the copies: the stored objects, never to be mutated."""
    return sorted(store.scan(key, namespace), key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))


def _by_owner(objs: list[Obj]) -> dict[str | None, list[Obj]]:
    """`objs` grouped by their controller's uid, in order: `_owned` for every owner in one pass."""
    out: dict[str | None, list[Obj]] = {}
    for o in objs:
        out.setdefault(controller_uid(o), []).append(o)
    return out


def _available(pod: Obj, min_ready: float, now: float) -> bool:
    if not is_ready(pod):
        return False
    return min_ready <= 0 or now - _ts(ready_since(pod)) >= min_ready


def _put_status(store: Store, key: str, obj: Obj, status: dict[str, Any]) -> None:
    if obj.get("status") == status:
        return
    def put(o: Obj) -> None:
        o["status"] = status
    try:
        store.mutate(key, obj["metadata"]["namespace"], obj["metadata"]["name"], put, subresource="status",
                     manager=CONTROLLER_MANAGER)
    except StoreError:
        pass


class _WorkloadController:
    """What every workload controller keeps of the ControlPlane."""

    def __init__(self, cp: ControlPlane) -> None:
        self.store, self.clock, self.rng, self.events, self.wake_at = cp.store, cp.clock, cp.rng, cp.events, cp.wake_at


class _PerObjectController(_WorkloadController):
    """A controller that syncs each object of its `resource` on its own, leaving those being
    deleted to the garbage collector."""

    resource: str

    def __call__(self, now: float) -> None:
        for obj in self.store.list(self.resource):
            if not obj["metadata"].get("deletionTimestamp"):
                self._sync(obj, now)

    def _sync(self, obj: Obj, now: float) -> None:
        raise NotImplementedError


class ReplicaSetController(_WorkloadController):
    def __init__(self, cp: ControlPlane) -> None:
        super().__init__(cp)
        self.retry: dict[str, tuple[float, float]] = {}  # uid → (next attempt, back-off)

    def __call__(self, now: float) -> None:
        store = self.store
        pods_by_ns: dict[str, list[Obj]] = {}
        owned: dict[str, dict[str | None, list[Obj]]] = {}  # ns → its pods by owner, dropped with pods_by_ns[ns]

        def mine(ns: str, rs: Obj) -> list[Obj]:
            if ns not in owned:
                owned[ns] = _by_owner(pods_by_ns[ns])
            return [p for p in owned[ns].get(rs["metadata"]["uid"], []) if is_active(p)]

        for rs in self.store.scan("replicasets.apps"):
            ns = rs["metadata"]["namespace"]
            if rs["metadata"].get("deletionTimestamp"):
                continue
            if ns not in pods_by_ns:
                pods_by_ns[ns] = self.store.scan("pods", ns)
            pods = mine(ns, rs)
            want = int((rs.get("spec") or {}).get("replicas", 1))
            diff = want - len(pods)
            uid = rs["metadata"]["uid"]
            failure = None
            if diff > 0:
                nxt, back = self.retry.get(uid, (0.0, 0.0))
                if now + 1e-9 >= nxt:
                    failure = self._create(rs, diff)
                    if failure:
                        back = min(60.0, back * 2 if back else 1.0)
                        self.retry[uid] = (now + back, back)
                        self.wake_at(now + back)
                    else:
                        self.retry.pop(uid, None)
                    pods_by_ns[ns] = self.store.scan("pods", ns)
                    owned.pop(ns, None)
                    pods = mine(ns, rs)
                else:
                    failure = next((c.get("message") for c in (rs.get("status") or {}).get("conditions") or []
                                    if c["type"] == "ReplicaFailure"), None)
            elif diff < 0:
                for pod in sorted(pods, key=self._delete_rank)[: -diff]:
                    if not delete_pod(store, pod):
                        continue
                    self.events.record(rs, "Normal", "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}",
                                               "replicaset-controller")
                pods_by_ns[ns] = self.store.scan("pods", ns)
                owned.pop(ns, None)
                pods = mine(ns, rs)
            min_ready = float((rs.get("spec") or {}).get("minReadySeconds", 0))
            ready = sum(1 for p in pods if is_ready(p))
            avail = sum(1 for p in pods if _available(p, min_ready, now))
            if min_ready and ready > avail:
                self.wake_at(now + min_ready)
            labels = ((rs["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {}
            status: dict[str, Any] = {"replicas": len(pods),
                                      "fullyLabeledReplicas": sum(1 for p in pods if match_labels(labels, p["metadata"].get("labels"))),
                                      "observedGeneration": rs["metadata"].get("generation", 1)}
            if ready:
                status["readyReplicas"] = ready
            if avail:
                status["availableReplicas"] = avail
            old_conds = [c for c in (rs.get("status") or {}).get("conditions") or [] if c["type"] == "ReplicaFailure"]
            if failure:
                stamp = self.clock.rfc3339(now)
                keep = old_conds[0] if old_conds and old_conds[0].get("message") == failure else None
                status["conditions"] = [keep or {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
                                                 "message": failure, "lastTransitionTime": stamp}]
            _put_status(self.store, "replicasets.apps", rs, status)

    @staticmethod
    def _delete_rank(pod: Obj) -> tuple[int, int, int, int, str]:
        st = pod.get("status") or {}
        restarts = sum(c.get("restartCount", 0) for c in st.get("containerStatuses") or [])
        return (0 if not pod["spec"].get("nodeName") else 1, 0 if st.get("phase") == "Pending" else 1,
                0 if not is_ready(pod) else 1, -restarts, "".join(chr(255 - ord(ch)) for ch in pod["metadata"].get("creationTimestamp", "")))

    def _create(self, rs: Obj, n: int) -> str | None:
        ns = rs["metadata"]["namespace"]
        for _ in range(n):
            name = f"{rs['metadata']['name']}-{random_suffix(self.rng)}"
            pod = pod_from_template(rs["spec"].get("template") or {}, name, ns, rs)
            try:
                self.store.create("pods", pod)
            except StoreError as exc:
                msg = f"Error creating: {exc.message}"
                self.events.record(rs, "Warning", "FailedCreate", msg, "replicaset-controller")
                return msg
            self.events.record(rs, "Normal", "SuccessfulCreate", f"Created pod: {name}", "replicaset-controller")
        return None


class DeploymentController(_WorkloadController):
    def __init__(self, cp: ControlPlane) -> None:
        super().__init__(cp)
        self._seen: dict[str, tuple] = {}
        # Recreate deployments waiting for old pods to terminate: a pod's removal changes no
        # replica set, so they are synced every pass until it is done
        self._draining: set[str] = set()

    def __call__(self, now: float) -> None:
        rs_by_owner = _by_owner(self.store.scan("replicasets.apps"))
        seen: dict[str, tuple] = {}
        for d in self.store.scan("deployments.apps"):
            if d["metadata"].get("deletionTimestamp"):
                continue
            rss = rs_by_owner.get(d["metadata"]["uid"], [])
            # nothing it reads changed since its last sync (and no deadline is due): skip the work
            key = (d["metadata"].get("resourceVersion"), tuple(sorted(r["metadata"].get("resourceVersion", "") for r in rss)),
                   int(now // 60))
            uid = d["metadata"]["uid"]
            seen[uid] = key
            if self._seen.get(uid) == key and uid not in self._draining:
                continue
            self._sync(d, rss, now)
            after = self.store.raw("deployments.apps", d["metadata"]["namespace"], d["metadata"]["name"])
            if after is not None:
                rss2 = _owned(self.store.scan("replicasets.apps", d["metadata"]["namespace"]), after)
                seen[uid] = (after["metadata"].get("resourceVersion"),
                             tuple(sorted(r["metadata"].get("resourceVersion", "") for r in rss2)), int(now // 60))
        self._seen = seen

    def _sync(self, d: Obj, rss: list[Obj], now: float) -> None:
        store, ns, spec = self.store, d["metadata"]["namespace"], d.get("spec") or {}
        want = int(spec.get("replicas", 1))
        progress = None
        template = normalized(spec.get("template") or {})
        phash = template_hash(template)
        new = None
        for rs in rss:
            t = normalized(rs["spec"].get("template") or {})
            (t.get("metadata") or {}).get("labels", {}).pop("pod-template-hash", None)
            if t == template:
                new = rs
        revisions = [int((rs["metadata"].get("annotations") or {}).get(REVISION, "0")) for rs in rss]
        max_rev = max(revisions, default=0)
        if spec.get("paused"):
            self._status(d, rss, new, now, None)
            return
        if new is None:
            rs_tmpl = copy.deepcopy(template)
            rs_tmpl.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = phash
            sel = copy.deepcopy(spec.get("selector") or {})
            sel.setdefault("matchLabels", {})["pod-template-hash"] = phash
            strategy = spec.get("strategy") or {}
            surge_start = 0
            if strategy.get("type") == "Recreate" or not rss:
                surge_start = 0 if rss else want
            rs = {"metadata": {"name": f"{d['metadata']['name']}-{phash}", "namespace": ns,
                               "labels": dict(rs_tmpl["metadata"].get("labels") or {}),
                               "annotations": {REVISION: str(max_rev + 1),
                                               "deployment.kubernetes.io/desired-replicas": str(want),
                                               "deployment.kubernetes.io/max-replicas": str(want + self._surge(d, want))},
                               "ownerReferences": [owner_ref(d)]},
                  "spec": {"replicas": surge_start, "minReadySeconds": spec.get("minReadySeconds", 0),
                           "selector": sel, "template": rs_tmpl}}
            try:
                new = store.create("replicasets.apps", rs)
            except StoreError:
                return
            rss = rss + [new]
            if surge_start:
                self._scaled(d, new, 0, surge_start, up=True)
            progress = ("NewReplicaSetCreated", f'Created new replica set "{new["metadata"]["name"]}"')
        else:
            rev = int((new["metadata"].get("annotations") or {}).get(REVISION, "0"))
            if rev < max_rev:
                def bump(o: Obj) -> None:
                    ann = o["metadata"].setdefault("annotations", {})
                    hist = [h for h in ann.get("deployment.kubernetes.io/revision-history", "").split(",") if h]
                    ann["deployment.kubernetes.io/revision-history"] = ",".join(hist + [str(rev)])
                    ann[REVISION] = str(max_rev + 1)
                new = store.mutate("replicasets.apps", ns, new["metadata"]["name"], bump)
                rss = [r for r in rss if r["metadata"]["uid"] != new["metadata"]["uid"]] + [new]
        olds = [r for r in rss if r["metadata"]["uid"] != new["metadata"]["uid"]]
        strategy = (spec.get("strategy") or {}).get("type", "RollingUpdate")
        if strategy == "Recreate":
            # old pods still terminating count as running: the new ones wait until they are gone
            old_uids = {r["metadata"]["uid"] for r in olds}
            running = any(controller_uid(p) in old_uids and not is_terminal(p) for p in self.store.scan("pods", ns))
            active_old = [r for r in olds if int(r["spec"].get("replicas", 0)) > 0 or (r.get("status") or {}).get("replicas", 0)
                          or running]
            if running:
                self._draining.add(d["metadata"]["uid"])
            else:
                self._draining.discard(d["metadata"]["uid"])
            for r in olds:
                if int(r["spec"].get("replicas", 0)) > 0:
                    self._scale(d, r, 0)
            if not active_old and int(new["spec"].get("replicas", 0)) != want:
                self._scale(d, new, want)
        else:
            self._rolling(d, new, olds, want, now)
        rss = _owned(self.store.scan("replicasets.apps", ns), d)
        new = next(r for r in rss if r["metadata"]["uid"] == new["metadata"]["uid"])
        self._cleanup(d, rss, new)
        d_annot = (d["metadata"].get("annotations") or {}).get(REVISION)
        new_rev = (new["metadata"].get("annotations") or {}).get(REVISION)
        if d_annot != new_rev:
            def ann(o: Obj) -> None:
                o["metadata"].setdefault("annotations", {})[REVISION] = new_rev
            d = store.mutate("deployments.apps", ns, d["metadata"]["name"], ann)
        self._status(d, rss, new, now, progress)

    def _surge(self, d: Obj, want: int) -> int:
        ru = ((d.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {}
        surge = int_or_percent(ru.get("maxSurge", "25%"), want, round_up=True)
        unavail = int_or_percent(ru.get("maxUnavailable", "25%"), want, round_up=False)
        if surge == 0 and unavail == 0:
            surge = 1
        return surge

    def _rolling(self, d: Obj, new: Obj, olds: list[Obj], want: int, now: float) -> None:
        ru = ((d.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {}
        surge = self._surge(d, want)
        max_unavail = int_or_percent(ru.get("maxUnavailable", "25%"), want, round_up=False)
        if surge == 0 and max_unavail == 0:
            max_unavail = 1
        total = sum(int(r["spec"].get("replicas", 0)) for r in olds + [new])
        new_spec = int(new["spec"].get("replicas", 0))
        if new_spec > want:
            self._scale(d, new, want)
            return
        if new_spec < want:
            room = want + surge - total
            if room > 0:
                self._scale(d, new, min(want, new_spec + room))
                return
        # scale down old replica sets while keeping `want - maxUnavailable` available
        min_avail = want - max_unavail
        all_avail = sum(int((r.get("status") or {}).get("availableReplicas", 0)) for r in olds + [new])
        new_unavail = new_spec - int((new.get("status") or {}).get("availableReplicas", 0))
        budget = total - min_avail - new_unavail
        # unhealthy old replicas go first, they count for nothing
        for r in olds:
            spec_r = int(r["spec"].get("replicas", 0))
            unhealthy = spec_r - int((r.get("status") or {}).get("availableReplicas", 0))
            if spec_r > 0 and unhealthy > 0 and budget > 0:
                cut = min(unhealthy, budget, spec_r)
                self._scale(d, r, spec_r - cut)
                budget -= cut
                total -= cut
        budget = min(budget, all_avail - min_avail)
        for r in sorted(olds, key=lambda o: o["metadata"].get("creationTimestamp", "")):
            spec_r = int(self.store.get("replicasets.apps", r["metadata"]["namespace"], r["metadata"]["name"])
                         ["spec"].get("replicas", 0))
            if spec_r > 0 and budget > 0:
                cut = min(spec_r, budget)
                self._scale(d, r, spec_r - cut)
                budget -= cut

    def _scale(self, d: Obj, rs: Obj, n: int) -> None:
        cur = int(rs["spec"].get("replicas", 0))
        if cur == n:
            return
        want = int((d.get("spec") or {}).get("replicas", 1))

        def put(o: Obj) -> None:
            o["spec"]["replicas"] = n
            ann = o["metadata"].setdefault("annotations", {})
            ann["deployment.kubernetes.io/desired-replicas"] = str(want)
            ann["deployment.kubernetes.io/max-replicas"] = str(want + self._surge(d, want))
        self.store.mutate("replicasets.apps", rs["metadata"]["namespace"], rs["metadata"]["name"], put)
        self._scaled(d, rs, cur, n, up=n > cur)

    def _scaled(self, d: Obj, rs: Obj, a: int, b: int, up: bool) -> None:
        word = "up" if up else "down"
        self.events.record(d, "Normal", "ScalingReplicaSet",
                                   f"Scaled {word} replica set {rs['metadata']['name']} from {a} to {b}",
                                   "deployment-controller")

    def _cleanup(self, d: Obj, rss: list[Obj], new: Obj) -> None:
        limit = int((d.get("spec") or {}).get("revisionHistoryLimit", 10))
        olds = [r for r in rss if r["metadata"]["uid"] != new["metadata"]["uid"]
                and int(r["spec"].get("replicas", 0)) == 0 and not (r.get("status") or {}).get("replicas")]
        olds.sort(key=lambda r: int((r["metadata"].get("annotations") or {}).get(REVISION, "0")))
        for r in olds[: max(0, len(olds) - limit)]:
            try:
                self.store.delete("replicasets.apps", r["metadata"]["namespace"], r["metadata"]["name"])
            except StoreError:
                pass

    def _status(self, d: Obj, rss: list[Obj], new: Obj | None, now: float,
                progress: tuple[str, str] | None) -> None:
        spec = d.get("spec") or {}
        want = int(spec.get("replicas", 1))
        st = lambda r, k: int((r.get("status") or {}).get(k, 0))  # noqa: E731
        replicas = sum(st(r, "replicas") for r in rss)
        updated = st(new, "replicas") if new else 0
        ready = sum(st(r, "readyReplicas") for r in rss)
        avail = sum(st(r, "availableReplicas") for r in rss)
        old = d.get("status") or {}
        status: dict[str, Any] = {"observedGeneration": d["metadata"].get("generation", 1), "replicas": replicas,
                                  "updatedReplicas": updated, "readyReplicas": ready, "availableReplicas": avail,
                                  "conditions": copy.deepcopy(old.get("conditions") or [])}
        for k in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas"):
            if not status[k]:
                status.pop(k)
        unavail = max(0, want - avail)
        if unavail:
            status["unavailableReplicas"] = unavail
        stamp = self.clock.rfc3339(now)
        ru = (spec.get("strategy") or {}).get("rollingUpdate") or {}
        max_unavail = int_or_percent(ru.get("maxUnavailable", "25%"), want, round_up=False) \
            if (spec.get("strategy") or {}).get("type", "RollingUpdate") == "RollingUpdate" else 0
        if avail >= want - max_unavail:
            set_condition(status, "Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability.",
                          stamp, heartbeat=True)
        else:
            set_condition(status, "Available", "False", "MinimumReplicasUnavailable",
                          "Deployment does not have minimum availability.", stamp, heartbeat=True)
        name = new["metadata"]["name"] if new else ""
        prog = next((c for c in status["conditions"] if c["type"] == "Progressing"), None)
        deadline = float(spec.get("progressDeadlineSeconds", 600))
        complete = new is not None and updated == want and replicas == want and avail >= want
        if progress is not None:
            reason, msg = progress
            set_condition(status, "Progressing", "True", reason, msg, stamp, heartbeat=True)
        elif complete:
            if not prog or prog.get("reason") != "NewReplicaSetAvailable":
                set_condition(status, "Progressing", "True", "NewReplicaSetAvailable",
                              f'ReplicaSet "{name}" has successfully progressed.', stamp, heartbeat=True)
        else:
            changed = (old.get("updatedReplicas"), old.get("availableReplicas"), old.get("readyReplicas")) != \
                (status.get("updatedReplicas"), status.get("availableReplicas"), status.get("readyReplicas"))
            if prog is None or changed or (prog.get("reason") in ("NewReplicaSetAvailable",) and not complete):
                set_condition(status, "Progressing", "True", "ReplicaSetUpdated", f'ReplicaSet "{name}" is progressing.',
                              stamp, heartbeat=True)
            elif prog.get("reason") != "ProgressDeadlineExceeded":
                last = _ts(prog.get("lastUpdateTime"))
                if now - last >= deadline:
                    set_condition(status, "Progressing", "False", "ProgressDeadlineExceeded",
                                  f'ReplicaSet "{name}" has timed out progressing.', stamp, heartbeat=True)
                else:
                    self.wake_at(last + deadline)
        failure = [c for r in rss for c in (r.get("status") or {}).get("conditions") or [] if c["type"] == "ReplicaFailure"]
        if failure:
            set_condition(status, "ReplicaFailure", "True", "FailedCreate", failure[0]["message"], stamp, heartbeat=True)
        else:
            status["conditions"] = [c for c in status["conditions"] if c["type"] != "ReplicaFailure"]
        order = {"Available": 0, "Progressing": 1, "ReplicaFailure": 2}
        status["conditions"].sort(key=lambda c: order.get(c["type"], 9))
        _put_status(self.store, "deployments.apps", d, status)


class StatefulSetController(_PerObjectController):
    resource = "statefulsets.apps"
    # A function of stored objects alone: the cluster skips it while nothing in the store changed.
    store_driven = True

    def _sync(self, sts: Obj, now: float) -> None:
        store, ns, name = self.store, sts["metadata"]["namespace"], sts["metadata"]["name"]
        spec = sts.get("spec") or {}
        want = int(spec.get("replicas", 1))
        rev = f"{name}-{template_hash(spec.get('template') or {})}"
        self._adopt(sts)
        # read only; terminating pods included: an ordinal is not made again while its old pod is there
        pods = {p["metadata"]["name"]: p for p in _owned(self.store.scan("pods", ns), sts)}
        parallel = spec.get("podManagementPolicy") == "Parallel"
        blocked = False  # OrderedReady: an ordinal not yet running and ready holds back every later step
        for i in range(want):
            pname = f"{name}-{i}"
            pod = pods.get(pname)
            if pod is not None and is_terminal(pod) and not pod["metadata"].get("deletionTimestamp"):
                # a failed (evicted) or completed pod is deleted and made again in the same pass
                if delete_pod(store, pod):
                    self.events.record(sts, "Normal", "SuccessfulDelete",
                                       f"delete Pod {pname} in StatefulSet {name} successful", "statefulset-controller")
                pod = store.try_get("pods", ns, pname)
            if pod is None:
                for tmpl in spec.get("volumeClaimTemplates") or []:
                    cname = f"{tmpl['metadata']['name']}-{pname}"
                    if store.try_get("persistentvolumeclaims", ns, cname) is None:
                        claim = {"metadata": {"name": cname, "namespace": ns,
                                              "labels": dict((spec.get("selector") or {}).get("matchLabels") or {})},
                                 "spec": copy.deepcopy(tmpl.get("spec") or {}), "status": {"phase": "Pending"}}
                        try:
                            store.create("persistentvolumeclaims", claim)
                            self.events.record(sts, "Normal", "SuccessfulCreate",
                                                       f"create Claim {cname} Pod {pname} in StatefulSet {name} success",
                                                       "statefulset-controller")
                        except StoreError:
                            pass
                tmpl = copy.deepcopy(spec.get("template") or {})
                for tv in spec.get("volumeClaimTemplates") or []:
                    vols = tmpl.setdefault("spec", {}).setdefault("volumes", [])
                    vols[:] = [v for v in vols if v.get("name") != tv["metadata"]["name"]]
                    vols.append({"name": tv["metadata"]["name"],
                                 "persistentVolumeClaim": {"claimName": f"{tv['metadata']['name']}-{pname}"}})
                p = pod_from_template(tmpl, pname, ns, sts, {"controller-revision-hash": rev,
                                                             "statefulset.kubernetes.io/pod-name": pname,
                                                             "apps.kubernetes.io/pod-index": str(i)})
                p["spec"]["hostname"] = pname
                if spec.get("serviceName"):
                    p["spec"]["subdomain"] = spec["serviceName"]
                try:
                    store.create("pods", p)
                    self.events.record(sts, "Normal", "SuccessfulCreate",
                                               f"create Pod {pname} in StatefulSet {name} successful", "statefulset-controller")
                except StoreError as exc:
                    self.events.record(sts, "Warning", "FailedCreate",
                                               f"create Pod {pname} in StatefulSet {name} failed error: {exc.message}",
                                               "statefulset-controller")
                if not parallel:
                    blocked = True
                    break
                continue
            if not parallel and (pod["metadata"].get("deletionTimestamp") or not is_ready(pod)):
                blocked = True
                break
        if not blocked:
            blocked = self._condemn(sts, pods, want, parallel)
        if not blocked:
            self._roll(sts, rev, want, parallel)
        created = _owned(self.store.scan("pods", ns), sts)
        pods_l = [p for p in created if is_active(p)]
        # as computeReplicaStatus: `replicas` counts every pod there, a terminating one too
        status = {"observedGeneration": sts["metadata"].get("generation", 1), "replicas": len(created),
                  "readyReplicas": sum(1 for p in pods_l if is_ready(p)),
                  "currentReplicas": sum(1 for p in pods_l if (p["metadata"].get("labels") or {}).get("controller-revision-hash") == rev),
                  "updatedReplicas": sum(1 for p in pods_l if (p["metadata"].get("labels") or {}).get("controller-revision-hash") == rev),
                  "availableReplicas": sum(1 for p in pods_l if is_ready(p)),
                  "currentRevision": rev, "updateRevision": rev, "collisionCount": 0}
        _put_status(self.store, "statefulsets.apps", sts, status)

    def _condemn(self, sts: Obj, pods: dict[str, Obj], want: int, parallel: bool) -> bool:
        """Scale-down as the statefulset controller does it: the pods at ordinals past `replicas`
        go highest first, each deleted gracefully and waited for (OrderedReady) before the next;
        an unhealthy one blocks unless it is the lowest unhealthy of them. True: it is waiting."""
        name = sts["metadata"]["name"]

        def ordinal(pname: str) -> int:
            tail = pname.rsplit("-", 1)[-1]
            return int(tail) if tail.isdigit() else 10**6

        condemned = sorted((p for n, p in pods.items() if ordinal(n) >= want),
                           key=lambda p: ordinal(p["metadata"]["name"]), reverse=True)
        unhealthy = [p for p in condemned if not is_ready(p) or p["metadata"].get("deletionTimestamp")]
        first_unhealthy = unhealthy[-1] if unhealthy else None
        for pod in condemned:
            if pod["metadata"].get("deletionTimestamp"):
                if not parallel:
                    return True
                continue
            if not parallel and not is_ready(pod) and pod is not first_unhealthy:
                return True
            pname = pod["metadata"]["name"]
            if delete_pod(self.store, pod):
                self.events.record(sts, "Normal", "SuccessfulDelete",
                                   f"delete Pod {pname} in StatefulSet {name} successful", "statefulset-controller")
            if not parallel:
                return True
        return False

    def _roll(self, sts: Obj, rev: str, want: int, parallel: bool) -> None:
        """RollingUpdate as the statefulset controller does it: from the highest ordinal down to the
        partition, delete the first Pod not on the update revision, or stop at an unhealthy one.
        OrderedReady sets roll only while every Pod is running and ready; Parallel ones do not
        wait, so a broken Pod of a reverted template is replaced too."""
        spec = sts.get("spec") or {}
        strategy = spec.get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") != "RollingUpdate":
            return
        ns, name = sts["metadata"]["namespace"], sts["metadata"]["name"]
        pods = {p["metadata"]["name"]: p for p in _owned(self.store.list("pods", ns), sts)}
        ordered = [pods.get(f"{name}-{i}") for i in range(want)]
        if not parallel and any(p is None or not is_active(p) or not is_ready(p) for p in ordered):
            return
        partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
        for pod in reversed(ordered[partition:]):
            if pod is None:
                return
            terminating = bool(pod["metadata"].get("deletionTimestamp"))
            if (pod["metadata"].get("labels") or {}).get("controller-revision-hash") != rev and not terminating:
                delete_pod(self.store, pod)
                self.events.record(sts, "Normal", "SuccessfulDelete",
                                           f"delete Pod {pod['metadata']['name']} in StatefulSet {name} successful",
                                           "statefulset-controller")
                return
            if terminating or not is_ready(pod):
                return

    def _adopt(self, sts: Obj) -> None:
        """Orphans (left by a delete with propagationPolicy Orphan) that the selector matches and
        whose name is one of this set's ordinals become its Pods again."""
        ns, name = sts["metadata"]["namespace"], sts["metadata"]["name"]
        selector = (sts.get("spec") or {}).get("selector") or {}
        for pod in self.store.scan("pods", ns):
            meta = pod["metadata"]
            if controller_uid(pod) is not None or meta.get("deletionTimestamp"):
                continue
            prefix, _, ordinal = meta["name"].rpartition("-")
            if prefix != name or not ordinal.isdigit() or not match_labels(selector, meta.get("labels") or {}):
                continue
            ref = owner_ref(sts)

            def adopt(o: Obj, ref: dict[str, Any] = ref) -> None:
                o["metadata"]["ownerReferences"] = [*(o["metadata"].get("ownerReferences") or []), ref]
            try:
                self.store.mutate("pods", ns, meta["name"], adopt)
            except StoreError:
                pass


class DaemonSetController(_WorkloadController):
    # A function of stored objects alone: the cluster skips it while nothing in the store changed.
    store_driven = True

    def __call__(self, now: float) -> None:
        from kubesim.controllers.scheduler import _tolerates, node_affinity_ok
        store = self.store
        # Stored objects read in place, in the order `store.list` gives (it copies each one, and
        # this controller runs on every change of the store): nothing below mutates them.
        nodes = _scan_sorted(store, "nodes")
        for ds in _scan_sorted(store, "daemonsets.apps"):
            if ds["metadata"].get("deletionTimestamp"):
                continue
            ns, name = ds["metadata"]["namespace"], ds["metadata"]["name"]
            tmpl = (ds.get("spec") or {}).get("template") or {}
            # every pod of a node, terminating ones too: a node whose pod is still going gets no new one yet
            by_node: dict[str | None, list[Obj]] = {}
            for p in _owned(_scan_sorted(store, "pods", ns), ds):
                aff = (((p["spec"].get("affinity") or {}).get("nodeAffinity") or {})
                       .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
                target = next((v for t in aff for e in t.get("matchFields") or [] for v in e.get("values") or []), None)
                by_node.setdefault(target, []).append(p)
            eligible = []
            probe: dict[str, Any] = {"metadata": {"labels": {}}, "spec": tmpl.get("spec") or {}}
            for node in nodes:
                taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
                if not node_affinity_ok(probe, node):
                    continue
                if any(not _tolerates((tmpl.get("spec") or {}).get("tolerations") or [], t) for t in taints):
                    continue
                eligible.append(node["metadata"]["name"])
            rev = None
            for nname in eligible:
                if nname in by_node:
                    continue
                rev = rev or template_hash(tmpl)
                # The node agents of kube-system and of the observability stack name their pods
                # from their own seeded source: the system components a cluster runs must not
                # reshuffle the names (and so the histories) a seed gives every application.
                rng = (random.Random(f"{ds['metadata'].get('uid', name)}/{nname}") if ns in ("kube-system", STACK_NAMESPACE)
                       else self.rng)
                pname = f"{name}-{random_suffix(rng)}"
                p = pod_from_template(tmpl, pname, ns, ds, {"controller-revision-hash": rev, "pod-template-generation": "1"})
                p["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [nname]}]}]}}}
                tols = p["spec"].setdefault("tolerations", [])
                for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable", "node.kubernetes.io/disk-pressure",
                            "node.kubernetes.io/memory-pressure", "node.kubernetes.io/pid-pressure",
                            "node.kubernetes.io/unschedulable"):
                    tols.append({"key": key, "operator": "Exists",
                                 "effect": "NoExecute" if key.endswith(("not-ready", "unreachable")) else "NoSchedule"})
                try:
                    store.create("pods", p)
                    self.events.record(ds, "Normal", "SuccessfulCreate", f"Created pod: {pname}", "daemonset-controller")
                except StoreError as exc:
                    self.events.record(ds, "Warning", "FailedCreate", f"Error creating: {exc.message}",
                                               "daemonset-controller")
            for nname, node_pods in by_node.items():
                for p in node_pods:
                    if p["metadata"].get("deletionTimestamp"):
                        continue
                    failed = (p.get("status") or {}).get("phase") == "Failed"
                    if nname in eligible and not failed:
                        continue
                    if failed and nname in eligible:
                        self.events.record(ds, "Warning", "FailedDaemonPod",
                                           f"Found failed daemon pod {ns}/{p['metadata']['name']} on node {nname}, "
                                           "will try to kill it", "daemonset-controller")
                    if delete_pod(store, p):
                        self.events.record(ds, "Normal", "SuccessfulDelete", f"Deleted pod: {p['metadata']['name']}",
                                           "daemonset-controller")
            pods = [p for p in _owned(store.scan("pods", ns), ds) if is_active(p)]
            ready = sum(1 for p in pods if is_ready(p))
            status = {"currentNumberScheduled": len(pods), "desiredNumberScheduled": len(eligible),
                      "numberMisscheduled": 0, "numberReady": ready, "numberAvailable": ready,
                      "updatedNumberScheduled": len(pods), "observedGeneration": ds["metadata"].get("generation", 1)}
            if len(eligible) - ready:
                status["numberUnavailable"] = len(eligible) - ready
            _put_status(self.store, "daemonsets.apps", ds, status)


class JobController(_PerObjectController):
    resource = "jobs.batch"

    def _sync(self, job: Obj, now: float) -> None:
        store, ns, name = self.store, job["metadata"]["namespace"], job["metadata"]["name"]
        spec, status = job.get("spec") or {}, copy.deepcopy(job.get("status") or {})
        if any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in status.get("conditions") or []):
            return
        pods = _owned(store.list("pods", ns), job)
        succeeded = sum(1 for p in pods if p["status"].get("phase") == "Succeeded")
        failed = sum(1 for p in pods if p["status"].get("phase") == "Failed") + sum(
            c.get("restartCount", 0) for p in pods for c in p["status"].get("containerStatuses") or [])
        active = [p for p in pods if is_active(p)]  # a pod being deleted is no longer active
        completions = int(spec.get("completions", 1) or 1)
        parallelism = int(spec.get("parallelism", 1) or 1)
        backoff = int(spec.get("backoffLimit", 6))
        stamp = self.clock.rfc3339(now)
        suspended = condition(job, "Suspended")
        if spec.get("suspend"):
            self._delete(job, active)
            active = []
            if not suspended or suspended.get("status") != "True":
                set_condition(status, "Suspended", "True", "JobSuspended", "Job suspended", stamp)
                self.events.record(job, "Normal", "Suspended", "Job suspended", "job-controller")
            self._write_status(job, status, active, succeeded, failed)
            return
        if suspended and suspended.get("status") == "True":
            set_condition(status, "Suspended", "False", "JobResumed", "Job resumed", stamp)
            self.events.record(job, "Normal", "Resumed", "Job resumed", "job-controller")
            status["startTime"] = stamp  # activeDeadlineSeconds counts from the resumption
        status.setdefault("startTime", stamp)
        deadline = spec.get("activeDeadlineSeconds")
        if failed > backoff:
            self._delete(job, active)
            set_condition(status, "Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit", stamp)
            self.events.record(job, "Warning", "BackoffLimitExceeded", "Job has reached the specified backoff limit",
                                       "job-controller")
            active = []
        elif deadline is not None and now - _ts(status["startTime"]) >= float(deadline):
            self._delete(job, active)
            set_condition(status, "Failed", "True", "DeadlineExceeded", "Job was active longer than specified deadline", stamp)
            self.events.record(job, "Warning", "DeadlineExceeded", "Job was active longer than specified deadline",
                                       "job-controller")
            active = []
        elif succeeded >= completions:
            set_condition(status, "Complete", "True", "", "", stamp)
            status["completionTime"] = stamp
            self.events.record(job, "Normal", "Completed", "Job completed", "job-controller")
        else:
            if deadline is not None:
                self.wake_at(_ts(status["startTime"]) + float(deadline))
            need = min(parallelism, completions - succeeded) - len(active)
            if need < 0:  # parallelism lowered: the least advanced pods go, as a ReplicaSet's would
                extra = sorted(active, key=ReplicaSetController._delete_rank)[:-need]
                self._delete(job, extra)
                active = [p for p in active if p not in extra]
            uid = job["metadata"]["uid"]
            for _ in range(max(0, need)):
                pname = f"{name}-{random_suffix(self.rng)}"
                p = pod_from_template(spec.get("template") or {}, pname, ns, job,
                                      {"controller-uid": uid, "job-name": name, "batch.kubernetes.io/controller-uid": uid,
                                       "batch.kubernetes.io/job-name": name})
                try:
                    store.create("pods", p)
                    self.events.record(job, "Normal", "SuccessfulCreate", f"Created pod: {pname}", "job-controller")
                    active.append(p)
                except StoreError as exc:
                    self.events.record(job, "Warning", "FailedCreate", f"Error creating: {exc.message}", "job-controller")
                    break
        self._write_status(job, status, active, succeeded, failed)

    def _delete(self, job: Obj, pods: list[Obj]) -> None:
        for p in pods:
            if delete_pod(self.store, p):
                self.events.record(job, "Normal", "SuccessfulDelete", f"Deleted pod: {p['metadata']['name']}",
                                   "job-controller")

    def _write_status(self, job: Obj, status: dict[str, Any], active: list[Obj], succeeded: int, failed: int) -> None:
        status["active"] = len(active)
        if not status["active"]:
            status.pop("active")
        if succeeded:
            status["succeeded"] = succeeded
        if failed:
            status["failed"] = failed
        status["ready"] = sum(1 for p in active if is_ready(p))
        _put_status(self.store, "jobs.batch", job, status)


def cron_matches(expr: str, t: float) -> bool:
    """Standard 5-field cron (minute hour dom month dow) with *, */n, a-b, lists."""
    fields = expr.split()
    macros = {"@hourly": "0 * * * *", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@weekly": "0 0 * * 0",
              "@monthly": "0 0 1 * *", "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *"}
    if len(fields) == 1 and fields[0] in macros:
        fields = macros[fields[0]].split()
    if len(fields) != 5:
        return False
    dt = datetime.fromtimestamp(t, UTC)
    values = [dt.minute, dt.hour, dt.day, dt.month, (dt.weekday() + 1) % 7]
    for f, v in zip(fields, values, strict=True):
        ok = False
        for part in f.split(","):
            step = 1
            if "/" in part:
                part, s = part.split("/", 1)
                step = int(s)
            if part in ("*", ""):
                lo, hi = 0, 59
            elif "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
            else:
                lo = hi = int(part)
                if step != 1:
                    hi = 59
            if lo <= v <= hi and (v - lo) % step == 0:
                ok = True
        if not ok:
            return False
    return True


class CronJobController(_WorkloadController):
    def __call__(self, now: float) -> None:
        store = self.store
        for cj in store.list("cronjobs.batch"):
            spec = cj.get("spec") or {}
            ns, name = cj["metadata"]["namespace"], cj["metadata"]["name"]
            minute = int(now // 60) * 60
            nxt = minute + 60
            self.wake_at(nxt)
            last = _ts((cj.get("status") or {}).get("lastScheduleTime"))
            jobs = _owned(store.list("jobs.batch", ns), cj)
            if spec.get("suspend") or last >= minute or not cron_matches(spec.get("schedule", ""), minute):
                self._history(cj, jobs)
                continue
            active = [j for j in jobs if not any(c["status"] == "True" for c in (j.get("status") or {}).get("conditions") or [])]
            policy = spec.get("concurrencyPolicy", "Allow")
            if active and policy == "Forbid":
                continue
            if active and policy == "Replace":
                for j in active:
                    store.delete("jobs.batch", ns, j["metadata"]["name"])
            jname = f"{name}-{minute // 60}"
            jt = copy.deepcopy(spec.get("jobTemplate") or {})
            job = {"metadata": {"name": jname, "namespace": ns, "labels": dict((jt.get("metadata") or {}).get("labels") or {}),
                                "annotations": {"batch.kubernetes.io/cronjob-scheduled-timestamp": self.clock.rfc3339(minute)},
                                "ownerReferences": [owner_ref(cj)]}, "spec": jt.get("spec") or {}}
            try:
                store.create("jobs.batch", job)
                self.events.record(cj, "Normal", "SuccessfulCreate", f"Created job {jname}", "cronjob-controller")
            except StoreError:
                pass

            def put(o: Obj, minute: float = minute) -> None:
                o.setdefault("status", {})["lastScheduleTime"] = self.clock.rfc3339(minute)
            store.mutate("cronjobs.batch", ns, name, put, subresource="status",
                     manager=CONTROLLER_MANAGER)
            self._history(cj, _owned(store.list("jobs.batch", ns), cj))

    def _history(self, cj: Obj, jobs: list[Obj]) -> None:
        spec = cj.get("spec") or {}
        for kind, limit in (("Complete", int(spec.get("successfulJobsHistoryLimit", 3))),
                            ("Failed", int(spec.get("failedJobsHistoryLimit", 1)))):
            done = [j for j in jobs if any(c["type"] == kind and c["status"] == "True"
                                           for c in (j.get("status") or {}).get("conditions") or [])]
            done.sort(key=lambda j: j["metadata"].get("creationTimestamp", ""))
            for j in done[: max(0, len(done) - limit)]:
                try:
                    self.store.delete("jobs.batch", j["metadata"]["namespace"], j["metadata"]["name"])
                except StoreError:
                    pass
