"""PersistentVolume binding: claims bind to matching static volumes, or kind's local-path
provisioner (`standard`, WaitForFirstConsumer) creates a node-pinned volume once a pod using the
claim is scheduled. Events as the persistentvolume-controller writes them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusters.sim.controllers.quantity import parse_quantity
from clusters.sim.store import Obj, StoreError

if TYPE_CHECKING:
    from clusters.sim.cluster import SimCluster

PROVISIONER = "rancher.io/local-path"


class VolumeBinder:
    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster
        self.last_event: dict[str, float] = {}

    def _class(self, claim: Obj) -> Obj | None:
        store = self.cluster.store
        name = (claim.get("spec") or {}).get("storageClassName")
        if name is None:
            for sc in store.list("storageclasses.storage.k8s.io"):
                if (sc["metadata"].get("annotations") or {}).get("storageclass.kubernetes.io/is-default-class") == "true":
                    return sc
            return None
        return store.try_get("storageclasses.storage.k8s.io", "", name) if name else None

    def __call__(self, now: float) -> None:
        store = self.cluster.store
        for claim in self.cluster.scan("persistentvolumeclaims"):
            if claim.get("status", {}).get("phase") == "Bound":
                continue
            ns, name = claim["metadata"]["namespace"], claim["metadata"]["name"]
            spec = claim.get("spec") or {}
            if spec.get("volumeName"):
                pv = store.try_get("persistentvolumes", "", spec["volumeName"])
                if pv is not None:
                    self._bind(claim, pv)
                continue
            pv = self._match_static(claim)
            if pv is not None:
                self._bind(claim, pv)
                continue
            sc_name = spec.get("storageClassName")
            sc = self._class(claim)
            uid = claim["metadata"]["uid"]
            if now - self.last_event.get(uid, -1e18) < 15.0:
                continue
            self.last_event[uid] = now
            self.cluster.wake_at(now + 15.0)
            if claim.get("status", {}).get("phase") != "Pending":
                store.mutate("persistentvolumeclaims", ns, name, lambda o: o.setdefault("status", {}).update(phase="Pending"),
                             subresource="status")
            if sc is None and sc_name:
                self.cluster.events.record(claim, "Warning", "ProvisioningFailed",
                                           f'storageclass.storage.k8s.io "{sc_name}" not found', "persistentvolume-controller")
            elif sc is None:
                self.cluster.events.record(claim, "Normal", "FailedBinding",
                                           "no persistent volumes available for this claim and no storage class is set",
                                           "persistentvolume-controller")
            elif sc.get("volumeBindingMode") == "WaitForFirstConsumer":
                self.cluster.events.record(claim, "Normal", "WaitForFirstConsumer",
                                           "waiting for first consumer to be created before binding",
                                           "persistentvolume-controller")

    def _match_static(self, claim: Obj) -> Obj | None:
        want = parse_quantity(((claim.get("spec") or {}).get("resources") or {}).get("requests", {}).get("storage", "0"))
        sc_name = (claim.get("spec") or {}).get("storageClassName")
        for pv in self.cluster.store.list("persistentvolumes"):
            if pv.get("status", {}).get("phase", "Available") not in ("Available", "") or (pv.get("spec") or {}).get("claimRef"):
                continue
            if (pv["spec"].get("storageClassName") or "") != (sc_name or ""):
                continue
            if parse_quantity((pv["spec"].get("capacity") or {}).get("storage", "0")) >= want:
                return pv
        return None

    def _bind(self, claim: Obj, pv: Obj) -> None:
        store = self.cluster.store
        ns, name = claim["metadata"]["namespace"], claim["metadata"]["name"]

        def bind_pv(o: Obj) -> None:
            o["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": ns, "name": name,
                                     "uid": claim["metadata"]["uid"], "apiVersion": "v1"}
            o.setdefault("status", {})["phase"] = "Bound"
        store.mutate("persistentvolumes", "", pv["metadata"]["name"], bind_pv)

        def bind_claim(o: Obj) -> None:
            o["spec"]["volumeName"] = pv["metadata"]["name"]
            ann = o["metadata"].setdefault("annotations", {})
            ann["pv.kubernetes.io/bind-completed"] = "yes"
            ann["pv.kubernetes.io/bound-by-controller"] = "yes"
        store.mutate("persistentvolumeclaims", ns, name, bind_claim)

        def st(o: Obj) -> None:
            o["status"] = {"phase": "Bound", "accessModes": pv["spec"].get("accessModes", ["ReadWriteOnce"]),
                           "capacity": pv["spec"].get("capacity", {})}
        store.mutate("persistentvolumeclaims", ns, name, st, subresource="status")

    def bind_for_pod(self, pod: Obj, node: str) -> None:
        """The scheduler picked `node`: provision WaitForFirstConsumer claims there."""
        store = self.cluster.store
        ns = pod["metadata"]["namespace"]
        for v in (pod.get("spec") or {}).get("volumes") or []:
            if "persistentVolumeClaim" not in v:
                continue
            claim = store.try_get("persistentvolumeclaims", ns, v["persistentVolumeClaim"].get("claimName", ""))
            if claim is None or claim.get("status", {}).get("phase") == "Bound":
                continue
            sc = self._class(claim)
            if sc is None or sc.get("provisioner") != PROVISIONER:
                continue
            storage = ((claim.get("spec") or {}).get("resources") or {}).get("requests", {}).get("storage", "1Gi")
            pv_name = f"pvc-{claim['metadata']['uid']}"
            pv = {"metadata": {"name": pv_name, "annotations": {"local.path.provisioner/selected-node": node,
                                                                "pv.kubernetes.io/provisioned-by": PROVISIONER},
                               "finalizers": ["kubernetes.io/pv-protection"]},
                  "spec": {"capacity": {"storage": storage}, "accessModes": (claim.get("spec") or {}).get("accessModes", ["ReadWriteOnce"]),
                           "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy", "Delete"),
                           "storageClassName": sc["metadata"]["name"], "volumeMode": "Filesystem",
                           "hostPath": {"path": f"/var/local-path-provisioner/{pv_name}_{ns}_{claim['metadata']['name']}",
                                        "type": "DirectoryOrCreate"},
                           "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                               {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}},
                  "status": {"phase": "Available"}}
            try:
                created = store.create("persistentvolumes", pv)
            except StoreError:
                created = store.get("persistentvolumes", "", pv_name)
            self.cluster.events.record(claim, "Normal", "ExternalProvisioning",
                                       f"Waiting for a volume to be created either by the external provisioner '{PROVISIONER}' "
                                       "or manually by the system administrator. If volume creation is delayed, please verify "
                                       "that the provisioner is running and correctly registered.", "persistentvolume-controller")
            self.cluster.events.record(claim, "Normal", "ProvisioningSucceeded",
                                       f"Successfully provisioned volume {pv_name}", f"{PROVISIONER}_local-path-provisioner")
            self._bind(claim, created)

    def node_of_claim(self, namespace: str, claim: str) -> str | None:
        c = self.cluster.store.try_get("persistentvolumeclaims", namespace, claim)
        if not c or not (c.get("spec") or {}).get("volumeName"):
            return None
        pv = self.cluster.store.try_get("persistentvolumes", "", c["spec"]["volumeName"])
        ann = ((pv or {}).get("metadata") or {}).get("annotations") or {}
        return ann.get("local.path.provisioner/selected-node")
