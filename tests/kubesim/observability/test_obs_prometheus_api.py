"""The Prometheus HTTP API's endpoints, parameters, envelopes and errors, over real HTTP."""

from __future__ import annotations

import pytest

from kubesim.clock import VirtualClock
from kubesim.observability import Observability

from .conftest import T0, Client


@pytest.fixture
def data(obs: Observability) -> None:
    for i in range(21):
        t = T0 + 15 * i
        obs.tsdb.append("up", {"job": "kube-state-metrics", "instance": "10.0.0.7:8080"}, t, 1.0)
        obs.tsdb.append("up", {"job": "node-exporter", "instance": "10.0.0.5:9100"}, t, 0.0 if i > 10 else 1.0)
        obs.tsdb.append("node_load1", {"job": "node-exporter", "instance": "10.0.0.5:9100"}, t, 0.5 + i / 10)


def test_query_defaults_to_the_cluster_clock(prom: Client, data: None, clock: VirtualClock) -> None:
    clock.set(T0 + 300)
    status, body = prom.get("/api/v1/query", query="node_load1")
    assert status == 200
    assert body == {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"__name__": "node_load1", "instance": "10.0.0.5:9100", "job": "node-exporter"},
         "value": [T0 + 300, "2.5"]}]}}


def test_query_time_as_rfc3339_and_post_form(prom: Client, data: None) -> None:
    _, by_unix = prom.get("/api/v1/query", query="node_load1", time=str(T0 + 150))
    _, by_rfc = prom.get("/api/v1/query", query="node_load1", time="2026-01-05T09:02:30Z")
    status, by_post = prom.post("/api/v1/query", query="node_load1", time="2026-01-05T09:02:30.000Z")
    assert status == 200
    assert by_unix == by_rfc == by_post
    assert by_unix["data"]["result"][0]["value"] == [T0 + 150, "1.5"]
    # fractional times keep millisecond precision
    _, frac = prom.get("/api/v1/query", query="time()", time=str(T0 + 0.25))
    assert frac["data"]["result"] == [T0 + 0.25, "1767603600.25"]


def test_query_range(prom: Client, data: None) -> None:
    status, body = prom.get("/api/v1/query_range", query="node_load1", start=T0, end="2026-01-05T09:01:00Z", step="30s")
    assert status == 200
    assert body["data"]["resultType"] == "matrix"
    (series,) = body["data"]["result"]
    assert series["values"] == [[T0, "0.5"], [T0 + 30, "0.7"], [T0 + 60, "0.9"]]
    status, body = prom.post("/api/v1/query_range", query="sum(up)", start=T0, end=T0 + 300, step="150")
    assert [v for _, v in body["data"]["result"][0]["values"]] == ["2", "2", "1"]
    assert body["data"]["result"][0]["metric"] == {}


@pytest.mark.parametrize(("path", "params", "fragment"), [
    ("/api/v1/query", {"query": "sum(rate(x[5m])"}, 'invalid parameter "query": parse error'),
    ("/api/v1/query", {"query": ""}, "no expression found in input"),
    ("/api/v1/query", {"query": "up", "time": "yesterday"}, 'invalid parameter "time": cannot parse "yesterday" to a valid timestamp'),
    ("/api/v1/query_range", {"query": "up", "end": "1", "step": "1"}, 'invalid parameter "start"'),
    ("/api/v1/query_range", {"query": "up", "start": "1", "end": "2", "step": "fast"}, 'invalid parameter "step"'),
    ("/api/v1/query_range", {"query": "up", "start": "10", "end": "2", "step": "1"}, "end timestamp must not be before start time"),
    ("/api/v1/query_range", {"query": "up", "start": "0", "end": "100000", "step": "1"}, "exceeded maximum resolution of 11,000 points"),
    ("/api/v1/query_range", {"query": "up[5m]", "start": "0", "end": "10", "step": "1"}, "invalid expression type"),
    ("/api/v1/series", {}, "no match[] parameter provided"),
    ("/api/v1/query", {"query": "rate(up)"}, "expected type matrix"),
])
def test_bad_requests_are_400_bad_data(prom: Client, path: str, params: dict[str, str], fragment: str) -> None:
    status, body = prom.get(path, **params)
    assert status == 400
    assert body["status"] == "error" and body["errorType"] == "bad_data"
    assert fragment in body["error"]


def test_series_labels_and_values(prom: Client, data: None) -> None:
    status, body = prom.get("/api/v1/series", **{"match[]": ['up{job="node-exporter"}', "node_load1"]})
    assert status == 200
    assert body["data"] == [
        {"__name__": "node_load1", "instance": "10.0.0.5:9100", "job": "node-exporter"},
        {"__name__": "up", "instance": "10.0.0.5:9100", "job": "node-exporter"},
    ]
    # outside the time range there is nothing
    _, body = prom.get("/api/v1/series", **{"match[]": "up", "start": T0 + 10_000, "end": T0 + 20_000})
    assert body["data"] == []
    _, body = prom.get("/api/v1/labels")
    assert body == {"status": "success", "data": ["__name__", "instance", "job"]}
    _, body = prom.get("/api/v1/label/__name__/values")
    assert body["data"] == ["node_load1", "up"]
    _, body = prom.get("/api/v1/label/job/values", **{"match[]": "node_load1"})
    assert body["data"] == ["node-exporter"]
    status, body = prom.post("/api/v1/labels", **{"match[]": "node_load1"})
    assert status == 200 and "instance" in body["data"]


def test_buildinfo_health_targets_and_404(prom: Client, data: None) -> None:
    status, body = prom.get("/api/v1/status/buildinfo")
    assert status == 200 and body["data"]["version"].count(".") == 2
    status, body = prom.get("/-/healthy")
    assert status == 200 and "Healthy" in body
    _, body = prom.get("/api/v1/targets")
    health = {t["labels"]["job"]: t["health"] for t in body["data"]["activeTargets"]}
    assert health == {"kube-state-metrics": "up", "node-exporter": "down"}
    status, _ = prom.get("/api/v1/nope")
    assert status == 404


def test_range_vector_instant_query_is_a_matrix(prom: Client, data: None) -> None:
    _, body = prom.get("/api/v1/query", query="node_load1[30s]", time=T0 + 30)
    assert body["data"]["resultType"] == "matrix"
    assert body["data"]["result"][0]["values"] == [[T0, "0.5"], [T0 + 15, "0.6"], [T0 + 30, "0.7"]]


def test_metadata_infers_types(prom: Client, obs: Observability) -> None:
    obs.tsdb.append("http_requests_total", {}, T0, 1.0)
    obs.tsdb.append("lat_seconds_bucket", {"le": "+Inf"}, T0, 1.0)
    obs.tsdb.append("lat_seconds_count", {}, T0, 1.0)
    obs.tsdb.append("node_load1", {}, T0, 1.0)
    _, body = prom.get("/api/v1/metadata")
    assert {k: v[0]["type"] for k, v in body["data"].items()} == {
        "http_requests_total": "counter", "lat_seconds": "histogram", "node_load1": "gauge"}
    _, body = prom.get("/api/v1/metadata", metric="node_load1")
    assert list(body["data"]) == ["node_load1"]
