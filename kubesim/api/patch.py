"""The three PATCH kinds the API server accepts: JSON merge patch (RFC 7386), JSON patch
(RFC 6902) and Kubernetes strategic merge patch, with the list merge keys of the built-in types
and the $patch, $setElementOrder, $retainKeys and $deleteFromPrimitiveList directives."""

from __future__ import annotations

import copy
from typing import Any

from kubesim.store import StoreError

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

# List field → merge key, from the `patchMergeKey` tags of k8s.io/api types.
_MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name", "env": "name",
    "volumes": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath",
    "imagePullSecrets": "name", "hostAliases": "ip", "ownerReferences": "uid", "conditions": "type",
    "topologySpreadConstraints": "topologyKey", "secrets": "name", "resourceClaims": "name",
}
# Primitive lists with patchStrategy=merge: the patch's values are added to the stored ones.
_PRIMITIVE_MERGE = {"finalizers"}

_DELETE = object()


def _invalid(message: str) -> StoreError:
    return StoreError(422, "Invalid", f"the server rejected our request due to an error in our request: {message}")


# -- JSON merge patch ----------------------------------------------------------------------
def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# -- JSON patch ----------------------------------------------------------------------------
def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _invalid(f'json patch path "{path}" must start with "/"')
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str], path: str) -> Any:
    cur = doc
    for part in parts:
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            raise _invalid(f'json patch: path "{path}" does not exist in the object')
    return cur


def _index(container: list, key: str, path: str, adding: bool) -> int:
    if key == "-" and adding:
        return len(container)
    if not key.isdigit() or int(key) > len(container) - (0 if adding else 1):
        raise _invalid(f'json patch: index "{key}" out of bounds at "{path}"')
    return int(key)


def json_patch(doc: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise _invalid("a JSON patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise _invalid(f"json patch: malformed operation {op!r}")
        kind, path = op["op"], op["path"]
        parts = _pointer(path)
        if kind in ("add", "replace", "test") and "value" not in op:
            raise _invalid(f'json patch: "{kind}" at "{path}" needs a value')
        if kind == "test":
            if _walk(doc, parts, path) != op["value"]:
                raise _invalid(f'json patch: test failed at "{path}"')
            continue
        if kind in ("move", "copy"):
            src = _pointer(op.get("from", ""))
            value = copy.deepcopy(_walk(doc, src, op.get("from", "")))
            if kind == "move":
                doc = _remove(doc, src, op.get("from", ""))
            doc = _add(doc, parts, path, value)
        elif kind == "add":
            doc = _add(doc, parts, path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            doc = _remove(doc, parts, path)
        elif kind == "replace":
            if not parts:
                doc = copy.deepcopy(op["value"])
                continue
            parent = _walk(doc, parts[:-1], path)
            if isinstance(parent, dict):
                if parts[-1] not in parent:
                    raise _invalid(f'json patch: replace operation does not apply: doc is missing key: {path}')
                parent[parts[-1]] = copy.deepcopy(op["value"])
            elif isinstance(parent, list):
                parent[_index(parent, parts[-1], path, False)] = copy.deepcopy(op["value"])
            else:
                raise _invalid(f'json patch: cannot replace at "{path}"')
        else:
            raise _invalid(f'json patch: unknown operation "{kind}"')
    return doc


def _add(doc: Any, parts: list[str], path: str, value: Any) -> Any:
    if not parts:
        return value
    parent = _walk(doc, parts[:-1], path)
    if isinstance(parent, dict):
        parent[parts[-1]] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, parts[-1], path, True), value)
    else:
        raise _invalid(f'json patch: cannot add at "{path}"')
    return doc


def _remove(doc: Any, parts: list[str], path: str) -> Any:
    if not parts:
        raise _invalid("json patch: cannot remove the whole document")
    parent = _walk(doc, parts[:-1], path)
    if isinstance(parent, dict) and parts[-1] in parent:
        del parent[parts[-1]]
    elif isinstance(parent, list):
        del parent[_index(parent, parts[-1], path, False)]
    else:
        raise _invalid(f'json patch: remove operation does not apply: doc is missing path: "{path}"')
    return doc


# -- strategic merge patch -----------------------------------------------------------------
def merge_key(path: tuple[str, ...], kind: str) -> str | None:
    """The merge key of the list at `path` (map keys from the object root), None if atomic."""
    if not path:
        return None
    field = path[-1]
    if field == "ports":
        parent = path[-2] if len(path) > 1 else ""
        if parent in ("containers", "initContainers", "ephemeralContainers"):
            return "containerPort"
        if kind == "Service" and path == ("spec", "ports"):
            return "port"
        return None
    return _MERGE_KEYS.get(field)


def strategic_merge_patch(original: dict[str, Any], patch: Any, kind: str) -> dict[str, Any]:
    if not isinstance(patch, dict):
        raise _invalid("a strategic merge patch must be a JSON object")
    merged = _merge_map(original, patch, (), kind)
    if merged is _DELETE:
        raise _invalid("a strategic merge patch cannot delete the whole object")
    return merged


def _strip(value: Any, path: tuple[str, ...], kind: str) -> Any:
    """A new value from a patch, with its directives applied against nothing."""
    if isinstance(value, dict):
        return _merge_map({}, value, path, kind)
    if isinstance(value, list):
        return _merge_list([], value, path, kind, None)
    return value


def _merge_map(orig: dict[str, Any], patch: dict[str, Any], path: tuple[str, ...], kind: str) -> Any:
    patch = dict(patch)
    directive = patch.pop("$patch", None)
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        return {k: _strip(v, path + (k,), kind) for k, v in patch.items()
                if not k.startswith("$") and v is not None}
    if directive is not None:
        raise _invalid(f'strategic merge patch: unknown $patch directive "{directive}"')
    retain = patch.pop("$retainKeys", None)
    orders = {k.split("/", 1)[1]: patch.pop(k) for k in list(patch) if k.startswith("$setElementOrder/")}
    removals = {k.split("/", 1)[1]: patch.pop(k) for k in list(patch) if k.startswith("$deleteFromPrimitiveList/")}
    result = copy.deepcopy(orig) if isinstance(orig, dict) else {}
    if retain is not None:
        result = {k: v for k, v in result.items() if k in retain}
    for key, value in patch.items():
        sub = path + (key,)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            cur = result.get(key)
            merged = _merge_map(cur if isinstance(cur, dict) else {}, value, sub, kind)
            if merged is _DELETE:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            cur = result.get(key)
            result[key] = _merge_list(cur if isinstance(cur, list) else [], value, sub, kind, orders.get(key))
        else:
            result[key] = value
    for key, values in removals.items():
        if isinstance(result.get(key), list):
            result[key] = [x for x in result[key] if x not in values]
    for key, order in orders.items():
        if key not in patch and isinstance(result.get(key), list):
            result[key] = _reorder(result[key], order, merge_key(path + (key,), kind))
    return result


def _merge_list(orig: list[Any], patch: list[Any], path: tuple[str, ...], kind: str,
                order: list[Any] | None) -> list[Any]:
    key = merge_key(path, kind)
    if any(isinstance(x, dict) and x.get("$patch") == "replace" for x in patch):
        return [_strip(x, path, kind) for x in patch if not (isinstance(x, dict) and x.get("$patch") == "replace")]
    if key is None:
        if path and path[-1] in _PRIMITIVE_MERGE:
            return list(orig) + [x for x in patch if x not in orig]
        return [_strip(x, path, kind) for x in patch]
    result = copy.deepcopy(orig)
    for item in patch:
        if not isinstance(item, dict):
            raise _invalid(f"strategic merge patch: element of {'.'.join(path)} is not an object")
        if key not in item:
            raise _invalid(f"map: {item} does not contain declared merge key: {key}")
        idx = next((i for i, cur in enumerate(result) if isinstance(cur, dict) and cur.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                del result[idx]
            continue
        if idx is None:
            result.append(_merge_map({}, item, path, kind))
        else:
            result[idx] = _merge_map(result[idx], item, path, kind)
    if order is not None:
        result = _reorder(result, order, key)
    return result


def _reorder(items: list[Any], order: list[Any], key: str | None) -> list[Any]:
    wanted = [o.get(key) if key and isinstance(o, dict) else o for o in order]
    rank = {repr(v): i for i, v in enumerate(wanted)}

    def sort_key(pair: tuple[int, Any]) -> tuple[int, int]:
        pos, item = pair
        value = item.get(key) if key and isinstance(item, dict) else item
        r = rank.get(repr(value))
        return (0, r) if r is not None else (1, pos)

    return [item for _, item in sorted(enumerate(items), key=sort_key)]


def apply_patch(content_type: str, original: dict[str, Any], patch: Any, kind: str) -> dict[str, Any]:
    """Apply a PATCH body of `content_type` (already JSON-decoded) to `original`."""
    base = content_type.split(";")[0].strip()
    if base == MERGE_PATCH:
        out = merge_patch(original, patch)
        if not isinstance(out, dict):
            raise _invalid("a merge patch must be a JSON object")
        return out
    if base == JSON_PATCH:
        out = json_patch(original, patch)
        if not isinstance(out, dict):
            raise _invalid("the JSON patch did not produce an object")
        return out
    if base == STRATEGIC_MERGE_PATCH:
        return strategic_merge_patch(original, patch, kind)
    raise StoreError(415, "UnsupportedMediaType",
                     f'the body of the request was in an unknown format - accepted media types include: '
                     f'{JSON_PATCH}, {MERGE_PATCH}, {STRATEGIC_MERGE_PATCH}')
