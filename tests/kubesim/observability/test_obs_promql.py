"""PromQL over HTTP against hand-computed values: selectors and matchers, lookback and
staleness, offset, rate/irate/increase/delta with extrapolation and counter resets,
*_over_time, aggregations, histogram_quantile, functions, binary operators and matching."""

from __future__ import annotations

import math

import pytest

from kubesim.observability import Observability

from .conftest import T0, Client


def q(prom: Client, query: str, t: float) -> dict[tuple[tuple[str, str], ...], float]:
    status, body = prom.get("/api/v1/query", query=query, time=t)
    assert status == 200, body
    assert body["data"]["resultType"] == "vector", body
    return {tuple(sorted(r["metric"].items())): float(r["value"][1]) for r in body["data"]["result"]}


def one(prom: Client, query: str, t: float) -> float:
    res = q(prom, query, t)
    assert len(res) == 1, res
    return next(iter(res.values()))


def lbl(**kw: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(kw.items()))


@pytest.fixture
def http_data(obs: Observability) -> None:
    """Two counters at 1/s and 0.1/s sampled every 15 s from T0 to T0+600."""
    for i in range(41):
        t = T0 + i * 15
        obs.tsdb.append("http_requests_total", {"job": "frontend", "code": "200", "instance": "a:80"}, t, i * 15.0)
        obs.tsdb.append("http_requests_total", {"job": "frontend", "code": "500", "instance": "a:80"}, t, i * 1.5)
        obs.tsdb.append("http_requests_total", {"job": "search", "code": "200", "instance": "b:80"}, t, i * 30.0)


def test_selectors_with_all_four_matchers(prom: Client, http_data: None) -> None:
    t = T0 + 600
    assert q(prom, 'http_requests_total{job="frontend",code="200"}', t) == {
        lbl(__name__="http_requests_total", job="frontend", code="200", instance="a:80"): 600.0}
    assert len(q(prom, 'http_requests_total{code!="200"}', t)) == 1
    assert set(q(prom, 'http_requests_total{job=~"front.*"}', t)) == {
        lbl(__name__="http_requests_total", job="frontend", code="200", instance="a:80"),
        lbl(__name__="http_requests_total", job="frontend", code="500", instance="a:80")}
    # regexes are anchored: "front" alone does not match "frontend"
    assert q(prom, 'http_requests_total{job=~"front"}', t) == {}
    assert [dict(k)["job"] for k in q(prom, 'http_requests_total{job!~"front.*"}', t)] == ["search"]
    assert len(q(prom, '{__name__=~"http_.*", code="200"}', t)) == 2
    # a missing label matches "" as in Prometheus
    assert len(q(prom, 'http_requests_total{zone=""}', t)) == 3


def test_lookback_is_five_minutes_and_staleness_ends_a_series(prom: Client, obs: Observability) -> None:
    obs.tsdb.append("up", {"job": "a"}, T0, 1.0)
    obs.tsdb.append("up", {"job": "b"}, T0, 1.0)
    obs.tsdb.mark_stale("up", {"job": "b"}, T0 + 30)
    # Prometheus 2.x: a sample exactly 5 minutes old still counts
    assert one(prom, 'up{job="a"}', T0 + 300) == 1.0
    assert q(prom, 'up{job="a"}', T0 + 300.5) == {}
    assert q(prom, 'up{job="b"}', T0 + 15) != {}
    assert q(prom, 'up{job="b"}', T0 + 31) == {}
    # before the first sample there is nothing
    assert q(prom, "up", T0 - 1) == {}


def test_offset(prom: Client, http_data: None) -> None:
    assert one(prom, 'http_requests_total{job="search"} offset 5m', T0 + 600) == 300.0 * 2


def test_rate_increase_on_aligned_window(prom: Client, http_data: None) -> None:
    t = T0 + 600
    # window [300, 600]: 21 samples covering it exactly, nothing to extrapolate
    assert one(prom, 'rate(http_requests_total{code="200",job="frontend"}[5m])', t) == pytest.approx(1.0)
    assert one(prom, 'increase(http_requests_total{code="500"}[5m])', t) == pytest.approx(30.0)
    assert one(prom, 'irate(http_requests_total{job="search"}[1m])', t) == pytest.approx(2.0)
    res = q(prom, "rate(http_requests_total[5m])", t)
    assert all("__name__" not in dict(k) for k in res)


def test_rate_extrapolation_limited_by_counter_zero_point(prom: Client, obs: Observability) -> None:
    # A counter that appears at T0+450 with value 100, growing 2/s; query window (T0+300, T0+600].
    for i in range(11):
        obs.tsdb.append("c_total", {}, T0 + 450 + 15 * i, 100 + 30.0 * i)
    # raw increase 300 over 150 s sampled; the gap to the window start (150 s) exceeds 1.1 × 15 s,
    # so Prometheus extrapolates by half a sample interval only: 300 × (150 + 7.5) / 150 = 315.
    assert one(prom, "increase(c_total[5m])", T0 + 600) == pytest.approx(315.0)
    assert one(prom, "rate(c_total[5m])", T0 + 600) == pytest.approx(315.0 / 300)


def test_counter_reset_is_handled(prom: Client, obs: Observability) -> None:
    for i, v in enumerate([0, 10, 20, 30, 5, 15]):
        obs.tsdb.append("restarts_total", {"pod": "p"}, T0 + 15 * i, float(v))
    t = T0 + 75
    # samples 0,10,20,30,5,15 in [T0, T0+75]: 15 + 30 (the reset) = 45, covering the window
    assert one(prom, "increase(restarts_total[75s])", t) == pytest.approx(45.0)
    # [T0+5, T0+75]: 10,20,30,5,15 → 5 + 30 = 35 over 60 s, extrapolated by the 10 s to the start
    assert one(prom, "increase(restarts_total[70s])", t) == pytest.approx(35 * 70 / 60)
    assert one(prom, "irate(restarts_total[1m])", t) == pytest.approx(10 / 15)
    assert one(prom, "resets(restarts_total[2m])", t) == 1.0
    assert one(prom, "changes(restarts_total[2m])", t) == 5.0
    # delta and idelta do not treat a drop as a reset
    assert one(prom, "idelta(restarts_total[1m])", t) == 10.0
    assert one(prom, "delta(restarts_total[75s])", t) == pytest.approx(15.0)


def test_over_time_functions(prom: Client, obs: Observability) -> None:
    for i, v in enumerate([4, 8, 15, 16, 23, 42]):
        obs.tsdb.append("g", {"k": "v"}, T0 + 10 * i, float(v))
    t = T0 + 50
    r = "g[1m]"
    assert one(prom, f"avg_over_time({r})", t) == pytest.approx(108 / 6)
    assert one(prom, f"sum_over_time({r})", t) == 108.0
    assert one(prom, f"min_over_time({r})", t) == 4.0
    assert one(prom, f"max_over_time({r})", t) == 42.0
    assert one(prom, f"count_over_time({r})", t) == 6.0
    assert one(prom, f"last_over_time({r})", t) == 42.0
    # rank 0.5 × 5 = 2.5 between 15 and 16
    assert one(prom, f"quantile_over_time(0.5, {r})", t) == pytest.approx(15.5)
    assert one(prom, "max_over_time(g[25s])", t) == 42.0
    assert one(prom, "min_over_time(g[25s])", t) == 16.0
    assert "__name__" in dict(next(iter(q(prom, f"last_over_time({r})", t))))


def test_aggregations(prom: Client, http_data: None) -> None:
    t = T0 + 600
    assert q(prom, "sum by (job) (http_requests_total)", t) == {lbl(job="frontend"): 660.0, lbl(job="search"): 1200.0}
    assert q(prom, "sum without (code, instance) (http_requests_total)", t) == {
        lbl(job="frontend"): 660.0, lbl(job="search"): 1200.0}
    assert one(prom, "avg(http_requests_total)", t) == pytest.approx(620.0)
    assert one(prom, "min(http_requests_total)", t) == 60.0
    assert one(prom, "max(http_requests_total)", t) == 1200.0
    assert q(prom, "count by (code) (http_requests_total)", t) == {lbl(code="200"): 2.0, lbl(code="500"): 1.0}
    top = q(prom, "topk(2, http_requests_total)", t)
    assert sorted(top.values()) == [600.0, 1200.0]
    assert all(dict(k)["__name__"] == "http_requests_total" for k in top)
    assert list(q(prom, "bottomk by (job) (1, http_requests_total)", t).values()) == [60.0, 1200.0]
    assert one(prom, "quantile(0.5, http_requests_total)", t) == 600.0
    assert q(prom, 'count_values("value", http_requests_total{job="frontend"})', t) == {
        lbl(value="600"): 1.0, lbl(value="60"): 1.0}


def test_histogram_quantile(prom: Client, obs: Observability) -> None:
    for le, count in [("0.1", 50), ("0.5", 80), ("1", 95), ("+Inf", 100)]:
        obs.tsdb.append("lat_seconds_bucket", {"service": "geo", "le": le}, T0, float(count))
    assert one(prom, "histogram_quantile(0.5, lat_seconds_bucket)", T0) == pytest.approx(0.1)
    assert one(prom, "histogram_quantile(0.9, lat_seconds_bucket)", T0) == pytest.approx(0.5 + 0.5 * 10 / 15)
    # in the +Inf bucket the answer is the highest finite bound
    assert one(prom, "histogram_quantile(0.99, lat_seconds_bucket)", T0) == 1.0
    assert q(prom, "histogram_quantile(0.9, lat_seconds_bucket)", T0).keys() == {lbl(service="geo")}


def test_histogram_quantile_of_rate_by_le(prom: Client, obs: Observability) -> None:
    for i in range(21):
        t = T0 + 15 * i
        for pod in ("a", "b"):
            for le, per_step in [("100", 6), ("500", 9), ("+Inf", 10)]:
                obs.tsdb.append("rpc_duration_milliseconds_bucket", {"pod": pod, "le": le}, t, float(per_step * i))
    v = one(prom, "histogram_quantile(0.5, sum by (le) (rate(rpc_duration_milliseconds_bucket[5m])))", T0 + 300)
    # rank 0.5 × 10 = 5 of 10 falls in the first bucket: 100 × 5/6
    assert v == pytest.approx(100 * 5 / 6)


def test_functions(prom: Client, obs: Observability) -> None:
    obs.tsdb.append("temp", {"room": "a"}, T0, -2.5)
    obs.tsdb.append("temp", {"room": "b"}, T0, 7.25)
    t = T0
    assert q(prom, "abs(temp)", t) == {lbl(room="a"): 2.5, lbl(room="b"): 7.25}
    assert q(prom, "ceil(temp)", t) == {lbl(room="a"): -2.0, lbl(room="b"): 8.0}
    assert q(prom, "floor(temp)", t) == {lbl(room="a"): -3.0, lbl(room="b"): 7.0}
    assert q(prom, "round(temp)", t) == {lbl(room="a"): -2.0, lbl(room="b"): 7.0}
    # ties round up, as Prometheus does: 7.25 → 7.5
    assert q(prom, "round(temp, 0.5)", t) == {lbl(room="a"): -2.5, lbl(room="b"): 7.5}
    assert q(prom, "clamp_min(temp, 0)", t) == {lbl(room="a"): 0.0, lbl(room="b"): 7.25}
    assert q(prom, "clamp_max(temp, 5)", t) == {lbl(room="a"): -2.5, lbl(room="b"): 5.0}
    assert q(prom, 'absent(nonexistent{job="x", env=~"p.*"})', t) == {lbl(job="x"): 1.0}
    assert q(prom, "absent(temp)", t) == {}
    assert q(prom, "vector(3)", t) == {(): 3.0}
    assert one(prom, "scalar(temp{room=\"b\"}) * vector(2)", t) == 14.5
    assert q(prom, 'label_replace(temp, "floor_no", "f-$1", "room", "(.*)")', t) == {
        lbl(__name__="temp", room="a", floor_no="f-a"): -2.5, lbl(__name__="temp", room="b", floor_no="f-b"): 7.25}
    # a non-matching regex leaves the series unchanged
    assert set(q(prom, 'label_replace(temp, "x", "$1", "room", "z(.*)")', t)) == {
        lbl(__name__="temp", room="a"), lbl(__name__="temp", room="b")}
    status, body = prom.get("/api/v1/query", query="time()", time=T0 + 42)
    assert body["data"] == {"resultType": "scalar", "result": [T0 + 42, str(int(T0 + 42))]}


def test_binary_scalar_vector_and_comparisons(prom: Client, http_data: None) -> None:
    t = T0 + 600
    assert q(prom, 'http_requests_total{job="search"} / 60', t) == {lbl(job="search", code="200", instance="b:80"): 20.0}
    assert q(prom, '2 * http_requests_total{job="search"}', t) == {lbl(job="search", code="200", instance="b:80"): 2400.0}
    # a comparison filter keeps the metric name and the vector's value, even with the scalar on the left
    assert q(prom, "1000 < http_requests_total", t) == {
        lbl(__name__="http_requests_total", job="search", code="200", instance="b:80"): 1200.0}
    assert sorted(q(prom, "http_requests_total > bool 100", t).values()) == [0.0, 1.0, 1.0]
    assert all("__name__" not in dict(k) for k in q(prom, "http_requests_total > bool 100", t))
    status, body = prom.get("/api/v1/query", query="2 > bool 1", time=t)
    assert body["data"]["result"][1] == "1"
    status, body = prom.get("/api/v1/query", query="1 / 0", time=t)
    assert body["data"]["result"][1] == "+Inf"


def test_vector_matching(prom: Client, http_data: None, obs: Observability) -> None:
    t = T0 + 600
    obs.tsdb.append("job_info", {"job": "frontend", "team": "web"}, t, 1.0)
    obs.tsdb.append("job_info", {"job": "search", "team": "core"}, t, 1.0)
    # one-to-one with ignoring
    ratio = q(prom, 'http_requests_total{code="500"} / ignoring(code) http_requests_total{code="200"}', t)
    assert ratio == {lbl(job="frontend", instance="a:80"): pytest.approx(0.1)}
    # one-to-one with on keeps only the on labels
    assert q(prom, 'sum by (job, instance) (http_requests_total) - on(job) sum by (job) (http_requests_total)', t) == {
        lbl(job="frontend"): 0.0, lbl(job="search"): 0.0}
    # many-to-one with group_left copies the label from the one side
    joined = q(prom, "http_requests_total * on(job) group_left(team) job_info", t)
    assert {dict(k)["team"] for k in joined} == {"web", "core"}
    assert len(joined) == 3
    # group_right mirrors it
    assert len(q(prom, "job_info * on(job) group_right(team) http_requests_total", t)) == 3
    # and / or / unless
    assert len(q(prom, 'http_requests_total and on(job) job_info{team="web"}', t)) == 2
    assert len(q(prom, 'http_requests_total unless on(job) job_info{team="web"}', t)) == 1
    assert len(q(prom, 'job_info or http_requests_total{job="nope"}', t)) == 2
    # many-to-many without grouping is an execution error (HTTP 422)
    status, body = prom.get("/api/v1/query", query="http_requests_total * on(job) job_info", time=t)
    status2, body2 = prom.get("/api/v1/query", query="job_info * on(job) http_requests_total", time=t)
    assert status == 422 and body["errorType"] == "execution", body
    assert "many-to-many" in body["error"] or "multiple matches" in body["error"]
    assert status2 == 422 and body2["errorType"] == "execution"


def test_subquery(prom: Client, http_data: None) -> None:
    v = one(prom, 'max_over_time(rate(http_requests_total{job="search"}[1m])[5m:1m])', T0 + 600)
    assert v == pytest.approx(2.0)
    # 2.x subquery steps are aligned to multiples of the step and include the window start
    assert one(prom, 'count_over_time(http_requests_total{job="search"}[5m:1m])', T0 + 600) == 6.0


def test_nan_and_inf_formatting(prom: Client, obs: Observability) -> None:
    obs.tsdb.append("x", {}, T0, math.nan)
    obs.tsdb.append("y", {}, T0, math.inf)
    obs.tsdb.append("z", {}, T0, 0.000012)
    _, body = prom.get("/api/v1/query", query="x", time=T0)
    assert body["data"]["result"][0]["value"][1] == "NaN"
    _, body = prom.get("/api/v1/query", query="-y", time=T0)
    assert body["data"]["result"][0]["value"][1] == "-Inf"
    _, body = prom.get("/api/v1/query", query="z", time=T0)
    assert body["data"]["result"][0]["value"][1] == "0.000012"


def test_at_modifier_or_matchers_and_linear_prediction(prom: Client, obs: Observability) -> None:
    for i in range(21):
        obs.tsdb.append("node_filesystem_avail_bytes", {"device": "sda1", "mountpoint": "/"}, T0 + 60 * i, 1000.0 - 10 * i)
        obs.tsdb.append("node_filesystem_avail_bytes", {"device": "sdb1", "mountpoint": "/data"}, T0 + 60 * i, 500.0)
    t = T0 + 1200
    assert one(prom, f'node_filesystem_avail_bytes{{device="sda1"}} @ {T0 + 600}', t) == 900.0
    assert len(q(prom, 'node_filesystem_avail_bytes{device="sda1" or mountpoint="/data"}', t)) == 2
    # 10 bytes a minute lost: the slope is -1/6 B/s, and in one hour 600 bytes are gone
    assert one(prom, 'deriv(node_filesystem_avail_bytes{device="sda1"}[10m])', t) == pytest.approx(-1 / 6)
    assert one(prom, 'predict_linear(node_filesystem_avail_bytes{device="sda1"}[10m], 3600)', t) == pytest.approx(200.0)
    assert one(prom, 'predict_linear(node_filesystem_avail_bytes{device="sdb1"}[10m], 3600)', t) == pytest.approx(500.0)
    assert one(prom, 'changes(node_filesystem_avail_bytes{device="sdb1"}[10m])', t) == 0.0
    assert one(prom, 'timestamp(node_filesystem_avail_bytes{device="sda1"})', t + 30) == T0 + 1200


def test_replicas_mismatch_rule_expression(prom: Client, obs: Observability) -> None:
    ksm = {"job": "kube-state-metrics", "namespace": "hotel-reservation", "deployment": "geo"}
    for i in range(41):
        t = T0 + 15 * i
        obs.tsdb.append("kube_deployment_spec_replicas", ksm, t, 3.0)
        obs.tsdb.append("kube_deployment_status_replicas_available", ksm, t, 1.0)
        obs.tsdb.append("kube_deployment_status_replicas_updated", ksm, t, 3.0)
    expr = ('(kube_deployment_spec_replicas{job="kube-state-metrics"} > kube_deployment_status_replicas_available'
            '{job="kube-state-metrics"}) and (changes(kube_deployment_status_replicas_updated{job="kube-state-metrics"}'
            '[10m]) == 0)')
    assert q(prom, expr, T0 + 600) == {lbl(__name__="kube_deployment_spec_replicas", **ksm): 3.0}
