"""Helpers (no tests here): a real emulated-cluster process for the injector and validation
tests. Until the full SimCluster builds, the API server runs with the stand-in cluster (store, clock,
observability, no controllers): injectors are tested for what they write through the real API."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusters.base import ClusterHandle, open_cluster

STANDIN = "test_api_standin:StandInCluster"
SIM_TESTS = Path(__file__).resolve().parents[1] / "clusters" / "sim"


def full_sim_builds() -> bool:
    try:
        import clusters.sim.cluster as sim

        sim.SimCluster(0)
        return True
    except Exception:
        return False


@pytest.fixture(scope="module")
def api_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterHandle]:
    """The emulated cluster over real HTTP: the full SimCluster when it builds, else the API
    server with the stand-in behind it."""
    import os

    workdir = tmp_path_factory.mktemp("sim")
    if full_sim_builds():
        cluster = open_cluster("sim", seed=3, workdir=workdir)
    else:
        sys.path.insert(0, str(SIM_TESTS))
        env_path = os.environ.get("PYTHONPATH", "")
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SIM_TESTS), env_path]))
        try:
            cluster = open_cluster("sim", seed=3, workdir=workdir, cluster_factory=STANDIN)
        finally:
            os.environ["PYTHONPATH"] = env_path
    try:
        yield cluster
    finally:
        cluster.close()


def worker_node(cluster: ClusterHandle) -> str:
    """A schedulable node of the cluster (not the control plane)."""
    from clusters.kube import Kube

    nodes = Kube.of(cluster).list("Node")
    names = [n["metadata"]["name"] for n in nodes
             if "node-role.kubernetes.io/control-plane" not in (n["metadata"].get("labels") or {})]
    return sorted(names)[0]
