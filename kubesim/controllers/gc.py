"""Garbage collection by ownerReferences, and the namespace lifecycle. One rule decides what goes:
an object with owners none of which is live (deleting a Deployment takes its ReplicaSets, then
their Pods, unless the client asked to orphan them). The rule runs in two places:

- as a store hook (`install`, done by the API server): the dependents of an object go as it is
  deleted, and a deleted Namespace's objects with it;
- as a controller pass (`__call__`): every object whose owners are gone (whoever deleted them,
  hook installed or not), then namespaces: new ones become Active with their `default`
  ServiceAccount and `kube-root-ca.crt` ConfigMap, terminating ones are emptied and finalized;
  Events expire."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kubesim.controllers.common import delete_pod
from kubesim.runtime import CONTROLLER_MANAGER
from kubesim.store import Obj, Store, StoreError

CA = "-----BEGIN CERTIFICATE-----\nMIIC/jCCAeagAwIBAgIBADANBgkqhkiG9w0BAQsFADAVMRMwEQYDVQQDEwprdWJl\ncm5ldGVzMB4XDTI2MDEwNTA5MDAwMFoXDTM2MDEwMzA5MDAwMFowFTETMBEGA1UE\n-----END CERTIFICATE-----\n"
CA_DESCRIPTION = ("Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints "
                  "such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across "
                  "distributions of Kubernetes clusters.")
EVENT_EXPIRY_EVERY = 300.0


class GarbageCollector:
    """`expire_events(now)` drops stale Events (the cluster's EventRecorder.expire); without it
    the controller pass leaves Events alone."""

    def __init__(self, store: Store, expire_events: Callable[[float], None] | None = None) -> None:
        self.store = store
        self.expire_events = expire_events
        self.last_expire = -1e18
        self._started_at = -1  # the store's resourceVersion when the last collection began

    # -- the rule ------------------------------------------------------------------------------
    def _live_uids(self) -> set[str]:
        store = self.store
        return {o["metadata"].get("uid") for key in list(store.types) for o in store.iter_raw(key)}

    @staticmethod
    def _ownerless(candidates: Iterable[tuple[str, Obj]], live: set[str]) -> list[tuple[str, str, str]]:
        """(key, namespace, name) of the candidates that have owners, none of them live."""
        doomed = []
        for key, obj in candidates:
            refs = obj["metadata"].get("ownerReferences") or []
            if refs and all(r.get("uid") not in live for r in refs):
                doomed.append((key, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]))
        return doomed

    def _delete_all(self, doomed: Iterable[tuple[str, str, str]]) -> None:
        """Delete as the garbage collector and the namespace controller do, with no grace period
        of their own: a pod terminates over its terminationGracePeriodSeconds."""
        for key, ns, name in doomed:
            if key == "pods":
                pod = self.store.raw("pods", ns, name)
                if pod is not None and not pod["metadata"].get("deletionTimestamp"):
                    delete_pod(self.store, pod)
                continue
            try:
                self.store.delete(key, ns, name)
            except StoreError:
                pass  # already gone through another owner, or its namespace

    def dependents(self, uid: str) -> list[tuple[str, Obj]]:
        out = []
        with self.store.lock:
            for key in list(self.store.types):
                for obj in self.store.iter_raw(key):
                    if any(r.get("uid") == uid for r in obj["metadata"].get("ownerReferences") or []):
                        out.append((key, obj))
        return out

    def _namespaced(self, predicate: Callable[[str], bool]) -> list[tuple[str, str, str, bool]]:
        """(key, namespace, name, has finalizers) of the namespaced objects whose namespace matches."""
        out = []
        with self.store.lock:
            for key, rt in self.store.types.items():
                if not rt.namespaced:
                    continue
                for obj in self.store.iter_raw(key):
                    ns = obj["metadata"].get("namespace", "")
                    if predicate(ns):
                        out.append((key, ns, obj["metadata"]["name"], bool(obj["metadata"].get("finalizers"))))
        return out

    # -- as the API server's store hook --------------------------------------------------------
    def install(self) -> None:
        if self._hook not in self.store.hooks:
            self.store.hooks.append(self._hook)

    def _hook(self, verb: str, key: str, old: Obj | None, new: Obj | None) -> None:
        if verb != "delete" or old is None:
            return
        meta = old.get("metadata", {})
        if key == "namespaces":
            name = meta.get("name", "")
            self._delete_all(d[:3] for d in self._namespaced(lambda ns: ns == name))
            return
        found = self.dependents(meta.get("uid", ""))
        if found:
            self._delete_all(self._ownerless(found, self._live_uids()))

    def orphan(self, owner: Obj) -> None:
        """DeleteOptions.propagationPolicy=Orphan: dependents lose the reference and stay."""
        uid = owner["metadata"].get("uid", "")
        for key, obj in self.dependents(uid):
            def drop(o: Obj) -> None:
                refs = [r for r in o["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
                if refs:
                    o["metadata"]["ownerReferences"] = refs
                else:
                    o["metadata"].pop("ownerReferences", None)

            self.store.mutate(key, obj["metadata"].get("namespace", ""), obj["metadata"]["name"], drop)

    # -- as a controller -------------------------------------------------------------------------
    def __call__(self, now: float) -> None:
        store = self.store
        # Dependents and namespaces are a function of stored objects: nothing to do while the store
        # has not changed since the last collection began (a pass woken by a probe's timer).
        if store.resource_version != self._started_at:
            self._started_at = store.resource_version
            with store.lock:
                candidates = [(key, o) for key in list(store.types) if key != "events" for o in store.iter_raw(key)]
                doomed = self._ownerless(candidates, self._live_uids())
            self._delete_all(doomed)
            self._namespaces()
        if self.expire_events is not None and now - self.last_expire >= EVENT_EXPIRY_EVERY:
            self.last_expire = now
            self.expire_events(now)

    @staticmethod
    def _terminating(ns: Obj) -> bool:
        return (ns.get("status") or {}).get("phase") == "Terminating" or bool(ns["metadata"].get("deletionTimestamp"))

    def _namespaces(self) -> None:
        store = self.store
        with store.lock:
            names = {n["metadata"]["name"]: n for n in store.iter_raw("namespaces")}
        for name, ns in names.items():
            if not self._terminating(ns):
                self._activate(name, ns)
        # objects of namespaces that are gone or terminating are deleted
        doomed = self._namespaced(lambda n: n not in names or self._terminating(names[n]))
        self._delete_all(d[:3] for d in doomed)
        emptied = {d[1] for d in doomed}
        for name, ns in names.items():
            if self._terminating(ns) and name not in emptied:
                self._finalize(name)

    def _activate(self, name: str, ns: Obj) -> None:
        store = self.store
        if (ns.get("status") or {}).get("phase") != "Active":
            store.mutate("namespaces", "", name, lambda o: o.setdefault("status", {}).update(phase="Active"),
                         subresource="status", manager=CONTROLLER_MANAGER)
        defaults: list[tuple[str, str, dict[str, Any]]] = [
            ("serviceaccounts", "default", {"metadata": {"name": "default", "namespace": name}}),
            ("configmaps", "kube-root-ca.crt", {"metadata": {"name": "kube-root-ca.crt", "namespace": name,
                                                             "annotations": {"kubernetes.io/description": CA_DESCRIPTION}},
                                                "data": {"ca.crt": CA}})]
        for key, obj_name, obj in defaults:
            if store.raw(key, name, obj_name) is None:
                try:
                    store.create(key, obj)
                except StoreError:
                    pass

    def _finalize(self, name: str) -> None:
        store = self.store

        def fin(o: Obj) -> None:
            o.setdefault("spec", {})["finalizers"] = []
            o["metadata"]["finalizers"] = []

        try:
            store.mutate("namespaces", "", name, fin)
            if store.try_get("namespaces", "", name) is not None and \
                    not store.get("namespaces", "", name)["metadata"].get("deletionTimestamp"):
                store.delete("namespaces", "", name)
        except StoreError:
            pass
