"""Operator-layer faults: misconfigured fields of a TiDB-style `pingcap.com/v1alpha1`
TidbCluster, which the operator turns into wrong StatefulSets, and a broken operator Deployment."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from clusters.handle import ClusterHandle
from clusters.kube import Kube, Obj
from injectors.fault import MISSING, Mutation, NamedObjectMutation, Params, contains
from injectors.injector import Injection, faults
from injectors.objects import Ref

COMPONENT = "^(pd|tikv|tidb|tiflash)$"


class TidbParams(Params):
    cluster: str = "basic"  # the TidbCluster's name in the application namespace
    component: str = Field("tikv", pattern=COMPONENT)


class TidbMutation(NamedObjectMutation):
    object_kind = "TidbCluster"
    name_param = "cluster"


class ReplicasParams(TidbParams):
    replicas: int = Field(20, ge=1)


@faults.register("tidb-replicas-beyond-capacity")
class TidbReplicasBeyondCapacity(TidbMutation):
    """More replicas of a component than the nodes can host: the extra pods stay Pending and
    the operator's scale-out never finishes."""

    Params = ReplicasParams

    def path(self, obj: Obj) -> list[Any]:
        return ["spec", self.p.component, "replicas"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        return self.p.replicas


class StorageClassParams(TidbParams):
    storage_class: str = "fast-nvme"


@faults.register("tidb-storage-class-missing")
class TidbStorageClassMissing(TidbMutation):
    """A storageClassName no StorageClass provides: new PVCs stay Pending, so do their pods."""

    Params = StorageClassParams

    def path(self, obj: Obj) -> list[Any]:
        return ["spec", self.p.component, "storageClassName"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        return self.p.storage_class


class AffinityParams(TidbParams):
    key: str = "topology.kubernetes.io/zone"
    value: str = "us-east-1z"


@faults.register("tidb-affinity-invalid")
class TidbAffinityInvalid(TidbMutation):
    """A required node affinity no node satisfies: the component's pods cannot be scheduled."""

    Params = AffinityParams

    def path(self, obj: Obj) -> list[Any]:
        return ["spec", self.p.component, "affinity"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        return {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": self.p.key, "operator": "In", "values": [self.p.value]}]}
                    ]
                }
            }
        }

    def still_in_place(self, current: Any, injection: Any) -> bool:
        """Every required node selector term still holds the expression no node satisfies (the
        terms are alternatives; an expression added to a term narrows it further)."""
        expression = {"key": self.p.key, "operator": "In", "values": [self.p.value]}
        terms = (((current if isinstance(current, dict) else {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
        return bool(terms) and all(any(contains(e, expression) for e in t.get("matchExpressions") or [])
                                   for t in terms)


class TolerationParams(TidbParams):
    effect: str = "NoExecuteAlways"  # not a valid taint effect
    key: str = "dedicated"
    value: str = "tidb"


@faults.register("tidb-toleration-invalid")
class TidbTolerationInvalid(TidbMutation):
    """A toleration with an invalid effect: the StatefulSet the operator renders is rejected by
    the API server, so the component is never updated or re-created."""

    Params = TolerationParams

    def path(self, obj: Obj) -> list[Any]:
        return ["spec", self.p.component, "tolerations"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        current = [] if before == MISSING else list(before)
        return [*current, {"key": self.p.key, "operator": "Equal", "value": self.p.value, "effect": self.p.effect}]

    def still_in_place(self, current: Any, injection: Any) -> bool:
        """The invalid toleration is still among them, whatever was added beside it."""
        wanted = {"key": self.p.key, "value": self.p.value, "effect": self.p.effect}
        return any(contains(t, wanted) for t in current if isinstance(t, dict)) if isinstance(current, list) else False


class SecurityContextParams(TidbParams):
    run_as_user: int = 0
    run_as_non_root: bool = True


@faults.register("tidb-security-context-wrong")
class TidbSecurityContextWrong(TidbMutation):
    """runAsNonRoot with runAsUser 0: the kubelet refuses to start the containers
    (CreateContainerConfigError)."""

    Params = SecurityContextParams

    def path(self, obj: Obj) -> list[Any]:
        return ["spec", self.p.component, "podSecurityContext"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        return {"runAsUser": self.p.run_as_user, "runAsNonRoot": self.p.run_as_non_root}


class UpdateStrategyParams(Params):
    cluster: str = "basic"
    strategy: str = "Recreate"  # not a StatefulSet update strategy


@faults.register("tidb-update-strategy-wrong")
class TidbUpdateStrategyWrong(TidbMutation):
    """An invalid statefulSetUpdateStrategy: every StatefulSet update the operator sends is
    refused, so configuration changes and upgrades never roll out."""

    Params = UpdateStrategyParams

    def path(self, obj: Obj) -> list[Any]:
        return ["spec", "statefulSetUpdateStrategy"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        return self.p.strategy


class VersionParams(Params):
    cluster: str = "basic"
    version: str = "v7.9.99"


@faults.register("tidb-version-wrong")
class TidbVersionWrong(TidbMutation):
    """A cluster version with no published images: every component's pods fail to pull."""

    Params = VersionParams

    def path(self, obj: Obj) -> list[Any]:
        return ["spec", "version"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        return self.p.version


class OperatorImageParams(Params):
    operator_namespace: str = "tidb-admin"
    deployment: str = "tidb-controller-manager"
    image: str = "pingcap/tidb-operator:v1.9.99"


@faults.register("tidb-operator-image-wrong")
class TidbOperatorImageWrong(Mutation):
    """The operator Deployment runs an image that does not exist: no reconciliation happens,
    so the cluster drifts and nothing heals it."""

    Params = OperatorImageParams

    def target(self, kube: Kube, namespace: str) -> tuple[Ref, Obj]:
        ns = self.p.operator_namespace
        return Ref("Deployment", ns, self.p.deployment), kube.get("Deployment", ns, self.p.deployment)

    def path(self, obj: Obj) -> list[Any]:
        name = obj["spec"]["template"]["spec"]["containers"][0]["name"]
        return ["spec", "template", "spec", "containers", {"name": name}, "image"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        return self.p.image

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        """Any container of the operator still runs the missing image, whatever it is called now."""
        _, obj = self._current(Kube.of(cluster), injection)
        containers = (((obj or {}).get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
        return any(c.get("image") == self.p.image for c in containers)
