"""Memory bounds and state: retention windows, per-stream and span budgets, out-of-order
samples, reset, and checkpoint/restore of telemetry and alert state."""

from __future__ import annotations

from kubesim.clock import VirtualClock
from kubesim.observability import Observability
from kubesim.observability.jaeger.traces import TraceStore
from kubesim.observability.loki.logs import LogStore
from kubesim.observability.prometheus.tsdb import TSDB, Matcher

from .conftest import T0, Client


def test_tsdb_retention_drops_old_samples_and_empty_series() -> None:
    db = TSDB(retention=600)
    for i in range(100):
        db.append("m", {"k": "a"}, T0 + 15 * i, float(i))
    db.append("gone", {}, T0, 1.0)
    db.trim(T0 + 15 * 99)
    (s,) = db.select([Matcher("__name__", "=", "m")])
    assert s.ts[0] >= T0 + 15 * 99 - 600 and len(s.ts) == 41
    assert db.select([Matcher("__name__", "=", "gone")]) == []
    assert db.metric_names() == ["m"]


def test_tsdb_drops_out_of_order_and_replaces_same_timestamp() -> None:
    db = TSDB()
    db.append("m", {}, T0 + 10, 1.0)
    db.append("m", {}, T0 + 5, 2.0)
    db.append("m", {}, T0 + 10, 3.0)
    (s,) = db.select([Matcher("__name__", "=", "m")])
    assert list(s.ts) == [T0 + 10] and list(s.vs) == [3.0]


def test_label_order_does_not_split_series() -> None:
    db = TSDB()
    db.append("m", {"a": "1", "b": "2"}, T0, 1.0)
    db.append("m", {"b": "2", "a": "1"}, T0 + 1, 2.0)
    assert len(db) == 1


def test_log_budget_and_retention() -> None:
    store = LogStore(retention=100, max_lines_per_stream=10)
    for i in range(50):
        store.append({"app": "a"}, T0 + i, f"line {i}")
    (s,) = store.streams()
    assert len(s.lines) <= 12 and s.lines[-1] == "line 49"
    store.trim(T0 + 200)
    assert list(store.streams()) == []


def test_log_out_of_order_lines_stay_sorted() -> None:
    store = LogStore()
    store.append({"app": "a"}, T0 + 2, "second")
    store.append({"app": "a"}, T0 + 1, "first")
    (s,) = store.streams()
    assert s.lines == ["first", "second"] and list(s.ts) == sorted(s.ts)


def test_trace_budget_evicts_oldest_traces() -> None:
    store = TraceStore(max_spans=5)
    for n in range(4):
        store.add([{"traceID": f"{n:x}", "spanID": f"{n}{k}", "operationName": "op", "references": [],
                    "startTime": int((T0 + n) * 1e6) + k, "duration": 1, "tags": [], "logs": [],
                    "process": {"serviceName": "svc", "tags": []}} for k in range(2)])
    assert store.span_count <= 5
    assert store.get("0") is None and store.get("3") is not None


def test_reset_and_checkpoint_restore(obs: Observability, clock: VirtualClock, prom: Client) -> None:
    labels = {"job": "kube-state-metrics", "namespace": "ns", "pod": "p", "container": "c", "reason": "CrashLoopBackOff"}
    for i in range(5):
        obs.tsdb.append("kube_pod_container_status_waiting_reason", labels, T0 + 15 * i, 1.0)
        obs.logs.append({"app": "a"}, T0 + 15 * i, f"log {i}")
    obs.traces.add([{"traceID": "ab", "spanID": "1", "operationName": "op", "references": [], "startTime": int(T0 * 1e6),
                     "duration": 5, "tags": [], "logs": [], "process": {"serviceName": "svc", "tags": []}}])
    clock.set(T0 + 60)
    obs.evaluate_rules()
    snap = obs.checkpoint()
    before = obs.stats()
    _, alerts_before = prom.get("/api/v1/alerts")

    # telemetry written after the checkpoint must vanish on restore
    obs.tsdb.append("kube_pod_container_status_waiting_reason", labels, T0 + 75, 1.0)
    obs.tsdb.append("new_metric", {}, T0 + 75, 1.0)
    obs.reset()
    assert obs.stats() == {"series": 0, "samples": 0, "log_lines": 0, "traces": 0, "spans": 0}
    _, alerts_empty = prom.get("/api/v1/alerts")
    assert alerts_empty["data"]["alerts"] == []

    obs.restore(snap)
    assert obs.stats() == before
    _, alerts_after = prom.get("/api/v1/alerts")
    assert alerts_after == alerts_before
    _, body = prom.get("/api/v1/query", query="new_metric", time=T0 + 75)
    assert body["data"]["result"] == []
    # restoring twice from the same checkpoint gives the same state (the snapshot is not aliased)
    obs.tsdb.append("kube_pod_container_status_waiting_reason", labels, T0 + 90, 1.0)
    obs.restore(snap)
    assert obs.stats() == before


def test_series_refs_append_and_survive_retention() -> None:
    db = TSDB(retention=60)
    ref = db.ref("m", {"pod": "p"})
    ref = db.append_ref(ref, T0, 1.0)
    db.append("m", {"pod": "p"}, T0 + 15, 2.0)  # the plain path finds the same series
    (s,) = db.select([Matcher("__name__", "=", "m")])
    assert s is ref and list(s.vs) == [1.0, 2.0]
    db.trim(T0 + 1000)  # retention drops the series; the held reference is now dead
    assert db.select([Matcher("__name__", "=", "m")]) == []
    ref = db.append_ref(ref, T0 + 1000, 3.0)
    (s,) = db.select([Matcher("__name__", "=", "m")])
    assert s is ref and list(s.vs) == [3.0] and s.labels == {"pod": "p", "__name__": "m"}


def test_global_log_budget_drops_oldest_lines_across_streams() -> None:
    store = LogStore(retention=1e9, max_lines_per_stream=10_000, max_lines=100)
    for i in range(300):
        store.append({"app": f"a{i % 3}"}, T0 + i, f"line {i}")
    assert store.line_count() <= 125
    store.trim(T0 + 300)
    assert store.line_count() == 100 == sum(len(s.lines) for s in store.streams())
    # the newest lines of every stream survive, the oldest go
    kept = sorted(int(line.split()[1]) for s in store.streams() for line in s.lines)
    assert kept == list(range(200, 300))


def test_queries_while_a_writer_appends(obs: Observability, prom: Client) -> None:
    """A scrape writer on another thread (not holding the lock) never breaks a query."""
    import threading
    import time

    stop = threading.Event()

    def writer() -> None:
        k = 0
        while not stop.is_set():
            for pod in range(20):
                obs.tsdb.append("container_cpu_usage_seconds_total", {"pod": f"p{k % 10}-{pod}"}, T0 + k, float(k))
            k += 1
            time.sleep(0)

    th = threading.Thread(target=writer, daemon=True)
    th.start()
    try:
        statuses = set()
        for _ in range(10):
            statuses.add(prom.get("/api/v1/query", query="sum(rate(container_cpu_usage_seconds_total[5m]))",
                                  time=T0 + 100)[0])
            statuses.add(prom.get("/api/v1/series", **{"match[]": "container_cpu_usage_seconds_total"})[0])
            statuses.add(prom.get("/api/v1/labels")[0])
    finally:
        stop.set()
        th.join()
    assert statuses == {200}


def test_labels_as_tuples_are_the_same_series_as_dicts() -> None:
    db = TSDB()
    db.append("m", (("pod", "p"), ("ns", "n")), T0, 1.0)
    db.append("m", {"ns": "n", "pod": "p"}, T0 + 15, 2.0)
    db.mark_stale("m", (("pod", "p"), ("ns", "n")), T0 + 30)
    (s,) = db.series()
    assert s.labels == {"pod": "p", "ns": "n", "__name__": "m"} and len(s.ts) == 3


def test_scrape_marks_vanished_series_stale(obs: Observability, prom: Client) -> None:
    ksm = "kube-state-metrics/10.244.0.9:8080"
    rows = [("kube_pod_info", {"pod": p, "namespace": "ns"}, 1.0) for p in ("a", "b")]
    assert obs.tsdb.scrape(ksm, T0, rows) == 2
    obs.tsdb.scrape(ksm, T0 + 15, rows[:1])  # pod b was deleted
    _, body = prom.get("/api/v1/query", query="kube_pod_info", time=T0 + 20)
    assert [r["metric"]["pod"] for r in body["data"]["result"]] == ["a"]
    # other targets' series are not touched by this target's scrapes
    obs.tsdb.scrape("node-exporter/10.0.0.5:9100", T0, [("node_load1", {}, 0.5)])
    obs.tsdb.scrape(ksm, T0 + 30, rows[:1])
    _, body = prom.get("/api/v1/query", query="node_load1", time=T0 + 30)
    assert len(body["data"]["result"]) == 1
    # a series that comes back is live again
    obs.tsdb.scrape(ksm, T0 + 45, rows)
    _, body = prom.get("/api/v1/query", query="kube_pod_info", time=T0 + 45)
    assert len(body["data"]["result"]) == 2


def test_log_stream_continues_after_restore() -> None:
    store = LogStore()
    store.append({"app": "a"}, T0, "one")
    snap = store.checkpoint()
    store.restore(snap)
    store.append({"app": "a"}, T0 + 1, "two")
    (s,) = store.streams()
    assert s.lines == ["one", "two"] and s.labels == {"app": "a", "service_name": "a"}


def test_scrape_membership_survives_restore(obs: Observability, prom: Client) -> None:
    rows = [("kube_pod_info", (("pod", p),), 1.0) for p in ("a", "b")]
    obs.tsdb.scrape("ksm", T0, rows)
    obs.restore(obs.checkpoint())
    obs.tsdb.scrape("ksm", T0 + 15, rows[:1])
    _, body = prom.get("/api/v1/query", query="kube_pod_info", time=T0 + 20)
    assert [r["metric"]["pod"] for r in body["data"]["result"]] == ["a"]
