"""Server-side printing: the pod STATUS column as kubectl's printPod computes it, ages as
HumanDuration renders them, and the columns of the common kinds."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.api.tables import human_duration, pod_status, table

T0 = 1767603600.0  # 2026-01-05T09:00:00Z


def _pod(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None, phase: str = "Running",
         **extra: Any) -> dict[str, Any]:
    n_init = len(init or [])
    return {"metadata": {"name": "p", "creationTimestamp": "2026-01-05T09:00:00Z", **extra.pop("meta", {})},
            "spec": {"containers": [{"name": f"c{i}"} for i in range(len(containers))],
                     "initContainers": [{"name": f"i{i}"} for i in range(n_init)]},
            "status": {"phase": phase, "containerStatuses": containers, "initContainerStatuses": init or [], **extra}}


def waiting(reason: str, restarts: int = 0) -> dict[str, Any]:
    return {"name": "c", "ready": False, "restartCount": restarts, "state": {"waiting": {"reason": reason}}}


def terminated(reason: str = "", code: int = 1, signal: int = 0) -> dict[str, Any]:
    term: dict[str, Any] = {"exitCode": code}
    if reason:
        term["reason"] = reason
    if signal:
        term["signal"] = signal
    return {"name": "c", "ready": False, "restartCount": 0, "state": {"terminated": term}}


RUNNING = {"name": "c", "ready": True, "restartCount": 0, "state": {"running": {}}}
RUNNING_UNREADY = {"name": "c", "ready": False, "restartCount": 0, "state": {"running": {}}}


@pytest.mark.parametrize(("pod", "status", "ready"), [
    (_pod([RUNNING]), "Running", "1/1"),
    (_pod([RUNNING_UNREADY]), "Running", "0/1"),
    (_pod([waiting("CrashLoopBackOff", 5)]), "CrashLoopBackOff", "0/1"),
    (_pod([waiting("ImagePullBackOff")]), "ImagePullBackOff", "0/1"),
    (_pod([waiting("ErrImagePull")]), "ErrImagePull", "0/1"),
    (_pod([waiting("ContainerCreating")], phase="Pending"), "ContainerCreating", "0/1"),
    (_pod([waiting("CreateContainerConfigError")], phase="Pending"), "CreateContainerConfigError", "0/1"),
    (_pod([], phase="Pending"), "Pending", "0/0"),
    (_pod([terminated("OOMKilled", 137)]), "OOMKilled", "0/1"),
    (_pod([terminated("Error", 1)], phase="Failed"), "Error", "0/1"),
    (_pod([terminated("Completed", 0)], phase="Succeeded"), "Completed", "0/1"),
    (_pod([terminated(code=2)]), "ExitCode:2", "0/1"),
    (_pod([terminated(code=137, signal=9)]), "Signal:9", "0/1"),
    (_pod([RUNNING, terminated("Completed", 0)], conditions=[{"type": "Ready", "status": "True"}]), "Running", "1/2"),
    (_pod([RUNNING, terminated("Completed", 0)], conditions=[{"type": "Ready", "status": "False"}]), "NotReady", "1/2"),
    (_pod([waiting("PodInitializing")], init=[RUNNING_UNREADY], phase="Pending"), "Init:0/1", "0/1"),
    (_pod([waiting("PodInitializing")], init=[terminated("Completed", 0), RUNNING_UNREADY], phase="Pending"), "Init:1/2", "0/1"),
    (_pod([waiting("PodInitializing")], init=[waiting("CrashLoopBackOff")], phase="Pending"), "Init:CrashLoopBackOff", "0/1"),
    (_pod([waiting("PodInitializing")], init=[terminated("Error", 1)], phase="Pending"), "Init:Error", "0/1"),
    (_pod([waiting("PodInitializing")], init=[terminated(code=3)], phase="Pending"), "Init:ExitCode:3", "0/1"),
    (_pod([RUNNING], meta={"deletionTimestamp": "2026-01-05T09:01:00Z"}), "Terminating", "1/1"),
    (_pod([RUNNING], reason="NodeLost", meta={"deletionTimestamp": "2026-01-05T09:01:00Z"}), "Unknown", "1/1"),
    (_pod([], phase="Failed", reason="Evicted"), "Evicted", "0/0"),
])
def test_pod_status_column(pod: dict[str, Any], status: str, ready: str) -> None:
    reason, n_ready, total, _, _ = pod_status(pod)
    assert (reason, f"{n_ready}/{total}") == (status, ready)


def test_restarts_sum_and_show_the_last_restart() -> None:
    pod = _pod([dict(waiting("CrashLoopBackOff", 3), lastState={"terminated": {"finishedAt": "2026-01-05T09:04:00Z"}}),
                dict(RUNNING, restartCount=1)])
    row = table("pods", [pod], T0 + 300, "1")["rows"][0]["cells"]
    assert row[:5] == ["p", "1/2", "CrashLoopBackOff", "4 (60s ago)", "5m"]


@pytest.mark.parametrize(("seconds", "text"), [
    (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (119, "119s"), (120, "2m"), (125, "2m5s"), (600, "10m"),
    (3 * 3600 - 1, "179m"), (3 * 3600, "3h"), (3 * 3600 + 120, "3h2m"), (8 * 3600, "8h"), (47 * 3600, "47h"),
    (48 * 3600, "2d"), (50 * 3600, "2d2h"), (8 * 86400, "8d"), (800 * 86400, "2y70d"), (9 * 365 * 86400, "9y"),
])
def test_human_duration(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def test_service_deployment_and_event_columns() -> None:
    svc = {"metadata": {"name": "frontend", "creationTimestamp": "2026-01-05T09:00:00Z"},
           "spec": {"type": "NodePort", "clusterIP": "10.96.0.42", "selector": {"app": "frontend"},
                    "ports": [{"port": 5000, "nodePort": 30500, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}}
    assert table("services", [svc], T0 + 90, "1")["rows"][0]["cells"] == [
        "frontend", "NodePort", "10.96.0.42", "<none>", "5000:30500/TCP,53/UDP", "90s", "app=frontend"]
    dep = {"metadata": {"name": "geo", "creationTimestamp": "2026-01-05T09:00:00Z"},
           "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "geo"}},
                    "template": {"spec": {"containers": [{"name": "hotel-reserv-geo", "image": "deathstarbench/hotel-reservation:latest"}]}}},
           "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}}
    assert table("deployments.apps", [dep], T0 + 7200, "1")["rows"][0]["cells"] == [
        "geo", "2/3", 3, 2, "120m", "hotel-reserv-geo", "deathstarbench/hotel-reservation:latest", "app=geo"]
    ev = {"metadata": {"name": "geo-1.17", "creationTimestamp": "2026-01-05T09:00:00Z"}, "type": "Warning",
          "reason": "BackOff", "message": "Back-off restarting failed container", "count": 9,
          "involvedObject": {"kind": "Pod", "name": "geo-1", "fieldPath": "spec.containers{hotel-reserv-geo}"},
          "source": {"component": "kubelet", "host": "worker-1"},
          "firstTimestamp": "2026-01-05T09:00:00Z", "lastTimestamp": "2026-01-05T09:01:00Z"}
    cells = table("events", [ev], T0 + 120, "1")["rows"][0]["cells"]
    assert cells[:4] == ["60s", "Warning", "BackOff", "pod/geo-1"] and cells[5:9] == [
        "kubelet, worker-1", "Back-off restarting failed container", "2m", 9]
    generic = table("podchaos.chaos-mesh.org", [{"metadata": {"name": "kill", "creationTimestamp": "2026-01-05T09:00:00Z"}}],
                    T0 + 30, "7", include_object="None")
    assert [c["name"] for c in generic["columnDefinitions"]] == ["Name", "Age"]
    assert generic["rows"] == [{"cells": ["kill", "30s"]}] and generic["metadata"]["resourceVersion"] == "7"
