"""Faults expressed as Chaos Mesh experiments on an application's pods: pod and container
kills, pod failure, network delay, loss and partition, I/O latency, CPU and memory stress."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from clusters.handle import ClusterHandle
from clusters.kube import Kube, Obj
from injectors.fault import Chaos, Params, io_chaos, netem_delay, netem_share
from injectors.injector import Injection, faults

MODE = "^(one|all|fixed|fixed-percent|random-max-percent)$"


class PodTargetParams(Params):
    service: str
    mode: str = Field("all", pattern=MODE)
    value: str | None = None  # for fixed / fixed-percent / random-max-percent
    container: str | None = None


class PodChaosBase(Chaos):
    kind = "PodChaos"
    action = ""

    def spec(self, kube: Kube, namespace: str) -> Obj:
        out: Obj = {"action": self.action, "mode": self.p.mode, "selector": self.selector(kube, namespace, self.p.service)}
        if self.p.value:
            out["value"] = self.p.value
        if self.p.container:
            out["containerNames"] = [self.p.container]
        return out


@faults.register("pod-failure")
class PodFailure(PodChaosBase):
    """Chaos Mesh pod-failure: the pods' containers are replaced by a pause image while active."""

    Params = PodTargetParams
    action = "pod-failure"


class OneShotPodChaos(PodChaosBase):
    """A PodChaos action that acts once, when the experiment starts: the experiment is deleted a
    second later (kept, a pod-kill would kill again), and nothing of it stays active. A trigger:
    what lasts is what the restart exposes."""

    Params = PodTargetParams
    trigger = True

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        injection = super().inject(cluster, namespace)
        cluster.advance(1)
        super().recover(cluster, injection)
        return injection

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        return False


@faults.register("container-kill")
class ContainerKill(OneShotPodChaos):
    """Chaos Mesh container-kill of the selected containers: they are killed once (SIGKILL) and
    the kubelet restarts them; what lasts is what the restart exposes (a registry that forgets,
    state that was only in memory), not the experiment."""

    action = "container-kill"


@faults.register("pod-kill")
class PodKill(OneShotPodChaos):
    """Kills the selected pods once; the controller brings them back. A trigger, not a lasting
    cause: used to start a metastable failure or to force a restart that exposes a latent one."""

    action = "pod-kill"


class NetworkParams(Params):
    service: str
    mode: str = Field("all", pattern=MODE)
    value: str | None = None
    target: str | None = None  # only traffic to this workload's pods
    direction: str = Field("to", pattern="^(to|from|both)$")


class NetworkChaosBase(Chaos):
    kind = "NetworkChaos"
    action = ""

    def action_spec(self) -> Obj:
        return {}

    def spec(self, kube: Kube, namespace: str) -> Obj:
        out: Obj = {
            "action": self.action,
            "mode": self.p.mode,
            "selector": self.selector(kube, namespace, self.p.service),
            "direction": self.p.direction,
            **self.action_spec(),
        }
        if self.p.value:
            out["value"] = self.p.value
        if self.p.target:
            out["target"] = {"mode": "all", "selector": self.selector(kube, namespace, self.p.target)}
        return out


class DelayParams(NetworkParams):
    latency: str = Field("500ms", pattern=r"^\d+(\.\d+)?(us|ms|s)$")
    jitter: str = "0ms"


@faults.register("network-delay")
class NetworkDelay(NetworkChaosBase):
    """Adds latency to the service's packets (tc netem delay)."""

    Params = DelayParams
    action = "delay"

    def action_spec(self) -> Obj:
        return netem_delay(self.p.latency, self.p.jitter)


class LossParams(NetworkParams):
    loss: int = Field(30, ge=1, le=100)


@faults.register("network-loss")
class NetworkLoss(NetworkChaosBase):
    """Drops a share of the service's packets (tc netem loss)."""

    Params = LossParams
    action = "loss"

    def action_spec(self) -> Obj:
        return netem_share("loss", self.p.loss)


class PartitionParams(NetworkParams):
    target: str  # required for a partition


@faults.register("network-partition")
class NetworkPartition(NetworkChaosBase):
    """Cuts the network between the service and one dependency."""

    Params = PartitionParams
    action = "partition"


class IoLatencyParams(Params):
    service: str
    volume_path: str = "/data/db"
    delay: str = Field("200ms", pattern=r"^\d+(\.\d+)?(us|ms|s)$")
    percent: int = Field(100, ge=1, le=100)
    mode: str = Field("all", pattern=MODE)


@faults.register("io-latency")
class IoLatency(Chaos):
    """Slows every file operation on the service's data volume."""

    Params = IoLatencyParams
    kind = "IOChaos"

    def spec(self, kube: Kube, namespace: str) -> Obj:
        return {"mode": self.p.mode, "selector": self.selector(kube, namespace, self.p.service),
                **io_chaos("latency", self.p.volume_path, self.p.percent, delay=self.p.delay)}


class StressParams(Params):
    service: str
    mode: str = Field("all", pattern=MODE)
    cpu_workers: int = Field(0, ge=0)
    cpu_load: int = Field(100, ge=1, le=100)
    memory_workers: int = Field(0, ge=0)
    memory_size: str = "256MB"


class InPodChaos(Chaos):
    """An experiment whose effect lives in the processes of the pods it was applied to (stressors
    Chaos Mesh starts inside their containers): replacing those pods ends it, as it would on a
    real cluster, where a new pod is never injected by an experiment that already ran (the
    `affects` every Chaos fault shares)."""


def stressors(p: Any) -> Obj:
    out: Obj = {}
    if p.cpu_workers:
        out["cpu"] = {"workers": p.cpu_workers, "load": p.cpu_load}
    if p.memory_workers:
        out["memory"] = {"workers": p.memory_workers, "size": p.memory_size}
    return out


class StressChaos(InPodChaos):
    Params = StressParams
    kind = "StressChaos"
    # The stressor the fault is named for, with the workers it gets when the problem sets none.
    default_workers: ClassVar[tuple[str, int]] = ("", 0)

    def spec(self, kube: Kube, namespace: str) -> Obj:
        field, workers = self.default_workers
        p = self.p.model_copy(update={field: getattr(self.p, field) or workers})
        return {"mode": p.mode, "selector": self.selector(kube, namespace, p.service), "stressors": stressors(p)}


@faults.register("stress-cpu")
class StressCpu(StressChaos):
    """A CPU burner inside the service's pods: it competes with the app for its CPU limit."""

    default_workers = ("cpu_workers", 2)


@faults.register("stress-memory")
class StressMemory(StressChaos):
    """A memory hog inside the service's pods: with a memory limit, the app is OOM-killed."""

    default_workers = ("memory_workers", 1)
