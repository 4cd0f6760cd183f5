"""The application's own change history after its deploy: the tool that deployed it keeps syncing
it (a GitOps or CD pipeline bumping a sync revision on every object it manages), each sync an
Update by the object's own deployer. Without these writes the only change after the deploy is the
fault's, and change metadata alone (managedFields times, `kubectl get -w`) names the faulted object
(issue 23; tests/security/test_metadata_tells.py).

Each object the application's deployer wrote is synced at its own times: a first sync within
FIRST_SYNC_S of its creation (the pipeline's post-deploy pass), then a renewal process with
exponential gaps of mean MEAN_INTERVAL_S. Its k-th sync time follows from the cluster's seed, the
object's uid, its creation time and k (the revision it carries), so the schedule is the same for
a seed, lives in the store (a restore brings it back) and draws nothing from the cluster's random
source (whose draws the rest of the emulator replays).

The revision an object carries is a digest of (seed, uid, k), as a pipeline's source revision is
(`main@sha1:...`), never the count k itself: a count tells a reader which objects were synced only
once and when that was due, so an object at revision 1 written long after its first sync names the
fault (helper adv2's spy: 38 of 91 hotel problems). The controller finds k again from the digest."""

from __future__ import annotations

import functools
import hashlib
import math
import random
from datetime import datetime

from kubesim.runtime import CONTROLLER_MANAGER, KUBELET, SCHEDULER
from kubesim.store import Obj, StoreError
from kubesim.view import ControlPlane

ANNOTATION = "fluxcd.io/sync-revision"
FIRST_SYNC_S = 60.0
RESCAN_S = 5.0
# One sync per object every ten minutes on average: an application of some fifty objects sees
# one every ~12 s, so the fault's write is seldom the latest when the agent starts reading.
MEAN_INTERVAL_S = 600.0
KINDS = ("deployments.apps", "statefulsets.apps", "daemonsets.apps", "services", "configmaps", "secrets",
         "serviceaccounts", "persistentvolumeclaims")
# The cluster's own namespaces and components: what they made is the distribution's, not the app's.
SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease"})
SYSTEM_MANAGERS = frozenset({CONTROLLER_MANAGER, KUBELET, SCHEDULER, "kube-apiserver"})


MAX_REVISION = 10_000  # a digest no k up to this gives is someone else's value: start over (syncs come ~10 min apart)


def revision_label(seed: int, uid: str, k: int) -> str:
    return "main@sha1:" + hashlib.blake2b(f"{seed}/{uid}/revision/{k}".encode(), digest_size=20).hexdigest()


@functools.lru_cache(maxsize=65536)
def revision_of(seed: int, uid: str, label: str | None) -> int:
    """The count k whose digest an object carries (0: none, or a value this controller did not write)."""
    if not label or not label.startswith("main@sha1:"):
        return 0
    return next((k for k in range(1, MAX_REVISION) if revision_label(seed, uid, k) == label), 0)


def _draw(seed: int, uid: str, k: int) -> float:
    digest = hashlib.blake2b(f"{seed}/{uid}/{k}".encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big")).random()


@functools.lru_cache(maxsize=65536)
def sync_time(seed: int, uid: str, created: float, k: int) -> float:
    """When an object created at `created` has its k-th sync (k >= 1)."""
    if k <= 1:
        return created + RESCAN_S + (FIRST_SYNC_S - RESCAN_S) * _draw(seed, uid, 1)
    return sync_time(seed, uid, created, k - 1) - MEAN_INTERVAL_S * math.log(1.0 - _draw(seed, uid, k))


def deployer(obj: Obj) -> str | None:
    """The manager that wrote the object's own fields (its first non-status writer that is not one
    of the cluster's components), None for what the cluster made itself and for what someone made
    with kubectl: the agent's objects are its own (no pipeline syncs them, and its tool's name must
    not sign writes it did not make); the farm deploys through its API client, never kubectl."""
    for entry in obj["metadata"].get("managedFields") or []:
        manager = str(entry.get("manager"))
        if not entry.get("subresource") and manager not in SYSTEM_MANAGERS:
            return None if manager == "kubectl" or manager.startswith("kubectl-") else manager
    return None


class SyncController:
    """Syncs the objects of the application namespaces: an Update by the object's deployer of
    ANNOTATION; nothing of their spec changes, so no rollout follows."""

    def __init__(self, cp: ControlPlane, seed: int) -> None:
        self.cp, self.seed = cp, seed
        self._next = -math.inf  # when some object is next due (rebuilt with the controllers on a restore)
        self._scanned = (-math.inf, -1)  # (when, the store's resourceVersion) of the last scan
        self._rescan = -math.inf  # the pass asked for to look at what changed since

    def due(self, obj: Obj) -> float:
        meta = obj["metadata"]
        uid = str(meta.get("uid", ""))
        k = revision_of(self.seed, uid, (meta.get("annotations") or {}).get(ANNOTATION))
        return sync_time(self.seed, uid, _seconds(meta.get("creationTimestamp")), k + 1)

    def __call__(self, now: float) -> None:
        store, nxt = self.cp.store, math.inf
        # Objects created since the last scan are due FIRST_SYNC_S after their creation at the
        # soonest: a look every RESCAN_S finds them in time without a scan on every pass.
        changed = store.resource_version != self._scanned[1]
        if now < self._next and not (changed and now >= self._scanned[0] + RESCAN_S):
            if changed and self._rescan != self._scanned[0] + RESCAN_S:  # a pass then, quiet or not
                self._rescan = self._scanned[0] + RESCAN_S
                self.cp.wake_at(self._rescan)
            return
        self._scanned = (now, store.resource_version)
        for key in KINDS:
            if key not in store.types:
                continue
            for obj in store.scan(key):
                meta = obj["metadata"]
                manager = deployer(obj)
                if manager is None or meta.get("namespace") in SYSTEM_NAMESPACES or "deletionTimestamp" in meta:
                    continue
                when = self.due(obj)
                while when <= now:
                    try:
                        obj = store.mutate(key, meta["namespace"], meta["name"], self._bump, manager=manager)
                    except StoreError:  # gone since the scan
                        break
                    when = self.due(obj)
                nxt = min(nxt, when)
        self._next = nxt
        if nxt < math.inf:
            self.cp.wake_at(nxt)

    def _bump(self, obj: Obj) -> None:
        meta = obj["metadata"]
        annotations = meta.setdefault("annotations", {})
        uid = str(meta.get("uid", ""))
        annotations[ANNOTATION] = revision_label(self.seed, uid, revision_of(self.seed, uid, annotations.get(ANNOTATION)) + 1)



def _seconds(stamp: str | None) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() if stamp else 0.0


__all__ = ["ANNOTATION", "SyncController", "deployer", "revision_label", "revision_of", "sync_time"]
