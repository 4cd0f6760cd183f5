"""Memory-backed filesystems in the emulated cluster: the pod sandbox's default 64 MiB /dev/shm
fills and a writer crash-loops with dd's ENOSPC; an emptyDir with medium Memory mounted there is
sized as the kubelet sizes it (node memory, else the pod's memory limit, else its sizeLimit) and
what is written in it counts against the container's memory."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.cluster import SimCluster
from farm.pytest_plugin import SimClusters
from tests.kubesim.apptools import newest_pod

NS = "default"
WRITE = "dd if=/dev/zero of=/dev/shm/scratch bs=1M count=128 && tail -f /dev/null"


@pytest.fixture
def cluster(sim_clusters: SimClusters) -> SimCluster:
    return sim_clusters.in_process(None, seed=5)


def worker(cluster: SimCluster, name: str, volume: dict[str, Any] | None = None,
           limit: str | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "worker", "image": "busybox:1.36", "command": ["sh", "-c", WRITE]}
    spec: dict[str, Any] = {"containers": [container]}
    if volume is not None:
        spec["volumes"] = [{"name": "dshm", "emptyDir": volume}]
        container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    if limit is not None:
        container["resources"] = {"limits": {"memory": limit}}
    labels = {"app": name}
    cluster.store.create("deployments.apps", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": spec}}})
    cluster.advance(60)
    return newest_pod(cluster, name, NS)


def status(pod: dict[str, Any]) -> dict[str, Any]:
    return dict(pod["status"]["containerStatuses"][0])


def test_the_sandbox_shm_holds_64_mib_and_the_writer_crash_loops(cluster: SimCluster) -> None:
    pod = worker(cluster, "media-processor")
    st = status(pod)
    assert st["restartCount"] >= 2 and st["lastState"]["terminated"]["exitCode"] == 1
    assert st["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    log = cluster.read_container_log(NS, pod["metadata"]["name"], previous=True)
    assert log.splitlines()[:3] == ["dd: writing '/dev/shm/scratch': No space left on device",
                                    "65+0 records in", "64+0 records out"]
    assert "67108864 bytes (64.0MB) copied" in log


def test_a_memory_emptydir_at_dev_shm_holds_the_scratch_and_charges_the_container(cluster: SimCluster) -> None:
    pod = worker(cluster, "roomy", {"medium": "Memory", "sizeLimit": "256Mi"})
    st = status(pod)
    assert st["ready"] and st["restartCount"] == 0
    name = pod["metadata"]["name"]
    assert "134217728 bytes (128.0MB) copied" in cluster.read_container_log(NS, name)
    rt = cluster.kubelet.runtime(pod)
    assert rt is not None and rt.containers["worker"].memory >= 128 * 2**20
    code, out, _ = cluster.kubelet.exec(NS, name, None, ["df", "-h", "/dev/shm"])
    row = next(line for line in out.splitlines() if line.endswith(" /dev/shm"))
    assert code == 0 and row.split()[:3] == ["tmpfs", "256.0M", "128.0M"]


def test_the_pods_memory_limit_sizes_a_memory_emptydir_without_a_size_limit(cluster: SimCluster) -> None:
    pod = worker(cluster, "capped", {"medium": "Memory"}, limit="200Mi")
    assert status(pod)["ready"]
    code, out, _ = cluster.kubelet.exec(NS, pod["metadata"]["name"], None, ["df", "-h", "/dev/shm"])
    row = next(line for line in out.splitlines() if line.endswith(" /dev/shm"))
    assert code == 0 and row.split()[:3] == ["tmpfs", "200.0M", "128.0M"]


def test_tmpfs_pages_past_the_memory_limit_get_the_writer_oom_killed(cluster: SimCluster) -> None:
    pod = worker(cluster, "tight", {"medium": "Memory"}, limit="100Mi")
    st = status(pod)
    assert st["lastState"]["terminated"]["reason"] == "OOMKilled" and st["restartCount"] >= 2


def test_a_disk_backed_emptydir_takes_the_write_without_touching_memory(cluster: SimCluster) -> None:
    pod = worker(cluster, "on-disk", {})
    assert status(pod)["ready"]
    rt = cluster.kubelet.runtime(pod)
    assert rt is not None and rt.containers["worker"].memory < 64 * 2**20
