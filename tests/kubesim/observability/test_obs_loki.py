"""The Loki API over real HTTP: stream selectors, chained line filters, json/logfmt parsers and
label filters, limit and direction, metric queries, labels/values/series, and Loki's errors."""

from __future__ import annotations

import json

import pytest

from kubesim.clock import VirtualClock
from kubesim.observability import Observability

from .conftest import T0, Client

GEO = {"namespace": "hotel-reservation", "pod": "geo-7d9c6b8f5-x2kqp", "container": "hotel-reserv-geo",
       "app": "geo", "job": "hotel-reservation/geo", "node_name": "worker-1", "stream": "stderr"}
FRONTEND = {"namespace": "hotel-reservation", "pod": "frontend-5b7c9d-abcde", "container": "hotel-reserv-frontend",
            "app": "frontend", "job": "hotel-reservation/frontend", "node_name": "worker-2", "stream": "stdout"}
KERNEL = {"job": "node-kernel", "node_name": "worker-1", "instance": "worker-1"}


@pytest.fixture
def logs(obs: Observability, clock: VirtualClock) -> None:
    for i in range(10):
        t = T0 + 10 * i
        obs.logs.append(GEO, t, f"2026-01-05T09:00:{i:02d}Z INF cmd/geo/main.go:40 > Read target port: 8083 n={i}")
        level = "error" if i % 3 == 0 else "info"
        obs.logs.append(FRONTEND, t + 1, json.dumps({"level": level, "msg": f"request {i}", "status": 500 if level == "error" else 200,
                                                     "latency": f"{i * 100}ms"}))
    obs.logs.append(KERNEL, T0 + 50, "blk_update_request: I/O error, dev sda, sector 123456 op 0x0:(READ) flags 0x0")
    obs.logs.append(GEO, T0 + 95, 'level=error msg="mongo: Input/output error" retries=3')
    clock.set(T0 + 120)


def lines(body: dict) -> list[str]:
    assert body["status"] == "success"
    assert body["data"]["resultType"] == "streams"
    return [v[1] for s in body["data"]["result"] for v in s["values"]]


def qr(loki: Client, query: str, **params: object) -> dict:
    params.setdefault("start", str(int(T0 * 1e9)))
    params.setdefault("end", str(int((T0 + 200) * 1e9)))
    status, body = loki.get("/loki/api/v1/query_range", query=query, **params)
    assert status == 200, body
    return body


def test_stream_selector_and_response_shape(loki: Client, logs: None) -> None:
    body = qr(loki, '{namespace="hotel-reservation", container="hotel-reserv-geo"}', limit=3)
    (stream,) = body["data"]["result"]
    # Loki 3 adds service_name from the app label
    assert stream["stream"] == dict(sorted({**GEO, "service_name": "geo"}.items()))
    # backward by default: newest first, as strings of nanoseconds
    assert stream["values"][0] == [str(int((T0 + 95) * 1e9)), 'level=error msg="mongo: Input/output error" retries=3']
    assert [int(v[0]) for v in stream["values"]] == sorted((int(v[0]) for v in stream["values"]), reverse=True)
    assert len(stream["values"]) == 3
    stats = body["data"]["stats"]
    assert {"summary", "querier", "ingester"} <= set(stats)
    assert stats["summary"]["totalLinesProcessed"] >= 3


def test_matchers(loki: Client, logs: None) -> None:
    assert len(lines(qr(loki, '{app=~"geo|frontend"}', limit=1000))) == 21
    assert len(lines(qr(loki, '{namespace="hotel-reservation", app!="geo"}', limit=1000))) == 10
    assert len(lines(qr(loki, '{namespace=~"hotel-.*", app!~"fr.*"}', limit=1000))) == 11
    assert lines(qr(loki, '{node_name="worker-1", job="node-kernel"}')) == [
        "blk_update_request: I/O error, dev sda, sector 123456 op 0x0:(READ) flags 0x0"]


def test_line_filters_chain(loki: Client, logs: None) -> None:
    assert len(lines(qr(loki, '{app="geo"} |= "target port"'))) == 10
    assert lines(qr(loki, '{app="geo"} |= "port" != "n=1" |~ "n=[0-2]$"')) == [
        "2026-01-05T09:00:02Z INF cmd/geo/main.go:40 > Read target port: 8083 n=2",
        "2026-01-05T09:00:00Z INF cmd/geo/main.go:40 > Read target port: 8083 n=0",
    ]
    assert lines(qr(loki, '{app="geo"} !~ "INF"')) == ['level=error msg="mongo: Input/output error" retries=3']
    assert len(lines(qr(loki, '{namespace="hotel-reservation"} |~ "(?i)input/OUTPUT"'))) == 1


def test_json_and_logfmt_label_filters(loki: Client, logs: None) -> None:
    body = qr(loki, '{app="frontend"} | json | level="error"', limit=100)
    got = lines(body)
    assert len(got) == 4 and all('"error"' in x for x in got)
    assert all(s["stream"]["level"] == "error" and s["stream"]["status"] == "500" for s in body["data"]["result"])
    assert len(lines(qr(loki, '{app="frontend"} | json | status >= 500'))) == 4
    assert len(lines(qr(loki, '{app="frontend"} | json | latency > 650ms'))) == 3
    assert len(lines(qr(loki, '{app="frontend"} | json | level="info" and status == 200'))) == 6
    body = qr(loki, '{app="geo"} | logfmt | level="error" | retries > 2')
    assert lines(body) == ['level=error msg="mongo: Input/output error" retries=3']
    assert body["data"]["result"][0]["stream"]["msg"] == "mongo: Input/output error"
    # lines that are not JSON get __error__ and can be dropped
    assert len(lines(qr(loki, '{app="geo"} | json | __error__=""'))) == 0
    # extracted labels differ per line, so each line is its own stream (streams sort by labels)
    assert lines(qr(loki, '{app="frontend"} | json | level="error" | line_format "{{.msg}}"', limit=2)) == [
        "request 6", "request 9"]


def test_limit_direction_and_window(loki: Client, logs: None) -> None:
    fwd = lines(qr(loki, '{app="geo"} |= "port"', direction="forward", limit=2))
    assert fwd == ["2026-01-05T09:00:00Z INF cmd/geo/main.go:40 > Read target port: 8083 n=0",
                   "2026-01-05T09:00:01Z INF cmd/geo/main.go:40 > Read target port: 8083 n=1"]
    # end is exclusive; start and end also accept RFC3339
    got = lines(qr(loki, '{app="geo"}', start="2026-01-05T09:00:10Z", end="2026-01-05T09:00:30Z", limit=100))
    assert [x[-3:] for x in got] == ["n=2", "n=1"]
    # the default window is the last hour before the cluster clock
    status, body = loki.get("/loki/api/v1/query_range", query='{app="geo"}', limit=1000)
    assert status == 200 and len(lines(body)) == 11


def test_metric_queries(loki: Client, logs: None) -> None:
    t = str(int((T0 + 100) * 1e9))
    status, body = loki.get("/loki/api/v1/query", query='sum by (app) (count_over_time({namespace="hotel-reservation"}[5m]))', time=t)
    assert status == 200 and body["data"]["resultType"] == "vector"
    counts = {r["metric"]["app"]: r["value"][1] for r in body["data"]["result"]}
    assert counts == {"geo": "11", "frontend": "10"}
    _, body = loki.get("/loki/api/v1/query", query='sum(rate({app="frontend"} | json | level="error" [1m]))', time=t)
    # errors at T0+61 and T0+91 inside (T0+40, T0+100]: 2 per 60 s
    (r,) = body["data"]["result"]
    assert float(r["value"][1]) == pytest.approx(2 / 60)
    _, body = loki.get("/loki/api/v1/query_range", query='count_over_time({app="geo"} |= "port" [30s])',
                       start=str(T0 + 30), end=str(T0 + 90), step="30")
    assert body["data"]["resultType"] == "matrix"
    assert body["data"]["result"][0]["values"] == [[T0 + 30, "3"], [T0 + 60, "3"], [T0 + 90, "3"]]
    _, body = loki.get("/loki/api/v1/query", query='sum(count_over_time({app="frontend"}[5m])) > 5', time=t)
    assert body["data"]["result"][0]["value"][1] == "10"


def test_labels_values_and_series(loki: Client, logs: None) -> None:
    status, body = loki.get("/loki/api/v1/labels")
    assert status == 200
    assert body == {"status": "success", "data": sorted(set(GEO) | set(KERNEL) | {"service_name"})}
    _, body = loki.get("/loki/api/v1/label/service_name/values")
    assert body["data"] == ["frontend", "geo", "node-kernel"]
    _, body = loki.get("/loki/api/v1/label/app/values")
    assert body["data"] == ["frontend", "geo"]
    _, body = loki.get("/loki/api/v1/label/node_name/values", query='{job="node-kernel"}')
    assert body["data"] == ["worker-1"]
    _, body = loki.get("/loki/api/v1/series", **{"match[]": '{namespace="hotel-reservation"}'})
    assert sorted(s["app"] for s in body["data"]) == ["frontend", "geo"]
    status, text = loki.get("/ready")
    assert status == 200 and text.strip() == "ready"


@pytest.mark.parametrize(("query", "fragment"), [
    ('{app="geo"', "parse error at line 1, col 11"),
    ("app=geo", "parse error at line 1, col 1"),
    ('{app=~".*"}', "queries require at least one regexp or equality matcher"),
    ('{app="geo"} |= 42', "syntax error: unexpected NUMBER"),
    ('count_over_time({app="geo"})', "expecting ["),
])
def test_parse_errors_are_plain_text_400(loki: Client, logs: None, query: str, fragment: str) -> None:
    status, body = loki.get("/loki/api/v1/query_range", query=query)
    assert status == 400
    assert isinstance(body, str) and fragment in body


def test_log_query_on_instant_endpoint_is_rejected(loki: Client, logs: None) -> None:
    status, body = loki.get("/loki/api/v1/query", query='{app="geo"}')
    assert status == 400 and "log queries are not supported as an instant query type" in body


def test_push_then_query(loki: Client, obs: Observability) -> None:
    ns = int(T0 * 1e9)
    status, _, _ = loki.request("POST", "/loki/api/v1/push")
    assert status == 204
    import urllib.request

    req = urllib.request.Request(loki.url + "/loki/api/v1/push", method="POST", data=json.dumps(
        {"streams": [{"stream": {"app": "pushed"}, "values": [[str(ns), "hello"]]}]}).encode())
    with urllib.request.urlopen(req) as resp:
        assert resp.status == 204
    assert lines(qr(loki, '{app="pushed"}')) == ["hello"]


def test_unwrap_regexp_pattern_and_label_stages(loki: Client, logs: None) -> None:
    t = str(int((T0 + 100) * 1e9))
    # latency "0ms".."900ms" parsed as durations; max over the errors (i = 0, 3, 6, 9)
    _, body = loki.get("/loki/api/v1/query", time=t, query=(
        'max_over_time({app="frontend"} | json | level="error" | unwrap duration(latency) [5m]) by (app)'))
    assert body["data"]["result"] == [{"metric": {"app": "frontend"}, "value": [T0 + 100, "0.9"]}]
    _, body = loki.get("/loki/api/v1/query", time=t, query='sum(sum_over_time({app="frontend"} | json | unwrap status [5m]))')
    assert body["data"]["result"][0]["value"][1] == str(4 * 500 + 6 * 200)
    body = qr(loki, '{app="geo"} | regexp "port: (?P<port>\\\\d+) n=(?P<n>\\\\d+)" | n = "7"')
    assert [s["stream"]["port"] for s in body["data"]["result"]] == ["8083"]
    body = qr(loki, '{app="geo"} | pattern "<_> <level> <file> > <_>" | level="INF" | drop file')
    assert len(lines(body)) == 10
    assert all("file" not in s["stream"] and s["stream"]["level"] == "INF" for s in body["data"]["result"])
    body = qr(loki, '{app="frontend"} | json | label_format lvl=level | lvl="error"')
    assert len(lines(body)) == 4 and all("level" not in s["stream"] for s in body["data"]["result"])
    # a line filter with alternatives
    assert len(lines(qr(loki, '{app="geo"} |= "n=1" or "n=2"'))) == 2


def test_lines_logged_at_the_current_instant_are_visible(loki: Client, obs: Observability, clock: VirtualClock) -> None:
    clock.set(T0 + 500)
    obs.logs.append({"app": "now"}, T0 + 500, "just now")
    status, body = loki.get("/loki/api/v1/query_range", query='{app="now"}')
    assert status == 200 and lines(body) == ["just now"]
    assert lines(qr(loki, '{app="now"}', start=str(T0), end=str(T0 + 500))) == ["just now"]
    # once the clock has moved on, an end in the past is exclusive as in Loki
    clock.set(T0 + 600)
    assert lines(qr(loki, '{app="now"}', start=str(T0), end=str(T0 + 500))) == []


def test_labels_of_a_stream_born_this_instant(loki: Client, obs: Observability, clock: VirtualClock) -> None:
    obs.logs.append({"app": "fresh", "pod": "fresh-1"}, clock.now(), "hello")
    _, body = loki.get("/loki/api/v1/label/app/values")
    assert body["data"] == ["fresh"]
