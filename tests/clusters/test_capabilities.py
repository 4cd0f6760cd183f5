"""What a cluster can do beyond the Kubernetes API is declared by its handle: the emulated
cluster, a kubeconfig handle over it and a real cluster each say so, and the clock hook an
injector registers runs at its own cluster times without replacing the handle's `advance`."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusters.handle import Capabilities, ClusterHandle
from clusters.real import KubeconfigClusterHandle
from core.errors import ConfigurationError
from farm.pytest_plugin import SimClusters


@pytest.fixture
def sim(sim_clusters: SimClusters) -> ClusterHandle:
    return sim_clusters.served()


def _over(sim: ClusterHandle, tmp: Path, **options: object) -> KubeconfigClusterHandle:
    return KubeconfigClusterHandle("kind", "over-sim", sim.kubeconfig, workdir=tmp, app_namespaces=set(),
                                   urls={"prometheus": sim.endpoints.prometheus, "loki": sim.endpoints.loki,
                                         "jaeger": sim.endpoints.jaeger}, **options)  # type: ignore[arg-type]


def test_each_handle_declares_what_it_can_do(sim: ClusterHandle, tmp_path: Path) -> None:
    assert sim.capabilities == Capabilities(checkpoints=True, node_faults=True, node_tasks=False,
                                            virtual_clock=True)
    wall = _over(sim, tmp_path / "wall")
    assert wall.capabilities == Capabilities()  # a real cluster's: tasks on node hosts, a wall clock
    assert wall.capabilities.node_tasks and not wall.capabilities.checkpoints
    with pytest.raises(ConfigurationError, match="cannot take checkpoints"):
        wall.checkpoint("x")
    with pytest.raises(ConfigurationError, match="cannot restore"):
        wall.restore("x")
    wall.close()
    # Reached through its kubeconfig, the emulated cluster keeps its clock and its modelled node
    # faults; its checkpoints need its control API, which that handle does not speak.
    over = _over(sim, tmp_path / "over", clock=sim)
    assert over.capabilities == Capabilities(checkpoints=False, node_faults=True, node_tasks=False,
                                             virtual_clock=True)
    over.close()


def test_a_live_emulated_cluster_has_no_virtual_clock(sim_clusters: SimClusters) -> None:
    live = sim_clusters.served(live=True)
    assert live.capabilities.checkpoints and not live.capabilities.virtual_clock


class _Recorder:
    """A clock hook with two boundaries, recording the cluster time of every tick."""

    def __init__(self, cluster: ClusterHandle, at: list[float]) -> None:
        self.cluster, self.at = cluster, at
        self.ticks: list[float] = []

    def boundaries(self) -> list[float]:
        return self.at

    def tick(self) -> None:
        self.ticks.append(self.cluster.now())


def test_a_clock_hook_runs_at_its_boundaries_and_leaves_advance_alone(sim: ClusterHandle) -> None:
    start = sim.now()
    hook = _Recorder(sim, [start + 10, start + 25, start + 500])
    sim.add_clock_hook(hook)
    try:
        assert "advance" not in vars(sim)  # registered, not patched in
        sim.advance(60)
    finally:
        sim.remove_clock_hook(hook)
    assert sim.now() == pytest.approx(start + 60, abs=1e-6)
    # the clock stopped at each boundary inside the step, then at its end
    assert hook.ticks == pytest.approx([start + 10, start + 25, start + 60], abs=1e-6)
    sim.advance(600)  # removed: it runs no more, though a boundary lies ahead
    assert len(hook.ticks) == 3
