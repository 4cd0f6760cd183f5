"""The two injector interfaces.

A fault `Injector` plants a root cause (never a symptom) and returns an `Injection`: what it
changed and what it saved, enough to `recover` and to check `is_active` (the fault's own part of
the mitigation oracle: is the mutated value still in place?). A `Noise` is a transient,
self-recovering disturbance unrelated to the root cause, started with a seeded random source and
stopped before the oracles run.
"""

from __future__ import annotations

import abc
import random
from typing import Any

from pydantic import BaseModel

from clusters.base import ClusterHandle
from farm.registry import Registry


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
        """True while the root cause is still in place."""


class Noise(abc.ABC):
    """A noise source. `start` schedules its disturbances; `stop` removes every trace."""

    @abc.abstractmethod
    def start(
        self, cluster: ClusterHandle, namespace: str, rng: random.Random, intensity: float
    ) -> Injection: ...

    @abc.abstractmethod
    def stop(self, cluster: ClusterHandle, injection: Injection) -> None: ...


faults: Registry[Injector] = Registry("fault injector", modules=["injectors.catalog"])
noises: Registry[Noise] = Registry("noise", modules=["injectors.noise"])
