"""finalizer-owner-rbac-revoked: the cleanup controller (SREGym's Python reconcile loop, run by
the emulated interpreter as its service account) is refused the patch that removes its finalizer,
logs the API's 403 and leaves the cleanup request Terminating. Its own check, as SREGym's oracle:
fixed only when the controller itself reconciles a fresh request, so clearing the finalizer by
hand or deleting the controller is not; giving its account patch back in the namespace is.
Recovery leaves nothing behind."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from clusters.handle import ClusterHandle
from clusters.kube import Kube
from farm.pytest_plugin import SimClusters
from injectors.app_finalizers import FORBIDDEN_LOG
from injectors.injector import faults
from injectors.jobs import _logs

NS = "demo"
STUCK = "reservation-cleanup-token"
ROLE = {"apiVersion": "rbac.authorization.k8s.io/v1", "metadata": {"name": "cleanup-configmaps"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "patch"]}]}
BINDING = {"apiVersion": "rbac.authorization.k8s.io/v1", "metadata": {"name": "cleanup-configmaps"},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cleanup-configmaps"},
           "subjects": [{"kind": "ServiceAccount", "name": "cleanup-controller", "namespace": NS}]}


def _grant(kube: Kube) -> None:
    kube.create("Role", NS, ROLE)
    kube.create("RoleBinding", NS, BINDING)


def _clear_by_hand(kube: Kube) -> None:
    kube.patch("ConfigMap", NS, STUCK, {"metadata": {"finalizers": None}})


def _delete_controller(kube: Kube) -> None:
    kube.patch("ConfigMap", NS, STUCK, {"metadata": {"finalizers": None}})
    kube.delete("Deployment", NS, "cleanup-controller")


EDITS: dict[str, tuple[Callable[[Kube], None], bool]] = {
    "patch granted in the namespace": (_grant, False),
    "finalizer cleared by hand": (_clear_by_hand, True),
    "controller deleted": (_delete_controller, True),
}


@pytest.fixture
def cluster(sim_clusters: SimClusters) -> ClusterHandle:
    return sim_clusters.served(seed=6)  # restored as built: an edit's Role does not outlive its test


def _controller_log(kube: Kube) -> str:
    return "".join(_logs(kube, NS, p["metadata"]["name"]) for p in kube.list("Pod", NS, "app=cleanup-controller"))


@pytest.mark.parametrize("edit", list(EDITS))
def test_only_the_controller_reconciling_again_resolves_it(cluster: ClusterHandle, edit: str) -> None:
    kube = Kube.of(cluster)
    kube.ensure_namespace(NS)
    fault = faults.create("finalizer-owner-rbac-revoked")
    injection = fault.inject(cluster, NS)
    try:
        stuck = kube.get("ConfigMap", NS, STUCK)
        assert stuck["metadata"]["deletionTimestamp"]
        assert stuck["metadata"]["finalizers"] == ["cleanup.reservations.io/pending-cleanup"]
        log = _controller_log(kube)
        assert f"ConfigMap {STUCK} is Terminating; attempting controller-owned cleanup" in log
        assert f"cleanup-controller reconciliation failed: {FORBIDDEN_LOG}" in log
        assert fault.affects(cluster, injection) and fault.is_active(cluster, injection)
        change, still = EDITS[edit]
        change(kube)
        cluster.advance(10)
        assert fault.affects(cluster, injection) is still
        if not still:
            assert kube.find("ConfigMap", NS, STUCK) is None
            assert f"ConfigMap {STUCK} cleanup completed" in _controller_log(kube)
    finally:
        fault.recover(cluster, injection)
        cluster.advance(30)
    assert kube.find("ClusterRole", "", "configmap-cleanup-controller") is None
    assert kube.find("ClusterRoleBinding", "", "configmap-cleanup-controller") is None
    assert [c["metadata"]["name"] for c in kube.list("ConfigMap", NS) if c["metadata"]["name"] != "kube-root-ca.crt"] == []
    assert [p["metadata"]["name"] for p in kube.list("Pod", NS)] == []
