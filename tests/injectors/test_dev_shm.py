"""dev-shm-undersized's own check, as strict as SREGym's DevShmMitigationOracle: the worker is
fixed only by an emptyDir with medium Memory at /dev/shm and with every replica ready; a disk-backed
emptyDir there (the writes succeed), one in memory elsewhere, a scale to zero or a deletion is not."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from clusters.base import ClusterHandle
from clusters.kube import Kube
from farm.pytest_plugin import SimClusters
from injectors.base import faults

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
