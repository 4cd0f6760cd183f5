"""PersistentVolume binding: claims bind to matching static volumes, or kind's local-path
provisioner (`standard`, WaitForFirstConsumer) creates a node-pinned volume once a pod using the
claim is scheduled, or the EBS CSI driver (`ebs.csi.aws.com`) creates a network-attached volume
with no node affinity. Events as the persistentvolume-controller writes them.

A network-attached volume is attached to one node at a time, as the attach/detach controller
does it: a pod on another node waits (FailedAttachVolume, Multi-Attach error) while a pod of the
old node still uses it, then the volume detaches there and attaches under the new pod
(SuccessfulAttachVolume). So a workload with such a volume can leave a broken node, provided its
old pod is deleted (force-deleted when the node's kubelet is gone, or after the controller's
6-minute maxWaitForUnmountDuration)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kubesim.quantity import parse_quantity
from kubesim.runtime import CONTROLLER_MANAGER
from kubesim.store import Obj, StoreError

if TYPE_CHECKING:
    from kubesim.view import ControlPlane, KubeletView

PROVISIONER = "rancher.io/local-path"
NETWORK_PROVISIONER = "ebs.csi.aws.com"
ATTACH_SECONDS = 5.0  # an EBS AttachVolume call takes a few seconds
MAX_WAIT_FOR_UNMOUNT = 360.0  # attach/detach controller: force detach from a node that never unmounts


class VolumeBinder:
    def __init__(self, cp: ControlPlane, kubelet: KubeletView) -> None:
        self.store, self.events, self.wake_at = cp.store, cp.events, cp.wake_at
        self.kubelet = kubelet  # keeps the attachments, so that a checkpoint holds them
        self.last_event: dict[str, float] = {}

    def pod_claims(self, pod: Obj) -> Iterator[tuple[str, Obj | None]]:
        """(claim name, the claim or None when it does not exist) for each claim a pod's volumes name."""
        ns = pod["metadata"]["namespace"]
        for v in (pod.get("spec") or {}).get("volumes") or []:
            if "persistentVolumeClaim" in v:
                name = v["persistentVolumeClaim"].get("claimName", "")
                yield name, self.store.try_get("persistentvolumeclaims", ns, name)

    def storage_class(self, claim: Obj) -> Obj | None:
        store = self.store
        name = (claim.get("spec") or {}).get("storageClassName")
        if name is None:
            for sc in store.list("storageclasses.storage.k8s.io"):
                if (sc["metadata"].get("annotations") or {}).get("storageclass.kubernetes.io/is-default-class") == "true":
                    return sc
            return None
        return store.try_get("storageclasses.storage.k8s.io", "", name) if name else None

    def __call__(self, now: float) -> None:
        store = self.store
        for claim in self.store.scan("persistentvolumeclaims"):
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
            sc = self.storage_class(claim)
            uid = claim["metadata"]["uid"]
            if now - self.last_event.get(uid, -1e18) < 15.0:
                continue
            self.last_event[uid] = now
            self.wake_at(now + 15.0)
            if claim.get("status", {}).get("phase") != "Pending":
                store.mutate("persistentvolumeclaims", ns, name, lambda o: o.setdefault("status", {}).update(phase="Pending"),
                             subresource="status", manager=CONTROLLER_MANAGER)
            if sc is None and sc_name:
                self.events.record(claim, "Warning", "ProvisioningFailed",
                                           f'storageclass.storage.k8s.io "{sc_name}" not found', "persistentvolume-controller")
            elif sc is None:
                self.events.record(claim, "Normal", "FailedBinding",
                                           "no persistent volumes available for this claim and no storage class is set",
                                           "persistentvolume-controller")
            elif sc.get("volumeBindingMode") == "WaitForFirstConsumer":
                self.events.record(claim, "Normal", "WaitForFirstConsumer",
                                           "waiting for first consumer to be created before binding",
                                           "persistentvolume-controller")

    def _match_static(self, claim: Obj) -> Obj | None:
        want = parse_quantity(((claim.get("spec") or {}).get("resources") or {}).get("requests", {}).get("storage", "0"))
        sc_name = (claim.get("spec") or {}).get("storageClassName")
        for pv in self.store.list("persistentvolumes"):
            if pv.get("status", {}).get("phase", "Available") not in ("Available", "") or (pv.get("spec") or {}).get("claimRef"):
                continue
            if (pv["spec"].get("storageClassName") or "") != (sc_name or ""):
                continue
            if parse_quantity((pv["spec"].get("capacity") or {}).get("storage", "0")) >= want:
                return pv
        return None

    def _bind(self, claim: Obj, pv: Obj) -> None:
        store = self.store
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
        store.mutate("persistentvolumeclaims", ns, name, st, subresource="status", manager=CONTROLLER_MANAGER)

    def bind_for_pod(self, pod: Obj, node: str) -> None:
        """The scheduler picked `node`: provision WaitForFirstConsumer claims there."""
        ns = pod["metadata"]["namespace"]
        for _, claim in self.pod_claims(pod):
            if claim is None or claim.get("status", {}).get("phase") == "Bound":
                continue
            sc = self.storage_class(claim)
            if sc is None or sc.get("provisioner") not in (PROVISIONER, NETWORK_PROVISIONER):
                continue
            storage = ((claim.get("spec") or {}).get("resources") or {}).get("requests", {}).get("storage", "1Gi")
            pv_name = f"pvc-{claim['metadata']['uid']}"
            if sc.get("provisioner") == NETWORK_PROVISIONER:
                self._provision_network(claim, sc, pv_name, storage)
                continue
            created = self._provision(claim, sc, pv_name, storage, {
                "local.path.provisioner/selected-node": node, "pv.kubernetes.io/provisioned-by": PROVISIONER},
                ["kubernetes.io/pv-protection"], {
                "hostPath": {"path": f"/var/local-path-provisioner/{pv_name}_{ns}_{claim['metadata']['name']}",
                             "type": "DirectoryOrCreate"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}})
            self.events.record(claim, "Normal", "ExternalProvisioning",
                                       f"Waiting for a volume to be created either by the external provisioner '{PROVISIONER}' "
                                       "or manually by the system administrator. If volume creation is delayed, please verify "
                                       "that the provisioner is running and correctly registered.", "persistentvolume-controller")
            self.events.record(claim, "Normal", "ProvisioningSucceeded",
                                       f"Successfully provisioned volume {pv_name}", f"{PROVISIONER}_local-path-provisioner")
            self._bind(claim, created)

    def _provision(self, claim: Obj, sc: Obj, pv_name: str, storage: str, annotations: dict[str, str],
                   finalizers: list[str], source: dict[str, Any]) -> Obj:
        """Create the PersistentVolume a provisioner makes for `claim` (the one made already when a
        retry finds it): the claim's size and access modes, the class's reclaim policy, and the
        provisioner's own annotations, finalizers and volume source."""
        pv = {"metadata": {"name": pv_name, "annotations": annotations, "finalizers": finalizers},
              "spec": {"capacity": {"storage": storage},
                       "accessModes": (claim.get("spec") or {}).get("accessModes", ["ReadWriteOnce"]),
                       "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy", "Delete"),
                       "storageClassName": sc["metadata"]["name"], "volumeMode": "Filesystem", **source},
              "status": {"phase": "Available"}}
        try:
            return self.store.create("persistentvolumes", pv)
        except StoreError:
            return self.store.get("persistentvolumes", "", pv_name)

    def _provision_network(self, claim: Obj, sc: Obj, pv_name: str, storage: str) -> None:
        ns = claim["metadata"]["namespace"]
        handle = "vol-0" + hashlib.sha256(claim["metadata"]["uid"].encode()).hexdigest()[:16]
        created = self._provision(claim, sc, pv_name, storage, {
            "pv.kubernetes.io/provisioned-by": NETWORK_PROVISIONER,
            "volume.kubernetes.io/provisioner-deletion-secret-name": "",
            "volume.kubernetes.io/provisioner-deletion-secret-namespace": ""},
            ["kubernetes.io/pv-protection", "external-attacher/ebs-csi-aws-com"], {
            "csi": {"driver": NETWORK_PROVISIONER, "volumeHandle": handle, "fsType": "ext4",
                    "volumeAttributes": {"storage.kubernetes.io/csiProvisionerIdentity": "1700000000000-8081-ebs.csi.aws.com"}}})
        self.events.record(claim, "Normal", "Provisioning",
                                   f'External provisioner is provisioning volume for claim "{ns}/{claim["metadata"]["name"]}"',
                                   f"{NETWORK_PROVISIONER}_ebs-csi-controller-0")
        self.events.record(claim, "Normal", "ProvisioningSucceeded", f"Successfully provisioned volume {pv_name}",
                                   f"{NETWORK_PROVISIONER}_ebs-csi-controller-0")
        self._bind(claim, created)

    @staticmethod
    def network_attached(pv: Obj | None) -> bool:
        return ((pv or {}).get("spec") or {}).get("csi", {}).get("driver") == NETWORK_PROVISIONER

    def attached_to(self, pod: Obj, node: str, pv: Obj, now: float) -> bool:
        """The attach/detach controller for one network-attached volume of `pod`, scheduled on
        `node`: True once the volume is attached there. Until then the pod's kubelet waits."""
        attachments: dict[str, Any] = self.kubelet.state.setdefault("attachments", {})
        moved = False
        pv_name, pv_uid = pv["metadata"]["name"], pv["metadata"].get("uid")
        cur = attachments.get(pv_name)
        if cur is not None and cur.get("uid") != pv_uid:
            cur = None  # a volume of that name from an earlier deployment
        if cur is not None and cur["node"] != node:
            users = self._users_on(pv, cur["node"], pod, now)
            if users:
                key = f"{pod['metadata']['uid']}/{pv_name}"
                if now - self.last_event.get(key, -1e18) >= 30.0:
                    self.last_event[key] = now
                    self.events.record(
                        pod, "Warning", "FailedAttachVolume",
                        f'Multi-Attach error for volume "{pv_name}" Volume is already used by pod(s) {", ".join(users)}',
                        "attachdetach-controller")
                self.wake_at(now + 5.0)
                return False
            cur = None  # detached from the old node
            moved = True
        if cur is None:
            # A volume's first attach counts as instant, so an application comes up in the order its
            # models were tuned to; a move off another node pays the detach and attach time.
            delay = ATTACH_SECONDS if moved else 0.0
            cur = attachments[pv_name] = {"node": node, "uid": pv_uid, "ready_at": now + delay, "reported": False}
        if now + 1e-9 < cur["ready_at"]:
            self.wake_at(cur["ready_at"])
            return False
        if not cur["reported"]:
            cur["reported"] = True
            self.events.record(pod, "Normal", "SuccessfulAttachVolume",
                                       f'AttachVolume.Attach succeeded for volume "{pv_name}"', "attachdetach-controller")
        return True

    def _users_on(self, pv: Obj, node: str, pod: Obj, now: float) -> list[str]:
        """Pods of `node` that still hold the volume: not deleted, or deleted but not yet unmounted
        (a node whose kubelet is down never unmounts: the controller force-detaches after
        MAX_WAIT_FOR_UNMOUNT)."""
        claim = ((pv.get("spec") or {}).get("claimRef") or {})
        users = []
        for other in self.store.list("pods", claim.get("namespace", "")):
            if other["metadata"]["uid"] == pod["metadata"]["uid"] or (other.get("spec") or {}).get("nodeName") != node:
                continue
            if (other.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            if not any((v.get("persistentVolumeClaim") or {}).get("claimName") == claim.get("name")
                       for v in (other.get("spec") or {}).get("volumes") or []):
                continue
            if other["metadata"].get("deletionTimestamp"):
                since = self.last_event.setdefault(f"deleted/{other['metadata']['uid']}", now)
                if since + MAX_WAIT_FOR_UNMOUNT <= now:
                    continue
                self.wake_at(since + MAX_WAIT_FOR_UNMOUNT)
            users.append(other["metadata"]["name"])
        return users

    def node_of_claim(self, namespace: str, claim: str) -> str | None:
        c = self.store.try_get("persistentvolumeclaims", namespace, claim)
        if not c or not (c.get("spec") or {}).get("volumeName"):
            return None
        pv = self.store.try_get("persistentvolumes", "", c["spec"]["volumeName"])
        ann = ((pv or {}).get("metadata") or {}).get("annotations") or {}
        return ann.get("local.path.provisioner/selected-node")
