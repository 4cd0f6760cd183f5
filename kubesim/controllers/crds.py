"""apiextensions: a CustomResourceDefinition written through the API serves its resource at once
(discovery, REST, watch, OpenAPI), with the status a real apiextensions controller gives it
(names accepted, Established), so helm's CRD step and `kubectl get <plural>` work; deleting the
definition stops serving it and drops its objects, as the real API server's cleanup does."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kubesim.store import Obj, ResourceType, Store, StoreError

if TYPE_CHECKING:
    from kubesim.view import ClusterView

CRD_KEY = "customresourcedefinitions.apiextensions.k8s.io"


def install_crd_registry(cluster: ClusterView) -> Callable[[], None]:
    """Types built into the emulated cluster (Chaos Mesh, the TiDB operator) are served whether or
    not their definition is present; only types a definition brought in are dropped with it.
    Returns what to call after a restore, which rewinds the definitions but not the types."""
    store = cluster.store
    builtin = frozenset(store.types)

    def admit(verb: str, key: str, obj: Obj, old: Obj | None) -> None:
        if key == CRD_KEY and verb in ("create", "update"):
            rt = _resource_type(obj)
            _accept(obj, rt, cluster.clock.rfc3339(), old)

    def serve(verb: str, key: str, old: Obj | None, new: Obj | None) -> None:
        if key != CRD_KEY:
            return
        if new is not None:
            _register(store, _resource_type(new))
        elif old is not None and f"{old['spec']['names']['plural']}.{old['spec']['group']}" not in builtin:
            store.unregister(f"{old['spec']['names']['plural']}.{old['spec']['group']}")

    store.admission.append(admit)
    store.hooks.append(serve)
    return lambda: sync_custom_types(store, builtin)


def sync_custom_types(store: Store, builtin: frozenset[str]) -> None:
    """After a restore: serve exactly the built-in types and those whose definition is stored."""
    defined = {}
    for crd in store.iter_raw(CRD_KEY):
        rt = _resource_type(crd)
        defined[rt.key] = rt
    for key in [k for k in store.types if k not in builtin and k not in defined]:
        store.unregister(key)
    for rt in defined.values():
        _register(store, rt)


def _register(store: Store, rt: ResourceType) -> None:
    if store.types.get(rt.key) != rt:
        store.register(rt)


def _invalid(name: str, field: str, reason: str) -> StoreError:
    return StoreError(422, "Invalid", f'CustomResourceDefinition.apiextensions.k8s.io "{name}" is invalid: {field}: '
                      f"{reason}", {"name": name, "group": "apiextensions.k8s.io", "kind": "CustomResourceDefinition",
                                    "causes": [{"reason": "FieldValueInvalid", "message": reason, "field": field}]})


def _resource_type(crd: Obj) -> ResourceType:
    """The served resource of a definition, refused with the API server's words when malformed."""
    name = (crd.get("metadata") or {}).get("name", "")
    spec: dict[str, Any] = crd.get("spec") or {}
    group, names = spec.get("group") or "", spec.get("names") or {}
    plural, kind = names.get("plural") or "", names.get("kind") or ""
    if not group or "." not in group:
        raise _invalid(name, "spec.group", "should be a domain with at least one dot")
    if not plural or not kind:
        raise _invalid(name, "spec.names", "plural and kind are required")
    if name != f"{plural}.{group}":
        raise _invalid(name, "metadata.name", 'must be spec.names.plural+"."+spec.group')
    versions = spec.get("versions") or []
    storage = [v for v in versions if v.get("storage")]
    if len(storage) != 1:
        raise _invalid(name, "spec.versions", "must have exactly one version marked as storage version")
    served = [v for v in versions if v.get("served")] or storage
    version = storage[0] if storage[0].get("served") else served[0]
    scope = spec.get("scope") or "Namespaced"
    if scope not in ("Namespaced", "Cluster"):
        raise _invalid(name, "spec.scope", 'Unsupported value: supported values: "Cluster", "Namespaced"')
    return ResourceType(plural, kind, group, version["name"], scope == "Namespaced",
                        tuple(names.get("shortNames") or ()), tuple(sorted(version.get("subresources") or {})),
                        names.get("singular") or kind.lower(), tuple(names.get("categories") or ()))


def _accept(crd: Obj, rt: ResourceType, stamp: str, old: Obj | None) -> None:
    names = {k: v for k, v in (crd["spec"].get("names") or {}).items()}
    names.setdefault("singular", rt.singular)
    names.setdefault("listKind", f"{rt.kind}List")
    crd["spec"]["names"] = names
    crd["spec"].setdefault("conversion", {"strategy": "None"})
    previous = ((old or {}).get("status") or {})
    stored = list(previous.get("storedVersions") or [])
    if rt.version not in stored:
        stored.append(rt.version)
    since = {c.get("type"): c.get("lastTransitionTime") for c in previous.get("conditions") or []}
    crd["status"] = {"acceptedNames": names, "storedVersions": stored, "conditions": [
        {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found",
         "lastTransitionTime": since.get("NamesAccepted") or stamp},
        {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
         "message": "the initial names have been accepted", "lastTransitionTime": since.get("Established") or stamp}]}
