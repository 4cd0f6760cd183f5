"""The OpenAPI v3 documents kube-apiserver publishes, built from the v2 document (openapi.py, the
one schema source): /openapi/v3, the index of one document per group-version with its
serverRelativeURL (`?hash=` of the document, so clients cache it), and /openapi/v3/<gv>, an
OpenAPI 3.0 document with that group-version's paths and every schema they reach under
components/schemas. kubectl >= 1.27 reads them for `explain` (falling back to v2 only when v3 is
absent, with the older output)."""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any

from kubesim.api.openapi import v2_document
from kubesim.store import ResourceType

_V2_REF, _V3_REF = "#/definitions/", "#/components/schemas/"


def _gv_path(rt: ResourceType) -> str:
    return "api/v1" if not rt.group else f"apis/{rt.group}/{rt.version}"


def _schema(node: Any) -> Any:
    """A v2 schema as v3 has it: refs under components, and a ref that carries its own
    description (or default) wrapped in allOf, as kube-apiserver writes them."""
    if isinstance(node, list):
        return [_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _schema(v) for k, v in node.items()}
    ref = out.get("$ref")
    if isinstance(ref, str):
        ref = ref.replace(_V2_REF, _V3_REF)
        siblings = {k: v for k, v in out.items() if k != "$ref"}
        if siblings:
            return {"allOf": [{"$ref": ref}], **({"default": {}} if "description" in siblings else {}), **siblings}
        out["$ref"] = ref
    return out


def _operation(op: dict[str, Any]) -> dict[str, Any]:
    params = [{"name": p["name"], "in": p["in"], "description": p.get("description", ""),
               "schema": {"type": p.get("type", "string"), "uniqueItems": True}} for p in op.get("parameters") or []]
    responses = {}
    for code, resp in (op.get("responses") or {}).items():
        entry: dict[str, Any] = {"description": resp.get("description", "")}
        if "schema" in resp:
            entry["content"] = {t: {"schema": _schema(resp["schema"])}
                                for t in ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf")}
        responses[code] = entry
    out = {k: v for k, v in op.items() if k not in ("parameters", "responses", "consumes", "produces", "schemes")}
    out["parameters"], out["responses"] = params, responses
    return out


def _refs(node: Any, out: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_V3_REF):
            out.add(ref[len(_V3_REF):])
        for v in node.values():
            _refs(v, out)
    elif isinstance(node, list):
        for v in node:
            _refs(v, out)


@functools.lru_cache(maxsize=8)
def _documents(types: tuple[ResourceType, ...], version: str) -> tuple[bytes, dict[str, bytes]]:
    v2 = v2_document(types, version)
    schemas = {name: _schema(d) for name, d in v2["definitions"].items()}
    docs: dict[str, bytes] = {}
    for gv in sorted({_gv_path(rt) for rt in types}):
        prefix = "/" + gv + "/"
        paths = {p: {verb: _operation(op) for verb, op in item.items()}
                 for p, item in v2["paths"].items() if p.startswith(prefix)}
        # the schemas the paths reach, and all they reach in turn
        wanted: set[str] = set()
        _refs(paths, wanted)
        todo, seen = list(wanted), set()
        while todo:
            name = todo.pop()
            if name in seen or name not in schemas:
                continue
            seen.add(name)
            more: set[str] = set()
            _refs(schemas[name], more)
            todo += list(more - seen)
        doc = {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": version}, "paths": paths,
               "components": {"schemas": {n: schemas[n] for n in sorted(seen)}}}
        docs[gv] = json.dumps(doc, separators=(",", ":")).encode()
    index = {"paths": {gv: {"serverRelativeURL": f"/openapi/v3/{gv}?hash={hashlib.sha512(body).hexdigest().upper()}"}
                       for gv, body in docs.items()}}
    return json.dumps(index, separators=(",", ":")).encode(), docs


def openapi_v3(types: tuple[ResourceType, ...], version: str, gv: str = "") -> bytes | None:
    """The index (gv empty) or the document of group-version path `gv` ("apis/apps/v1"); None if
    this server has no such group-version."""
    index, docs = _documents(types, version)
    return index if not gv else docs.get(gv)
