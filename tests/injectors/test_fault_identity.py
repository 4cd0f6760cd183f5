"""Each fault's own check finds the injected cause by what identifies it, never by its place in a
list or its name alone (issue 23): after an evasion that moves, renames, re-spells or pads what
holds the fault without changing what runs, the fault still affects the system; after the real
fix it does not; and recover puts the cause back right wherever it was moved to. On the emulated
cluster's real API, the evasions written as an agent's edits would write them."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from clusters.handle import ClusterHandle
from clusters.kube import Kube
from farm.pytest_plugin import SimClusters
from injectors.injector import faults

NS = "hotel-reservation"
IMAGE = "ghcr.io/sregym/hotel-reservation:latest"
MARK = "identity-objects"


def _deployment(name: str, port: int, **spec: Any) -> dict[str, Any]:
    labels = {"io.kompose.service": name}
    pod: dict[str, Any] = {"containers": [{
        "name": f"hotel-reserv-{name}", "image": IMAGE, "command": [name], "args": ["-v"],
        "ports": [{"containerPort": port}],
        "env": [{"name": "A", "value": "1"}, {"name": "DB", "value": "mongodb-rate:27017"}],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}}}]}
    pod.update(spec)
    return {"metadata": {"name": name, "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": pod}}}


@pytest.fixture(scope="module")
def built(sim_clusters: SimClusters) -> ClusterHandle:
    cluster = sim_clusters.served(seed=7)
    kube = Kube.of(cluster)
    kube.ensure_namespace(NS)
    kube.ensure_namespace("tidb-admin")
    kube.create("Deployment", NS, _deployment("search", 8082))
    kube.create("Deployment", NS, _deployment(
        "mongodb-rate", 27017, volumes=[{"name": "rate", "persistentVolumeClaim": {"claimName": "rate-pvc"}}]))
    kube.create("Deployment", "tidb-admin", _deployment("tidb-controller-manager", 6060))
    kube.create("Service", NS, {"metadata": {"name": "search"}, "spec": {
        "selector": {"io.kompose.service": "search"}, "ports": [{"name": "grpc", "port": 8082, "targetPort": 8082}]}})
    kube.create("ConfigMap", NS, {"metadata": {"name": "mongo-conf"}, "data": {
        "mongod.conf": "net:\n  tls:\n    mode: disabled\n",
        "service-config.json": json.dumps({"post-storage-service": {"addr": "post-storage", "port": 9090}})}})
    cluster.checkpoint(MARK)
    return cluster


@pytest.fixture()
def kube(built: ClusterHandle) -> Iterator[Kube]:
    built.restore(MARK)
    yield Kube.of(built)


def _edit(kind: str, name: str, change: Callable[[dict[str, Any]], None], ns: str = NS) -> Callable[[Kube], None]:
    def apply(kube: Kube) -> None:
        obj = kube.get(kind, ns, name)
        change(obj)
        obj.pop("status", None)
        kube.replace(kind, ns, obj)
    return apply


def _pod(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["template"]["spec"]


def _hide_container(obj: dict[str, Any]) -> None:
    """Rename the container, move it behind a new first one, and spell its image another way."""
    pod = _pod(obj)
    c = pod["containers"][0]
    c["name"] = "main"
    if c["image"] == IMAGE:
        c["image"] = "ghcr.io/sregym/hotel-reservation@sha256:" + "0" * 64
    pod["containers"] = [{"name": "helper", "image": "busybox:1.36", "command": ["sleep", "inf"]}, c]


def _spare_port_first(obj: dict[str, Any]) -> None:
    obj["spec"]["ports"].insert(0, {"name": "spare", "port": 18080, "targetPort": 18080})


def _rename_ports(obj: dict[str, Any]) -> None:
    _spare_port_first(obj)
    obj["spec"]["ports"][1]["name"] = "grpc-renamed"


# (injector, params, evasion, real fix)
CASES: list[tuple[str, dict[str, Any], Callable[[Kube], None], Callable[[Kube], None]]] = [
    ("service-wrong-target-port", {"service": "search", "port": 9999},
     _edit("Service", "search", _spare_port_first),
     _edit("Service", "search", lambda o: [p.update(targetPort=8082) for p in o["spec"]["ports"] if p["port"] == 8082])),
    ("service-wrong-port", {"service": "search", "port": 9999},
     _edit("Service", "search", _rename_ports),
     _edit("Service", "search", lambda o: [p.update(port=8082) for p in o["spec"]["ports"] if p["port"] == 9999])),
    ("image-wrong-tag", {"service": "search", "tag": "sha-0badc0de"},
     _edit("Deployment", "search", _hide_container),
     _edit("Deployment", "search", lambda o: _pod(o)["containers"][-1].update(image=IMAGE))),
    ("env-var-wrong", {"service": "search", "var": "DB", "value": "mongodb-rate:27018"},
     _edit("Deployment", "search", _hide_container),
     _edit("Deployment", "search", lambda o: _pod(o)["containers"][-1]["env"][1].update(value="mongodb-rate:27017"))),
    ("command-wrong-binary", {"service": "search", "command": ["geo"]},
     _edit("Deployment", "search", lambda o: _pod(o)["containers"][0]["command"].append("--quiet")),
     _edit("Deployment", "search", lambda o: _pod(o)["containers"][0].update(command=["search"]))),
    ("container-args-changed", {"service": "search", "args": ["-l", "127.0.0.1"]},
     _edit("Deployment", "search", lambda o: _pod(o)["containers"][0]["args"].append("--verbose")),
     _edit("Deployment", "search", lambda o: _pod(o)["containers"][0].update(args=["-v"]))),
    ("probe-misconfigured", {"service": "search", "port": 9083, "failure_threshold": 2},
     _edit("Deployment", "search", lambda o: _pod(o)["containers"][0]["livenessProbe"].update(failureThreshold=4)),
     _edit("Deployment", "search", lambda o: _pod(o)["containers"][0].pop("livenessProbe"))),
    ("requests-too-large", {"service": "search", "cpu": "64"},
     _edit("Deployment", "search", lambda o: _pod(o)["containers"][0]["resources"]["requests"].update(memory="65Mi")),
     _edit("Deployment", "search", lambda o: _pod(o)["containers"][0]["resources"].update(
         requests={"cpu": "100m"}, limits={"cpu": "1"}))),
    ("init-container-hang", {"service": "search", "wait_for": "search-primary"},
     _edit("Deployment", "search", lambda o: _pod(o)["initContainers"][0].update(name="init-deps")),
     _edit("Deployment", "search", lambda o: _pod(o).pop("initContainers"))),
    ("sidecar-port-conflict", {"service": "search"},
     _edit("Deployment", "search", lambda o: _pod(o)["containers"][1].update(name="stats")),
     _edit("Deployment", "search", lambda o: _pod(o).update(containers=_pod(o)["containers"][:1]))),
    ("pvc-claim-mismatch", {"service": "mongodb-rate", "claim": "rate-pvc-v2"},
     _edit("Deployment", "mongodb-rate", lambda o: _pod(o)["volumes"][0].update(name="data")),
     _edit("Deployment", "mongodb-rate", lambda o: _pod(o)["volumes"][0]["persistentVolumeClaim"].update(
         claimName="rate-pvc"))),
    ("anti-affinity-deadlock", {"service": "search"},
     _edit("Deployment", "search", lambda o: _pod(o)["affinity"]["podAntiAffinity"][
         "requiredDuringSchedulingIgnoredDuringExecution"].append(
         {"labelSelector": {"matchLabels": {"x": "y"}}, "topologyKey": "kubernetes.io/hostname"})),
     _edit("Deployment", "search", lambda o: _pod(o).pop("affinity"))),
    ("tidb-operator-image-wrong", {},
     _edit("Deployment", "tidb-controller-manager", _hide_container, ns="tidb-admin"),
     _edit("Deployment", "tidb-controller-manager", lambda o: _pod(o)["containers"][-1].update(image=IMAGE),
           ns="tidb-admin")),
    ("configmap-drift", {"configmap": "mongo-conf", "key": "mongod.conf", "replace": {"mode: disabled": "mode: requireTLS"}},
     _edit("ConfigMap", "mongo-conf", lambda o: o["data"].update({"mongod.conf": "# tuned\n" + o["data"]["mongod.conf"]})),
     _edit("ConfigMap", "mongo-conf", lambda o: o["data"].update({"mongod.conf": "net:\n  tls:\n    mode: disabled\n"}))),
    ("configmap-drift", {"configmap": "mongo-conf", "key": "service-config.json",
                         "json_path": ["post-storage-service", "port"], "json_value": 9091},
     _edit("ConfigMap", "mongo-conf", lambda o: o["data"].update(
         {"service-config.json": json.dumps(json.loads(o["data"]["service-config.json"]))})),
     _edit("ConfigMap", "mongo-conf", lambda o: o["data"].update(
         {"service-config.json": json.dumps({"post-storage-service": {"addr": "post-storage", "port": 9090}})}))),
]


@pytest.mark.parametrize(("injector", "params", "evade", "fix"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_an_evasion_leaves_the_fault_in_place_and_the_fix_removes_it(
        kube: Kube, built: ClusterHandle, injector: str, params: dict[str, Any],
        evade: Callable[[Kube], None], fix: Callable[[Kube], None]) -> None:
    fault = faults.create(injector, **params)
    injection = fault.inject(built, NS)
    assert fault.affects(built, injection)
    evade(kube)
    assert fault.affects(built, injection), f"{injector}: the evasion hid the fault from its own check"
    fix(kube)
    assert not fault.affects(built, injection), f"{injector}: the real fix still reads as the fault"


def test_recover_puts_the_port_back_where_the_agent_moved_it(kube: Kube, built: ClusterHandle) -> None:
    fault = faults.create("service-wrong-target-port", service="search", port=9999)
    injection = fault.inject(built, NS)
    _edit("Service", "search", _spare_port_first)(kube)
    fault.recover(built, injection)
    ports = kube.get("Service", NS, "search")["spec"]["ports"]
    assert [(p["name"], p["port"], p["targetPort"]) for p in ports] == [("spare", 18080, 18080), ("grpc", 8082, 8082)]
    assert not fault.is_active(built, injection)


def test_a_port_that_had_the_value_before_is_not_the_fault(kube: Kube, built: ClusterHandle) -> None:
    """A second port forwarding to the injected number all along is the Service's own, not the fault."""
    _edit("Service", "search", lambda o: o["spec"]["ports"].append(
        {"name": "metrics", "port": 9999, "targetPort": 9999}))(kube)
    fault = faults.create("service-wrong-target-port", service="search", port=9999)
    injection = fault.inject(built, NS)
    assert fault.is_active(built, injection)
    fault.recover(built, injection)
    assert not fault.is_active(built, injection)
    ports = kube.get("Service", NS, "search")["spec"]["ports"]
    assert [p["targetPort"] for p in ports] == [8082, 9999]
