"""Golden renderings of the node and pod lifecycle transitions, as kwok pins its stages: each
transition is driven on the emulated cluster, and what a client sees of it (conditions, taints,
container states, the Events in order) is rendered to YAML and compared with the file under
golden/lifecycle/. A change to a transition's data (kubesim/lifecycle.py) or to the code that applies
it shows up here as a diff a reviewer can read; `FARM_UPDATE_GOLDEN=1` rewrites the files.

Names and times are normalised (pods by their workload, times dropped): the files pin what a
transition does, not which random suffix a pod got."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesim.cluster import SimCluster
from tests.kubesim.apptools import newest_pod

NS = "hotel-reservation"
GOLDEN = Path(__file__).parent / "golden" / "lifecycle"


def _pod_name(cluster: SimCluster, name: str) -> str:
    return re.sub(r"-[0-9a-f]{8,10}-[0-9a-z]{5}$", "-<hash>", name)


def _normal(text: str) -> str:
    """uids, pod IPs and pod-name suffixes follow from how many objects the cluster made before, not
    from the transition: each becomes a placeholder."""
    text = re.sub(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "<uid>", text)
    text = re.sub(r"\b10\.244\.\d+\.\d+\b", "<pod-ip>", text)
    return re.sub(r"\b([a-z][a-z0-9-]*?)-[a-z0-9]{8,10}-[a-z0-9]{5}\b", r"\1-<hash>", text)


def _events(cluster: SimCluster, namespace: str, names: dict[str, str], since: int) -> list[str]:
    out = []
    for e in cluster.store.list("events", namespace):
        if int(e["metadata"]["resourceVersion"]) <= since:
            continue
        obj = e["involvedObject"]
        if obj.get("name") not in names:
            continue
        message = e["message"]
        for real, alias in names.items():
            message = message.replace(real, alias)
        message = re.sub(r"in \d+\.\d+s \(\d+\.\d+s including waiting\)", "in <t>s (<t>s including waiting)", message)
        message = _normal(message)
        out.append(f"{obj['kind']} {names[obj['name']]}: {e['type']} {e['reason']}: {message}"
                   + (f" (x{e['count']})" if e.get("count", 1) > 1 else ""))
    return out


def _node(cluster: SimCluster, node: str) -> dict[str, Any]:
    obj = cluster.store.get("nodes", "", node)
    return {
        "conditions": [{k: c.get(k) for k in ("type", "status", "reason", "message")}
                       for c in obj["status"].get("conditions") or []],
        "taints": [{k: t.get(k) for k in ("key", "effect")} for t in obj["spec"].get("taints") or []],
    }


def _pod(cluster: SimCluster, namespace: str, name: str) -> dict[str, Any]:
    obj = cluster.store.get("pods", namespace, name)
    status = obj.get("status") or {}

    def state(s: dict[str, Any]) -> dict[str, Any]:
        kind, body = next(iter(s.items())) if s else ("none", {})
        return {kind: {k: _normal(body[k]) if k == "message" else body[k]
                       for k in ("reason", "message", "exitCode") if k in body}}

    return {
        "phase": status.get("phase"),
        "reason": status.get("reason"),
        "conditions": {c["type"]: c["status"] for c in status.get("conditions") or []},
        "containers": [{"name": c["name"], "ready": c["ready"], "restartCount": c["restartCount"],
                        "state": state(c.get("state") or {}),
                        "lastState": state(c.get("lastState") or {})}
                       for c in status.get("containerStatuses") or []],
    }


def _check(name: str, rendered: dict[str, Any]) -> None:
    path = GOLDEN / f"{name}.yaml"
    text = yaml.safe_dump(rendered, sort_keys=False, width=200)
    if os.environ.get("FARM_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with FARM_UPDATE_GOLDEN=1 once and review it"
    assert text == path.read_text(), f"{name}: the transition renders differently from {path}"


def _node_fault(cluster: SimCluster, name: str, node: str, **spec: object) -> None:
    cluster.store.create("nodefaults.sim.farm.io", {"apiVersion": "sim.farm.io/v1alpha1", "kind": "NodeFault",
                                                    "metadata": {"name": name}, "spec": {"nodeName": node, **spec}})


def _rv(cluster: SimCluster) -> int:
    return cluster.store.resource_version


def _set_container(cluster: SimCluster, deployment: str, edit: Callable[[dict[str, Any]], None]) -> None:
    def mutate(d: dict[str, Any]) -> None:
        edit(d["spec"]["template"]["spec"]["containers"][0])
    cluster.store.mutate("deployments.apps", NS, deployment, mutate)


def test_a_node_whose_kubelet_stops_goes_unreachable_and_comes_back(cluster: SimCluster) -> None:
    geo = newest_pod(cluster, "geo", NS)
    node = geo["spec"]["nodeName"]
    names = {node: "<node>", geo["metadata"]["name"]: "geo-<hash>"}
    since = _rv(cluster)
    _node_fault(cluster, "stopped", node, kubeletStopped=True)
    cluster.advance(60)
    stopped = {"node": _node(cluster, node), "pod": _pod(cluster, NS, geo["metadata"]["name"]),
               "events": _events(cluster, "default", names, since) + _events(cluster, NS, names, since)}
    since = _rv(cluster)
    cluster.store.delete("nodefaults.sim.farm.io", "", "stopped")
    cluster.advance(30)
    back = {"node": _node(cluster, node), "pod": _pod(cluster, NS, geo["metadata"]["name"]),
            "events": _events(cluster, "default", names, since) + _events(cluster, NS, names, since)}
    _check("node-unreachable-and-back", {"kubelet stopped, 60 s": stopped, "kubelet back, 30 s": back})


def test_a_node_under_memory_pressure_is_tainted_and_released(cluster: SimCluster) -> None:
    mongo = newest_pod(cluster, "mongodb-reservation", NS)
    node = mongo["spec"]["nodeName"]
    names = {node: "<node>"}
    since = _rv(cluster)
    _node_fault(cluster, "evict", node, evictionHard={"memory.available": "90%"})
    cluster.advance(5)
    pressure = {"node": _node(cluster, node), "events": _events(cluster, "default", names, since)}
    since = _rv(cluster)
    cluster.store.delete("nodefaults.sim.farm.io", "", "evict")
    cluster.advance(90)
    released = {"node": _node(cluster, node), "events": _events(cluster, "default", names, since)}
    _check("node-memory-pressure", {"evictionHard memory.available 90%, 5 s": pressure,
                                    "threshold removed, 90 s": released})


@pytest.mark.parametrize(("name", "deployment", "edit", "steps"), [
    ("pod-image-pull-backoff", "geo", lambda c: c.update(image="yinfangchen/hotelreservation:no-such-tag"),
     (5, 30, 60)),
    ("pod-missing-configmap", "geo", lambda c: c.update(envFrom=[{"configMapRef": {"name": "no-such-config"}}]),
     (5, 30)),
    ("pod-oom-crashloop", "geo", lambda c: c.update(resources={"limits": {"memory": "1Mi"}}), (5, 20, 60)),
    ("pod-readiness-probe-failing", "geo",
     lambda c: c.update(readinessProbe={"tcpSocket": {"port": 9999}, "periodSeconds": 5, "failureThreshold": 3}),
     (10, 40)),
])
def test_a_pod_transition_renders_as_pinned(cluster: SimCluster, name: str, deployment: str,
                                            edit: Callable[[dict[str, Any]], None], steps: tuple[int, ...]) -> None:
    old = {p["metadata"]["name"] for p in cluster.store.list("pods", NS)}
    since = _rv(cluster)
    _set_container(cluster, deployment, edit)
    rendered: dict[str, Any] = {}
    elapsed = 0
    for step in steps:
        cluster.advance(step - elapsed)
        elapsed = step
        new = sorted(p["metadata"]["name"] for p in cluster.store.list("pods", NS)
                     if p["metadata"]["name"].startswith(deployment + "-") and p["metadata"]["name"] not in old)
        assert new, f"{name}: no new {deployment} pod after {step} s"
        names = {n: f"{deployment}-<new{i}>" for i, n in enumerate(new)}
        rendered[f"{step} s"] = {"pods": [_pod(cluster, NS, n) for n in new],
                                 "events": _events(cluster, NS, names, since)}
    _check(name, rendered)
