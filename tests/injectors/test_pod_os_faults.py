"""The own checks of the faults in a pod's OS settings. dev-shm-undersized, as strict as SREGym's
DevShmMitigationOracle: the worker is fixed only by an emptyDir with medium Memory at /dev/shm and
with every replica ready; a disk-backed emptyDir there (the writes succeed), one in memory
elsewhere, a scale to zero or a deletion is not. ephemeral-port-range-narrowed: a range widened
just enough for today's connections is still the fault; the sysctl removed is the fix."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from clusters.handle import ClusterHandle
from clusters.kube import Kube
from farm.pytest_plugin import SimClusters
from injectors.injector import faults

NS = "hotel-reservation"
MOUNT = [{"name": "dshm", "mountPath": "/dev/shm"}]


def _volume(medium: str | None, mount: str = "/dev/shm") -> Callable[[dict[str, Any]], None]:
    def edit(spec: dict[str, Any]) -> None:
        spec["volumes"] = [{"name": "dshm", "emptyDir": {"medium": medium} if medium else {}}]
        spec["containers"][0]["volumeMounts"] = [{"name": "dshm", "mountPath": mount}]
    return edit


EDITS: dict[str, tuple[Callable[[dict[str, Any]], None] | str, bool]] = {
    "memory emptyDir at /dev/shm": (_volume("Memory"), False),
    "disk emptyDir at /dev/shm": (_volume(None), True),
    "memory emptyDir at /scratch": (_volume("Memory", "/scratch"), True),
    "scaled to zero": ("scale", True),
    "deleted": ("delete", True),
}


@pytest.fixture(scope="module")
def cluster(sim_clusters: SimClusters) -> ClusterHandle:
    cluster = sim_clusters.served(seed=7)
    Kube.of(cluster).ensure_namespace(NS)
    return cluster


@pytest.mark.parametrize("edit", list(EDITS))
def test_only_a_memory_backed_dev_shm_with_the_worker_ready_resolves_it(cluster: ClusterHandle, edit: str) -> None:
    kube = Kube.of(cluster)
    fault = faults.create("dev-shm-undersized", worker="media-processor", scratch_mib=128)
    injection = fault.inject(cluster, NS)
    try:
        cluster.advance(60)
        assert fault.affects(cluster, injection)
        change, still = EDITS[edit]
        obj = kube.get("Deployment", NS, "media-processor")
        if change == "delete":
            kube.delete("Deployment", NS, "media-processor")
        else:
            if change == "scale":
                obj["spec"]["replicas"] = 0
            else:
                assert callable(change)
                change(obj["spec"]["template"]["spec"])
            obj.pop("status", None)
            kube.replace("Deployment", NS, obj)
        cluster.advance(60)
        assert fault.affects(cluster, injection) is still
    finally:
        fault.recover(cluster, injection)
        cluster.advance(5)


def _app_deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {"metadata": {"name": name}, "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": name, "image": "busybox:1.36", "command": ["sleep", "3600"]}]}}}}


@pytest.mark.parametrize(("value", "still"), [("32000 32010", True), (None, False), ("32768 60999", False)])
def test_the_port_range_is_fixed_only_when_wide_again(cluster: ClusterHandle, value: str | None, still: bool) -> None:
    kube = Kube.of(cluster)
    for name in ("front", "back", "agent"):
        kube.create("Deployment", NS, _app_deployment(name))
    fault = faults.create("ephemeral-port-range-narrowed", value="32000 32003", exclude=["agent"])
    injection = fault.inject(cluster, NS)
    try:
        assert sorted(injection.touched) == [f"Deployment/{NS}/back", f"Deployment/{NS}/front"]
        assert "sysctls" not in kube.get("Deployment", NS, "agent")["spec"]["template"]["spec"].get("securityContext", {})
        assert fault.affects(cluster, injection) and fault.is_active(cluster, injection)
        for name in ("front", "back"):
            obj = kube.get("Deployment", NS, name)
            sc = obj["spec"]["template"]["spec"]["securityContext"]
            if value is None:
                sc.pop("sysctls")
            else:
                sc["sysctls"] = [{"name": "net.ipv4.ip_local_port_range", "value": value}]
            obj.pop("status", None)
            kube.replace("Deployment", NS, obj)
        assert fault.affects(cluster, injection) is still
        assert not fault.is_active(cluster, injection)
    finally:
        fault.recover(cluster, injection)
        for name in ("front", "back", "agent"):
            kube.delete("Deployment", NS, name)
        cluster.advance(5)
