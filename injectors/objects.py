"""What injectors keep about the objects they change: an object's address as an Injection stores
it, Kubernetes quantities as numbers, a read object made fit to be created again, a container
found by name. The REST calls themselves are clusters.kube's."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from clusters.kube import Obj
from core.errors import InjectionError

# Server-owned metadata that must not travel with a saved object when it is created again.
_SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink")


@dataclass(frozen=True)
class Ref:
    """An object's address, stored in an Injection as "Kind/namespace/name"."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"

    @classmethod
    def parse(cls, text: str) -> Ref:
        kind, namespace, name = text.split("/", 2)
        return cls(kind, namespace, name)


_SUFFIX = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(text: Any) -> float | Any:
    """A Kubernetes quantity as a number ("1000m" and "1" are the same CPU); unparsable stays."""
    m = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", str(text))
    if not m or (m.group(2) and m.group(2) not in _SUFFIX):
        return text
    return float(m.group(1)) * _SUFFIX.get(m.group(2), 1.0)


def clean_for_create(obj: Obj) -> Obj:
    """A copy of a read object that can be POSTed again (no status, no server metadata)."""
    out = copy.deepcopy(obj)
    out.pop("status", None)
    meta = out.get("metadata", {})
    for key in _SERVER_FIELDS:
        meta.pop(key, None)
    return out


def container_index(template_spec: Obj, container: str | None) -> int:
    containers = template_spec.get("containers", [])
    if not containers:
        raise InjectionError("the pod template has no containers")
    if container is None:
        return 0
    for i, c in enumerate(containers):
        if c.get("name") == container:
            return i
    names = ", ".join(c.get("name", "?") for c in containers)
    raise InjectionError(f"no container '{container}' (containers: {names})")
