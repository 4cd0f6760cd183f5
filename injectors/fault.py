"""The four shapes every fault injector takes, so each concrete fault is a few declarative lines:

- `Mutation`: change one fragment of an object (an env list, a port, a limit, a CR field), save
  the fragment as it was, put it back on recover; active while the injected fragment is in place.
- `Creation`: create objects (a NetworkPolicy, a ResourceQuota, a webhook); delete them on recover.
- `Removal`: delete an object the application needs; create it again, as it was, on recover.
- `Chaos`: a Chaos Mesh resource in a namespace the agent cannot read; deleted on recover.

Parameters are a pydantic model per injector (`Params`); a bad type or an unknown key is one
`ParamsError` naming the injector and the field.
"""

from __future__ import annotations

import abc
import copy
import hashlib
from collections.abc import Callable
from typing import Any, ClassVar, cast

from pydantic import BaseModel, ConfigDict, ValidationError

from clusters.handle import ClusterHandle
from clusters.kube import Kube, KubeError, NotFound, Obj, api_for
from core.errors import InjectionError, InputError

# Chaos Mesh resources live there; the agent's credentials cannot read it.
from core.namespaces import CHAOS_NAMESPACE as CHAOS_NAMESPACE
from injectors.injector import Injection, Injector, faults
from injectors.objects import Ref, clean_for_create

CHAOS_API = ("chaos-mesh.org", "v1alpha1")
MISSING = "__missing__"  # a saved fragment that did not exist before the injection


class ParamsError(InputError):
    """An injector was given a parameter of the wrong type, or one it does not know."""

    def __init__(self, injector: str, field: str, reason: str) -> None:
        self.injector, self.field, self.reason = injector, field, reason
        super().__init__(f"injector '{injector}': parameter '{field}': {reason}")


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WorkloadParams(Params):
    """The usual target: a Deployment/StatefulSet by name and one of its containers."""

    service: str
    container: str | None = None  # default: the first container
    kind: str | None = None  # Deployment, StatefulSet; default: whichever exists


class Fault(Injector):
    """Validates `Params` at construction, so a catalog entry is checked before any cluster exists."""

    Params: ClassVar[type[Params]] = Params
    # A trigger is transient (a load spike, a capacity cut): it is over when inject returns and
    # the oracle may replay it; the sustaining faults of a metastable problem are the others.
    trigger: ClassVar[bool] = False
    needs_real_cluster: ClassVar[bool] = False

    p: Any  # the validated params (an instance of the subclass's own Params model)

    def __init__(self, **params: Any) -> None:
        try:
            self.p = self.Params(**params)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(x) for x in err["loc"]) or "params"
            raise ParamsError(self.name, field, err["msg"]) from None

    @property
    def name(self) -> str:
        """The name this class is registered under in `injectors.faults`."""
        return registered_name(type(self))

    def record(self, cluster: ClusterHandle, namespace: str, **saved: Any) -> Injection:
        touched = saved.pop("touched", [])
        return Injection(
            injector=self.name,
            params=self.p.model_dump(),
            namespace=namespace,
            touched=[str(t) for t in touched],
            saved=saved,
            injected_at=cluster.now(),
        )


_NAMES: dict[Callable[..., Injector], str] = {}  # the factories registered are the injector classes


def registered_name(cls: type) -> str:
    if cls not in _NAMES:
        _NAMES.update({faults.factory(n): n for n in faults.names()})
    return _NAMES.get(cls, cls.__name__)


def neutral_name(*parts: str, prefix: str = "") -> str:
    """A stable, unrevealing object name: a routine-looking prefix and a short hash."""
    digest = hashlib.sha1("/".join(parts).encode()).hexdigest()[:6]
    return f"{prefix}{digest}" if prefix else f"w-{digest}"


# -- fragment paths -------------------------------------------------------------------------
# A path is a list of keys; an int indexes a list; a dict {"name": x} selects the list element
# whose "name" is x. Paths are resolved on every read, so a reordered list does not misplace.


def _step(node: Any, key: Any) -> Any:
    if isinstance(key, dict):
        for item in node or []:
            if all(item.get(k) == v for k, v in key.items()):
                return item
        return MISSING
    if isinstance(key, int):
        return node[key] if isinstance(node, list) and key < len(node) else MISSING
    return node.get(key, MISSING) if isinstance(node, dict) else MISSING


def get_path(obj: Obj, path: list[Any]) -> Any:
    node: Any = obj
    for key in path:
        node = _step(node, key)
        if node is MISSING or node == MISSING:
            return MISSING
    return copy.deepcopy(node)


def set_path(obj: Obj, path: list[Any], value: Any) -> None:
    node: Any = obj
    for i, key in enumerate(path[:-1]):
        nxt = _step(node, key)
        if nxt is MISSING or nxt == MISSING:
            if isinstance(key, dict):
                raise InjectionError(f"no element {key} at {path[:i]}")
            nxt = {}
            node[key] = nxt
        node = nxt
    last = path[-1]
    if isinstance(last, dict):
        raise InjectionError("a path cannot end in a list selector")
    if value == MISSING:
        if isinstance(node, dict):
            node.pop(last, None)
        return
    if isinstance(last, int):
        node[last] = value
    else:
        node[last] = value


def contains(current: Any, wanted: Any) -> bool:
    """`wanted` is in `current`, allowing fields the server added (defaults, status)."""
    if isinstance(wanted, dict):
        return isinstance(current, dict) and all(contains(current.get(k, MISSING), v) for k, v in wanted.items())
    if isinstance(wanted, list):
        return isinstance(current, list) and len(current) == len(wanted) and all(
            contains(c, w) for c, w in zip(current, wanted, strict=True))
    return current == wanted


def has_run(current: Any, run: list[Any]) -> bool:
    """`run` appears in the list `current` as consecutive items (an injected flag pair among
    whatever else the list holds now), each allowing what `contains` allows."""
    if not isinstance(current, list) or not run:
        return False
    return any(all(contains(current[i + j], item) for j, item in enumerate(run))
               for i in range(len(current) - len(run) + 1))


def appended(injection: Injection) -> list[Any]:
    """What a Mutation added to a list: the injected list less the list it extended (all of it
    when it replaced the list)."""
    before, after = injection.saved.get("before"), list(injection.saved.get("after") or [])
    if isinstance(before, list) and after[:len(before)] == before:
        return after[len(before):]
    return after


class Mutation(Fault):
    """Changes the fragment at `path(...)` of one object to `mutate(before)`."""

    def target(self, kube: Kube, namespace: str) -> tuple[Ref, Obj]:
        """The object to change (default: the workload named by params.service)."""
        kind, obj = kube.workload(namespace, self.p.service, getattr(self.p, "kind", None))
        return Ref(kind, namespace, obj["metadata"]["name"]), obj

    @abc.abstractmethod
    def path(self, obj: Obj) -> list[Any]:
        """Where in the object the fault lives."""

    @abc.abstractmethod
    def mutate(self, before: Any, obj: Obj) -> Any:
        """The injected fragment, from the fragment as it was (MISSING when absent)."""

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        kube = Kube.of(cluster)
        ref, obj = self.target(kube, namespace)
        path = self.path(obj)
        before = get_path(obj, path)
        after = self.mutate(copy.deepcopy(before), obj)
        if after == before:
            raise InjectionError(f"{self.name}: {ref} already has the injected value at {path}")
        set_path(obj, path, after)
        extras = []
        for extra_path, value in self.extra(obj):
            extras.append({"path": extra_path, "before": get_path(obj, extra_path), "after": value})
            set_path(obj, extra_path, value)
        uid = (obj.get("metadata") or {}).get("uid")
        self._write(kube, ref, obj)
        return self.record(
            cluster, namespace, touched=[ref], ref=str(ref), path=path, before=before, after=after, extras=extras,
            uid=uid, **self.identity(obj, path),
        )

    def identity(self, obj: Obj, path: list[Any]) -> dict[str, Any]:
        """What finds the faulted part again when its name changes (saved with the injection):
        a container's index and image, say. Object names are immutable, and `uid` tells a
        re-created object from the one faulted."""
        return {}

    def restart_targets(self, injection: Injection) -> list[str]:
        """A fault in a workload's pod template: the fixed template must survive a restart. A fault
        elsewhere in the object (its replica count) has nothing a restart would test."""
        ref = injection.saved.get("ref", "")
        path = injection.saved.get("path") or []
        if ref.split("/", 1)[0] in ("Deployment", "StatefulSet") and path[:2] == ["spec", "template"]:
            return [ref]
        return []

    def extra(self, obj: Obj) -> list[tuple[list[Any], Any]]:
        """Further fragments that go with the main one (restored with it, not checked)."""
        return []

    def _write(self, kube: Kube, ref: Ref, obj: Obj) -> None:
        obj.pop("status", None)
        kube.replace(ref.kind, ref.namespace, obj)

    def _current(self, kube: Kube, injection: Injection) -> tuple[Ref, Obj | None]:
        ref = Ref.parse(injection.saved["ref"])
        return ref, kube.find(ref.kind, ref.namespace, ref.name)

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        kube = Kube.of(cluster)
        ref, obj = self._current(kube, injection)
        if obj is None:
            return  # the object is gone; nothing of the fault remains on it
        fragments = [injection.saved, *injection.saved.get("extras", [])]
        if all(get_path(obj, f["path"]) == f["before"] for f in fragments):
            return
        for fragment in fragments:
            set_path(obj, fragment["path"], fragment["before"])
        self._write(kube, ref, obj)

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        kube = Kube.of(cluster)
        _, obj = self._current(kube, injection)
        if obj is None:
            return False
        return self.still_in_place(get_path(obj, injection.saved["path"]), injection)

    def still_in_place(self, current: Any, injection: Injection) -> bool:
        """True while the mutated value is still there (overridable: a looser check). The API
        server may have filled in defaults, so the injected fragment need only be contained."""
        return contains(current, injection.saved["after"])


class NamedObjectMutation(Mutation):
    """A Mutation of the object of kind `object_kind` named by the parameter `name_param`."""

    object_kind: ClassVar[str]
    name_param: ClassVar[str]

    def target(self, kube: Kube, namespace: str) -> tuple[Ref, Obj]:
        name = getattr(self.p, self.name_param)
        return Ref(self.object_kind, namespace, name), kube.get(self.object_kind, namespace, name)


class ConfigMapKeyMutation(NamedObjectMutation):
    """Rewrites the text under one key of a config map (parameters `configmap` and `key`); a key
    the config map lacks is refused."""

    object_kind = "ConfigMap"
    name_param = "configmap"

    def path(self, obj: Obj) -> list[Any]:
        return ["data", self.p.key]

    def mutate(self, before: Any, obj: Obj) -> Any:
        require(before != MISSING, f"config map {self.p.configmap} has no key {self.p.key}")
        return self.rewrite(before)

    @abc.abstractmethod
    def rewrite(self, text: str) -> str:
        """The key's new text, from its text as it is."""


class Creation(Fault):
    """Creates objects; `objects(kube, namespace)` returns (kind, namespace, body) triples."""

    @abc.abstractmethod
    def objects(self, kube: Kube, namespace: str) -> list[tuple[str, str, Obj]]:
        """What to create, as (kind, namespace, body)."""

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        kube = Kube.of(cluster)
        created: list[Ref] = []
        made_namespaces: list[str] = []
        for kind, ns, body in self.objects(kube, namespace):
            if ns and ns != namespace and kube.ensure_namespace(ns):
                made_namespaces.append(ns)
            kube.create(kind, ns, body)
            created.append(Ref(kind, ns, body["metadata"]["name"]))
        return self.record(
            cluster, namespace, touched=created, created=[str(r) for r in created], namespaces=made_namespaces
        )

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        kube = Kube.of(cluster)
        for text in reversed(injection.saved["created"]):
            ref = Ref.parse(text)
            kube.delete(ref.kind, ref.namespace, ref.name)
        for ns in injection.saved.get("namespaces", []):
            kube.delete("Namespace", "", ns)

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        kube = Kube.of(cluster)
        return any(
            kube.find(r.kind, r.namespace, r.name) is not None
            for r in map(Ref.parse, injection.saved["created"])
        )


class Removal(Fault):
    """Deletes one object; `removed(kube, namespace)` names it. Recovery creates it again."""

    @abc.abstractmethod
    def removed(self, kube: Kube, namespace: str) -> Ref:
        """The object to delete."""

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        kube = Kube.of(cluster)
        ref = self.removed(kube, namespace)
        obj = kube.find(ref.kind, ref.namespace, ref.name)
        if obj is None:
            raise InjectionError(f"{self.name}: {ref} does not exist")
        kube.delete(ref.kind, ref.namespace, ref.name)
        return self.record(cluster, namespace, touched=[ref], ref=str(ref), object=clean_for_create(obj))

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        kube = Kube.of(cluster)
        ref = Ref.parse(injection.saved["ref"])
        body = copy.deepcopy(injection.saved["object"])
        current = kube.find(ref.kind, ref.namespace, ref.name)
        if current is not None:
            # Someone (the agent) made a new one: put the original's content back into it.
            body["metadata"]["resourceVersion"] = current["metadata"].get("resourceVersion")
            if ref.kind == "Service":
                for key in ("clusterIP", "clusterIPs"):
                    if key in current.get("spec", {}):
                        body.setdefault("spec", {})[key] = current["spec"][key]
            kube.replace(ref.kind, ref.namespace, body)
            return
        try:
            kube.create(ref.kind, ref.namespace, body)
        except KubeError:
            # A Service's old cluster IP may have been reused meanwhile; let the server pick one.
            spec = body.get("spec", {})
            if ref.kind != "Service" or "clusterIP" not in spec:
                raise
            spec.pop("clusterIP", None)
            spec.pop("clusterIPs", None)
            kube.create(ref.kind, ref.namespace, body)

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        ref = Ref.parse(injection.saved["ref"])
        return Kube.of(cluster).find(ref.kind, ref.namespace, ref.name) is None


# Chaos Mesh action blocks, spelled once: the application faults, the node faults and the noises
# build their experiments from them.
def netem_delay(latency: str, jitter: str, correlation: str = "0") -> Obj:
    """A NetworkChaos `delay` block (tc netem delay)."""
    return {"delay": {"latency": latency, "jitter": jitter, "correlation": correlation}}


def netem_share(action: str, percent: int, correlation: str = "0") -> Obj:
    """A NetworkChaos `loss` or `corrupt` block: that share of packets (tc netem)."""
    return {action: {action: str(percent), "correlation": correlation}}


def io_chaos(action: str, volume_path: str, percent: int, **fields: Any) -> Obj:
    """An IOChaos spec acting on that share of operations on every file under `volume_path`."""
    return {"action": action, "volumePath": volume_path, "path": f"{volume_path}/**/*", **fields, "percent": percent}


class Chaos(Fault):
    """A Chaos Mesh experiment. `kind` is the CR kind; `spec(kube, namespace)` its spec."""

    kind: ClassVar[str] = ""

    @abc.abstractmethod
    def spec(self, kube: Kube, namespace: str) -> Obj:
        """The experiment's spec (selector, mode, action, ...)."""

    def target_service(self) -> str | None:
        """The workload the experiment aims at (restarted by the oracle after a fix)."""
        return getattr(self.p, "service", None)

    def selector(self, kube: Kube, namespace: str, service: str | None, node: str | None = None) -> Obj:
        sel: Obj = {"namespaces": [namespace]}
        if service:
            _, obj = kube.workload(namespace, service)
            sel["labelSelectors"] = dict(obj["spec"]["selector"].get("matchLabels", {}))
        if node:
            sel["nodes"] = [node]
        return sel

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        from kubernetes import client

        kube = Kube.of(cluster)
        created_ns = kube.ensure_namespace(CHAOS_NAMESPACE)
        spec = self.spec(kube, namespace)
        name = neutral_name(self.name, namespace, repr(sorted(self.p.model_dump().items())), prefix="exp-")
        body = {
            "apiVersion": "/".join(CHAOS_API),
            "kind": self.kind,
            "metadata": {"name": name, "namespace": CHAOS_NAMESPACE},
            "spec": spec,
        }
        api = client.CustomObjectsApi(kube.api)
        try:
            api.create_namespaced_custom_object(*CHAOS_API, CHAOS_NAMESPACE, self.plural(), body)
        except client.ApiException as exc:
            raise InjectionError(f"{self.name}: creating {self.kind}: {exc.status} {exc.reason}") from exc
        ref = Ref(self.kind, CHAOS_NAMESPACE, name)
        # Chaos Mesh selects its pods when the experiment starts: the pods alive now, by uid, are
        # the only ones it can ever hold (a replacement, even one with the same name, is outside).
        namespaces = spec.get("selector", {}).get("namespaces") or [namespace]
        pods = {f"{ns}/{p['metadata']['name']}": p["metadata"].get("uid") for ns in namespaces
                for p in kube.list("Pod", ns)}
        workload = None
        if service := self.target_service():
            kind, obj = kube.workload(namespace, service)
            workload = str(Ref(kind, namespace, obj["metadata"]["name"]))
        return self.record(cluster, namespace, touched=[ref], chaos=str(ref), spec=spec, created_namespace=created_ns,
                           pods_at_start=pods, workload=workload)

    def plural(self) -> str:
        return self.kind.lower()  # Chaos Mesh plurals: podchaos, networkchaos, iochaos, ...

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        from kubernetes import client

        api = client.CustomObjectsApi(api_for(cluster))
        ref = Ref.parse(injection.saved["chaos"])
        try:
            api.delete_namespaced_custom_object(*CHAOS_API, ref.namespace, self.plural(), ref.name)
        except client.ApiException as exc:
            if exc.status != 404:
                raise InjectionError(f"deleting {ref}: {exc.status} {exc.reason}") from exc
            return
        # Chaos finalizers have hung resets elsewhere: if the object lingers, drop them.
        try:  # (a custom object comes back as its JSON document)
            obj = cast(Obj, api.get_namespaced_custom_object(*CHAOS_API, ref.namespace, self.plural(), ref.name))
        except client.ApiException:
            return
        if obj.get("metadata", {}).get("finalizers"):
            api.patch_namespaced_custom_object(
                *CHAOS_API, ref.namespace, self.plural(), ref.name, {"metadata": {"finalizers": []}}
            )

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        from kubernetes import client

        api = client.CustomObjectsApi(api_for(cluster))
        ref = Ref.parse(injection.saved["chaos"])
        try:
            obj = cast(Obj, api.get_namespaced_custom_object(*CHAOS_API, ref.namespace, self.plural(), ref.name))
        except client.ApiException as exc:
            if exc.status == 404:
                return False
            raise InjectionError(f"reading {ref}: {exc.status} {exc.reason}") from exc
        paused = obj.get("metadata", {}).get("annotations", {}).get("experiment.chaos-mesh.org/pause")
        return not obj.get("metadata", {}).get("deletionTimestamp") and paused != "true"

    def _experiment(self, cluster: ClusterHandle, injection: Injection) -> Obj | None:
        from kubernetes import client

        api = client.CustomObjectsApi(api_for(cluster))
        ref = Ref.parse(injection.saved["chaos"])
        try:
            return cast(Obj, api.get_namespaced_custom_object(*CHAOS_API, ref.namespace, self.plural(), ref.name))
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise InjectionError(f"reading {ref}: {exc.status} {exc.reason}") from exc

    def pods_under(self, cluster: ClusterHandle, injection: Injection) -> dict[str, set[str]]:
        """Running pods the experiment holds, per selector key ("." the selected pods, ".Target"
        a network experiment's other side): recorded as injected, and still the very pod (same
        uid) that was alive when the experiment started."""
        if not self.is_active(cluster, injection):
            return {}
        obj = self._experiment(cluster, injection)
        if obj is None:
            return {}
        records = ((obj.get("status") or {}).get("experiment") or {}).get("containerRecords") or []
        at_start = injection.saved.get("pods_at_start")
        kube = Kube.of(cluster)
        live: dict[str, Obj] = {}
        for ns in {r["id"].split("/")[0] for r in records}:
            live.update({f"{ns}/{p['metadata']['name']}": p for p in kube.list("Pod", ns)})
        out: dict[str, set[str]] = {}
        for rec in records:
            if rec.get("phase") != "Injected":
                continue
            pid = "/".join(rec["id"].split("/")[:2])
            pod = live.get(pid)
            if pod is None or pod["metadata"].get("deletionTimestamp") or (
                    pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            if at_start is not None and at_start.get(pid) != pod["metadata"].get("uid"):
                continue  # created after the experiment started: never selected
            out.setdefault(rec.get("selectorKey", "."), set()).add(pid)
        return out

    def affects(self, cluster: ClusterHandle, injection: Injection) -> bool:
        """While a running pod is still under the experiment: a replaced pod is out of it, as on
        a real Chaos Mesh; the experiment object (which the agent cannot see) may stay. Not
        yet applied counts as affecting. With a target, both sides must still be held."""
        if not self.is_active(cluster, injection):
            return False
        obj = self._experiment(cluster, injection)
        records = (((obj or {}).get("status") or {}).get("experiment") or {}).get("containerRecords")
        if obj is not None and not records:
            return True  # not applied yet
        held = self.pods_under(cluster, injection)
        if (injection.saved.get("spec") or {}).get("target"):
            return bool(held.get(".")) and bool(held.get(".Target"))
        return bool(held.get("."))

    def restart_targets(self, injection: Injection) -> list[str]:
        workload = injection.saved.get("workload")
        return [workload] if workload else []


def require(condition: bool, message: str) -> None:
    if not condition:
        raise InjectionError(message)


__all__ = [
    "CHAOS_NAMESPACE",
    "MISSING",
    "Chaos",
    "Creation",
    "Fault",
    "Mutation",
    "NotFound",
    "Params",
    "ParamsError",
    "Removal",
    "WorkloadParams",
    "appended",
    "get_path",
    "has_run",
    "neutral_name",
    "require",
    "set_path",
]
