"""social-network (DeathStarBench) on the emulated cluster as a call graph, over the real protocols:
the farm's manifests deployed through the Kubernetes API, causes planted with a stock kubectl, symptoms
read from Prometheus, Loki and Jaeger as an agent would."""

from __future__ import annotations

import functools
import json
import time

import pytest

from clusters.emulated import SimHandle
from farm.pytest_plugin import SimClusters
from tests.kubesim.apptools import NEEDS_KUBECTL, get, prom, run_kubectl

NS = "social-network"
pytestmark = NEEDS_KUBECTL
kubectl = functools.partial(run_kubectl, namespace=NS)


@pytest.fixture
def sim(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served(NS, seed=7)


def wrk2(handle: object, by: str = "code", where: str = "") -> dict[str, float]:
    """wrk2's request rate over the last 2 minutes, by `by`."""
    return prom(handle, f'sum by ({by}) (rate(wrk2_requests_total{{namespace="{NS}"{where}}}[2m]))')


def success(handle: object, where: str = "") -> float:
    codes = wrk2(handle, where=where)
    return codes.get("200", 0.0) / sum(codes.values())


def logs(handle: object, selector: str, minutes: int = 5) -> list[str]:
    now = handle.now() if hasattr(handle, "now") else time.time()  # type: ignore[attr-defined]
    body = get(handle, "loki", "/loki/api/v1/query_range", query=selector, start=str(int((now - minutes * 60) * 1e9)),
               end=str(int(now * 1e9)), limit="1000")
    return [line for stream in body["data"]["result"] for _, line in stream["values"]]


def pod_of(handle: object, deployment: str) -> str:
    table = kubectl(handle, "get", "pods", "-o", "name")
    return next(line.split("/", 1)[1] for line in table.splitlines() if line.split("/", 1)[1].startswith(deployment + "-"))


def test_deployed_network_serves_the_mixed_workload(sim: object) -> None:
    table = kubectl(sim, "get", "pods")
    assert table.count("Running") == 28 and "CrashLoopBackOff" not in table
    assert success(sim) > 0.99
    by_endpoint = wrk2(sim, by="endpoint")
    # DeathStarBench's mixed workload at 100 req/s: 60 % home timelines, 30 % user timelines, 10 % posts
    assert by_endpoint["/wrk2-api/home-timeline/read"] == pytest.approx(60, rel=0.05)
    assert by_endpoint["/wrk2-api/user-timeline/read"] == pytest.approx(30, rel=0.05)
    assert by_endpoint["/wrk2-api/post/compose"] == pytest.approx(10, rel=0.05)
    served = prom(sim, f'sum by (service_name) (rate(traces_span_metrics_calls_total{{namespace="{NS}"}}[2m]))')
    # every post fans out to text (→ url-shorten, user-mention), user, media and unique-id, then three writes
    for service in ("text-service", "url-shorten-service", "user-mention-service", "media-service",
                    "unique-id-service", "user-timeline-service"):
        assert served[service] >= 10 * 0.9, (service, served)
    # post-storage reads posts for every timeline read and stores every post
    assert served["post-storage-service"] > served["home-timeline-service"]
    assert "Starting the compose-post-service server..." in kubectl(sim, "logs", "deploy/compose-post-service")


def test_a_missing_service_config_entry_stops_the_service_with_its_json_error(sim: object) -> None:
    cm = json.loads(kubectl(sim, "get", "configmap", "home-timeline-service", "-o", "json"))
    config = json.loads(cm["data"]["service-config.json"])
    del config["post-storage-service"]
    patch = json.dumps({"data": {"service-config.json": json.dumps(config, indent=2)}})
    kubectl(sim, "patch", "configmap", "home-timeline-service", "--type", "merge", "-p", patch)
    sim.advance(30)  # type: ignore[attr-defined]
    assert success(sim) > 0.99  # the running process read its config at start
    kubectl(sim, "rollout", "restart", "deployment/home-timeline-service")
    sim.advance(120)  # type: ignore[attr-defined]
    table = kubectl(sim, "get", "pods", "-l", "service=home-timeline-service")
    assert "CrashLoopBackOff" in table or "Error" in table
    pod = next(line.split()[0] for line in table.splitlines()[1:] if "1/1" not in line)
    previous = kubectl(sim, "logs", pod, "--previous")
    assert "terminate called after throwing an instance of 'nlohmann::detail::type_error'" in previous
    assert "[json.exception.type_error.302] type must be number, but is null" in previous
    status = json.loads(kubectl(sim, "get", "pod", pod, "-o", "json"))["status"]["containerStatuses"][0]
    assert status["lastState"]["terminated"]["exitCode"] == 134  # SIGABRT from std::terminate
    # the old pod keeps serving until the rollout can replace it: reads still succeed
    assert success(sim, ',endpoint="/wrk2-api/home-timeline/read"') > 0.95


def test_a_wrong_post_storage_port_in_compose_config_fails_store_post(sim: object) -> None:
    cm = json.loads(kubectl(sim, "get", "configmap", "compose-post-service", "-o", "json"))
    config = json.loads(cm["data"]["service-config.json"])
    config["post-storage-service"]["port"] = 9091
    patch = json.dumps({"data": {"service-config.json": json.dumps(config, indent=2)}})
    kubectl(sim, "patch", "configmap", "compose-post-service", "--type", "merge", "-p", patch)
    kubectl(sim, "rollout", "restart", "deployment/compose-post-service")
    sim.advance(180)  # type: ignore[attr-defined]
    assert success(sim, ',endpoint="/wrk2-api/post/compose"') < 0.05
    assert success(sim, ',endpoint="/wrk2-api/home-timeline/read"') > 0.99  # reads never go through compose-post
    compose = logs(sim, f'{{namespace="{NS}", pod=~"compose-post-service-.*"}}')
    assert any("Failed to connect post-storage-client" in line for line in compose), compose[-5:]
    nginx = logs(sim, f'{{namespace="{NS}", pod=~"nginx-thrift-.*"}} |= "compost_post failure"')
    assert nginx and "connect() failed" in nginx[-1]


def test_mongod_requiring_tls_without_a_certificate_breaks_post_storage(sim: object) -> None:
    patch = json.dumps({"data": {"mongod.conf": "net:\n  tls:\n    mode: requireTLS\n"}})
    kubectl(sim, "patch", "configmap", "post-storage-mongodb", "--type", "merge", "-p", patch)
    # its replacement reads the new mongod.conf; the cluster clock stands still until advanced,
    # so kubectl must not wait for the graceful deletion to end
    kubectl(sim, "delete", "pod", "-l", "service=post-storage-mongodb", "--wait=false")
    sim.advance(180)  # type: ignore[attr-defined]
    table = kubectl(sim, "get", "pods", "-l", "service=post-storage-mongodb")
    assert "CrashLoopBackOff" in table or "Error" in table
    pod = next(line.split()[0] for line in table.splitlines()[1:] if "1/1" not in line)
    assert "need tlsCertificateKeyFile or certificateSelector when TLS is enabled" in kubectl(sim, "logs", pod, "--previous")
    storage = logs(sim, f'{{namespace="{NS}", pod=~"post-storage-service-.*"}}')
    assert any("No suitable servers found" in line and "post-storage-mongodb:27017" in line for line in storage)
    assert any("Error: Failed to insert post to MongoDB" in line for line in storage)
    codes = wrk2(sim)
    assert codes.get("500", 0) > 10  # every post (StorePost) and the timeline reads that miss memcached
    nginx = logs(sim, f'{{namespace="{NS}", pod=~"nginx-thrift-.*"}}')
    assert any("Get home-timeline failure: No suitable servers found" in line for line in nginx)
    errors = prom(sim, f'sum by (service_name) (rate(traces_span_metrics_calls_total{{namespace="{NS}",'
                       f'status_code="STATUS_CODE_ERROR"}}[2m]))')
    assert errors.get("post-storage-service", 0) > 0 and errors.get("nginx-thrift", 0) > 0
    assert errors.get("url-shorten-service", 0) == 0  # not on the failing path
    # what an SRE does: put mongod.conf back and restart mongod
    kubectl(sim, "patch", "configmap", "post-storage-mongodb", "--type", "merge", "-p",
            json.dumps({"data": {"mongod.conf": "net:\n  tls:\n    mode: disabled\n"}}))
    kubectl(sim, "rollout", "restart", "deployment/post-storage-mongodb")
    sim.advance(240)  # type: ignore[attr-defined]
    assert success(sim) > 0.99


def test_traces_follow_the_thrift_call_graph(sim: object) -> None:
    sim.advance(60)  # type: ignore[attr-defined]  # fresh traces: a restore never turns the clock back
    traces = get(sim, "jaeger", "/api/traces", service="nginx-thrift", operation="POST /wrk2-api/post/compose",
                 lookback="5m", limit="5")["data"]
    assert traces
    trace = traces[0]
    spans = {s["spanID"]: s for s in trace["spans"]}

    def service(span: dict) -> str:
        return trace["processes"][span["processID"]]["serviceName"]

    edges = set()
    for s in trace["spans"]:
        for ref in s["references"]:
            parent = spans.get(ref["spanID"])
            grand = spans.get(parent["references"][0]["spanID"]) if parent and parent["references"] else None
            # server span ← client span ← caller's server span
            if parent is not None and grand is not None and service(grand) != service(s):
                edges.add((service(grand), service(s)))
    for edge in (("nginx-thrift", "compose-post-service"), ("compose-post-service", "text-service"),
                 ("text-service", "url-shorten-service"), ("text-service", "user-mention-service"),
                 ("compose-post-service", "post-storage-service"), ("compose-post-service", "home-timeline-service"),
                 ("home-timeline-service", "social-graph-service")):
        assert edge in edges, (edge, sorted(edges))
    names = {s["operationName"] for s in trace["spans"]}
    assert {"compose_post_server", "compose_text_server", "compose_urls_server", "store_post_server"} <= names
    reads = get(sim, "jaeger", "/api/traces", service="home-timeline-service", lookback="5m", limit="5")["data"]
    ops = {s["operationName"] for t in reads for s in t["spans"]}
    assert {"read_home_timeline_server", "post_storage_read_posts_server"} <= ops


def shift_user_service_clock(sim: object, offset: str) -> None:
    """Chaos Mesh's TimeChaos on user-service alone, given three minutes of cluster time to act."""
    chaos = {"apiVersion": "chaos-mesh.org/v1alpha1", "kind": "TimeChaos",
             "metadata": {"name": "user-service-clock", "namespace": NS},
             "spec": {"mode": "all", "selector": {"namespaces": [NS], "labelSelectors": {"service": "user-service"}},
                      "timeOffset": offset}}
    kubectl(sim, "apply", "--validate=false", "-f", "-", stdin=json.dumps(chaos))
    sim.advance(180)  # type: ignore[attr-defined]


def test_login_tokens_signed_by_a_clock_two_hours_behind_are_rejected(sim: object) -> None:
    # The tokens user-service signs carry a timestamp two hours old,
    # and the /api Lua scripts compare timestamp + ttl (3600 s) with nginx-thrift's own clock.
    shift_user_service_clock(sim, "-2h")
    assert success(sim, ',endpoint="/api/home-timeline/read"') < 0.05
    assert success(sim, ',endpoint="/api/user/login"') > 0.99  # logins themselves succeed
    assert success(sim, ',endpoint="/wrk2-api/home-timeline/read"') > 0.99  # no token on the wrk2 API
    kubectl(sim, "delete", "timechaos", "user-service-clock", "--wait=false")  # the controller lifts its finalizer
    sim.advance(180)  # type: ignore[attr-defined]
    assert success(sim, ',endpoint="/api/home-timeline/read"') > 0.99


def test_a_clock_ahead_leaves_tokens_valid(sim: object) -> None:
    shift_user_service_clock(sim, "2h")
    assert success(sim) > 0.99  # they only live longer than they should
