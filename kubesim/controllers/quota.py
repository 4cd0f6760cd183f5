"""The resourcequota controller: keeps each ResourceQuota's status.hard / status.used current
(what admission charges a pod is kubesim/api/admission.py's pod_usage)."""

from __future__ import annotations

from typing import Any

from kubesim.api.admission import COMPUTE, pod_usage
from kubesim.controllers.common import is_terminal
from kubesim.quantity import format_resource
from kubesim.runtime import CONTROLLER_MANAGER
from kubesim.store import Obj, Store

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
