"""The call-graph engine's declared mechanisms, each on a small application of its own (`depot`):
a cache in front of a store (reads reach the store only on a miss), a token bucket with a queue in
front of a handler, a client's own deadline and retries with backoff (and what it reports when
they run out), the Go runtime's collector and heap (GOGC, GOMEMLIMIT), service discovery through
Consul with each pod's cached answers, a tracer that tags spans its own way, and a handler that
returns at its first failed call."""

from __future__ import annotations

from typing import Any

import pytest

from farm.pytest_plugin import SimClusters
from kubesim.apps.model import register_image
from kubesim.apps.callgraph import TraceFormat
from kubesim.apps.goruntime import GO
from kubesim.apps.graph import (
    AppGraph,
    Cache,
    Call,
    Peer,
    RateLimit,
    Registry,
    Retry,
    Route,
    Service,
    graph_app,
    image_suffix,
)
from kubesim.cluster import SimCluster
from kubesim.observability.jaeger.traces import TraceQuery

NS = "depot"
IMAGE = "example.com/depot"
register_image(IMAGE, tags=("1.0.0-api", "1.0.0-stock", "1.0.0-price"))


class JaegerGo(TraceFormat):
    """Jaeger's Go client: `component` tags, errors logged as (error, message), no database spans."""

    error_event = ("error", "message")
    store_spans = False
    sample_env = "JAEGER_SAMPLE_RATIO"

    def server_tags(self, route: Any, protocol: str, ok: bool) -> list[dict[str, Any]]:
        return [{"key": "span.kind", "type": "string", "value": "server"},
                {"key": "component", "type": "string", "value": "net/http" if route is not None else "gRPC"}]


def _app(name: str, api: dict[str, Any], stock: dict[str, Any] | None = None, stock_ops: tuple[Call, ...] = (),
         stock_peers: tuple[Peer, ...] = (), api_peer: dict[str, Any] | None = None, tracer: Any = None,
         trace_host: str = "") -> AppGraph:
    peer = Peer("stock", "grpc", service="stock", **(api_peer or {"env": "STOCK_ADDR", "required": True}))
    services = {
        "api": Service("api", "go", (8080,), {"GET /items": (Call("stock", "stock.Stock/Get"),)},
                       peers=(peer, *api.pop("peers", ())), cpu=0.0002, latency=0.001, **api),
        "stock": Service("stock", "go", (9090,), {"stock.Stock/Get": stock_ops}, cpu=0.0002, latency=0.002,
                         **{"peers": stock_peers, **(stock or {})}),
    }
    return graph_app(AppGraph(name, services, (Route("/items", "GET", "api", "GET /items", 1.0),),
                              lambda c: image_suffix(c, IMAGE) if any(
                                  e.get("name") == "APP" and e.get("value") == name for e in c.get("env") or []) else None,
                              tracer=tracer, trace_host=trace_host))


LIMITED = _app("depot-limited", {}, {"limit": RateLimit(20.0, 50.0, error="stock queue is full",
                                                        env=("STOCK_QPS", "STOCK_QUEUE"),
                                                        metrics=("depot", "stock:9090", "stock"))})
RETRIED = _app("depot-retried", {}, api_peer={"env": "STOCK_ADDR", "required": True, "retry": Retry(
    3, 0.1, 0.05, 2.0, env=("STOCK_ATTEMPTS", "STOCK_TIMEOUT_MS", "STOCK_BACKOFF_MS", "STOCK_MULTIPLIER"),
    metrics=("depot", "api:8080", "api_stock"))})
GOLANG = _app("depot-go", {"runtime": GO})
CACHED = _app("depot-cached", {}, stock_ops=(Call("memcached", "get"), Call("mongodb", "find stock.items",
                                                                            on_miss="memcached")),
              stock_peers=(Peer("memcached", "memcached", env="MEMCACHED_ADDR", cache=Cache(keys=80.0)),
                           Peer("mongodb", "mongo", env="MONGO_ADDR")))
DISCOVERED = _app("depot-discovered", {"registry": Registry("consul"), "peers": (Peer("consul", "http", env="CONSUL_ADDR"),)},
                  {"registry": Registry("consul", "srv-stock"), "peers": (Peer("consul", "http", env="CONSUL_ADDR"),)},
                  api_peer={"discovery": True})
TRACED = _app("depot-traced", {}, tracer=JaegerGo(), trace_host="jaeger")
GAVE_UP = _app("depot-gave-up", {}, api_peer={"env": "STOCK_ADDR", "required": True, "retry": Retry(
    3, 0.1, 0.05, 2.0, gave_up="rpc error: code = Unavailable desc = stock dependency unavailable")})


def _two_calls(name: str, sequential: bool) -> AppGraph:
    """api asks stock, then price, for every request."""
    services = {
        "api": Service("api", "go", (8080,), {"GET /items": (Call("stock", "stock.Stock/Get"), Call("price", "price.Price/Get"))},
                       peers=(Peer("stock", "grpc", service="stock", env="STOCK_ADDR", required=True),
                              Peer("price", "grpc", service="price", env="PRICE_ADDR", required=True)),
                       cpu=0.0002, latency=0.001, sequential=sequential),
        "stock": Service("stock", "go", (9090,), {"stock.Stock/Get": ()}, cpu=0.0002, latency=0.002),
        "price": Service("price", "go", (9091,), {"price.Price/Get": ()}, cpu=0.0002, latency=0.002),
    }
    return graph_app(AppGraph(name, services, (Route("/items", "GET", "api", "GET /items", 1.0),),
                              lambda c: image_suffix(c, IMAGE) if any(
                                  e.get("name") == "APP" and e.get("value") == name for e in c.get("env") or []) else None))


SEQUENTIAL = _two_calls("depot-sequential", True)
CONCURRENT = _two_calls("depot-concurrent", False)


def _deployment(name: str, image: str, port: int, env: dict[str, str], memory: str = "") -> dict:
    container: dict[str, Any] = {"name": name, "image": image, "ports": [{"containerPort": port}],
                                 "env": [{"name": k, "value": v} for k, v in env.items()]}
    if memory:
        container["resources"] = {"limits": {"memory": memory}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container]}}}}


def _service(name: str, port: int) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": [{"port": port, "targetPort": port}]}}


def _load(rate: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "load"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "load"}},
                     "template": {"metadata": {"labels": {"app": "load"}},
                                  "spec": {"containers": [{"name": "wrk2", "image": "deathstarbench/wrk2-client:latest",
                                                           "command": ["/bin/sh", "-c"],
                                                           "args": [f"while true; do wrk -t 2 -c 20 -d 30s http://api:8080 "
                                                                    f"-R {rate}; sleep 1; done"]}]}}}}


def _deploy(cluster: SimCluster, app: AppGraph, rate: int = 200, api_env: dict[str, str] | None = None,
            stock_env: dict[str, str] | None = None, api_memory: str = "", extra: tuple[dict, ...] = (),
            stock_service: bool = True) -> None:
    cluster.apply([
        *extra,
        _deployment("stock", f"{IMAGE}:1.0.0-stock", 9090, {"APP": app.name, **(stock_env or {})}),
        *([_service("stock", 9090)] if stock_service else []),
        _deployment("api", f"{IMAGE}:1.0.0-api", 8080, {"APP": app.name, "STOCK_ADDR": "stock:9090", **(api_env or {})},
                    api_memory),
        _service("api", 8080), _load(rate)], NS)
    cluster.advance(120)


def _counter(cluster: SimCluster, metric: str, **match: str) -> float:
    return sum(v for (m, labels), v in cluster.workload.state["counters"].items()
               if m == metric and ("namespace", NS) in labels and all((k, val) in labels for k, val in match.items()))


def _window(cluster: SimCluster, seconds: float) -> float:
    """Share of the client's requests answered 200 during the next `seconds`."""
    before = {code: _counter(cluster, "wrk2_requests_total", code=code) for code in ("200", "500", "timeout", "connect_error")}
    cluster.advance(seconds)
    delta = {code: _counter(cluster, "wrk2_requests_total", code=code) - v for code, v in before.items()}
    total = sum(delta.values())
    return delta["200"] / total if total else 0.0


def _pod(cluster: SimCluster, prefix: str) -> dict:
    return next(p for p in cluster.store.list("pods", NS) if p["metadata"]["name"].startswith(prefix + "-")
                and not p["metadata"].get("deletionTimestamp"))


def _log(cluster: SimCluster, prefix: str) -> str:
    return cluster.read_container_log(NS, _pod(cluster, prefix)["metadata"]["name"])


@pytest.fixture
def cluster(sim_clusters: SimClusters) -> SimCluster:
    return sim_clusters.in_process(seed=5)


def test_a_token_bucket_rejects_what_its_queue_cannot_hold_and_its_env_raises_the_limit(cluster: SimCluster) -> None:
    _deploy(cluster, LIMITED)
    assert _window(cluster, 60) < 0.2  # 200 req/s offered to a bucket of 20/s with 50 queued
    assert _counter(cluster, "stock_requests_rejected_total") > _counter(cluster, "stock_requests_received_total") * 0.5
    assert "stock queue is full" in _log(cluster, "api")
    cluster.apply([_deployment("stock", f"{IMAGE}:1.0.0-stock", 9090, {"APP": LIMITED.name, "STOCK_QPS": "1000"})], NS)
    cluster.advance(60)
    assert _window(cluster, 60) > 0.99


def test_a_client_retries_its_own_deadline_with_backoff_and_amplifies_the_callees_load(cluster: SimCluster) -> None:
    _deploy(cluster, RETRIED)
    assert _window(cluster, 30) > 0.99
    requests, attempts = _counter(cluster, "api_requests_total"), _counter(cluster, "api_stock_attempts_total")
    assert attempts == pytest.approx(requests, rel=0.01)  # nothing fails: one attempt per request
    cluster.store.create("networkchaos.chaos-mesh.org", {
        "apiVersion": "chaos-mesh.org/v1alpha1", "kind": "NetworkChaos", "metadata": {"name": "slow", "namespace": NS},
        "spec": {"action": "delay", "mode": "all", "delay": {"latency": "80ms"},
                 "selector": {"namespaces": [NS], "labelSelectors": {"app": "stock"}}}})
    cluster.advance(30)
    before = (_counter(cluster, "api_requests_total"), _counter(cluster, "api_stock_attempts_total"),
              _counter(cluster, "traces_span_metrics_calls_total", service_name="stock"))
    assert _window(cluster, 60) < 0.2  # every attempt outlives its 100 ms deadline
    requests = _counter(cluster, "api_requests_total") - before[0]
    assert _counter(cluster, "api_stock_attempts_total") - before[1] == pytest.approx(3 * requests, rel=0.1)
    served = _counter(cluster, "traces_span_metrics_calls_total", service_name="stock") - before[2]
    assert served > 2.5 * requests  # the callee serves every retry
    assert _counter(cluster, "api_stock_timeouts_total") > 0
    assert "DeadlineExceeded" in _log(cluster, "api")
    cluster.apply([_deployment("api", f"{IMAGE}:1.0.0-api", 8080, {"APP": RETRIED.name, "STOCK_ADDR": "stock:9090",
                                                                   "STOCK_TIMEOUT_MS": "2000"})], NS)
    cluster.advance(60)
    assert _window(cluster, 60) > 0.99  # the env var gives every call time enough


def test_the_go_collector_off_without_a_memory_limit_grows_the_heap_until_the_oom_killer(cluster: SimCluster) -> None:
    _deploy(cluster, GOLANG, api_env={"GOGC": "off"}, api_memory="128Mi")
    statuses = (_pod(cluster, "api")["status"].get("containerStatuses") or [])
    assert any(((s.get("lastState") or {}).get("terminated") or {}).get("reason") == "OOMKilled" for s in statuses)
    # a soft limit just above the live heap: the collector keeps the heap under it by running often
    cluster.apply([_deployment("api", f"{IMAGE}:1.0.0-api", 8080, {"APP": GOLANG.name, "STOCK_ADDR": "stock:9090",
                                                                   "GOGC": "off", "GOMEMLIMIT": "16MiB"},
                               "128Mi")], NS)
    cluster.advance(120)
    pod = _pod(cluster, "api")
    assert all(s.get("restartCount", 0) == 0 for s in pod["status"]["containerStatuses"])
    rt = cluster.kubelet.runtime(pod)
    assert rt is not None
    c = next(iter(rt.containers.values()))
    assert c.memory <= 17 * 2**20
    assert c.instance["gc_cost"] > 0  # more CPU per request than GOGC=100 costs


def test_a_malformed_gomemlimit_stops_the_runtime_before_main(cluster: SimCluster) -> None:
    _deploy(cluster, GOLANG, api_env={"GOMEMLIMIT": "lots"})
    pod = _pod(cluster, "api")
    assert "malformed GOMEMLIMIT" in cluster.read_container_log(NS, pod["metadata"]["name"], previous=True)


def test_a_cache_in_front_of_a_store_sends_only_its_misses_to_the_store(cluster: SimCluster) -> None:
    stores = (_deployment("mongodb", "mongo:4.4.6", 27017, {}), _service("mongodb", 27017),
              _deployment("memcached", "memcached:1.6.7", 11211, {}), _service("memcached", 11211))
    _deploy(cluster, CACHED, stock_env={"MEMCACHED_ADDR": "memcached:11211", "MONGO_ADDR": "mongodb:27017"}, extra=stores)

    def mongo_cpu(seconds: float) -> float:
        rt = cluster.kubelet.runtime(_pod(cluster, "mongodb"))
        assert rt is not None
        c = next(iter(rt.containers.values()))
        before = c.cpu_seconds
        cluster.advance(seconds)
        return c.cpu_seconds - before

    warm = mongo_cpu(30)
    memcached = cluster.kubelet.runtime(_pod(cluster, "memcached"))
    assert memcached is not None
    assert next(iter(memcached.containers.values())).instance["keys"]["stock"] == pytest.approx(80.0)
    cluster.store.delete("pods", NS, _pod(cluster, "memcached")["metadata"]["name"])
    cluster.advance(5)
    cold = mongo_cpu(5) * 6  # a new memcached holds nothing: every read goes to MongoDB until it warms
    assert cold > warm * 3
    assert _window(cluster, 30) > 0.99
    cluster.store.delete("deployments.apps", NS, "mongodb")
    cluster.advance(30)
    assert _window(cluster, 30) > 0.99  # with a warm cache a dead store costs nothing


def test_callers_find_peers_through_consul_and_keep_their_last_answer(cluster: SimCluster) -> None:
    consul = (_deployment("consul", "hashicorp/consul:1.18", 8500, {}), _service("consul", 8500))
    _deploy(cluster, DISCOVERED, api_env={"CONSUL_ADDR": "consul:8500"}, stock_env={"CONSUL_ADDR": "consul:8500"},
            extra=consul, stock_service=False)
    assert _window(cluster, 60) > 0.99  # no Service in front of stock: only Consul knows where it is
    cluster.store.delete("deployments.apps", NS, "consul")
    cluster.advance(30)
    assert _window(cluster, 60) > 0.99  # the pod dials what it last heard
    cluster.store.delete("pods", NS, _pod(cluster, "api")["metadata"]["name"])
    cluster.advance(30)
    assert _window(cluster, 60) < 0.01  # a new pod has heard nothing
    assert "there is no address available" in _log(cluster, "api")


def test_a_declared_tracer_tags_spans_its_own_way_and_its_sampling_can_be_switched_off(cluster: SimCluster) -> None:
    _deploy(cluster, TRACED, extra=(_deployment("jaeger", "jaegertracing/all-in-one:1.57", 6831, {}), _service("jaeger", 6831)))
    traces = cluster.obs.traces.find(TraceQuery(service="api"))
    servers = [s for tr in traces for s in tr.spans if ("span.kind", "string", "server") in s.tags]
    assert servers and all(any(key == "component" for key, _, _ in s.tags) for s in servers)
    assert not any(key == "otel.status_code" for s in servers for key, _, _ in s.tags)
    cluster.apply([_deployment("api", f"{IMAGE}:1.0.0-api", 8080, {"APP": TRACED.name, "STOCK_ADDR": "stock:9090",
                                                                   "JAEGER_SAMPLE_RATIO": "0"})], NS)
    cluster.advance(60)
    count = cluster.obs.traces.span_count
    cluster.advance(60)
    assert cluster.obs.traces.span_count == count


def test_a_client_whose_retries_ran_out_on_their_deadline_says_what_it_declared(cluster: SimCluster) -> None:
    _deploy(cluster, GAVE_UP)
    cluster.store.create("networkchaos.chaos-mesh.org", {
        "apiVersion": "chaos-mesh.org/v1alpha1", "kind": "NetworkChaos", "metadata": {"name": "slow", "namespace": NS},
        "spec": {"action": "delay", "mode": "all", "delay": {"latency": "80ms"},
                 "selector": {"namespaces": [NS], "labelSelectors": {"app": "stock"}}}})
    cluster.advance(30)
    assert _window(cluster, 60) < 0.2
    log = _log(cluster, "api")
    assert "stock dependency unavailable" in log and "DeadlineExceeded" not in log


@pytest.mark.parametrize(("app", "price_share"), [(SEQUENTIAL, 0.01), (CONCURRENT, 0.99)])
def test_a_sequential_handler_makes_no_later_call_once_an_earlier_one_failed(cluster: SimCluster, app: AppGraph,
                                                                              price_share: float) -> None:
    cluster.apply([_deployment("price", f"{IMAGE}:1.0.0-price", 9091, {"APP": app.name}), _service("price", 9091)], NS)
    _deploy(cluster, app, api_env={"PRICE_ADDR": "price:9091"})
    cluster.store.delete("deployments.apps", NS, "stock")
    cluster.advance(30)
    requests = _counter(cluster, "traces_span_metrics_calls_total", service_name="api")
    priced = _counter(cluster, "traces_span_metrics_calls_total", service_name="price")
    assert _window(cluster, 60) < 0.01  # every request needs stock
    requests = _counter(cluster, "traces_span_metrics_calls_total", service_name="api") - requests
    priced = _counter(cluster, "traces_span_metrics_calls_total", service_name="price") - priced
    if app.services["api"].sequential:
        assert priced < requests * price_share  # the handler returned at stock's error
    else:
        assert priced > requests * price_share  # price is asked all the same
