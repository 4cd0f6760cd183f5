"""Admission the API server runs before an object is stored: Service ClusterIP allocation, pod
defaults, LimitRange defaulting and limits, and ResourceQuota accounting — with the real
`pods "x" is forbidden: exceeded quota: ...` messages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clusters.sim.controllers.common import is_terminal
from clusters.sim.controllers.quantity import format_resource, parse_quantity
from clusters.sim.store import Obj, StoreError

if TYPE_CHECKING:
    from clusters.sim.cluster import SimCluster

POD_DEFAULTS = {"restartPolicy": "Always", "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
                "terminationGracePeriodSeconds": 30, "serviceAccountName": "default", "securityContext": {},
                "enableServiceLinks": True, "priority": 0, "preemptionPolicy": "PreemptLowerPriority"}


def install_admission(cluster: SimCluster) -> None:
    state = {"next_ip": 10}

    def hook(verb: str, key: str, obj: Obj, old: Obj | None) -> None:
        if verb == "delete":
            return
        if key == "services" and verb == "create":
            _allocate_cluster_ip(cluster, obj, state)
        if key == "pods" and verb == "create":
            _default_pod(obj)
            _apply_limit_ranges(cluster, obj)
            _check_quota(cluster, obj)

    cluster.store.admission.append(hook)


def _allocate_cluster_ip(cluster: SimCluster, svc: Obj, state: dict[str, int]) -> None:
    spec = svc.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    for p in spec.get("ports") or []:
        p.setdefault("protocol", "TCP")
        p.setdefault("targetPort", p.get("port"))
    if spec["type"] == "ExternalName" or spec.get("clusterIP") == "None":
        return
    if not spec.get("clusterIP"):
        used = set()
        with cluster.store.lock:
            for s in cluster.store.iter_raw("services"):
                used.add(s.get("spec", {}).get("clusterIP"))
        while True:
            n = state["next_ip"]
            state["next_ip"] += 1
            ip = f"10.96.{n // 250}.{n % 250 + 1}"
            if ip not in used and ip != "10.96.0.10" and ip != "10.96.0.1":
                break
        spec["clusterIP"] = ip
    spec["clusterIPs"] = [spec["clusterIP"]]
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")


def _default_pod(pod: Obj) -> None:
    spec = pod.setdefault("spec", {})
    for k, v in POD_DEFAULTS.items():
        spec.setdefault(k, v)
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("tolerations", [])
    tol_keys = {t.get("key") for t in spec["tolerations"]}
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if key not in tol_keys:
            spec["tolerations"].append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        c.setdefault("imagePullPolicy", "Always" if str(c.get("image", "")).endswith(":latest") or ":" not in
                     str(c.get("image", "")).rsplit("/", 1)[-1] else "IfNotPresent")
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        c.setdefault("resources", {})
        for p in c.get("ports") or []:
            p.setdefault("protocol", "TCP")
    pod.setdefault("status", {}).setdefault("phase", "Pending")


def _apply_limit_ranges(cluster: SimCluster, pod: Obj) -> None:
    ns = pod["metadata"]["namespace"]
    name = pod["metadata"]["name"]
    for lr in cluster.store.list("limitranges", ns):
        for item in (lr.get("spec") or {}).get("limits") or []:
            if item.get("type", "Container") != "Container":
                continue
            for c in pod["spec"].get("containers") or []:
                res = c.setdefault("resources", {})
                lim, req = res.setdefault("limits", {}), res.setdefault("requests", {})
                for r, v in (item.get("default") or {}).items():
                    lim.setdefault(r, v)
                for r, v in (item.get("defaultRequest") or {}).items():
                    req.setdefault(r, lim.get(r, v) if r not in (item.get("defaultRequest") or {}) else v)
                for r in list(lim):
                    req.setdefault(r, lim[r])
                if not lim:
                    res.pop("limits")
                if not req:
                    res.pop("requests")
                for r, v in (item.get("max") or {}).items():
                    have = (res.get("limits") or {}).get(r)
                    if have is None:
                        raise StoreError(403, "Forbidden", f'pods "{name}" is forbidden: maximum {_word(r)} usage per '
                                         f"Container is {v}.  No limit is specified")
                    if parse_quantity(have) > parse_quantity(v):
                        raise StoreError(403, "Forbidden", f'pods "{name}" is forbidden: maximum {_word(r)} usage per '
                                         f"Container is {v}, but limit is {have}")
                for r, v in (item.get("min") or {}).items():
                    have = (res.get("requests") or {}).get(r)
                    if have is not None and parse_quantity(have) < parse_quantity(v):
                        raise StoreError(403, "Forbidden", f'pods "{name}" is forbidden: minimum {_word(r)} usage per '
                                         f"Container is {v}, but request is {have}")


def _word(resource: str) -> str:
    return {"cpu": "cpu", "memory": "memory", "ephemeral-storage": "ephemeral-storage"}.get(resource, resource)


def pod_usage(pod: Obj) -> dict[str, float]:
    """What one pod counts against a quota (init containers' max, as the quota evaluator does)."""
    out = {"pods": 1.0, "count/pods": 1.0}
    spec = pod.get("spec") or {}
    sums: dict[str, float] = {}
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        for kind in ("requests", "limits"):
            for r, v in (res.get(kind) or {}).items():
                sums[f"{kind}.{r}"] = sums.get(f"{kind}.{r}", 0.0) + parse_quantity(v)
    for c in spec.get("initContainers") or []:
        res = c.get("resources") or {}
        for kind in ("requests", "limits"):
            for r, v in (res.get(kind) or {}).items():
                k = f"{kind}.{r}"
                sums[k] = max(sums.get(k, 0.0), parse_quantity(v))
    out.update(sums)
    for r in ("cpu", "memory", "ephemeral-storage"):
        if f"requests.{r}" in sums:
            out[r] = sums[f"requests.{r}"]
    return out


def _containers_missing(pod: Obj, resource: str) -> list[str]:
    kind, _, r = resource.partition(".")
    if kind not in ("requests", "limits"):
        kind, r = "requests", resource
    names = []
    for c in pod["spec"].get("containers") or []:
        if r not in ((c.get("resources") or {}).get(kind) or {}):
            names.append(c["name"])
    return names


COMPUTE = ("cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory",
           "ephemeral-storage", "requests.ephemeral-storage", "limits.ephemeral-storage")


def _check_quota(cluster: SimCluster, pod: Obj) -> None:
    ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    quotas = cluster.store.list("resourcequotas", ns)
    if not quotas:
        return
    usage = pod_usage(pod)
    pods_in_ns = [p for p in cluster.store.list("pods", ns) if not is_terminal(p)]
    for q in sorted(quotas, key=lambda o: o["metadata"]["name"]):
        hard = (q.get("spec") or {}).get("hard") or {}
        missing = []
        for r in sorted(hard):
            if r in COMPUTE and r not in usage:
                missing.append(f"{r} for: {','.join(_containers_missing(pod, r))}")
        if missing:
            raise StoreError(403, "Forbidden", f'pods "{name}" is forbidden: failed quota: {q["metadata"]["name"]}: '
                             f"must specify {'; '.join(missing)}")
        exceeded = []
        for r in sorted(hard):
            if r not in usage and r not in ("pods", "count/pods"):
                continue
            used = sum(pod_usage(p).get(r, 0.0) for p in pods_in_ns)
            limit = parse_quantity(hard[r])
            if used + usage.get(r, 0.0) > limit + 1e-9:
                exceeded.append((r, usage.get(r, 0.0), used, hard[r]))
        if exceeded:
            req = ",".join(f"{r}={format_resource(r, v)}" for r, v, _, _ in exceeded)
            used_s = ",".join(f"{r}={format_resource(r, u)}" for r, _, u, _ in exceeded)
            lim_s = ",".join(f"{r}={h}" for r, _, _, h in exceeded)
            raise StoreError(403, "Forbidden", f'pods "{name}" is forbidden: exceeded quota: {q["metadata"]["name"]}, '
                             f"requested: {req}, used: {used_s}, limited: {lim_s}")


def quota_status(cluster: SimCluster, now: float) -> None:
    """The resourcequota controller: keep status.hard / status.used current."""
    store = cluster.store
    for q in cluster.scan("resourcequotas"):
        ns = q["metadata"]["namespace"]
        hard = (q.get("spec") or {}).get("hard") or {}
        pods = [p for p in cluster.scan("pods", ns) if not is_terminal(p)]
        used: dict[str, Any] = {}
        for r in hard:
            if r in ("pods", "count/pods") or r in COMPUTE:
                used[r] = format_resource(r, sum(pod_usage(p).get(r, 0.0) for p in pods))
            elif r in ("services", "count/services"):
                used[r] = str(len(store.list("services", ns)))
            elif r in ("configmaps", "count/configmaps"):
                used[r] = str(len(store.list("configmaps", ns)))
            elif r in ("secrets", "count/secrets"):
                used[r] = str(len(store.list("secrets", ns)))
            elif r in ("persistentvolumeclaims", "count/persistentvolumeclaims"):
                used[r] = str(len(store.list("persistentvolumeclaims", ns)))
            elif r == "count/deployments.apps":
                used[r] = str(len(store.list("deployments.apps", ns)))
            else:
                used[r] = "0"
        status = {"hard": dict(hard), "used": used}
        if q.get("status") != status:
            def put(o: Obj, st: dict[str, Any] = status) -> None:
                o["status"] = st
            store.mutate("resourcequotas", ns, q["metadata"]["name"], put, subresource="status")
