"""Garbage collection and namespace lifecycle: dependents whose controlling owner is gone are
deleted (background propagation); a terminating namespace is emptied, then finalized; every
namespace gets its `default` ServiceAccount and `kube-root-ca.crt` ConfigMap; Events expire."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusters.sim.store import StoreError

if TYPE_CHECKING:
    from clusters.sim.cluster import SimCluster

CA = "-----BEGIN CERTIFICATE-----\nMIIC/jCCAeagAwIBAgIBADANBgkqhkiG9w0BAQsFADAVMRMwEQYDVQQDEwprdWJl\ncm5ldGVzMB4XDTI2MDEwNTA5MDAwMFoXDTM2MDEwMzA5MDAwMFowFTETMBEGA1UE\n-----END CERTIFICATE-----\n"


class GarbageCollector:
    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster
        self.last_expire = -1e18
        self._started_at = -1  # the store's resourceVersion when the last collection began

    def __call__(self, now: float) -> None:
        store = self.cluster.store
        # Dependents and namespaces are a function of stored objects: nothing to do while the store
        # has not changed since the last collection began (a pass woken by a probe's timer).
        if store.resource_version != self._started_at:
            self._started_at = store.resource_version
            self._collect(now)
        if now - self.last_expire >= 300:
            self.last_expire = now
            self.cluster.events.expire(now)

    def _collect(self, now: float) -> None:
        store = self.cluster.store
        with store.lock:
            uids = set()
            for key in list(store.types):
                for obj in store.iter_raw(key):
                    uids.add(obj["metadata"].get("uid"))
            doomed = []
            for key in list(store.types):
                if key == "events":
                    continue
                for obj in store.iter_raw(key):
                    refs = obj["metadata"].get("ownerReferences") or []
                    if refs and all(r.get("uid") not in uids for r in refs):
                        doomed.append((key, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]))
        for key, ns, name in doomed:
            try:
                store.delete(key, ns, name)
            except StoreError:
                pass
        self._namespaces(now)

    def _namespaces(self, now: float) -> None:
        store = self.cluster.store
        names = {n["metadata"]["name"]: n for n in self.cluster.scan("namespaces")}
        for name, ns in names.items():
            if (ns.get("status") or {}).get("phase") != "Terminating" and not ns["metadata"].get("deletionTimestamp"):
                if (ns.get("status") or {}).get("phase") != "Active":
                    store.mutate("namespaces", "", name, lambda o: o.setdefault("status", {}).update(phase="Active"),
                                 subresource="status")
                if self.cluster.raw("serviceaccounts", name, "default") is None:
                    try:
                        store.create("serviceaccounts", {"metadata": {"name": "default", "namespace": name}})
                    except StoreError:
                        pass
                if self.cluster.raw("configmaps", name, "kube-root-ca.crt") is None:
                    try:
                        store.create("configmaps", {"metadata": {"name": "kube-root-ca.crt", "namespace": name,
                                                                 "annotations": {"kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."}},
                                                    "data": {"ca.crt": CA}})
                    except StoreError:
                        pass
        # objects of namespaces that are gone or terminating are deleted
        with store.lock:
            doomed = []
            for key, rt in store.types.items():
                if not rt.namespaced:
                    continue
                for obj in store.iter_raw(key):
                    ns = obj["metadata"].get("namespace", "")
                    nsobj = names.get(ns)
                    if nsobj is None or (nsobj.get("status") or {}).get("phase") == "Terminating" \
                            or nsobj["metadata"].get("deletionTimestamp"):
                        doomed.append((key, ns, obj["metadata"]["name"], bool(obj["metadata"].get("finalizers"))))
        for key, ns, name, _ in doomed:
            try:
                store.delete(key, ns, name)
            except StoreError:
                pass
        for name, ns in names.items():
            if (ns.get("status") or {}).get("phase") == "Terminating" or ns["metadata"].get("deletionTimestamp"):
                if not any(d[1] == name for d in doomed if not d[3]) and \
                        not any(d[1] == name and d[3] for d in doomed):
                    def fin(o: dict) -> None:
                        o.setdefault("spec", {})["finalizers"] = []
                        o["metadata"]["finalizers"] = []
                    try:
                        store.mutate("namespaces", "", name, fin)
                        if store.try_get("namespaces", "", name) is not None and \
                                not store.get("namespaces", "", name)["metadata"].get("deletionTimestamp"):
                            store.delete("namespaces", "", name)
                    except StoreError:
                        pass
