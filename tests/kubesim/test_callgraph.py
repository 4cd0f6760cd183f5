"""The call-graph engine on a two-service application of its own: requests flow from the load
generator through the caller to the callee over the emulated network, the caller's address comes
from its env, retries amplify load, and a client connection pool exhausts behind a slow callee."""

from __future__ import annotations

import pytest

from kubesim.apps.model import register_image
from kubesim.apps.graph import AppGraph, Call, Peer, Route, Service, graph_app, image_suffix
from kubesim.cluster import SimCluster
from farm.pytest_plugin import SimClusters

NS = "stockroom"
IMAGE = "example.com/stockroom"
register_image(IMAGE, tags=("1.0.0-api", "1.0.0-stock"))


def _graph(name: str, pool: int, attempts: int = 1) -> AppGraph:
    services = {
        "api": Service("api", "go", (8080,), {"GET /items": (Call("stock", "stock.Stock/Get"),)},
                       peers=(Peer("stock", "grpc", service="stock", env="STOCK_ADDR", required=True, pool=pool),),
                       cpu=0.0002, latency=0.001, timeout=2.0, attempts=attempts),
        "stock": Service("stock", "go", (9090,), {"stock.Stock/Get": ()}, cpu=0.0002, latency=0.01),
    }
    return AppGraph(name, services, (Route("/items", "GET", "api", "GET /items", 1.0),),
                    lambda c: image_suffix(c, IMAGE) if c.get("env") and any(
                        e.get("name") == "APP" and e.get("value") == name for e in c["env"]) else None)


POOLED = graph_app(_graph("stockroom-pooled", pool=4))
UNPOOLED = graph_app(_graph("stockroom-unpooled", pool=0))


def _deployment(name: str, image: str, port: int, app: str, env: list[dict]) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": name, "image": image, "ports": [{"containerPort": port}],
                                                           "env": [{"name": "APP", "value": app}, *env]}]}}}}


def _service(name: str, port: int) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": [{"port": port, "targetPort": port}]}}


def _deploy(cluster: SimCluster, app: str, rate: int = 200) -> None:
    cluster.apply([
        _deployment("stock", f"{IMAGE}:1.0.0-stock", 9090, app, []), _service("stock", 9090),
        _deployment("api", f"{IMAGE}:1.0.0-api", 8080, app, [{"name": "STOCK_ADDR", "value": "stock:9090"}]),
        _service("api", 8080),
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "load"},
         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "load"}},
                  "template": {"metadata": {"labels": {"app": "load"}},
                               "spec": {"containers": [{"name": "wrk2", "image": "deathstarbench/wrk2-client:latest",
                                                        "command": ["/bin/sh", "-c"],
                                                        "args": [f"while true; do wrk -t 2 -c 20 -d 30s http://api:8080 "
                                                                 f"-R {rate}; sleep 1; done"]}]}}}},
    ], NS)
    cluster.advance(120)


def _codes(cluster: SimCluster) -> dict[str, float]:
    out: dict[str, float] = {}
    for (metric, labels), v in cluster.workload.state["counters"].items():
        if metric == "wrk2_requests_total" and ("namespace", NS) in labels:
            code = dict(labels)["code"]
            out[code] = out.get(code, 0.0) + v
    return out


def _window(cluster: SimCluster, seconds: float) -> float:
    """Share of the client's requests answered 200 during the next `seconds`."""
    before = _codes(cluster)
    cluster.advance(seconds)
    after = _codes(cluster)
    delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    total = sum(delta.values())
    return delta.get("200", 0.0) / total if total else 0.0


def _slow_stock(cluster: SimCluster, latency: str) -> None:
    cluster.store.create("networkchaos.chaos-mesh.org", {
        "apiVersion": "chaos-mesh.org/v1alpha1", "kind": "NetworkChaos", "metadata": {"name": "slow", "namespace": NS},
        "spec": {"action": "delay", "mode": "all", "delay": {"latency": latency},
                 "selector": {"namespaces": [NS], "labelSelectors": {"app": "stock"}}}})


@pytest.fixture
def cluster(sim_clusters: SimClusters) -> SimCluster:
    return sim_clusters.in_process(seed=5)


def test_requests_flow_through_the_graph_and_the_address_comes_from_env(cluster: SimCluster) -> None:
    _deploy(cluster, POOLED.name)
    assert _window(cluster, 60) > 0.99
    calls = {dict(labels)["service_name"]: v for (m, labels), v in cluster.workload.state["counters"].items()
             if m == "traces_span_metrics_calls_total" and ("namespace", NS) in labels}
    assert calls["stock"] == pytest.approx(calls["api"], rel=0.05)
    cluster.apply([_deployment("api", f"{IMAGE}:1.0.0-api", 8080, POOLED.name,
                               [{"name": "STOCK_ADDR", "value": "stock:9999"}])], NS)
    cluster.advance(60)
    assert _window(cluster, 60) < 0.05  # every call dials a port nothing listens on
    pod = next(p for p in cluster.store.list("pods", NS) if p["metadata"]["name"].startswith("api-")
               and p["status"].get("phase") == "Running")
    log = cluster.read_container_log(NS, pod["metadata"]["name"])
    assert "stock.Stock/Get failed" in log and "9999" in log


def test_a_slow_callee_exhausts_a_bounded_client_pool(cluster: SimCluster) -> None:
    _deploy(cluster, POOLED.name)
    _slow_stock(cluster, "150ms")
    cluster.advance(30)
    pooled = _window(cluster, 60)
    pod = next(p["metadata"]["name"] for p in cluster.store.list("pods", NS) if p["metadata"]["name"].startswith("api-"))
    assert pooled < 0.5  # 200 req/s × 0.3 s per call needs ~60 connections; the pool has 4
    assert "connection pool to stock exhausted" in cluster.read_container_log(NS, pod)


def test_without_a_pool_the_same_slow_callee_only_adds_latency(cluster: SimCluster) -> None:
    _deploy(cluster, UNPOOLED.name)
    _slow_stock(cluster, "150ms")
    cluster.advance(30)
    assert _window(cluster, 60) > 0.95
