"""cronjob-sidecar-blocks-completion's own check, as strict as SREGym's
CronJobSidecarBlocksCompletionMitigationOracle: fixed only by the native sidecar pattern on the
original schedule with the stuck Jobs cleaned up and a fresh Job of the current template
completing; deleting the CronJob, removing the sidecar, an active deadline, suspending it, or the
right template with the stuck Jobs left (or with a sidecar that cannot start) is not. Recovery
leaves no CronJob, Job or pod behind."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any

import pytest

from clusters.handle import ClusterHandle
from clusters.kube import Kube, NotFound
from farm.pytest_plugin import SimClusters
from injectors.app_batch import CronJobSidecarBlocksCompletion
from injectors.injector import faults

NS = "demo"
NAME = "audit-log-archiver"


def _native(fault: CronJobSidecarBlocksCompletion, cj: dict[str, Any]) -> None:
    cj["spec"]["jobTemplate"] = copy.deepcopy(fault.cronjob_body(native=True)["spec"]["jobTemplate"])


def _native_broken(fault: CronJobSidecarBlocksCompletion, cj: dict[str, Any]) -> None:
    _native(fault, cj)
    # its startup probe on a port it does not listen on: it never starts, so the job's container never runs
    cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["initContainers"][0]["startupProbe"]["tcpSocket"]["port"] = 24225


def _sidecar_removed(fault: CronJobSidecarBlocksCompletion, cj: dict[str, Any]) -> None:
    pod = cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    pod["containers"] = [c for c in pod["containers"] if c["name"] != "fluent-bit-sidecar"]


def _deadline(fault: CronJobSidecarBlocksCompletion, cj: dict[str, Any]) -> None:
    cj["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] = 30


def _native_suspended(fault: CronJobSidecarBlocksCompletion, cj: dict[str, Any]) -> None:
    _native(fault, cj)
    cj["spec"]["suspend"] = True


# edit, whether the stuck Jobs are deleted after it, whether the fault still affects
EDITS: dict[str, tuple[Callable[..., None] | None, bool, bool]] = {
    "native sidecar, stuck jobs deleted": (_native, True, False),
    "native sidecar, stuck jobs left": (_native, False, True),
    "native sidecar that cannot start": (_native_broken, True, True),
    "sidecar removed": (_sidecar_removed, True, True),
    "active deadline": (_deadline, True, True),
    "native sidecar, suspended": (_native_suspended, True, True),
    "cronjob deleted": (None, True, True),
}


@pytest.fixture(scope="module")
def cluster(sim_clusters: SimClusters) -> ClusterHandle:
    return sim_clusters.served(seed=5)


@pytest.mark.parametrize("edit", list(EDITS))
def test_only_the_native_sidecar_with_the_stuck_jobs_gone_resolves_it(cluster: ClusterHandle, edit: str) -> None:
    kube = Kube.of(cluster)
    kube.ensure_namespace(NS)
    fault = faults.create("cronjob-sidecar-blocks-completion")
    assert isinstance(fault, CronJobSidecarBlocksCompletion)
    injection = fault.inject(cluster, NS)
    try:
        active = [j for j in kube.list("Job", NS) if (j.get("status") or {}).get("active")]
        assert len(active) >= 2 and all(j["metadata"]["ownerReferences"][0]["name"] == NAME for j in active)
        assert fault.affects(cluster, injection) and fault.is_active(cluster, injection)
        change, clean, still = EDITS[edit]
        if change is None:
            kube.delete("CronJob", NS, NAME)
        else:
            cj = kube.get("CronJob", NS, NAME)
            change(fault, cj)
            cj.pop("status", None)
            kube.replace("CronJob", NS, cj)
        if clean:
            for j in active:  # the CronJob's deletion may have taken them already
                with contextlib.suppress(NotFound):
                    kube.request("DELETE", kube.path("Job", NS, j["metadata"]["name"]), {"propagationPolicy": "Background"})
        cluster.advance(90)
        assert fault.affects(cluster, injection) is still
    finally:
        fault.recover(cluster, injection)
        cluster.advance(30)
    assert kube.find("CronJob", NS, NAME) is None
    assert kube.list("Job", NS) == []
    assert [p["metadata"]["name"] for p in kube.list("Pod", NS)] == []
