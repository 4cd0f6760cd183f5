"""What the emulated cluster's controllers are given: a ControlPlane and the collaborators they
use, never the cluster object itself (so that what a controller may touch is read from its
constructor), also after a restore rebuilds them."""

from __future__ import annotations

from typing import Any

from kubesim.cluster import SimCluster


def _holders(cluster: SimCluster) -> set[str]:
    """Type names of the controllers (or the objects whose method a controller is) that hold
    `cluster` in an attribute."""
    owners: list[Any] = [getattr(c, "__self__", c) for c in cluster.controllers] + [cluster.kubelet]
    return {type(o).__name__ for o in owners if any(v is cluster for v in vars(o).values())}


def test_no_controller_holds_the_whole_cluster(sim_cluster: SimCluster) -> None:
    names = {type(getattr(c, "__self__", c)).__name__ for c in sim_cluster.controllers}
    assert {"Scheduler", "VolumeBinder", "TidbOperator", "Kubelet", "DeploymentController",
            "NodeFleet", "ChaosController"} <= names
    assert _holders(sim_cluster) == set()
    sim_cluster.checkpoint("wiring")
    sim_cluster.restore("wiring")  # rebuilds the controllers: the binder is the kubelet's again
    assert _holders(sim_cluster) == set()
    binder = next(c for c in sim_cluster.controllers if type(c).__name__ == "VolumeBinder")
    assert sim_cluster.kubelet.volumes is binder and binder.kubelet is sim_cluster.kubelet
    # The node fleet and the kubelet are given each other; chaos acts through both.
    assert sim_cluster.nodes.kubelet is sim_cluster.kubelet and sim_cluster.kubelet.nodes is sim_cluster.nodes
    assert sim_cluster.chaos.kubelet is sim_cluster.kubelet and sim_cluster.chaos.nodes is sim_cluster.nodes
