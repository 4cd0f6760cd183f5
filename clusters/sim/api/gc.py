"""Garbage collection by ownerReferences, and namespace deletion: deleting an owner (a
Deployment) deletes the dependents (its ReplicaSets, then their Pods) that have no other live
owner, unless the client asked to orphan them; deleting a Namespace deletes what it holds.
Runs as a store hook, so it follows deletions by the API and by controllers alike."""

from __future__ import annotations

from clusters.sim.store import Obj, Store, StoreError


class GarbageCollector:
    def __init__(self, store: Store) -> None:
        self.store = store

    def install(self) -> None:
        if self._hook not in self.store.hooks:
            self.store.hooks.append(self._hook)

    def _hook(self, verb: str, key: str, old: Obj | None, new: Obj | None) -> None:
        if verb != "delete" or old is None:
            return
        meta = old.get("metadata", {})
        if key == "namespaces":
            self._empty_namespace(meta.get("name", ""))
            return
        self._delete_dependents(meta.get("uid", ""))

    def _live_uids(self) -> set[str]:
        return {o["metadata"]["uid"] for key in self.store.types for o in self.store.iter_raw(key)}

    def dependents(self, uid: str) -> list[tuple[str, Obj]]:
        out = []
        with self.store.lock:
            for key in list(self.store.types):
                for obj in self.store.iter_raw(key):
                    refs = obj["metadata"].get("ownerReferences") or []
                    if any(r.get("uid") == uid for r in refs):
                        out.append((key, obj))
        return out

    def _delete_dependents(self, uid: str) -> None:
        found = self.dependents(uid)
        if not found:
            return
        live = self._live_uids()
        for key, obj in found:
            others = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
            if any(r.get("uid") in live for r in others):
                continue
            try:
                self.store.delete(key, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
            except StoreError:
                pass  # already gone through another owner

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

    def _empty_namespace(self, namespace: str) -> None:
        for key, rt in list(self.store.types.items()):
            if not rt.namespaced:
                continue
            for obj in self.store.iter_raw(key):
                if obj["metadata"].get("namespace") != namespace:
                    continue
                try:
                    self.store.delete(key, namespace, obj["metadata"]["name"])
                except StoreError:
                    pass
