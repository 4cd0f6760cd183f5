"""The Jaeger query API over real HTTP: services, operations, search by service, operation,
tags, time window, lookback and duration, trace by id, dependencies, and the error envelope."""

from __future__ import annotations

import json

import pytest

from kubesim.clock import VirtualClock
from kubesim.observability import Observability

from .conftest import T0, Client

US = 1_000_000


def proc(service: str) -> dict:
    return {"serviceName": service, "tags": [{"key": "hostname", "type": "string", "value": f"{service}-pod"},
                                              {"key": "jaeger.version", "type": "string", "value": "Go-2.30.0"}]}


def request_trace(n: int, start: float, error: bool = False, slow: bool = False) -> list[dict]:
    """frontend → search → geo, and frontend → profile; error marks the geo span."""
    tid = f"{n:032x}"
    t = int(start * US)
    root = {"traceID": tid, "spanID": f"{n:08x}00000001", "operationName": "HTTP GET /hotels", "references": [],
            "startTime": t, "duration": 250_000 if slow else 12_000, "flags": 1,
            "tags": [{"key": "span.kind", "type": "string", "value": "server"},
                     {"key": "http.status_code", "type": "int64", "value": 500 if error else 200},
                     {"key": "sampler.type", "type": "string", "value": "probabilistic"}],
            "logs": [], "process": proc("frontend")}
    search = {"traceID": tid, "spanID": f"{n:08x}00000002", "operationName": "/search.Search/Nearby",
              "references": [{"refType": "CHILD_OF", "traceID": tid, "spanID": root["spanID"]}],
              "startTime": t + 100, "duration": 8_000, "tags": [{"key": "span.kind", "type": "string", "value": "server"}],
              "logs": [], "process": proc("search")}
    geo_tags = [{"key": "span.kind", "type": "string", "value": "server"}]
    logs = []
    if error:
        geo_tags.append({"key": "error", "type": "bool", "value": True})
        logs = [{"timestamp": t + 300, "fields": [{"key": "event", "type": "string", "value": "error"},
                                                   {"key": "message", "type": "string", "value": "no such host"}]}]
    geo = {"traceID": tid, "spanID": f"{n:08x}00000003", "operationName": "/geo.Geo/Nearby",
           "references": [{"refType": "CHILD_OF", "traceID": tid, "spanID": search["spanID"]}],
           "startTime": t + 200, "duration": 3_000, "tags": geo_tags, "logs": logs, "process": proc("geo")}
    profile = {"traceID": tid, "spanID": f"{n:08x}00000004", "operationName": "/profile.Profile/GetProfiles",
               "references": [{"refType": "CHILD_OF", "traceID": tid, "spanID": root["spanID"]}],
               "startTime": t + 9_000, "duration": 2_000,
               "tags": [{"key": "span.kind", "type": "string", "value": "client"}], "logs": [], "process": proc("frontend")}
    return [root, search, geo, profile]


@pytest.fixture
def traces(obs: Observability, clock: VirtualClock) -> None:
    for n in range(1, 11):
        obs.traces.add(request_trace(n, T0 + 60 * n, error=n in (3, 7), slow=n == 5))
    clock.set(T0 + 3600)


def ids(body: dict) -> list[str]:
    assert body["errors"] is None
    return [t["traceID"] for t in body["data"]]


def test_services_and_operations(jaeger: Client, traces: None) -> None:
    status, body = jaeger.get("/api/services")
    assert status == 200
    assert body == {"data": ["frontend", "geo", "search"], "total": 3, "limit": 0, "offset": 0, "errors": None}
    _, body = jaeger.get("/api/services/frontend/operations")
    assert body["data"] == ["/profile.Profile/GetProfiles", "HTTP GET /hotels"]
    _, body = jaeger.get("/api/operations", service="frontend")
    assert body["data"] == [{"name": "/profile.Profile/GetProfiles", "spanKind": "client"},
                            {"name": "HTTP GET /hotels", "spanKind": "server"}]
    _, body = jaeger.get("/api/operations", service="frontend", spanKind="server")
    assert body["data"] == [{"name": "HTTP GET /hotels", "spanKind": "server"}] and body["total"] == 1


def test_search_by_service_newest_first_with_limit(jaeger: Client, traces: None) -> None:
    _, body = jaeger.get("/api/traces", service="geo", limit=3)
    assert ids(body) == [f"{n:032x}" for n in (10, 9, 8)]
    _, body = jaeger.get("/api/traces", service="geo")
    assert len(body["data"]) == 10


def test_search_by_operation_and_tags(jaeger: Client, traces: None) -> None:
    _, body = jaeger.get("/api/traces", service="frontend", operation="/profile.Profile/GetProfiles", limit=20)
    assert len(body["data"]) == 10
    _, body = jaeger.get("/api/traces", service="geo", tags=json.dumps({"error": "true"}))
    assert ids(body) == [f"{7:032x}", f"{3:032x}"]
    _, body = jaeger.get("/api/traces", service="frontend", tag="http.status_code:500")
    assert ids(body) == [f"{7:032x}", f"{3:032x}"]
    # a span log field matches like a tag; process tags match too
    _, body = jaeger.get("/api/traces", service="geo", tags=json.dumps({"message": "no such host"}))
    assert len(body["data"]) == 2
    _, body = jaeger.get("/api/traces", service="search", tag="hostname:search-pod")
    assert len(body["data"]) == 10
    # tags must match on a span of the searched service
    _, body = jaeger.get("/api/traces", service="search", tags=json.dumps({"error": "true"}))
    assert body["data"] == []


def test_search_by_time_window_lookback_and_duration(jaeger: Client, traces: None) -> None:
    _, body = jaeger.get("/api/traces", service="frontend", start=int((T0 + 100) * US), end=int((T0 + 250) * US))
    assert ids(body) == [f"{4:032x}", f"{3:032x}", f"{2:032x}"]
    _, body = jaeger.get("/api/traces", service="frontend", lookback="1h", end=int((T0 + 600) * US))
    assert len(body["data"]) == 10
    _, body = jaeger.get("/api/traces", service="frontend", lookback="5m", end=int((T0 + 600) * US))
    assert ids(body) == [f"{n:032x}" for n in (10, 9, 8, 7, 6, 5)]
    _, body = jaeger.get("/api/traces", service="frontend", minDuration="100ms")
    assert ids(body) == [f"{5:032x}"]
    _, body = jaeger.get("/api/traces", service="frontend", operation="HTTP GET /hotels", maxDuration="20ms")
    assert len(body["data"]) == 9


def test_trace_model(jaeger: Client, traces: None) -> None:
    status, body = jaeger.get(f"/api/traces/{3:032x}")
    assert status == 200 and body["errors"] is None
    (trace,) = body["data"]
    assert trace["traceID"] == f"{3:032x}" and trace["warnings"] is None
    assert set(trace["processes"]) == {"p1", "p2", "p3"}
    by_pid = {pid: p["serviceName"] for pid, p in trace["processes"].items()}
    assert sorted(by_pid.values()) == ["frontend", "geo", "search"]
    root = next(s for s in trace["spans"] if not s["references"])
    assert by_pid[root["processID"]] == "frontend"
    assert root["operationName"] == "HTTP GET /hotels" and root["startTime"] == int((T0 + 180) * US)
    assert set(root) == {"traceID", "spanID", "flags", "operationName", "references", "startTime", "duration",
                         "tags", "logs", "processID", "warnings"}
    assert "process" not in root
    geo = next(s for s in trace["spans"] if s["operationName"] == "/geo.Geo/Nearby")
    assert {"key": "error", "type": "bool", "value": True} in geo["tags"]
    assert geo["logs"][0]["fields"][1]["value"] == "no such host"


def test_trace_by_id_errors(jaeger: Client, traces: None) -> None:
    status, body = jaeger.get(f"/api/traces/{999:032x}")
    assert status == 404
    assert body == {"data": None, "total": 0, "limit": 0, "offset": 0, "errors": [{"code": 404, "msg": "trace not found"}]}
    status, body = jaeger.get("/api/traces/not-hex")
    assert status == 400 and "cannot parse traceID" in body["errors"][0]["msg"]
    # a short id without leading zeros finds the same trace
    status, body = jaeger.get("/api/traces/3")
    assert status == 200 and body["data"][0]["traceID"] == f"{3:032x}"


@pytest.mark.parametrize(("params", "msg"), [
    ({}, "parameter 'service' is required"),
    ({"service": "geo", "tag": "nocolon"}, "malformed 'tag' parameter"),
    ({"service": "geo", "tags": "{bad"}, "malformed 'tags' parameter"),
    ({"service": "geo", "minDuration": "fast"}, "cannot not parse minDuration"),
    ({"service": "geo", "minDuration": "2s", "maxDuration": "1s"}, "'maxDuration' should be greater than 'minDuration'"),
])
def test_search_errors(jaeger: Client, traces: None, params: dict, msg: str) -> None:
    status, body = jaeger.get("/api/traces", **params)
    assert status == 400
    assert body["data"] is None and body["errors"][0]["code"] == 400 and msg in body["errors"][0]["msg"]


def test_dependencies(jaeger: Client, traces: None) -> None:
    status, body = jaeger.get("/api/dependencies", endTs=int((T0 + 3600) * 1000), lookback=3600 * 1000)
    assert status == 200
    # the frontend → profile client span stays inside frontend, so it is no edge
    assert body["data"] == [{"parent": "frontend", "child": "search", "callCount": 10},
                            {"parent": "search", "child": "geo", "callCount": 10}]
    _, body = jaeger.get("/api/dependencies", endTs=int((T0 + 200) * 1000), lookback=90 * 1000)
    assert body["data"] == [{"parent": "frontend", "child": "search", "callCount": 2},
                            {"parent": "search", "child": "geo", "callCount": 2}]
    _, body = jaeger.get("/api/dependencies")
    assert body["total"] == 2


def test_clock_skew_warnings_as_jaeger_query_adds_them(jaeger: Client, obs: Observability) -> None:
    p = int(T0 * US)

    def span(sid: str, parent: str | None, svc: str, ip: str, start: int, dur: int) -> dict:
        return {"traceID": "ab" * 16, "spanID": sid, "operationName": f"op-{svc}", "startTime": start, "duration": dur,
                "references": [{"refType": "CHILD_OF", "traceID": "ab" * 16, "spanID": parent}] if parent else [],
                "tags": [], "logs": [], "process": {"serviceName": svc, "tags": [
                    {"key": "ip", "type": "string", "value": ip}]}}

    obs.traces.add([
        span("1" * 16, None, "frontend", "10.0.0.1", p, 10_000),
        # geo's node clock is 2 s ahead: its server span starts after the caller finished
        span("2" * 16, "1" * 16, "geo", "10.0.0.2", p + 2_000_100, 3_000),
        span("3" * 16, "2" * 16, "geo", "10.0.0.2", p + 2_000_200, 1_000),  # same host: same delta
        span("4" * 16, "1" * 16, "profile", "10.0.0.3", p + 100, 2_000),  # fits: no warning
        span("5" * 16, "9" * 16, "rate", "10.0.0.4", p + 50, 100),  # parent missing
    ])
    _, body = jaeger.get("/api/traces/" + "ab" * 16)
    warnings = {s["spanID"][0]: s["warnings"] for s in body["data"][0]["spans"]}
    # latency (10 ms - 3 ms) / 2 = 3.5 ms; delta = parent start + 3.5 ms - child start
    assert warnings["2"] == ["clock skew adjustment disabled; not applying calculated delta of -1.9966s"]
    assert warnings["3"] == ["clock skew adjustment disabled; not applying calculated delta of -1.9966s"]
    assert warnings["1"] is None and warnings["4"] is None
    assert warnings["5"] == ["parent span ID=9999999999999999 is not in the trace; skipping clock skew adjustment"]
    _, raw = jaeger.get("/api/traces/" + "ab" * 16, raw="true")
    assert all(s["warnings"] is None for s in raw["data"][0]["spans"])


def test_go_duration_strings() -> None:
    from kubesim.observability.jaeger.traces import go_duration

    assert [go_duration(v) for v in (0, 250, 1_500, 2_000_000, 123_500_000, 3_600_000_000, -250_000)] == [
        "0s", "250µs", "1.5ms", "2s", "2m3.5s", "1h0m0s", "-250ms"]
