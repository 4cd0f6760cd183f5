"""The emulated cluster's object store: Kubernetes objects as plain JSON dicts, keyed by resource
(plural.group), namespace and name, with resourceVersion, uid, generation, creation timestamps,
optimistic concurrency (409 on a stale resourceVersion) and a watch log.

Everything that changes cluster state goes through here: the HTTP API (for kubectl, the
kubernetes client, injectors and agents) and the controllers alike.
"""

from __future__ import annotations

import builtins
import copy
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from core.labels import expression_holds as expression_holds
from core.labels import labels_match_query as labels_match_query
from core.labels import match_labels as match_labels
from core.labels import parse_label_selector as parse_label_selector
from kubesim.clock import VirtualClock

Obj = dict[str, Any]
_ATOMIC = (str, int, float, bool, type(None))


def clone(obj: Any) -> Any:
    """A deep copy of a JSON-like object (dicts, lists, scalars), ~3x faster than copy.deepcopy;
    anything else is deep-copied. Stored objects never alias their parts, so no memo is needed."""
    t = type(obj)
    if t is dict:
        return {k: (v if type(v) in _ATOMIC else clone(v)) for k, v in obj.items()}
    if t is list:
        return [v if type(v) in _ATOMIC else clone(v) for v in obj]
    if t in _ATOMIC:
        return obj
    return copy.deepcopy(obj)


class StoreError(Exception):
    """Carries a Kubernetes Status: code (404, 409, 422, ...), reason and message."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.details = details or {}

    def status(self) -> Obj:
        """As kube-apiserver encodes it: StatusDetails' fields are omitempty (the core group's
        empty `group` is left out), and so are absent details."""
        out: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": self.message, "reason": self.reason}
        details = {k: v for k, v in self.details.items() if v not in ("", None, [], 0)}
        if details:
            out["details"] = details
        out["code"] = self.code
        return out


def not_found(resource: str, name: str, group: str = "") -> StoreError:
    res = f"{resource}.{group}" if group else resource
    return StoreError(404, "NotFound", f'{res} "{name}" not found',
                      {"name": name, "group": group, "kind": resource})


@dataclass(frozen=True)
class ResourceType:
    """One REST resource. `key` is plural for the core group, plural.group otherwise."""

    plural: str
    kind: str
    group: str = ""
    version: str = "v1"
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    singular: str = ""
    categories: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


# The built-in kinds whose registry strategy sets metadata.generation on create (PrepareForCreate in
# kube-apiserver's pkg/registry, v1.29): the workloads, and the few others with an observed spec.
# A Service, ConfigMap, Pod (before 1.33), PVC, HPA or Node has none.
GENERATION_KINDS = frozenset({
    "deployments.apps", "replicasets.apps", "statefulsets.apps", "daemonsets.apps", "jobs.batch", "cronjobs.batch",
    "replicationcontrollers", "poddisruptionbudgets.policy", "networkpolicies.networking.k8s.io",
    "ingresses.networking.k8s.io", "customresourcedefinitions.apiextensions.k8s.io",
    "validatingwebhookconfigurations.admissionregistration.k8s.io",
    "mutatingwebhookconfigurations.admissionregistration.k8s.io",
    "validatingadmissionpolicies.admissionregistration.k8s.io",
    "validatingadmissionpolicybindings.admissionregistration.k8s.io",
    "flowschemas.flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations.flowcontrol.apiserver.k8s.io",
})


def has_generation(rt: ResourceType) -> bool:
    """Built-in kinds as their strategies say; every custom resource (the custom resource
    strategy sets it for all)."""
    custom = "." in rt.group and not rt.group.endswith(".k8s.io")
    return rt.key in GENERATION_KINDS or custom


@dataclass
class WatchEvent:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    resource: str  # ResourceType.key
    obj: Obj


def get_path(obj: Obj, dotted: str) -> Any:
    cur: Any = obj
    for part in dotted.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def parse_field_selector(text: str | None) -> list[tuple[str, bool, str]]:
    """`metadata.name=x,status.phase!=Running` → [(path, equal?, value)]."""
    out = []
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        if "!=" in part:
            k, v = part.split("!=", 1)
            out.append((k.strip(), False, v.strip()))
        else:
            k, v = part.split("==", 1) if "==" in part else part.split("=", 1)
            out.append((k.strip(), True, v.strip()))
    return out


def fields_match(reqs: list[tuple[str, bool, str]], obj: Obj) -> bool:
    for path, equal, value in reqs:
        have = get_path(obj, path)
        have_s = "" if have is None else str(have)
        if (have_s == value) != equal:
            return False
    return True


@dataclass
class _Bucket:
    objects: dict[tuple[str, str], Obj] = field(default_factory=dict)


class Store:
    """Thread-safe; every read returns a deep copy so callers can mutate freely."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.types: dict[str, ResourceType] = {}
        self._buckets: dict[str, _Bucket] = {}
        self._rv = 1
        self.events: list[WatchEvent] = []
        self.max_events = 20000
        self.hooks: list[Callable[[str, str, Obj | None, Obj | None], None]] = []
        self.admission: list[Callable[[str, str, Obj, Obj | None], None]] = []
        # managedFields after a write by a named manager, (old, new, manager, subresource) →
        # entries; the API server installs kube-apiserver's field manager here
        self.stamp_fields: Callable[[Obj, Obj, str, str], builtins.list[dict[str, Any]]] | None = None
        self._uid_counter = 0
        self._uid_ns = uuid.UUID("7a0b0000-0000-4000-8000-000000000000")

    # -- types -----------------------------------------------------------------------------
    def register(self, rt: ResourceType) -> None:
        self.types[rt.key] = rt
        self._buckets.setdefault(rt.key, _Bucket())

    def unregister(self, key: str) -> None:
        """Stop serving a type and drop its objects (its definition was deleted)."""
        with self.lock:
            self.types.pop(key, None)
            self._buckets.pop(key, None)

    def type_for(self, key: str) -> ResourceType:
        try:
            return self.types[key]
        except KeyError:
            raise StoreError(404, "NotFound", f"the server could not find the requested resource ({key})") from None

    def type_by_kind(self, api_version: str, kind: str) -> ResourceType:
        for rt in self.types.values():
            if rt.kind == kind and rt.api_version == api_version:
                return rt
        raise StoreError(404, "NotFound", f"no matches for kind \"{kind}\" in version \"{api_version}\"")

    # -- helpers ---------------------------------------------------------------------------
    @property
    def resource_version(self) -> int:
        return self._rv

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def new_uid(self) -> str:
        # Deterministic uids: a fixed seed replays the same objects.
        self._uid_counter += 1
        return str(uuid.uuid5(self._uid_ns, str(self._uid_counter)))

    def _emit(self, type_: str, key: str, obj: Obj) -> None:
        self.events.append(WatchEvent(self._rv, type_, key, clone(obj)))
        if len(self.events) > self.max_events:
            del self.events[: len(self.events) - self.max_events]
        self.changed.notify_all()

    def _run_hooks(self, verb: str, key: str, old: Obj | None, new: Obj | None) -> None:
        for hook in self.hooks:
            hook(verb, key, old, new)

    # -- verbs -----------------------------------------------------------------------------
    def get(self, key: str, namespace: str, name: str) -> Obj:
        with self.lock:
            rt = self.type_for(key)
            obj = self._buckets[key].objects.get((namespace if rt.namespaced else "", name))
            if obj is None:
                raise not_found(rt.plural, name, rt.group)
            return clone(obj)

    def try_get(self, key: str, namespace: str, name: str) -> Obj | None:
        try:
            return self.get(key, namespace, name)
        except StoreError:
            return None

    def list(
        self,
        key: str,
        namespace: str | None = None,
        label_selector: str | dict[str, Any] | None = None,
        field_selector: str | None = None,
    ) -> list[Obj]:
        with self.lock:
            self.type_for(key)
            lreq = parse_label_selector(label_selector) if isinstance(label_selector, str) else None
            freq = parse_field_selector(field_selector)
            out = []
            for (ns, _), obj in sorted(self._buckets[key].objects.items()):
                if namespace and ns != namespace:
                    continue
                labels = obj.get("metadata", {}).get("labels")
                if lreq is not None and not labels_match_query(lreq, labels):
                    continue
                if isinstance(label_selector, dict) and not match_labels(label_selector, labels):
                    continue
                if freq and not fields_match(freq, obj):
                    continue
                out.append(clone(obj))
            return out

    def iter_raw(self, key: str) -> Iterator[Obj]:
        """Objects without copying, for hot read-only controller loops; hold `lock`."""
        return iter(list(self._buckets[key].objects.values()))

    def raw(self, key: str, namespace: str, name: str) -> Obj | None:
        """One stored object without copying (read-only)."""
        bucket = self._buckets.get(key)
        return None if bucket is None else bucket.objects.get((namespace, name))

    def scan(self, key: str, namespace: str | None = None) -> builtins.list[Obj]:  # `list` is a method here
        """Stored objects without copying, for read-only controller loops: never mutate them."""
        with self.lock:
            return [o for o in self._buckets[key].objects.values()
                    if namespace is None or o.get("metadata", {}).get("namespace") == namespace]

    def create(self, key: str, obj: Obj, namespace: str | None = None) -> Obj:
        with self.lock:
            rt = self.type_for(key)
            obj = clone(obj)
            meta = obj.setdefault("metadata", {})
            if rt.namespaced:
                ns = namespace or meta.get("namespace") or "default"
                meta["namespace"] = ns
            else:
                ns = ""
                meta.pop("namespace", None)
            if not meta.get("name"):
                if meta.get("generateName"):
                    meta["name"] = meta["generateName"] + self._suffix()
                else:
                    raise StoreError(422, "Invalid", f"{rt.kind} is invalid: metadata.name: Required value: name or generateName is required",
                                     {"kind": rt.kind, "causes": [{"reason": "FieldValueRequired", "field": "metadata.name"}]})
            if (ns, meta["name"]) in self._buckets[key].objects:
                raise StoreError(409, "AlreadyExists", f'{rt.plural}{"." + rt.group if rt.group else ""} "{meta["name"]}" already exists',
                                 {"name": meta["name"], "group": rt.group, "kind": rt.plural})
            if rt.namespaced and key != "namespaces" and "namespaces" in self.types:
                nsobj = self._buckets["namespaces"].objects.get(("", ns))
                if nsobj is None:
                    raise not_found("namespaces", ns)
                if nsobj.get("status", {}).get("phase") == "Terminating":
                    raise StoreError(403, "Forbidden", f'{rt.plural} "{meta["name"]}" is forbidden: unable to create new content in namespace {ns} because it is being terminated')
            obj["apiVersion"] = rt.api_version
            obj["kind"] = rt.kind
            for hook in self.admission:
                hook("create", key, obj, None)
            meta["uid"] = self.new_uid()
            meta["creationTimestamp"] = self.clock.rfc3339()
            meta["resourceVersion"] = str(self._next_rv())
            meta.pop("generation", None)  # the server's to set, as rest.BeforeCreate has it
            if has_generation(rt):
                meta["generation"] = 1
            self._buckets[key].objects[(ns, meta["name"])] = obj
            self._emit("ADDED", key, obj)
            self._run_hooks("create", key, None, obj)
            return clone(obj)

    def replace(self, key: str, obj: Obj, *, check_rv: bool = True, subresource: str | None = None,
                manager: str | None = None) -> Obj:
        """Update an object. A resourceVersion that is set and stale is a 409 Conflict. A write to
        the status subresource keeps the object but its status and managedFields; `manager`: the
        component writing (kubelet, kube-controller-manager ...), recorded in managedFields."""
        with self.lock:
            rt = self.type_for(key)
            obj = clone(obj)
            meta = obj.setdefault("metadata", {})
            ns = meta.get("namespace", "") if rt.namespaced else ""
            cur = self._buckets[key].objects.get((ns, meta.get("name", "")))
            if cur is None:
                raise not_found(rt.plural, meta.get("name", ""), rt.group)
            rv = meta.get("resourceVersion")
            if check_rv and rv and rv != cur["metadata"]["resourceVersion"]:
                raise StoreError(409, "Conflict",
                                 f'Operation cannot be fulfilled on {rt.plural}{"." + rt.group if rt.group else ""} "{meta["name"]}": '
                                 "the object has been modified; please apply your changes to the latest version and try again",
                                 {"name": meta["name"], "group": rt.group, "kind": rt.plural})
            if subresource == "status":
                new = clone(cur)
                new["status"] = obj.get("status", {})
                if "managedFields" in meta:  # the API server's record of this write
                    new["metadata"]["managedFields"] = clone(meta["managedFields"])
            else:
                new = obj
                if "status" in cur and subresource is None and "status" not in obj:
                    new["status"] = cur["status"]
            # Immutable bookkeeping fields come from the stored object.
            for k in ("uid", "creationTimestamp"):
                new["metadata"][k] = cur["metadata"][k]
            if rt.namespaced:
                new["metadata"]["namespace"] = ns
            new["apiVersion"], new["kind"] = rt.api_version, rt.kind
            gen = cur["metadata"].get("generation")
            new["metadata"].pop("generation", None)  # requests cannot set it (rest.BeforeUpdate)
            if gen is not None:
                new["metadata"]["generation"] = gen + (1 if new.get("spec") != cur.get("spec") else 0)
            for k in ("deletionTimestamp", "deletionGracePeriodSeconds"):
                if k in cur["metadata"]:
                    new["metadata"][k] = cur["metadata"][k]
            for hook in self.admission:
                hook("update", key, new, cur)
            if manager is not None and self.stamp_fields is not None:
                new["metadata"]["managedFields"] = self.stamp_fields(cur, new, manager, subresource or "")
            if new == cur:
                return clone(cur)
            new["metadata"]["resourceVersion"] = str(self._next_rv())
            self._buckets[key].objects[(ns, new["metadata"]["name"])] = new
            # An object whose deletion waited for finalizers goes once they are gone.
            if "deletionTimestamp" in new["metadata"] and not new["metadata"].get("finalizers") \
                    and not new["metadata"].get("deletionGracePeriodSeconds"):
                return self._remove(key, ns, new["metadata"]["name"])
            self._emit("MODIFIED", key, new)
            self._run_hooks("update", key, cur, new)
            return clone(new)

    def mutate(self, key: str, namespace: str, name: str, fn: Callable[[Obj], None],
               subresource: str | None = None, manager: str | None = None) -> Obj:
        """Read-modify-write under the lock (controllers use this; never conflicts)."""
        with self.lock:
            obj = self.get(key, namespace, name)
            fn(obj)
            obj["metadata"].pop("resourceVersion", None)
            return self.replace(key, obj, check_rv=False, subresource=subresource, manager=manager)

    def delete(self, key: str, namespace: str, name: str, grace: int = 0) -> Obj:
        """Delete now, or with `grace` seconds: the object stays, marked with deletionTimestamp
        (now + grace) and deletionGracePeriodSeconds, until someone (the kubelet) deletes it
        again with no grace. Finalizers keep it, marked, until they are removed. A second
        delete may shorten the grace period, never lengthen it (as kube-apiserver's)."""
        with self.lock:
            rt = self.type_for(key)
            ns = namespace if rt.namespaced else ""
            cur = self._buckets[key].objects.get((ns, name))
            if cur is None:
                raise not_found(rt.plural, name, rt.group)
            for hook in self.admission:
                hook("delete", key, cur, cur)
            meta = cur["metadata"]
            pending = meta.get("deletionGracePeriodSeconds")
            if grace > 0 or meta.get("finalizers"):
                if pending is not None and grace >= pending:
                    return clone(cur)
                cur = clone(cur)
                stamp = self.clock.rfc3339(self.clock.now() + grace)
                cur["metadata"]["deletionTimestamp"] = min(stamp, meta.get("deletionTimestamp") or stamp)
                cur["metadata"]["deletionGracePeriodSeconds"] = grace
                cur["metadata"]["resourceVersion"] = str(self._next_rv())
                self._buckets[key].objects[(ns, name)] = cur
                self._emit("MODIFIED", key, cur)
                self._run_hooks("update", key, None, cur)
                return clone(cur)
            return self._remove(key, ns, name)

    def _remove(self, key: str, ns: str, name: str) -> Obj:
        obj = self._buckets[key].objects.pop((ns, name))
        obj["metadata"]["resourceVersion"] = str(self._next_rv())
        self._emit("DELETED", key, obj)
        self._run_hooks("delete", key, obj, None)
        return clone(obj)

    def events_since(self, rv: int, key: str) -> builtins.list[WatchEvent]:  # `list` is a method here
        with self.lock:
            return [e for e in self.events if e.rv > rv and e.resource == key]

    def _suffix(self) -> str:
        alphabet = "bcdfghjklmnpqrstvwxz2456789"
        n = self._uid_counter * 2654435761 + self._rv
        self._uid_counter += 1
        out = ""
        for _ in range(5):
            out += alphabet[n % len(alphabet)]
            n //= len(alphabet)
        return out

    # -- snapshots (reset in well under a second) ------------------------------------------
    def checkpoint(self) -> Any:
        with self.lock:
            return (clone({k: b.objects for k, b in self._buckets.items()}), self._uid_counter)

    def restore(self, state: Any) -> None:
        with self.lock:
            objects, uid_counter = state
            for key in objects:  # a custom type's bucket dropped with its definition since
                self._buckets.setdefault(key, _Bucket())
            for key, bucket in self._buckets.items():
                bucket.objects = clone(objects.get(key, {}))
            self._uid_counter = uid_counter
            self._next_rv()
            self.events.clear()
            self.changed.notify_all()
