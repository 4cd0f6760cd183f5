"""The PodSecurity admission plugin: a pod created in a namespace whose
`pod-security.kubernetes.io/enforce` level it violates is refused (403 Forbidden, the plugin's
wording, from `core.pod_security`), whoever creates it: a user, or a ReplicaSet controller that
then reports FailedCreate. Pods already running are left alone (the plugin gates admission only)."""

from __future__ import annotations

from core.pod_security import refusal
from kubesim.store import Obj, Store, StoreError


class PodSecurityAdmission:
    """Store admission hook."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def install(self) -> None:
        if self not in self.store.admission:
            self.store.admission.append(self)

    def __call__(self, verb: str, key: str, obj: Obj, old: Obj | None) -> None:
        if verb != "create" or key != "pods":
            return
        meta = obj.get("metadata") or {}
        ns = self.store.try_get("namespaces", "", meta.get("namespace", ""))
        message = refusal(meta.get("name", ""), obj.get("spec") or {}, ((ns or {}).get("metadata") or {}).get("labels"))
        if message is not None:
            raise StoreError(403, "Forbidden", message)
