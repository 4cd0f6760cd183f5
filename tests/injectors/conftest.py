"""A real emulated-cluster process for injector tests. Until the full SimCluster builds, the API
server runs with the stand-in cluster (store, clock, observability, no controllers): injectors
are tested for what they write through the real Kubernetes API, and recover exactly."""

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
    """The emulated cluster's API server over real HTTP (stand-in behind it)."""
    import os

    sys.path.insert(0, str(SIM_TESTS))
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SIM_TESTS), env_path]))
    try:
        cluster = open_cluster("sim", seed=3, workdir=tmp_path_factory.mktemp("sim"), cluster_factory=STANDIN)
    finally:
        os.environ["PYTHONPATH"] = env_path
    try:
        yield cluster
    finally:
        cluster.close()
