"""Resource and scheduling faults: limits, requests, replicas, node selectors, affinity, taints,
volume claims and quotas."""

from __future__ import annotations

import copy
from typing import Any

from pydantic import Field

from clusters.handle import ClusterHandle
from clusters.kube import Kube, Obj
from core.labels import match_labels
from injectors.fault import (
    MISSING,
    Creation,
    Mutation,
    Params,
    WorkloadParams,
    contains,
    neutral_name,
    require,
)
from injectors.injector import Injection, faults
from injectors.objects import Ref, quantity
from injectors.workload import TEMPLATE, ContainerMutation


class ResourceParams(WorkloadParams):
    cpu: str | None = None
    memory: str | None = None


class ResourceFieldMutation(ContainerMutation):
    """Sets resources.<section> (limits or requests) cpu and/or memory of one container."""

    section = "limits"

    def path(self, obj: Obj) -> list[Any]:
        return [*self.container_path(obj), "resources", self.section]

    def mutate(self, before: Any, obj: Obj) -> Any:
        out = {} if before == MISSING else dict(before)
        require(self.p.cpu is not None or self.p.memory is not None, "give cpu or memory")
        if self.p.cpu is not None:
            out["cpu"] = self.p.cpu
        if self.p.memory is not None:
            out["memory"] = self.p.memory
        return out

    def still_in_place(self, current: Any, injection: Any) -> bool:
        return injected_quantity(current, self.p)


def injected_quantity(section: Any, p: Any) -> bool:
    """A resources section (requests or limits) still holds one of the injected quantities,
    whatever else in it changed since."""
    held = section if isinstance(section, dict) else {}
    return any(getattr(p, key) is not None and key in held and quantity(held[key]) == quantity(getattr(p, key))
               for key in ("cpu", "memory"))


def lower_limit(before: Any, resource: str, value: str) -> Any:
    """resources with limits[resource] = value, and the request lowered to it when above it
    (a request above the limit is rejected by the API server)."""
    out = {} if before == MISSING else copy.deepcopy(before)
    out.setdefault("limits", {})[resource] = value
    request = out.get("requests", {}).get(resource)
    if request is not None and quantity(request) > quantity(value):
        out["requests"][resource] = value
    return out


class LimitMutation(ContainerMutation):
    field = "resources"
    resource = ""

    def mutate(self, before: Any, obj: Obj) -> Any:
        return lower_limit(before, self.resource, getattr(self.p, self.resource))

    def still_in_place(self, current: Any, injection: Any) -> bool:
        limits = (current or {}).get("limits", {}) if current != MISSING else {}
        return quantity(limits.get(self.resource, "")) == quantity(getattr(self.p, self.resource))


class MemoryLimitParams(WorkloadParams):
    memory: str = "16Mi"


@faults.register("memory-limit-too-low")
class MemoryLimitTooLow(LimitMutation):
    """A memory limit below the service's working set: the kernel OOM-kills it (OOMKilled)."""

    Params = MemoryLimitParams
    resource = "memory"


class CpuLimitParams(WorkloadParams):
    cpu: str = "10m"


@faults.register("cpu-limit-too-low")
class CpuLimitTooLow(LimitMutation):
    """A CPU limit so low the container is throttled by CFS and requests time out."""

    Params = CpuLimitParams
    resource = "cpu"


@faults.register("requests-too-large")
class RequestsTooLarge(ContainerMutation):
    """Requests more than any node can offer: the new pod stays Pending (FailedScheduling)."""

    Params = ResourceParams
    field = "resources"

    def mutate(self, before: Any, obj: Obj) -> Any:
        out = {} if before == MISSING else copy.deepcopy(before)
        require(self.p.cpu is not None or self.p.memory is not None, "give cpu or memory")
        for key in ("cpu", "memory"):
            value = getattr(self.p, key)
            if value is not None:
                out.setdefault("requests", {})[key] = value
                # A request above the limit is invalid; the limit is raised with it.
                if key in out.get("limits", {}):
                    out["limits"][key] = value
        return out

    def still_in_place(self, current: Any, injection: Any) -> bool:
        return injected_quantity((current if isinstance(current, dict) else {}).get("requests"), self.p)


@faults.register("requests-too-small")
class RequestsTooSmall(ResourceFieldMutation):
    """Requests far below real use: the scheduler packs the pod onto a busy node and it is
    starved (CPU) or evicted first under memory pressure; where the namespace has a LimitRange
    with a minimum, the API server refuses the new pods outright."""

    Params = ResourceParams
    section = "requests"


class ScaleParams(WorkloadParams):
    replicas: int = Field(0, ge=0)


@faults.register("scale-to-zero")
class ScaleToZero(Mutation):
    """Scales a workload to zero (or another count) replicas."""

    Params = ScaleParams

    def path(self, obj: Obj) -> list[Any]:
        return ["spec", "replicas"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        return self.p.replicas


class NodeSelectorParams(WorkloadParams):
    key: str = "kubernetes.io/hostname"
    value: str = "worker-9"
    # As SREGym's assign_to_non_existent_node (`kubectl delete deployment` then `apply`): the old
    # ReplicaSets go with their pods, so no old pod keeps serving behind the stuck rollout.
    recreate: bool = False


@faults.register("node-selector-missing-node")
class NodeSelectorMissingNode(Mutation):
    """A nodeSelector that no node satisfies: the pod stays Pending."""

    Params = NodeSelectorParams

    def path(self, obj: Obj) -> list[Any]:
        return [*TEMPLATE, "nodeSelector"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        out = {} if before == MISSING else dict(before)
        out[self.p.key] = self.p.value
        return out

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        injection = super().inject(cluster, namespace)
        if self.p.recreate:
            drop_replica_sets(Kube.of(cluster), injection)
        return injection

    def still_in_place(self, current: Any, injection: Any) -> bool:
        return current != MISSING and current.get(self.p.key) == self.p.value


class AntiAffinityParams(WorkloadParams):
    topology_key: str = "kubernetes.io/hostname"
    label_key: str | None = None  # default: the first key of the workload's selector


@faults.register("anti-affinity-deadlock")
class AntiAffinityDeadlock(Mutation):
    """A required pod anti-affinity that matches every pod of the application (including the
    new pod's own predecessors): no node qualifies, the rollout's new pod stays Pending."""

    Params = AntiAffinityParams

    def path(self, obj: Obj) -> list[Any]:
        return [*TEMPLATE, "affinity"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        key = self.p.label_key or next(iter(obj["spec"]["selector"]["matchLabels"]))
        out = {} if before == MISSING else copy.deepcopy(before)
        out["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchExpressions": [{"key": key, "operator": "Exists"}]},
                    "topologyKey": self.p.topology_key,
                }
            ]
        }
        return out

    def still_in_place(self, current: Any, injection: Any) -> bool:
        """The deadlocking term is still among the required ones, whatever was added beside it."""
        term = injection.saved["after"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
        terms = ((current if isinstance(current, dict) else {}).get("podAntiAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution") or []
        return any(contains(t, term) for t in terms)


class TaintParams(Params):
    service: str | None = None  # taint the node that runs this workload's pod
    node: str | None = None  # or this node
    key: str = "node.kubernetes.io/maintenance"
    value: str = "true"
    effect: str = Field("NoExecute", pattern="^(NoSchedule|PreferNoSchedule|NoExecute)$")


@faults.register("node-taint-no-toleration")
class NodeTaintNoToleration(Mutation):
    """Taints a node the workload depends on (its volume lives there) with a taint its pods do
    not tolerate: they are evicted and cannot come back."""

    Params = TaintParams

    def target(self, kube: Kube, namespace: str) -> tuple[Ref, Obj]:
        require(bool(self.p.service or self.p.node), "give service or node")
        node = self.p.node or kube.node_of(namespace, self.p.service)
        return Ref("Node", "", node), kube.get("Node", "", node)

    def path(self, obj: Obj) -> list[Any]:
        return ["spec", "taints"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        taints = [] if before == MISSING else list(before)
        return [*taints, {"key": self.p.key, "value": self.p.value, "effect": self.p.effect}]

    def still_in_place(self, current: Any, injection: Any) -> bool:
        return any(t.get("key") == self.p.key for t in (current if current != MISSING else []))

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        injection = super().inject(cluster, namespace)
        injection.saved["node"] = Ref.parse(injection.saved["ref"]).name  # what `{node}` names
        return injection

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        """The taint is there and the workload's pods do not tolerate it (a toleration added to
        the workload is a fix as good as removing the taint)."""
        if not super().is_active(cluster, injection):
            return False
        if not self.p.service:
            return True
        kube = Kube.of(cluster)
        _, obj = kube.workload(injection.namespace, self.p.service)
        tolerations = obj["spec"]["template"]["spec"].get("tolerations") or []
        taint = {"key": self.p.key, "value": self.p.value, "effect": self.p.effect}
        return not tolerates(tolerations, taint)


def tolerates(tolerations: list[Obj], taint: Obj) -> bool:
    """v1.Toleration.ToleratesTaint: effect (empty matches all), key (empty with Exists matches
    all), Exists or Equal on the value."""
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("key") and t["key"] != taint.get("key"):
            continue
        if t.get("operator", "Equal") == "Exists" or (t.get("value") or "") == (taint.get("value") or ""):
            if t.get("key") or t.get("operator") == "Exists":
                return True
    return False


class HostPortParams(WorkloadParams):
    host_port: int = Field(9100, ge=1, le=65535)  # 9100: the node exporter's, on every node


@faults.register("host-port-conflict")
class HostPortConflict(ContainerMutation):
    """The container's first port asks for a host port another DaemonSet already holds on every
    node (9100, prometheus-node-exporter's): the scheduler finds no node with the port free
    (`didn't have free ports for the requested pod ports`) and the new pod stays Pending. As in
    SREGym, the workload is re-created with the port rather than rolled: its old ReplicaSets go,
    so no old pod keeps serving behind the stuck rollout."""

    Params = HostPortParams
    field = "ports"

    def mutate(self, before: Any, obj: Obj) -> Any:
        ports = [] if before == MISSING or not before else copy.deepcopy(before)
        if not ports:
            ports = [{"containerPort": self.p.host_port, "protocol": "TCP"}]
        ports[0]["hostPort"] = self.p.host_port
        return ports

    def still_in_place(self, current: Any, injection: Any) -> bool:
        """Any port of the container still asks for the host port, wherever it sits in the list
        and whatever its container port is now."""
        return isinstance(current, list) and any(
            isinstance(p, dict) and p.get("hostPort") == self.p.host_port for p in current)

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        injection = super().inject(cluster, namespace)
        drop_replica_sets(Kube.of(cluster), injection)
        return injection


def drop_replica_sets(kube: Kube, injection: Injection) -> None:
    """What SREGym's `kubectl delete deployment` then `apply` does to the pods, with the
    Deployment itself kept (its uid is what the oracle's baseline knows): every ReplicaSet of the
    faulted Deployment goes with its pods, and only the faulted template's pods come back."""
    ref = Ref.parse(injection.saved["ref"])
    if ref.kind != "Deployment":
        return
    owner = injection.saved.get("uid")
    for rs in kube.list("ReplicaSet", ref.namespace):
        if any(o.get("uid") == owner for o in rs["metadata"].get("ownerReferences") or []):
            kube.delete("ReplicaSet", ref.namespace, rs["metadata"]["name"])


class ClaimMount(Mutation):
    """A new claim mounted by the workload's first container: the volume appended to the
    template (the main fragment), the mount with it; `claim_mounted` finds the claim again
    whatever the volume is called."""

    def claim(self) -> str:
        raise NotImplementedError

    def path(self, obj: Obj) -> list[Any]:
        return [*TEMPLATE, "volumes"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        volumes = [] if before == MISSING or not before else list(before)
        return [*volumes, {"name": f"{self.p.service}-volume", "persistentVolumeClaim": {"claimName": self.claim()}}]

    def mount(self, obj: Obj) -> tuple[list[Any], Any]:
        first = obj["spec"]["template"]["spec"]["containers"][0]
        return ([*TEMPLATE, "containers", {"name": first["name"]}, "volumeMounts"],
                [*(first.get("volumeMounts") or []), {"name": f"{self.p.service}-volume", "mountPath": f"/{self.p.service}-data"}])

    def claim_mounted(self, spec: Obj) -> bool:
        return any((v.get("persistentVolumeClaim") or {}).get("claimName") == self.claim() for v in spec.get("volumes") or [])


class SharedClaimParams(WorkloadParams):
    replicas: int = Field(2, ge=2)
    storage: str = "1Gi"


@faults.register("duplicate-pvc-mounts")
class DuplicatePvcMounts(ClaimMount):
    """Every replica of the workload mounts one new ReadWriteOnce claim while a required
    hostname anti-affinity keeps its replicas on different nodes (SREGym's duplicate_pvc_mounts):
    the claim binds to a node-local volume where the first replica lands, and the others fit no
    node (volume node affinity on one side, anti-affinity on the other): Pending, the Deployment
    partly ready and its rollout stuck. Re-created as in SREGym: no old pod keeps serving."""

    Params = SharedClaimParams

    def claim(self) -> str:
        return f"{self.p.service}-pvc"

    def extra(self, obj: Obj) -> list[tuple[list[Any], Any]]:
        spec = obj["spec"]["template"]["spec"]
        key, value = next(iter(obj["spec"]["selector"]["matchLabels"].items()))
        affinity = copy.deepcopy(spec.get("affinity") or {})
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]},
            "topologyKey": "kubernetes.io/hostname"}]}
        return [self.mount(obj), ([*TEMPLATE, "affinity"], affinity),
                (["spec", "replicas"], max(int(obj["spec"].get("replicas", 1) or 1), self.p.replicas))]

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        kube = Kube.of(cluster)
        require(kube.find("PersistentVolumeClaim", namespace, self.claim()) is None,
                f"a claim {self.claim()} already exists in {namespace}")
        kube.create("PersistentVolumeClaim", namespace, {
            "metadata": {"name": self.claim()},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": self.p.storage}}}})
        injection = super().inject(cluster, namespace)
        injection.touched.append(str(Ref("PersistentVolumeClaim", namespace, self.claim())))
        drop_replica_sets(kube, injection)
        return injection

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        super().recover(cluster, injection)
        Kube.of(cluster).delete("PersistentVolumeClaim", injection.namespace, self.claim())

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        """All three parts of the deadlock still hold: more than one replica, the one claim in a
        volume of the template (whatever the volume is called), and a required anti-affinity that
        separates the workload's own pods by hostname. Dropping any one of them lets every
        replica run (one replica; no shared claim; or the replicas together beside the volume)."""
        _, obj = self._current(Kube.of(cluster), injection)
        if obj is None:
            return False
        spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
        if int((obj.get("spec") or {}).get("replicas", 1) or 0) < 2:
            return False
        if not self.claim_mounted(spec):
            return False
        own = ((obj.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels") or {}
        terms = ((spec.get("affinity") or {}).get("podAntiAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution") or []
        return any(t.get("topologyKey") == "kubernetes.io/hostname"
                   and injection.namespace in (t.get("namespaces") or [injection.namespace])
                   and match_labels(t.get("labelSelector") or {}, own) for t in terms)


class VolumeAffinityParams(WorkloadParams):
    storage: str = "1Gi"


@faults.register("volume-node-affinity-violation")
class VolumeNodeAffinityViolation(ClaimMount):
    """The workload mounts a claim bound to a static volume pinned (PV node affinity) to one worker
    while its nodeSelector pins the pod to another (SREGym's persistent_volume_affinity_violation):
    no node satisfies both, the scheduler reports `volume node affinity conflict` and the
    re-created pod stays Pending."""

    Params = VolumeAffinityParams
    _pod_node = ""  # chosen in inject, before the template is changed

    def claim(self) -> str:
        return f"{self.p.service}-data"

    def volume_name(self, namespace: str) -> str:
        return neutral_name(namespace, self.p.service, prefix="pv-local-")

    @staticmethod
    def workers(kube: Kube) -> list[str]:
        names = sorted(n["metadata"]["name"] for n in kube.list("Node")
                       if "node-role.kubernetes.io/control-plane" not in (n["metadata"].get("labels") or {}))
        require(len(names) >= 2, "needs two worker nodes")
        return names

    def extra(self, obj: Obj) -> list[tuple[list[Any], Any]]:
        spec = obj["spec"]["template"]["spec"]
        selector = {**(spec.get("nodeSelector") or {}), "kubernetes.io/hostname": self._pod_node}
        return [self.mount(obj), ([*TEMPLATE, "nodeSelector"], selector)]

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        kube = Kube.of(cluster)
        volume_node, self._pod_node = self.workers(kube)[:2]
        require(kube.find("PersistentVolumeClaim", namespace, self.claim()) is None,
                f"a claim {self.claim()} already exists in {namespace}")
        pv = self.volume_name(namespace)
        kube.create("PersistentVolume", "", {
            "metadata": {"name": pv},
            "spec": {"capacity": {"storage": self.p.storage}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "",
                     "hostPath": {"path": f"/var/local/volumes/{pv}"},
                     "claimRef": {"name": self.claim(), "namespace": namespace},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "kubernetes.io/hostname", "operator": "In", "values": [volume_node]}]}]}}}})
        kube.create("PersistentVolumeClaim", namespace, {
            "metadata": {"name": self.claim()},
            "spec": {"storageClassName": "", "volumeName": pv, "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": self.p.storage}}}})
        injection = super().inject(cluster, namespace)
        injection.saved.update(volume=pv, volume_node=volume_node, pod_node=self._pod_node)
        injection.touched += [str(Ref("PersistentVolume", "", pv)), str(Ref("PersistentVolumeClaim", namespace, self.claim()))]
        drop_replica_sets(kube, injection)
        return injection

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        super().recover(cluster, injection)
        kube = Kube.of(cluster)
        kube.delete("PersistentVolumeClaim", injection.namespace, self.claim())
        kube.delete("PersistentVolume", "", injection.saved["volume"])

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        """The template still mounts the claim (whatever the volume is called) and its
        nodeSelector still rules out the node the claim's volume is pinned to: a selector moved to
        a third worker keeps the conflict; dropping the selector or the claim ends it."""
        kube = Kube.of(cluster)
        _, obj = self._current(kube, injection)
        spec = (((obj or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
        if not self.claim_mounted(spec):
            return False
        node = kube.find("Node", "", injection.saved["volume_node"])
        labels = ((node or {}).get("metadata") or {}).get("labels") or {}
        return any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items())


class ClaimParams(WorkloadParams):
    volume: str | None = None  # default: the first volume backed by a claim
    claim: str  # the (nonexistent or mismatched) claim name


@faults.register("pvc-claim-mismatch")
class PvcClaimMismatch(Mutation):
    """Points a volume at a claim that does not exist (a renamed PVC): the pod stays Pending."""

    Params = ClaimParams

    def path(self, obj: Obj) -> list[Any]:
        volumes = obj["spec"]["template"]["spec"].get("volumes", [])
        for v in volumes:
            if "persistentVolumeClaim" in v and (self.p.volume is None or v["name"] == self.p.volume):
                return [*TEMPLATE, "volumes", {"name": v["name"]}, "persistentVolumeClaim", "claimName"]
        require(False, f"{self.p.service} mounts no claim-backed volume {self.p.volume or ''}")
        return []

    def mutate(self, before: Any, obj: Obj) -> Any:
        return self.p.claim

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        """A volume of the template still claims the missing PVC, whatever the volume is called
        now (renaming it, and its mounts, does not change what it claims)."""
        _, obj = self._current(Kube.of(cluster), injection)
        volumes = (((obj or {}).get("spec") or {}).get("template") or {}).get("spec", {}).get("volumes") or []
        return any((v.get("persistentVolumeClaim") or {}).get("claimName") == self.p.claim for v in volumes)


class QuotaParams(Params):
    quota: str = "compute-resources"
    hard: dict[str, str] | None = None  # explicit limits, e.g. {"pods": "10"}
    # Or: set `pods` to the current pod count minus `below_usage` (existing pods keep running,
    # any replacement is refused with "exceeded quota").
    below_usage: int = Field(1, ge=0)


@faults.register("resource-quota-below-usage")
class ResourceQuotaBelowUsage(Creation):
    """A namespace ResourceQuota at or under current use: replacement pods are refused."""

    Params = QuotaParams

    def objects(self, kube: Kube, namespace: str) -> list[tuple[str, str, Obj]]:
        hard = self.p.hard
        if hard is None:
            hard = {"pods": str(max(0, self._pods(kube, namespace) - self.p.below_usage))}
        return [("ResourceQuota", namespace, {"metadata": {"name": self.p.quota}, "spec": {"hard": hard}})]

    @staticmethod
    def _pods(kube: Kube, namespace: str) -> int:
        return sum(1 for p in kube.list("Pod", namespace) if p.get("status", {}).get("phase") in ("Running", "Pending"))

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        needed = self._pods(Kube.of(cluster), namespace)
        injection = super().inject(cluster, namespace)
        injection.saved["needed_pods"] = needed
        return injection

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        """In place while the quota still holds the namespace under the pods it ran when injected:
        raising it (the fix its owners would make) ends the fault as surely as deleting it."""
        quota = Kube.of(cluster).find("ResourceQuota", injection.namespace, self.p.quota)
        if quota is None:
            return False
        hard = quota.get("spec", {}).get("hard") or {}
        if self.p.hard is not None:
            # an explicit limit is in place while any of its resources is still limited there
            return any(r in hard for r in self.p.hard)
        pods = hard.get("pods")
        if pods is None:
            return True
        try:
            return int(str(pods)) < int(injection.saved.get("needed_pods", 0))
        except ValueError:
            return True


HPA_API = "autoscaling/v1"


class AutoscalerParams(WorkloadParams):
    hpa: str = "frontend-capacity"
    target_percent: int = Field(60, ge=1, le=100)
    min_replicas: int = Field(1, ge=1)
    max_replicas: int = Field(5, ge=1)


@faults.register("hpa-missing-cpu-request")
class HpaMissingCpuRequest(ContainerMutation):
    """A CPU-utilization HorizontalPodAutoscaler on a workload whose container has no effective
    CPU request (the request and the limit it would default from are gone; SREGym's
    hpa_missing_effective_cpu_request): utilization is a share of the request, so the autoscaler
    cannot compute it (FailedGetResourceMetric, ScalingActive False, `<unknown>/60%`) and never
    scales, while the pods stay Running and Ready. In place while autoscaling the workload on CPU
    is broken: the autoscaler gone or no longer aimed at it by CPU, or a container of the template
    without an effective CPU request."""

    Params = AutoscalerParams
    field = "resources"

    def mutate(self, before: Any, obj: Obj) -> Any:
        out = {} if before == MISSING or not before else copy.deepcopy(before)
        for section in ("requests", "limits"):
            if isinstance(out.get(section), dict):
                out[section].pop("cpu", None)
                if not out[section]:
                    out.pop(section)
        return out

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        kube = Kube.of(cluster)
        require(kube.find("HorizontalPodAutoscaler", namespace, self.p.hpa, HPA_API) is None,
                f"an autoscaler {self.p.hpa} already exists in {namespace}")
        kind, obj = kube.workload(namespace, self.p.service, self.p.kind)
        replicas = int(obj["spec"].get("replicas", 1))
        injection = super().inject(cluster, namespace)
        kube.create("HorizontalPodAutoscaler", namespace, {
            "apiVersion": HPA_API, "metadata": {"name": self.p.hpa},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": kind, "name": self.p.service},
                     "minReplicas": self.p.min_replicas, "maxReplicas": self.p.max_replicas,
                     "targetCPUUtilizationPercentage": self.p.target_percent}})
        injection.touched.append(str(Ref("HorizontalPodAutoscaler", namespace, self.p.hpa)))
        injection.saved.update(replicas=replicas, kind=kind)
        return injection

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        """The request back, the autoscaler gone, and the replica count it may have set since the
        fix undone."""
        kube = Kube.of(cluster)
        kube.delete("HorizontalPodAutoscaler", injection.namespace, self.p.hpa, api_version=HPA_API)
        super().recover(cluster, injection)
        obj = kube.find(injection.saved["kind"], injection.namespace, self.p.service)
        if obj is not None and int(obj["spec"].get("replicas", 1)) != injection.saved["replicas"]:
            kube.patch(injection.saved["kind"], injection.namespace, self.p.service,
                       {"spec": {"replicas": injection.saved["replicas"]}})

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        kube = Kube.of(cluster)
        workload = kube.find(injection.saved.get("kind") or "Deployment", injection.namespace, self.p.service)
        if workload is None:
            return False
        autoscalers = [h for h in kube.list("HorizontalPodAutoscaler", injection.namespace, api_version=HPA_API)
                       if ((h.get("spec") or {}).get("scaleTargetRef") or {}).get("name") == self.p.service
                       and (h.get("spec") or {}).get("targetCPUUtilizationPercentage")]
        if not autoscalers:
            return True
        containers = ((workload.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
        return any("cpu" not in ((c.get("resources") or {}).get("requests") or {})
                   and "cpu" not in ((c.get("resources") or {}).get("limits") or {}) for c in containers)
class ShmWorkerParams(Params):
    worker: str = "media-processor"  # the worker Deployment (and its app label)
    image: str = "busybox:1.36"
    scratch_mib: int = Field(128, gt=64)  # more than the sandbox's default 64 MiB /dev/shm holds
    path: str = "/dev/shm"


@faults.register("dev-shm-undersized")
class DevShmUndersized(Creation):
    """A worker that writes more scratch data to /dev/shm than the pod sandbox's default 64 MiB
    tmpfs holds, with no memory-backed emptyDir mounted there: dd fails with ENOSPC and the worker
    crash-loops while the node's disk is nearly empty."""

    Params = ShmWorkerParams

    def objects(self, kube: Kube, namespace: str) -> list[tuple[str, str, Obj]]:
        labels = {"app": self.p.worker}
        script = f"dd if=/dev/zero of={self.p.path}/scratch bs=1M count={self.p.scratch_mib} && tail -f /dev/null"
        body = {
            "metadata": {"name": self.p.worker, "labels": dict(labels)},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": dict(labels)},
                "template": {
                    "metadata": {"labels": dict(labels)},
                    "spec": {
                        "terminationGracePeriodSeconds": 0,
                        "automountServiceAccountToken": False,
                        "containers": [{"name": "worker", "image": self.p.image, "command": ["sh", "-c", script]}],
                    },
                },
            },
        }
        return [("Deployment", namespace, body)]

    def affects(self, cluster: ClusterHandle, injection: Injection) -> bool:
        """The worker is part of the application now: deleted, scaled to zero, without a
        memory-backed emptyDir at the path in the container that writes there, or not all ready,
        it is still broken (SREGym's DevShmMitigationOracle)."""
        obj = Kube.of(cluster).find("Deployment", injection.namespace, self.p.worker)
        if obj is None:
            return True
        spec = obj.get("spec") or {}
        replicas = int(spec["replicas"]) if spec.get("replicas") is not None else 1
        if replicas < 1 or int((obj.get("status") or {}).get("readyReplicas") or 0) < replicas:
            return True
        return not memory_backed_at(spec.get("template", {}).get("spec") or {}, self.p.path)


def memory_backed_at(pod_spec: Obj, path: str) -> bool:
    """Every container that writes under `path` (one whose command names it) mounts an emptyDir
    with medium Memory there."""
    memory = {v.get("name") for v in pod_spec.get("volumes") or []
              if (v.get("emptyDir") or {}).get("medium") == "Memory"}
    writers = [c for c in pod_spec.get("containers") or []
               if any(path in str(a) for a in (c.get("command") or []) + (c.get("args") or []))]
    return bool(writers) and all(
        any(m.get("name") in memory and (m.get("mountPath") or "").rstrip("/") == path.rstrip("/")
            for m in c.get("volumeMounts") or [])
        for c in writers)
