"""The resourcequota controller: keeps each ResourceQuota's status.hard / status.used current,
and the quota evaluator it shares with admission (kubesim/api/admission.py charges a pod what
`pod_usage` says, as kube-apiserver and kube-controller-manager share one evaluator)."""

from __future__ import annotations

from typing import Any

from kubesim.controllers.common import is_terminal
from kubesim.quantity import format_resource, parse_quantity
from kubesim.runtime import CONTROLLER_MANAGER
from kubesim.store import Obj, Store

COMPUTE = ("cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory",
           "ephemeral-storage", "requests.ephemeral-storage", "limits.ephemeral-storage")


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


# object-count quotas: the quota's resource name → the stored kind it counts
_COUNTED = {"services": "services", "count/services": "services", "configmaps": "configmaps",
            "count/configmaps": "configmaps", "secrets": "secrets", "count/secrets": "secrets",
            "persistentvolumeclaims": "persistentvolumeclaims",
            "count/persistentvolumeclaims": "persistentvolumeclaims", "count/deployments.apps": "deployments.apps"}


class QuotaController:
    def __init__(self, store: Store) -> None:
        self.store = store

    def __call__(self, now: float) -> None:
        store = self.store
        for q in store.scan("resourcequotas"):
            ns = q["metadata"]["namespace"]
            hard = (q.get("spec") or {}).get("hard") or {}
            pods = [p for p in store.scan("pods", ns) if not is_terminal(p)]
            used: dict[str, Any] = {}
            for r in hard:
                if r in ("pods", "count/pods") or r in COMPUTE:
                    used[r] = format_resource(r, sum(pod_usage(p).get(r, 0.0) for p in pods))
                elif r in _COUNTED:
                    used[r] = str(len(store.scan(_COUNTED[r], ns)))
                else:
                    used[r] = "0"
            status = {"hard": dict(hard), "used": used}
            if q.get("status") != status:
                def put(o: Obj, st: dict[str, Any] = status) -> None:
                    o["status"] = st
                store.mutate("resourcequotas", ns, q["metadata"]["name"], put, subresource="status",
                             manager=CONTROLLER_MANAGER)
