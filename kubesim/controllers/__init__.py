"""The emulated cluster's control loops (scheduler, kubelet, workload controllers, endpoints, GC,
quota, volumes) and the cluster-side models they use (network/DNS, admission, telemetry)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubesim.view import ClusterView


def build_controllers(cluster: ClusterView) -> list[Callable[[float], None]]:
    """The controllers in the order one pass runs them."""
    # The HPA is a client of the resource metrics API, which the API floor above serves from the
    # TSDB: a run-time dependency that goes up, so deferred (tests/architecture/test_kubesim_floors).
    from kubesim.api.metrics import ResourceMetrics
    from kubesim.apps.tidb import PdView
    from kubesim.controllers.autoscaler import HorizontalPodAutoscalerController
    from kubesim.controllers.churn import SyncController
    from kubesim.controllers.endpoints import EndpointsController
    from kubesim.controllers.gc import GarbageCollector
    from kubesim.controllers.quota import QuotaController
    from kubesim.controllers.scheduler import Scheduler
    from kubesim.controllers.tidb_operator import TidbOperator
    from kubesim.controllers.volumes import VolumeBinder
    from kubesim.controllers.workloads import (
        CronJobController,
        DaemonSetController,
        DeploymentController,
        JobController,
        ReplicaSetController,
        StatefulSetController,
    )

    cp = cluster.control
    # The binder is rebuilt with the controllers (its event times are of one timeline) and the
    # kubelet, which outlives them, waits for its attachments.
    volumes = cluster.kubelet.volumes = VolumeBinder(cp, cluster.kubelet)
    return [
        cluster.nodes.reconcile,
        cluster.chaos.reconcile,
        GarbageCollector(cluster.store, cluster.events.expire),
        HorizontalPodAutoscalerController(cp, ResourceMetrics(cluster.store, cluster.obs)),
        CronJobController(cp),
        JobController(cp),
        DeploymentController(cp),
        ReplicaSetController(cp),
        StatefulSetController(cp),
        DaemonSetController(cp),
        # a custom controller: acts only while its operator pod runs
        TidbOperator(cp, cluster.kubelet, cluster.logs, functools.partial(PdView, cluster)),
        volumes,
        Scheduler(cp, volumes),
        cluster.kubelet.reconcile,
        EndpointsController(cluster.store),
        QuotaController(cluster.store),
        SyncController(cp, cluster.seed),
    ]
