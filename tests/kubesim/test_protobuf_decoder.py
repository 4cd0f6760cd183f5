"""Protobuf request bodies the emulated API server decodes (the kinds typed client-go clientsets
write that way: helm's release Secrets, ConfigMaps, DeleteOptions), built here field by field
as the Kubernetes protobuf encoding lays them out; other kinds are refused with a 415."""

from __future__ import annotations

import base64

import pytest

from kubesim.api.protobuf import MAGIC, decode
from kubesim.store import StoreError


def varint(n: int) -> bytes:
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def field(number: int, value: bytes | str | int) -> bytes:
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    raw = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(raw)) + raw


def entry(number: int, key: str, value: bytes | str) -> bytes:
    return field(number, field(1, key) + field(2, value))


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    return MAGIC + field(1, field(1, api_version) + field(2, kind)) + field(2, raw)


def test_a_helm_release_secret_decodes_to_its_json_form() -> None:
    meta = (field(1, "sh.helm.release.v1.shape.v1") + field(3, "observe") + entry(11, "owner", "helm")
            + entry(11, "status", "deployed") + field(8, field(1, 1796411000)) + field(14, "x/keep"))
    secret = field(1, meta) + entry(2, "release", b"\x1f\x8b\x08gzip") + field(3, "helm.sh/release.v1")
    obj = decode(envelope("v1", "Secret", secret))
    assert obj == {"kind": "Secret", "apiVersion": "v1", "type": "helm.sh/release.v1",
                   "metadata": {"name": "sh.helm.release.v1.shape.v1", "namespace": "observe",
                                "labels": {"owner": "helm", "status": "deployed"},
                                "creationTimestamp": "2026-12-04T19:03:20Z", "finalizers": ["x/keep"]},
                   "data": {"release": base64.b64encode(b"\x1f\x8b\x08gzip").decode()}}


def test_delete_options_keep_the_propagation_policy() -> None:
    body = decode(envelope("meta.k8s.io/v1", "DeleteOptions", field(1, 0) + field(4, "Background")))
    assert body["gracePeriodSeconds"] == 0 and body["propagationPolicy"] == "Background"


def test_a_kind_without_a_modelled_schema_is_refused() -> None:
    with pytest.raises(StoreError) as err:
        decode(envelope("v1", "Pod", field(1, field(1, "web"))))
    assert err.value.code == 415 and "Pod" in str(err.value.status)
    with pytest.raises(StoreError) as err:
        decode(b'{"kind": "Secret"}')
    assert err.value.code == 400
