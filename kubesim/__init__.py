"""The emulated cluster: an object store and controllers behind the real Kubernetes, Chaos Mesh,
Prometheus, Loki and Jaeger HTTP protocols, over a model of real applications, on a virtual clock.

Its own floors, bottom first (tests/architecture/test_kubesim_floors.py): the clock, the object
store and quantities; the runtime contract of containers, pods and connections (`runtime`) and
lifecycle transitions as data; the observability stores; `view`, what each part sees of the
cluster (`ClusterView` and a Protocol per part); the application models (`apps`), the userland,
the controllers, nodes, chaos and the workload; the API server (`api`); `SimCluster` assembles
them and `server` serves one as its own process. The farm reaches it only through the cluster
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
