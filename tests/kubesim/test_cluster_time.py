"""Cluster time as a real cluster's: it starts at the host's clock (so Prometheus, Loki and Jaeger
queries an SRE builds from `date` find data), a seed decides everything relative to the start,
and node heartbeats and kubelet leases keep advancing. Queries go over HTTP to the served
cluster (from the plugin), as an agent's tools send them."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from datetime import UTC, datetime

import pytest

from clusters.kube import Kube
from kubesim.clock import FIXED_EPOCH
from kubesim.cluster import BOOTSTRAP_SECONDS, SimCluster
from clusters.emulated import SimHandle
from farm.pytest_plugin import SimClusters

NS = "hotel-reservation"


def _parse(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(UTC).timestamp()


@pytest.fixture(scope="module")
def start() -> float:
    # Ten minutes before the host's now, so that catching up below gives a telemetry history
    # that ends at the host's clock, as a live cluster's does.
    return time.time() - 600


@pytest.fixture
def served(sim_clusters: SimClusters, start: float) -> SimHandle:
    return sim_clusters.served(NS, seed=11, start=start, warmup=0)


def get(url: str, **params: str) -> dict:
    req = urllib.request.Request(url + ("?" + urllib.parse.urlencode(params) if params else ""))
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def catch_up(cluster: SimHandle) -> None:
    """Advance cluster time to the host's clock, as the live clock does."""
    cluster.advance(max(0.0, time.time() - cluster.now()))


def test_a_cluster_starts_at_the_hosts_clock_unless_given_a_start() -> None:
    before = time.time()
    cluster = SimClusters.new(seed=0)
    # Built, it reads the host's clock; its bootstrap ran in the 30 s before.
    assert before - 1.0 <= cluster.now() <= time.time()
    assert cluster.clock.start == cluster.now() - BOOTSTRAP_SECONDS
    assert SimClusters.new(seed=0, start=FIXED_EPOCH).now() == FIXED_EPOCH


def test_a_seed_decides_the_same_history_relative_to_any_start() -> None:
    a = SimClusters.new(NS, seed=5, settle=60, start=FIXED_EPOCH)
    b = SimClusters.new(NS, seed=5, settle=60, start=FIXED_EPOCH + 86400 * 300.25)

    def history(cluster: SimCluster) -> list[tuple[str, float]]:
        start = cluster.clock.start
        return sorted((p["metadata"]["name"], _parse(p["metadata"]["creationTimestamp"]) - start)
                      for p in cluster.store.list("pods", NS))

    assert history(a) == history(b) and len(history(a)) > 10


def test_prometheus_loki_and_jaeger_answer_queries_built_from_the_hosts_date(served: SimHandle) -> None:
    catch_up(served)
    ep = served.endpoints.model_dump()
    now = time.time()
    # `query=up` at the default time (now), and `time=$(date +%s)` as an SRE types it.
    for params in ({}, {"time": str(int(now))}):
        result = get(ep["prometheus"] + "/api/v1/query", query='kube_pod_status_ready{namespace="hotel-reservation"}', **params)
        assert result["data"]["result"], params
    rng = get(ep["prometheus"] + "/api/v1/query_range", query="sum(rate(container_cpu_usage_seconds_total[1m]))",
              start=str(int(now - 300)), end=str(int(now)), step="30")
    assert len(rng["data"]["result"][0]["values"]) >= 8
    logs = get(ep["loki"] + "/loki/api/v1/query_range", query=f'{{namespace="{NS}"}}',
               start=str(int((now - 600) * 1e9)), end=str(int(now * 1e9)), limit="50")
    assert sum(len(s["values"]) for s in logs["data"]["result"]) == 50
    traces = get(ep["jaeger"] + "/api/traces", service="frontend", start=str(int((now - 600) * 1e6)),
                 end=str(int(now * 1e6)), limit="5")
    assert traces["data"], "no trace of the last 10 minutes"


def test_node_heartbeats_and_leases_advance_and_stop_with_the_kubelet(served: SimHandle) -> None:
    cluster = served
    kube = Kube(cluster.api_client())

    def ready_heartbeat(node: str) -> float:
        obj = kube.request("GET", f"/api/v1/nodes/{node}")
        return _parse(next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")["lastHeartbeatTime"])

    def renewed(node: str) -> float:
        lease = kube.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}")
        return _parse(lease["spec"]["renewTime"])

    cluster.advance(700)
    now = cluster.now()
    for node in ("sim-control-plane", "sim-worker", "sim-worker2"):
        assert now - 300 - 1 <= ready_heartbeat(node) <= now
        assert now - 10 - 1 <= renewed(node) <= now
    kube.request("POST", "/apis/sim.farm.io/v1alpha1/nodefaults",
                 {"apiVersion": "sim.farm.io/v1alpha1", "kind": "NodeFault", "metadata": {"name": "stop-kubelet"},
                  "spec": {"nodeName": "sim-worker2", "kubeletStopped": True}})
    stopped = cluster.now()
    cluster.advance(400)
    assert renewed("sim-worker2") <= stopped
    assert ready_heartbeat("sim-worker2") <= stopped
    assert renewed("sim-worker") >= cluster.now() - 11
