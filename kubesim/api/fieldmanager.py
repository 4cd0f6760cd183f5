"""Field ownership as kube-apiserver's fieldmanager keeps it: metadata.managedFields (one entry
per manager, operation and subresource, its field set in FieldsV1), written on every create,
update, patch and apply; and server-side apply itself (the applied configuration merged into
the object, fields the applier stopped applying removed, conflicts with other managers refused
with a 409 listing them unless forced).

A field set is a set of paths; a path's elements are FieldsV1 keys: `f:<field>`, `k:<merge key
as JSON>` for an item of a keyed list (with `.` for the item itself), `v:<value as JSON>` for
a member of a set of scalars (finalizers)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from kubesim.api.patch import STRATEGIC_MERGE_PATCH, apply_patch, merge_key
from kubesim.store import Obj, StoreError

Path = tuple[str, ...]
# Bookkeeping the server sets itself: nobody owns it.
_UNOWNED_META = frozenset({"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                           "managedFields", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"})
_SETS = frozenset({"finalizers"})
_MISSING = object()


def _key_fields(names: tuple[str, ...], kind: str) -> tuple[str, ...] | None:
    """The key fields of the list at `names` (field names from the root), None if atomic."""
    key = merge_key(names, kind)
    if key is None:
        return None
    if key == "containerPort":
        return ("containerPort", "protocol")
    if key == "port":
        return ("port", "protocol")
    return (key,)


def _item_key(item: dict[str, Any], fields: tuple[str, ...]) -> str:
    values = {f: item.get(f, "TCP" if f == "protocol" else None) for f in fields}
    return "k:" + json.dumps(values, separators=(",", ":"), sort_keys=True)


def flatten(obj: Obj, kind: str, subresource: str = "") -> dict[Path, Any]:
    """Every owned path of `obj` with its value (a keyed item's `.` maps to True)."""
    out: dict[Path, Any] = {}
    for field, value in obj.items():
        if field in ("apiVersion", "kind") or (field == "status") != (subresource == "status"):
            continue
        if field == "metadata" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in _UNOWNED_META}
            if not value:
                continue
        _walk(value, ("f:" + field,), (field,), kind, out)
    return out


def _walk(value: Any, path: Path, names: tuple[str, ...], kind: str, out: dict[Path, Any]) -> None:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _walk(v, path + ("f:" + k,), names + (k,), kind, out)
        return
    if isinstance(value, list) and value:
        fields = _key_fields(names, kind)
        if fields is not None and all(isinstance(i, dict) for i in value):
            for item in value:
                p = path + (_item_key(item, fields),)
                out[p + (".",)] = True
                for k, v in item.items():
                    _walk(v, p + ("f:" + k,), names + (k,), kind, out)
            return
        if names[-1] in _SETS:
            for item in value:
                out[path + ("v:" + json.dumps(item, separators=(",", ":")),)] = True
            return
    out[path] = value


def encode(paths: set[Path] | dict[Path, Any]) -> dict[str, Any]:
    """A field set as FieldsV1 JSON (keys sorted, as the server serialises them)."""
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for el in path:
            node = node.setdefault(el, {})
    return root


def decode(fields: dict[str, Any], prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for key, sub in (fields or {}).items():
        path = prefix + (key,)
        if sub:
            out |= decode(sub, path)
        else:
            out.add(path)
    return out


def path_string(path: Path) -> str:
    """A path as structured-merge-diff prints it: `.spec.containers[name="web"].image`."""
    text = ""
    for el in path:
        kind, _, rest = el.partition(":")
        if el == ".":
            continue
        if kind == "f":
            text += "." + rest
        elif kind == "k":
            text += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in json.loads(rest).items()) + "]"
        elif kind == "v":
            text += f"[={rest}]"
    return text


def _entries(obj: Obj | None) -> list[dict[str, Any]]:
    return copy.deepcopy(((obj or {}).get("metadata") or {}).get("managedFields") or [])


def _entry(manager: str, operation: str, api_version: str, stamp: str, paths: set[Path], subresource: str) -> dict[str, Any]:
    entry = {"manager": manager, "operation": operation, "apiVersion": api_version, "time": stamp,
             "fieldsType": "FieldsV1", "fieldsV1": encode(paths)}
    if subresource:
        entry["subresource"] = subresource
    return entry


def _same(entry: dict[str, Any], manager: str, operation: str, subresource: str) -> bool:
    return (entry.get("manager"), entry.get("operation"), entry.get("subresource", "")) == (manager, operation, subresource)


def updated(old: Obj | None, new: Obj, manager: str, stamp: str, subresource: str = "") -> list[dict[str, Any]]:
    """The managedFields after a create (`old` None), update or patch by `manager`: it owns what
    it changed, which other managers no longer own; a removed field is nobody's."""
    kind, api_version = new.get("kind", ""), new.get("apiVersion", "")
    before = flatten(old, kind, subresource) if old is not None else {}
    after = flatten(new, kind, subresource)
    changed = {p for p, v in after.items() if before.get(p, _MISSING) != v}
    removed = set(before) - set(after)
    if old is not None and not changed and not removed:
        return _entries(old)  # a no-op write leaves the object (and its resourceVersion) as it was
    entries, mine = [], None
    for entry in _entries(old):
        paths = decode(entry.get("fieldsV1") or {})
        if _same(entry, manager, "Update", subresource):
            mine = paths
            continue
        paths -= changed | removed
        if paths:
            entries.append(dict(entry, fieldsV1=encode(paths)))
    mine = ((mine or set()) | changed) - removed
    if mine:
        entries.append(_entry(manager, "Update", api_version, stamp, mine, subresource))
    return entries


def conflict_error(conflicts: list[tuple[dict[str, Any], Path]]) -> StoreError:
    """409 as the server answers an apply that takes fields others own."""
    def who(entry: dict[str, Any]) -> str:
        name = json.dumps(entry.get("manager", ""))
        if entry.get("subresource"):
            name += f' with subresource {json.dumps(entry["subresource"])}'
        if entry.get("operation") == "Update" and entry.get("time"):
            return f'{name} using {entry.get("apiVersion")} at {entry["time"]}'
        return f'{name} using {entry.get("apiVersion")}'

    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {who(e)}", "field": path_string(p)}
              for e, p in conflicts]
    if len(conflicts) == 1:
        message = f"Apply failed with 1 conflict: conflict with {who(conflicts[0][0])}: {path_string(conflicts[0][1])}"
    else:
        by: dict[str, list[str]] = {}
        for e, p in conflicts:
            by.setdefault(who(e), []).append(path_string(p))
        lines = []
        for name in sorted(by):
            lines.append(f"conflicts with {name}:")
            lines += [f"- {p}" for p in by[name]]
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return StoreError(409, "Conflict", message, {"causes": causes})


def apply(current: Obj | None, config: Obj, manager: str, force: bool, stamp: str,
          subresource: str = "") -> Obj:
    """The object after `manager` applies `config` to `current` (None: it does not exist yet),
    its managedFields included; raises the conflict error when others own differing fields."""
    kind, api_version = config.get("kind", ""), config.get("apiVersion", "")
    applied = flatten(config, kind, subresource)
    now = flatten(current, kind, subresource) if current is not None else {}
    entries, previous, conflicts = [], set(), []
    for entry in _entries(current):
        paths = decode(entry.get("fieldsV1") or {})
        if _same(entry, manager, "Apply", subresource):
            previous = paths
            continue
        taken = sorted(p for p in paths & set(applied) if now.get(p, _MISSING) != applied[p])
        conflicts += [(entry, p) for p in taken]
        if force:
            paths -= set(taken)
        if paths:
            entries.append((entry, paths))
    if conflicts and not force:
        raise conflict_error(conflicts)
    body = {k: v for k, v in config.items() if k != "status" or subresource == "status"}
    merged = apply_patch(STRATEGIC_MERGE_PATCH, current, body, kind) if current is not None else copy.deepcopy(config)
    others = set().union(*(p for _, p in entries)) if entries else set()
    kept = set(applied) | others
    for path in sorted(previous - kept, key=len, reverse=True):
        # a field owned as a whole (an empty map applied once) that now holds owned children stays
        if not any(k[:len(path)] == path for k in kept):
            _remove(merged, path)
    managed = [dict(e, fieldsV1=encode(p)) for e, p in entries]
    managed.append(_entry(manager, "Apply", api_version, stamp, set(applied), subresource))
    merged.setdefault("metadata", {})["managedFields"] = managed
    return merged


def _remove(obj: Any, path: Path) -> None:
    """Drop the field (or keyed item, set member) at `path` from `obj`, if it is there."""
    node: Any = obj
    parent: Any = None
    for i, el in enumerate(path):
        kind, _, rest = el.partition(":")
        if el == ".":
            if isinstance(parent, list):
                parent.remove(node)
            return
        if kind == "f" and isinstance(node, dict) and rest in node:
            if i == len(path) - 1:
                del node[rest]
                return
            parent, node = node, node[rest]
        elif kind == "k" and isinstance(node, list):
            want = json.loads(rest)
            match = next((it for it in node if isinstance(it, dict) and all(
                it.get(k, "TCP" if k == "protocol" else None) == v for k, v in want.items())), None)
            if match is None:
                return
            parent, node = node, match
        elif kind == "v" and isinstance(node, list):
            value = json.loads(rest)
            if value in node:
                node.remove(value)
            return
        else:
            return


# Who writes what the cluster's own components create (not through this API's handlers): the
# controller manager owns what it makes for an owner; a bare manifest the farm deployed is as
# `kubectl apply` would have left it.
_UNSTAMPED = frozenset({"events", "leases.coordination.k8s.io"})


def internal_create_stamper(now: Callable[[], str]) -> Callable[[str, str, Obj, Obj | None], None]:
    """A store admission hook giving managedFields to an object created without them (run before
    defaulting fills in what its writer never sent); `now()` is the cluster time, RFC 3339."""
    def stamp(verb: str, key: str, obj: Obj, old: Obj | None) -> None:
        meta = obj.get("metadata") or {}
        if verb != "create" or key in _UNSTAMPED or meta.get("managedFields") is not None:
            return
        owned = any(r.get("controller") for r in meta.get("ownerReferences") or [])
        manager = "kube-controller-manager" if owned or key.startswith("endpoint") else "kubectl-client-side-apply"
        meta["managedFields"] = updated(None, obj, manager, now())
    return stamp


def component_stamper(now: Callable[[], str]) -> Callable[[Obj, Obj, str, str], list[dict[str, Any]]]:
    """The managedFields after a write by one of the cluster's own components (the kubelet, the
    controller manager, the scheduler) that goes to the store without a request: an Update by
    that manager, as kube-apiserver records its requests; `now()` is the cluster time."""
    def stamp(old: Obj, new: Obj, manager: str, subresource: str) -> list[dict[str, Any]]:
        return updated(old, new, manager, now(), subresource)
    return stamp
