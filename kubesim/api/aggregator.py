"""apiregistration.k8s.io APIServices as kube-apiserver's aggregator keeps them: one per group
version it serves itself (autoRegisterController: label `kube-aggregator.kubernetes.io/automanaged:
onstart`, the priorities of cmd/kube-apiserver/app/aggregator.go, Available because Local), one per
version a CustomResourceDefinition serves (crdRegistrationController: automanaged `true`, priority
1000/100, removed with the definition), and metrics-server's v1beta1.metrics.k8s.io, which points at
its Service in kube-system as metrics-server's own manifest registers it."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kubesim.store import Obj, ResourceType, Store

KEY = "apiservices.apiregistration.k8s.io"
CRD_KEY = "customresourcedefinitions.apiextensions.k8s.io"
AUTOMANAGED = "kube-aggregator.kubernetes.io/automanaged"

# (groupPriorityMinimum, versionPriority) of the group versions kube-apiserver v1.29 registers.
PRIORITIES: dict[str, tuple[int, int]] = {
    "v1": (18000, 1),
    "apps/v1": (17800, 15),
    "events.k8s.io/v1": (17750, 15),
    "authentication.k8s.io/v1": (17700, 15),
    "authorization.k8s.io/v1": (17600, 15),
    "autoscaling/v1": (17500, 15),
    "autoscaling/v2": (17500, 30),
    "batch/v1": (17400, 15),
    "certificates.k8s.io/v1": (17300, 15),
    "networking.k8s.io/v1": (17200, 15),
    "policy/v1": (17100, 15),
    "rbac.authorization.k8s.io/v1": (17000, 15),
    "storage.k8s.io/v1": (16800, 15),
    "apiextensions.k8s.io/v1": (16700, 15),
    "admissionregistration.k8s.io/v1": (16700, 15),
    "scheduling.k8s.io/v1": (16600, 15),
    "coordination.k8s.io/v1": (16500, 15),
    "node.k8s.io/v1": (16300, 15),
    "discovery.k8s.io/v1": (16200, 15),
    "flowcontrol.apiserver.k8s.io/v1": (16100, 21),
}
METRICS_GROUP_VERSION = "metrics.k8s.io/v1beta1"


def name_of(group_version: str) -> str:
    """`<version>.<group>`; the core group's is `v1.`."""
    group, _, version = group_version.rpartition("/")
    return f"{version}.{group}"


def _api_service(group_version: str, labels: dict[str, str], priority: tuple[int, int], spec: Obj, status: Obj) -> Obj:
    group, _, version = group_version.rpartition("/")
    return {"metadata": {"name": name_of(group_version), "labels": labels},
            "spec": {"group": group, "version": version, "groupPriorityMinimum": priority[0],
                     "versionPriority": priority[1], **spec},
            "status": {"conditions": [{"type": "Available", **status}]}}


def _local(stamp: str) -> Obj:
    return {"status": "True", "lastTransitionTime": stamp, "reason": "Local",
            "message": "Local APIServices are always available"}


class APIServiceRegistry:
    """Keeps the store's APIServices in line with what the server serves. `served` lists the
    group versions served besides the stored types (the virtual ones); `hidden` groups get none."""

    def __init__(self, store: Store, served: Callable[[], Iterable[ResourceType]], metrics: bool,
                 hidden: frozenset[str]) -> None:
        self.store, self.served, self.metrics, self.hidden = store, served, metrics, hidden

    def install(self) -> None:
        self.store.hooks.append(self._on_change)
        with self.store.lock:
            self.sync()

    def _on_change(self, verb: str, key: str, old: Obj | None, new: Obj | None) -> None:
        if key == CRD_KEY:
            self.sync()

    def _wanted(self) -> dict[str, Obj]:
        stamp = self.store.clock.rfc3339()
        by_crd: set[str] = set()
        for crd in self.store.iter_raw(CRD_KEY) if CRD_KEY in self.store.types else ():
            spec = crd.get("spec") or {}
            for v in spec.get("versions") or ():
                if v.get("served", True) and spec.get("group"):
                    by_crd.add(f"{spec['group']}/{v['name']}")
        wanted: dict[str, Obj] = {}
        for rt in [*self.store.types.values(), *self.served()]:
            gv = rt.api_version
            if rt.group in self.hidden or gv in wanted:
                continue
            if gv in PRIORITIES:
                wanted[gv] = _api_service(gv, {AUTOMANAGED: "onstart"}, PRIORITIES[gv], {}, _local(stamp))
            elif "." in rt.group and not rt.group.endswith(".k8s.io"):
                by_crd.add(gv)  # the emulator's built-in custom types (Chaos Mesh, TiDB) as their CRDs serve them
            # else: a group the aggregator serves itself (apiregistration) or metrics-server's, below
        for gv in by_crd:
            wanted[gv] = _api_service(gv, {AUTOMANAGED: "true"}, (1000, 100), {}, _local(stamp))
        if self.metrics:
            wanted[METRICS_GROUP_VERSION] = _api_service(
                METRICS_GROUP_VERSION, {"k8s-app": "metrics-server"}, (100, 100),
                {"service": {"name": "metrics-server", "namespace": "kube-system", "port": 443},
                 "insecureSkipTLSVerify": True},
                {"status": "True", "lastTransitionTime": stamp, "reason": "Passed", "message": "all checks passed"})
        return {name_of(gv): obj for gv, obj in wanted.items()}

    def sync(self) -> None:
        """Create the missing ones; drop those a deleted definition registered (the store's lock held)."""
        if KEY not in self.store.types:
            return
        wanted = self._wanted()
        for name, obj in wanted.items():
            if self.store.raw(KEY, "", name) is None:
                self.store.create(KEY, obj)
        for current in list(self.store.iter_raw(KEY)):
            meta = current["metadata"]
            if meta["name"] not in wanted and (meta.get("labels") or {}).get(AUTOMANAGED) == "true":
                self.store.delete(KEY, "", meta["name"])
