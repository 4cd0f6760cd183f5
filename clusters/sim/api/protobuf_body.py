"""Protobuf request bodies (application/vnd.kubernetes.protobuf) for the kinds a typed client-go
clientset writes in that encoding by default since client-go 0.33: helm 4 stores its releases as
Secrets (or ConfigMaps) and deletes them with DeleteOptions that way. Decoded to the JSON form
the handlers take; other kinds keep the 415 a server without their schema would give."""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

from clusters.sim.store import StoreError

MAGIC = b"k8s\x00"

# field number -> (json name, kind): "s" string, "b" bytes (base64 in JSON), "i" varint, "?" bool,
# "ss"/"sb" map of string to string/bytes, "rs" repeated string, or a nested message's name
# (a leading "*" repeats it), "t" a metav1.Time.
_SCHEMAS: dict[str, dict[int, tuple[str, str]]] = {
    "ObjectMeta": {1: ("name", "s"), 2: ("generateName", "s"), 3: ("namespace", "s"), 5: ("uid", "s"),
                   6: ("resourceVersion", "s"), 7: ("generation", "i"), 8: ("creationTimestamp", "t"),
                   11: ("labels", "ss"), 12: ("annotations", "ss"), 13: ("ownerReferences", "*OwnerReference"),
                   14: ("finalizers", "rs")},
    "OwnerReference": {1: ("kind", "s"), 3: ("name", "s"), 4: ("uid", "s"), 5: ("apiVersion", "s"),
                       6: ("controller", "?"), 7: ("blockOwnerDeletion", "?")},
    "Secret": {1: ("metadata", "ObjectMeta"), 2: ("data", "sb"), 3: ("type", "s"), 4: ("stringData", "ss"),
               5: ("immutable", "?")},
    "ConfigMap": {1: ("metadata", "ObjectMeta"), 2: ("data", "ss"), 3: ("binaryData", "sb"), 4: ("immutable", "?")},
    "Preconditions": {1: ("uid", "s"), 2: ("resourceVersion", "s")},
    "DeleteOptions": {1: ("gracePeriodSeconds", "i"), 2: ("preconditions", "Preconditions"),
                      3: ("orphanDependents", "?"), 4: ("propagationPolicy", "s"), 5: ("dryRun", "rs")},
}
_UNKNOWN = {1: ("typeMeta", "TypeMeta"), 2: ("raw", "b"), 3: ("contentEncoding", "s"), 4: ("contentType", "s")}
_TYPE_META = {1: ("apiVersion", "s"), 2: ("kind", "s")}


def _unsupported(what: str) -> StoreError:
    return StoreError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - accepted "
                      f'media types include: application/json, application/yaml (got protobuf {what})')


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    out, i = [], 0

    def varint() -> int:
        nonlocal i
        shift = value = 0
        while True:
            if i >= len(data):
                raise StoreError(400, "BadRequest", "the protobuf body is truncated")
            byte = data[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while i < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            out.append((number, wire, varint()))
        elif wire == 2:
            size = varint()
            out.append((number, wire, data[i:i + size]))
            i += size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            out.append((number, wire, data[i:i + width]))
            i += width
        else:
            raise StoreError(400, "BadRequest", f"the protobuf body has an unsupported wire type {wire}")
    return out


def _message(data: bytes, schema: dict[int, tuple[str, str]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for number, _wire, value in _fields(data):
        if number not in schema:
            continue  # a field this model does not keep, as an older server would drop it
        name, kind = schema[number]
        if kind == "s":
            obj[name] = value.decode()
        elif kind == "b":
            obj[name] = value
        elif kind == "i":
            obj[name] = value - (1 << 64) if value >= 1 << 63 else value
        elif kind == "?":
            obj[name] = bool(value)
        elif kind == "rs":
            obj.setdefault(name, []).append(value.decode())
        elif kind in ("ss", "sb"):
            entry = {n: v for n, _w, v in _fields(value)}
            raw = entry.get(2, b"")
            obj.setdefault(name, {})[entry.get(1, b"").decode()] = \
                raw.decode() if kind == "ss" else base64.b64encode(raw).decode()
        elif kind == "t":
            parts = {n: v for n, _w, v in _fields(value)}
            obj[name] = dt.datetime.fromtimestamp(parts.get(1, 0), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        elif kind.startswith("*"):
            obj.setdefault(name, []).append(_message(value, _SCHEMAS[kind[1:]]))
        else:
            obj[name] = _message(value, _TYPE_META if kind == "TypeMeta" else _SCHEMAS[kind])
    return obj


def decode(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object (runtime.Unknown in the "k8s\\0" envelope)."""
    if not body.startswith(MAGIC):
        raise StoreError(400, "BadRequest", "the protobuf body lacks the k8s envelope")
    unknown = _message(body[len(MAGIC):], _UNKNOWN)
    type_meta = unknown.get("typeMeta") or {}
    kind = type_meta.get("kind", "")
    if kind not in _SCHEMAS or kind in ("ObjectMeta", "OwnerReference", "Preconditions"):
        raise _unsupported(kind or "without a kind")
    obj = _message(unknown.get("raw", b""), _SCHEMAS[kind])
    return {"kind": kind, "apiVersion": type_meta.get("apiVersion") or "v1", **obj}
