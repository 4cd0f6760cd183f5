"""The emulated cluster: an object store and controllers behind the real Kubernetes, Chaos Mesh,
Prometheus, Loki and Jaeger HTTP protocols, over a model of real applications, on a virtual clock.

Its own floors, bottom first: the clock and the object store; the runtime of containers, pods and
connections (`workload`, `userland`); the API server (`api`), the controllers and nodes, the
application models (`apps`, `callgraph`) and observability above them; `SimCluster` assembles
them (each sees it as a `ClusterView`, `view`) and `server` serves one as its own process. The farm reaches it only through the cluster
provider `clusters.emulated`, which runs `python -m kubesim.server`.

The names below load on first use, so importing one corner of the emulator (the store, the clock)
does not build the whole of it."""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "ClusterView": "kubesim.view",
    "SimCluster": "kubesim.cluster",
    "VirtualClock": "kubesim.clock",
    "Store": "kubesim.store",
    "StoreError": "kubesim.store",
}

__all__ = ["ClusterView", "SimCluster", "Store", "StoreError", "VirtualClock"]


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'kubesim' has no attribute {name!r}")
