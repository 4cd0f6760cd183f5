"""The two injector interfaces.

A fault `Injector` plants a root cause (never a symptom) and returns an `Injection`: what it
changed and what it saved, enough to `recover` and to check `affects` (the fault's own part of
the mitigation oracle: does the fault still affect what runs, in terms the agent can change?).
`is_active` is the farm's bookkeeping (is what it planted still there?). A `Noise` is a transient,
self-recovering disturbance unrelated to the root cause, started with a seeded random source and
stopped before the oracles run.
"""

from __future__ import annotations

import abc
import random
from typing import Any

from pydantic import BaseModel

from clusters.handle import ClusterHandle
from core.registry import Registry


class Injection(BaseModel):
    """The record of one injection, stored with the attempt (never shown to the agent)."""

    injector: str
    params: dict[str, Any] = {}
    namespace: str
    # Objects created or changed, as "kind/namespace/name" (namespace empty for cluster scope).
    touched: list[str] = []
    # Whatever the injector needs to undo itself (previous values, created resource names).
    saved: dict[str, Any] = {}
    injected_at: float = 0.0  # cluster time


class Injector(abc.ABC):
    """A fault. Created by `faults.create(name, **params)`; params are validated there."""

    @abc.abstractmethod
    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection: ...

    @abc.abstractmethod
    def recover(self, cluster: ClusterHandle, injection: Injection) -> None: ...

    @abc.abstractmethod
    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        """True while what the injector planted is still in place (the farm's bookkeeping)."""

    def affects(self, cluster: ClusterHandle, injection: Injection) -> bool:
        """True while the fault still affects the running system, judged by what the agent can
        change: a pod still under the experiment, the workload still on the faulty node, the
        injected value still in the live desired state. An object the agent cannot see (a chaos
        experiment, a node fault) may stay: its presence alone is not the fault. Default: the
        planted value itself is what the agent changes."""
        return self.is_active(cluster, injection)

    def restart_targets(self, injection: Injection) -> list[str]:
        """The workloads ("Kind/namespace/name") whose one restart a lasting fix must survive:
        the mitigation oracle restarts them after its window and checks again."""
        return [t for t in injection.touched if t.split("/", 1)[0] in ("Deployment", "StatefulSet")]


class Noise(abc.ABC):
    """A noise source. `start` schedules its disturbances; `stop` removes every trace."""

    @abc.abstractmethod
    def start(
        self, cluster: ClusterHandle, namespace: str, rng: random.Random, intensity: float
    ) -> Injection: ...

    @abc.abstractmethod
    def stop(self, cluster: ClusterHandle, injection: Injection) -> None: ...


faults: Registry[Injector] = Registry("fault injector", modules=["injectors.builtin"])
noises: Registry[Noise] = Registry("noise", modules=["injectors.noise"])
