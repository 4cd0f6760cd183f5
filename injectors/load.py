"""Load and resilience-policy faults, the parts metastable failures are built from: a load
spike and a transient slowdown of a service (triggers: over when inject returns), retry
amplification, and limits close to the heap that make the garbage collector thrash."""

from __future__ import annotations

import copy
from typing import Any

from pydantic import Field

from clusters.handle import ClusterHandle
from clusters.kube import Kube
from core.errors import InjectionError
from injectors.chaos import DelayParams, NetworkChaosBase
from injectors.fault import MISSING, Fault, Params, WorkloadParams, netem_delay
from injectors.injector import Injection, faults
from injectors.workload import ContainerMutation, env_list, env_value


class LoadSpikeParams(Params):
    load_generator: str  # the workload generating the application's traffic
    multiplier: float = Field(4.0, gt=1.0, le=50.0)
    duration_seconds: float = Field(60.0, gt=0)


@faults.register("load-spike")
class LoadSpike(Fault):
    """Multiplies the offered load for a while (more load-generator replicas), then puts it
    back: the trigger of a metastable failure, which must outlive it."""

    Params = LoadSpikeParams
    trigger = True

    def _scale(self, kube: Kube, namespace: str, replicas: int) -> None:
        kind, _ = kube.workload(namespace, self.p.load_generator)
        kube.patch(kind, namespace, self.p.load_generator, {"spec": {"replicas": replicas}})

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        return self.replay(cluster, namespace, self.p.duration_seconds)

    def replay(self, cluster: ClusterHandle, namespace: str, duration: float) -> Injection:
        kube = Kube.of(cluster)
        kind, obj = kube.workload(namespace, self.p.load_generator)
        before = int(obj["spec"].get("replicas", 1))
        if before < 1:
            raise InjectionError(f"the load generator {self.p.load_generator} is scaled to zero")
        injection = self.record(cluster, namespace, touched=[f"{kind}/{namespace}/{self.p.load_generator}"],
                                replicas_before=before)
        self._scale(kube, namespace, max(before + 1, round(before * self.p.multiplier)))
        try:
            cluster.advance(duration)
        finally:
            self._scale(kube, namespace, before)
        return injection

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        kube = Kube.of(cluster)
        self._scale(kube, injection.namespace, int(injection.saved["replicas_before"]))

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        _, obj = Kube.of(cluster).workload(injection.namespace, self.p.load_generator)
        return int(obj["spec"].get("replicas", 1)) > int(injection.saved["replicas_before"])


class SlowdownParams(DelayParams):
    duration_seconds: float = Field(60.0, gt=0)


@faults.register("latency-spike")
class LatencySpike(NetworkChaosBase):
    """Delays a service's packets for a while (a NetworkChaos delay), then removes the delay: a
    transient slowdown, the trigger of a metastable failure that must outlive it."""

    Params = SlowdownParams
    action = "delay"
    trigger = True

    def action_spec(self) -> Any:
        return netem_delay(self.p.latency, self.p.jitter)

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        return self.replay(cluster, namespace, self.p.duration_seconds)

    def replay(self, cluster: ClusterHandle, namespace: str, duration: float) -> Injection:
        injection = super().inject(cluster, namespace)
        try:
            cluster.advance(duration)
        finally:
            super().recover(cluster, injection)
        return injection

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        return False


class RetryParams(WorkloadParams):
    # env var → value; e.g. hotel-reservation search: RATE_RPC_MAX_ATTEMPTS, RATE_RPC_TIMEOUT_MS
    settings: dict[str, str] = Field(min_length=1)


@faults.register("retry-amplification")
class RetryAmplification(ContainerMutation):
    """A client's retry policy turned aggressive (many attempts, short per-try deadline, no
    backoff): under overload every failed call comes back several times, which keeps the
    callee overloaded after the cause of the overload is gone."""

    Params = RetryParams
    field = "env"

    def mutate(self, before: Any, obj: Any) -> Any:
        env = copy.deepcopy(env_list(before))
        for name, value in self.p.settings.items():
            for item in env:
                if item.get("name") == name:
                    item.pop("valueFrom", None)
                    item["value"] = value
                    break
            else:
                env.append({"name": name, "value": value})
        return env

    def still_in_place(self, current: Any, injection: Injection) -> bool:
        return any(env_value(current, k) == v for k, v in self.p.settings.items())


class GcParams(WorkloadParams):
    memory: str = "64Mi"  # just above the working set at normal load
    cpu: str | None = None  # a CPU limit set with it (limits sized to observed use), if any
    gc_env: str = "GC"  # hotel-reservation reads the Go GC percent from GC
    gc_percent: str = "400"
    soft_limit: str | None = None  # GOMEMLIMIT (Go 1.19+): the heap size the collector defends


@faults.register("gc-pressure")
class GcPressure(ContainerMutation):
    """A memory limit barely above the working set with a lazy GC setting (and, for Go, a
    GOMEMLIMIT under it): a burst grows the heap to the limit and the runtime spends its time
    collecting, so latency stays high."""

    Params = GcParams
    field = "resources"

    def mutate(self, before: Any, obj: Any) -> Any:
        out = {} if before == MISSING else copy.deepcopy(before)
        limits = {"memory": self.p.memory} | ({"cpu": self.p.cpu} if self.p.cpu else {})
        for name, value in limits.items():
            out.setdefault("limits", {})[name] = value
            if name in out.get("requests", {}):
                out["requests"][name] = value
        return out

    def extra(self, obj: Any) -> list[tuple[list[Any], Any]]:
        env_path = [*self.container_path(obj), "env"]
        from injectors.fault import get_path

        settings = {self.p.gc_env: self.p.gc_percent} | ({"GOMEMLIMIT": self.p.soft_limit} if self.p.soft_limit else {})
        env = copy.deepcopy(env_list(get_path(obj, env_path)))
        env = [e for e in env if e.get("name") not in settings] + [{"name": k, "value": v} for k, v in settings.items()]
        return [(env_path, env)]

    def still_in_place(self, current: Any, injection: Injection) -> bool:
        return current != MISSING and (current or {}).get("limits", {}).get("memory") == self.p.memory
