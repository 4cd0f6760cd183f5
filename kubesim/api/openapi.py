"""The OpenAPI v2 document kube-apiserver publishes at /openapi/v2, for the kinds this cluster
serves: a definition per built-in kind (its fields, types, descriptions and required fields, from
the official Python client's models, which are generated from that very document) tagged with
x-kubernetes-group-version-kind, a generic object definition per custom kind (as a CRD without
a structural schema publishes), and the paths of every kind with their operations' query
parameters. kubectl reads it for `explain`, client-side validation, and (1.20) to decide whether
a kind supports server dry-run (a PATCH operation with a `dryRun` parameter), so `apply
--dry-run=server` and `diff` work. Served as JSON, or as the gnostic protobuf kubectl asks for.

`schema_for(rt)` and `unknown_fields(obj, rt)` serve the server's own field validation
(fieldValidation=Strict/Warn)."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from typing import Any

from kubesim.store import ResourceType

# Groups whose kinds the Python client has models for (everything else is a custom resource).
_BUILTIN_GROUPS = frozenset({"", "apps", "batch", "autoscaling", "policy", "networking.k8s.io", "rbac.authorization.k8s.io",
                             "scheduling.k8s.io", "storage.k8s.io", "admissionregistration.k8s.io",
                             "apiextensions.k8s.io", "coordination.k8s.io", "discovery.k8s.io", "events.k8s.io",
                             "node.k8s.io", "certificates.k8s.io"})
# Models of k8s.io/apimachinery (their definitions live under its package, not a group's).
_META = frozenset({"V1ObjectMeta", "V1ListMeta", "V1LabelSelector", "V1LabelSelectorRequirement", "V1OwnerReference",
                   "V1ManagedFieldsEntry", "V1Condition", "V1Status", "V1StatusDetails", "V1StatusCause",
                   "V1DeleteOptions", "V1Preconditions", "V1APIResource", "V1APIGroup"})
QUERY_PARAMETERS = {
    "dryRun": "When present, indicates that modifications should not be persisted. Valid values are: - All: all dry run stages will be processed",
    "fieldManager": "fieldManager is a name associated with the actor or entity that is making these changes.",
    "fieldValidation": "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) "
                       "containing unknown or duplicate fields. Valid values are: - Ignore - Warn (the default) - Strict",
    "pretty": "If 'true', then the output is pretty printed.",
    "force": "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people.",
}
_WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation", "pretty")


def _models() -> Any:
    import kubernetes.client.models as models

    return models


def _group_word(group: str) -> str:
    return {"": "core"}.get(group, group.split(".")[0])


def model_class(rt: ResourceType) -> Any | None:
    """The Python client's model of a built-in kind (V1Deployment, CoreV1Event, ...), or None."""
    if rt.group not in _BUILTIN_GROUPS:
        return None
    models = _models()
    ver = rt.version[:1].upper() + rt.version[1:]
    word = _group_word(rt.group)
    for name in (f"{word[:1].upper()}{word[1:]}{ver}{rt.kind}", f"{ver}{rt.kind}"):
        cls = getattr(models, name, None)
        if cls is not None and hasattr(cls, "openapi_types"):
            return cls
    return None


def _definition_name(cls_name: str, group: str, version: str) -> str:
    bare = re.sub(r"^(Core|Apps|Batch|Events|Networking|Storage|Discovery|Policy|Rbac|Authentication)?V\d+((alpha|beta)\d+)?",
                  "", cls_name)
    if cls_name in _META:
        return f"io.k8s.apimachinery.pkg.apis.meta.v1.{bare}"
    if group == "apiextensions.k8s.io":
        return f"io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.{version}.{bare}"
    return f"io.k8s.api.{_group_word(group)}.{version}.{bare}"


_INT_OR_STRING_NAME = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_INT_OR_STRING = {"type": "string", "format": "int-or-string",
                  "description": "IntOrString is a type that can hold an int32 or a string."}


class _Builder:
    def __init__(self) -> None:
        self.definitions: dict[str, dict[str, Any]] = {}
        self.names: dict[str, str] = {}  # model class name → definition name

    def ref(self, cls_name: str, group: str, version: str) -> dict[str, Any]:
        models = _models()
        if cls_name not in self.names:
            name = _definition_name(cls_name, group, version)
            self.names[cls_name] = name
            self.definitions[name] = {}  # claimed before the recursion reaches it again
            self.definitions[name] = self._object(getattr(models, cls_name), group, version)
        return {"$ref": f"#/definitions/{self.names[cls_name]}"}

    def _object(self, cls: Any, group: str, version: str) -> dict[str, Any]:
        fields = getattr(cls, "model_fields", {})
        props: dict[str, Any] = {}
        required = []
        for attr, type_name in cls.openapi_types.items():
            json_name = cls.attribute_map.get(attr, attr)
            info = fields.get(attr)
            schema = self.schema(type_name, group, version, json_name)
            description = (getattr(info, "description", None) or "").strip()
            if description:  # beside a $ref too, as kube-apiserver publishes it
                schema = {**schema, "description": description}
            if schema.get("type") == "array":
                schema = {**schema, **_patch_extensions(cls.__name__, json_name)}
            props[json_name] = schema
            if info is not None and info.is_required():
                required.append(json_name)
        doc = (cls.__doc__ or "").strip().split("\n\n")[0].strip()
        out: dict[str, Any] = {"type": "object", "properties": props}
        if doc and not doc.startswith("NOTE"):
            out["description"] = " ".join(doc.split())
        if required:
            out["required"] = required
        return out

    def schema(self, type_name: str, group: str, version: str, field: str) -> dict[str, Any]:
        t = type_name.strip()
        if t.startswith("List[") and t.endswith("]"):
            return {"type": "array", "items": self.schema(t[5:-1], group, version, field)}
        if t.startswith("Dict[") and t.endswith("]"):
            value = t[5:-1].split(",", 1)[1]
            return {"type": "object", "additionalProperties": self.schema(value, group, version, field)}
        if t == "str":
            return {"type": "string"}
        if t == "int":
            return {"type": "integer", "format": "int32" if not field.endswith("Seconds") else "int64"}
        if t == "float":
            return {"type": "number", "format": "double"}
        if t == "bool":
            return {"type": "boolean"}
        if t == "datetime":
            return {"type": "string", "format": "date-time"}
        if t == "object":
            # The client types IntOrString and RawExtension alike; the ports, surges and probes
            # that are IntOrString are what manifests set.
            if field in _INT_OR_STRING_FIELDS:
                self.definitions.setdefault(_INT_OR_STRING_NAME, dict(_INT_OR_STRING))
                return {"$ref": f"#/definitions/{_INT_OR_STRING_NAME}"}
            return {"type": "object"}
        if hasattr(_models(), t):
            return self.ref(t, group, version)
        return {"type": "object"}


def _patch_extensions(cls_name: str, field: str) -> dict[str, str]:
    """The list's strategic-merge tags (patchStrategy/patchMergeKey of k8s.io/api), which kubectl
    computes its apply patches with: without them a list the server defaulted would always differ."""
    from kubesim.api.patch import _MERGE_KEYS, _PRIMITIVE_MERGE

    if field == "ports":
        key = {"V1Container": "containerPort", "V1EphemeralContainer": "containerPort", "V1ServiceSpec": "port"}.get(cls_name)
    elif field == "conditions" and not cls_name.endswith("Status"):
        key = None
    else:
        key = _MERGE_KEYS.get(field)
    if key:
        strategy = "merge,retainKeys" if field == "volumes" else "merge"
        return {"x-kubernetes-patch-merge-key": key, "x-kubernetes-patch-strategy": strategy}
    if field in _PRIMITIVE_MERGE:
        return {"x-kubernetes-patch-strategy": "merge"}
    return {}


_INT_OR_STRING_FIELDS = frozenset({"port", "targetPort", "maxSurge", "maxUnavailable", "minAvailable"})


def _gvk(rt: ResourceType) -> dict[str, str]:
    return {"group": rt.group, "kind": rt.kind, "version": rt.version}


def _custom_definition(rt: ResourceType) -> dict[str, Any]:
    return {"type": "object", "description": f"{rt.kind} is the Schema for the {rt.plural} API",
            "properties": {"apiVersion": {"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."},
                           "kind": {"type": "string", "description": "Kind is a string value representing the REST resource this object represents."},
                           "metadata": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
                           "spec": {"type": "object", "description": f"{rt.kind}Spec defines the desired state of {rt.kind}"},
                           "status": {"type": "object", "description": f"{rt.kind}Status defines the observed state of {rt.kind}"}}}


def _params(names: Iterable[str]) -> list[dict[str, Any]]:
    return [{"uniqueItems": True, "type": "string", "description": QUERY_PARAMETERS[n], "name": n, "in": "query"}
            for n in names]


def _operation(rt: ResourceType, action: str, verb_id: str, params: Iterable[str]) -> dict[str, Any]:
    word = _group_word(rt.group)
    tag = f"{word}{rt.version[:1].upper() + rt.version[1:]}"
    return {"description": f"{action} {rt.kind}", "operationId": f"{verb_id}{tag[:1].upper() + tag[1:]}{rt.kind}",
            "consumes": ["*/*"], "produces": ["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"],
            "schemes": ["https"], "tags": [tag], "parameters": _params(params),
            "responses": {"200": {"description": "OK", "schema": {"$ref": f"#/definitions/{_root_name(rt)}"}},
                          "401": {"description": "Unauthorized"}},
            "x-kubernetes-action": verb_id.split("Namespaced")[0].lower() if verb_id != "deletecollection" else verb_id,
            "x-kubernetes-group-version-kind": _gvk(rt)}


def _root_name(rt: ResourceType) -> str:
    cls = model_class(rt)
    if cls is not None:
        return _definition_name(cls.__name__, rt.group, rt.version)
    return f"{'.'.join(reversed(rt.group.split('.')))}.{rt.version}.{rt.kind}"


def _paths(rt: ResourceType) -> dict[str, Any]:
    base = "/api/v1" if not rt.group else f"/apis/{rt.group}/{rt.version}"
    ns = "Namespaced" if rt.namespaced else ""
    coll = f"{base}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{base}/{rt.plural}"
    return {
        coll: {"get": _operation(rt, "list or watch objects of kind", f"list{ns}", ("pretty",)),
               "post": _operation(rt, "create a", f"create{ns}", _WRITE_PARAMS),
               "delete": _operation(rt, "delete collection of", f"deletecollection{ns}", ("dryRun", "pretty"))},
        f"{coll}/{{name}}": {"get": _operation(rt, "read the specified", f"read{ns}", ("pretty",)),
                             "put": _operation(rt, "replace the specified", f"replace{ns}", _WRITE_PARAMS),
                             "patch": _operation(rt, "partially update the specified", f"patch{ns}",
                                                 (*_WRITE_PARAMS, "force")),
                             "delete": _operation(rt, "delete a", f"delete{ns}", ("dryRun", "pretty"))},
    }


@functools.lru_cache(maxsize=8)
def _document(types: tuple[ResourceType, ...], version: str) -> tuple[bytes, bytes, dict[str, Any]]:
    builder = _Builder()
    builder.ref("V1ObjectMeta", "", "v1")
    roots: dict[str, dict[str, Any]] = {}
    paths: dict[str, Any] = {}
    for rt in sorted(types, key=lambda t: (t.group != "", t.group, t.kind)):
        cls = model_class(rt)
        if cls is not None:
            builder.ref(cls.__name__, rt.group, rt.version)
            name = builder.names[cls.__name__]
        else:
            name = _root_name(rt)
            builder.definitions[name] = _custom_definition(rt)
        entry = builder.definitions[name]
        entry["x-kubernetes-group-version-kind"] = [*entry.get("x-kubernetes-group-version-kind", []), _gvk(rt)]
        roots[rt.key] = entry
        paths.update(_paths(rt))
    doc = {"swagger": "2.0", "info": {"title": "Kubernetes", "version": version}, "paths": paths,
           "definitions": builder.definitions}
    return json.dumps(doc, separators=(",", ":")).encode(), _encode_document(doc), roots


def openapi_v2(types: Iterable[ResourceType], version: str) -> tuple[bytes, bytes]:
    """(JSON, gnostic protobuf) of the document for these types."""
    doc_json, doc_pb, _ = _document(tuple(types), version)
    return doc_json, doc_pb


def v2_document(types: tuple[ResourceType, ...], version: str) -> dict[str, Any]:
    """The v2 document as data (a fresh copy), for the v3 documents built from it."""
    return json.loads(_document(types, version)[0])


# -- field validation ----------------------------------------------------------------------------

@functools.cache
def _builtin_schema(rt: ResourceType) -> tuple[dict[str, dict[str, Any]], str] | None:
    cls = model_class(rt)
    if cls is None:
        return None
    builder = _Builder()
    builder.ref(cls.__name__, rt.group, rt.version)
    return builder.definitions, builder.names[cls.__name__]


def unknown_fields(obj: Any, rt: ResourceType, prune: bool = False) -> list[str]:
    """The paths of fields `obj` carries that the kind's schema does not declare (what
    fieldValidation=Strict refuses and Warn warns about), e.g. `spec.template.spec.containers[0].bogus`;
    `prune` drops them from `obj`, as decoding into the kind's Go struct does."""
    found = _builtin_schema(rt)
    if found is None or not isinstance(obj, dict):
        return []
    definitions, root = found
    out: list[str] = []
    _walk(obj, definitions[root], definitions, "", out, prune)
    return [p.lstrip(".") for p in out]


def _resolve(schema: dict[str, Any], definitions: dict[str, dict[str, Any]]) -> dict[str, Any]:
    while True:
        if "$ref" in schema:
            schema = definitions.get(schema["$ref"].rsplit("/", 1)[1], {})
        else:
            return schema


def _walk(value: Any, schema: dict[str, Any], definitions: dict[str, dict[str, Any]], path: str, out: list[str],
          prune: bool) -> None:
    schema = _resolve(schema, definitions)
    if isinstance(value, dict):
        props = schema.get("properties")
        if props is not None:
            for key in list(value):
                sub = value[key]
                if key not in props:
                    out.append(f"{path}.{key}")
                    if prune:
                        del value[key]
                elif sub is not None:
                    _walk(sub, props[key], definitions, f"{path}.{key}", out, prune)
        elif "additionalProperties" in schema:
            for key, sub in value.items():
                _walk(sub, schema["additionalProperties"], definitions, f"{path}.{key}", out, prune)
    elif isinstance(value, list) and "items" in schema:
        for i, sub in enumerate(value):
            _walk(sub, schema["items"], definitions, f"{path}[{i}]", out, prune)


# -- gnostic protobuf (github.com/google/gnostic openapiv2/OpenAPIv2.proto) ------------------------

def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes(field: int, data: bytes | str) -> bytes:
    raw = data.encode() if isinstance(data, str) else data
    return _varint(field << 3 | 2) + _varint(len(raw)) + raw


def _bool(field: int, value: bool) -> bytes:
    return _varint(field << 3) + _varint(1) if value else b""


def _yaml_any(value: Any) -> bytes:
    import yaml

    return _bytes(2, yaml.safe_dump(value, sort_keys=True))  # Any.yaml


def _named_any(name: str, value: Any) -> bytes:
    return _bytes(1, name) + _bytes(2, _yaml_any(value))


def _schema(s: dict[str, Any]) -> bytes:
    out = b""
    if "$ref" in s:
        out += _bytes(1, s["$ref"])
    if "format" in s:
        out += _bytes(2, s["format"])
    if "description" in s:
        out += _bytes(4, s["description"])
    for name in s.get("required", ()):
        out += _bytes(19, name)
    if "additionalProperties" in s:
        out += _bytes(21, _bytes(1, _schema(s["additionalProperties"])))
    if "type" in s:
        out += _bytes(22, _bytes(1, s["type"]))
    if "items" in s:
        out += _bytes(23, _bytes(1, _schema(s["items"])))
    if "properties" in s:
        out += _bytes(25, b"".join(_bytes(1, _bytes(1, k) + _bytes(2, _schema(v))) for k, v in s["properties"].items()))
    for key, value in s.items():
        if key.startswith("x-"):
            out += _bytes(31, _named_any(key, value))
    return out


def _operation_pb(op: dict[str, Any]) -> bytes:
    out = b"".join(_bytes(1, t) for t in op.get("tags", ()))
    out += _bytes(3, op["description"]) + _bytes(5, op["operationId"])
    out += b"".join(_bytes(6, p) for p in op.get("produces", ())) + b"".join(_bytes(7, c) for c in op.get("consumes", ()))
    for p in op.get("parameters", ()):
        query = _bytes(2, "query") + _bytes(3, p["description"]) + _bytes(4, p["name"]) + _bytes(6, p["type"])
        # ParametersItem.parameter → Parameter.non_body_parameter → NonBodyParameter.query_parameter_sub_schema
        out += _bytes(8, _bytes(1, _bytes(2, _bytes(3, query))))
    for key, value in op.items():
        if key.startswith("x-"):
            out += _bytes(13, _named_any(key, value))
    return out


_PATH_ITEM_FIELDS = {"get": 2, "put": 3, "post": 4, "delete": 5, "patch": 8}


def _encode_document(doc: dict[str, Any]) -> bytes:
    info = _bytes(1, doc["info"]["title"]) + _bytes(2, doc["info"]["version"])
    paths = b""
    for path, item in doc["paths"].items():
        body = b"".join(_bytes(_PATH_ITEM_FIELDS[verb], _operation_pb(op)) for verb, op in item.items())
        paths += _bytes(2, _bytes(1, path) + _bytes(2, body))
    definitions = b"".join(_bytes(1, _bytes(1, name) + _bytes(2, _schema(s))) for name, s in doc["definitions"].items())
    return _bytes(1, doc["swagger"]) + _bytes(2, info) + _bytes(8, paths) + _bytes(9, definitions)
