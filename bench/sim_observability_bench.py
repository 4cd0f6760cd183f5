"""Benchmark of the emulated cluster's observability back ends; prints figures, asserts nothing.

A realistic cluster: 2,000 series (cAdvisor, kube-state-metrics, node-exporter, span-metrics
histograms) scraped every 15 s for 10 minutes of cluster time. Prints append throughput,
instant/range query and rule-evaluation CPU time, memory per million samples, and log/trace
store figures.

    .venv/bin/python bench/sim_observability_bench.py
"""

from __future__ import annotations

import gc
import json
import random
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubesim.clock import VirtualClock  # noqa: E402
from kubesim.observability import Observability  # noqa: E402
from kubesim.observability.prometheus.tsdb import TSDB  # noqa: E402

SCRAPE = 15.0
MINUTES = 10
SERVICES = ["frontend", "search", "geo", "profile", "rate", "recommendation", "reservation", "user"]
BUCKETS = ["2", "4", "6", "8", "10", "50", "100", "200", "400", "800", "1000", "1400", "2000", "5000", "10000", "15000",
           "+Inf"]


def cluster_series(rng: random.Random) -> list[tuple[str, dict[str, str], str, float]]:
    """(metric, labels, kind, rate) for about 2,000 series; kind is counter or gauge."""
    out: list[tuple[str, dict[str, str], str, float]] = []
    ns = "hotel-reservation"
    pods = [(svc, f"{svc}-{rng.getrandbits(32):08x}-{i}") for svc in SERVICES for i in range(3)]
    for svc, pod in pods:
        base = {"namespace": ns, "pod": pod, "container": f"hotel-reserv-{svc}", "job": "kubernetes-cadvisor",
                "instance": f"worker-{rng.randint(1, 3)}", "image": f"yinfangchen/hotelreservation:{svc}"}
        for metric in ("container_cpu_usage_seconds_total", "container_cpu_cfs_periods_total",
                       "container_cpu_cfs_throttled_periods_total", "container_network_receive_bytes_total",
                       "container_network_transmit_bytes_total", "container_fs_reads_total", "container_fs_writes_total"):
            out.append((metric, base, "counter", rng.uniform(0.01, 50)))
        for metric in ("container_memory_working_set_bytes", "container_memory_usage_bytes", "container_spec_memory_limit_bytes",
                       "container_threads", "container_file_descriptors"):
            out.append((metric, base, "gauge", rng.uniform(1e3, 5e8)))
        ksm = {"job": "kube-state-metrics", "instance": "10.244.0.9:8080", "namespace": ns, "pod": pod,
               "uid": f"{rng.getrandbits(64):016x}"}
        for phase in ("Pending", "Running", "Succeeded", "Failed", "Unknown"):
            out.append(("kube_pod_status_phase", {**ksm, "phase": phase}, "gauge", 1.0 if phase == "Running" else 0.0))
        for cond in ("true", "false", "unknown"):
            out.append(("kube_pod_status_ready", {**ksm, "condition": cond}, "gauge", 1.0 if cond == "true" else 0.0))
        ctr = {**ksm, "container": f"hotel-reserv-{svc}"}
        out.append(("kube_pod_container_status_restarts_total", ctr, "counter", 0.0))
        for res, unit in (("cpu", "core"), ("memory", "byte")):
            out.append(("kube_pod_container_resource_requests", {**ctr, "resource": res, "unit": unit, "node": "worker-1"},
                        "gauge", 0.1))
            out.append(("kube_pod_container_resource_limits", {**ctr, "resource": res, "unit": unit, "node": "worker-1"},
                        "gauge", 1.0))
    for svc in SERVICES:
        for kind in ("SPAN_KIND_SERVER", "SPAN_KIND_CLIENT"):
            for status in ("STATUS_CODE_UNSET", "STATUS_CODE_ERROR"):
                sm = {"job": "otel-spanmetrics", "namespace": "blueprint-hotel-reservation", "service_name": svc,
                      "span_name": f"/{svc}.{svc.title()}/Call", "span_kind": kind, "status_code": status,
                      "instance": "otel-collector:8889"}
                out.append(("traces_span_metrics_calls_total", sm, "counter", rng.uniform(1, 40)))
                for le in BUCKETS:
                    out.append(("traces_span_metrics_duration_milliseconds_bucket", {**sm, "le": le}, "counter",
                                rng.uniform(1, 40)))
    for node in range(1, 4):
        ne = {"job": "node-exporter", "instance": f"10.0.0.{node}:9100"}
        for cpu in range(8):
            for mode in ("idle", "iowait", "irq", "nice", "softirq", "steal", "system", "user"):
                out.append(("node_cpu_seconds_total", {**ne, "cpu": str(cpu), "mode": mode}, "counter", rng.uniform(0, 1)))
        for dev in ("sda", "sdb"):
            for m in ("node_disk_io_time_seconds_total", "node_disk_read_bytes_total", "node_disk_written_bytes_total"):
                out.append((m, {**ne, "device": dev}, "counter", rng.uniform(0, 1e6)))
    while len(out) < 2000:
        i = len(out)
        out.append(("probe_duration_seconds", {"job": "blackbox-hotel-reservation", "instance": f"svc-{i}.hotel-reservation:80"},
                    "gauge", 0.01))
    return out[:2000]


def fill(obs: Observability, series: list[tuple[str, dict[str, str], str, float]], t0: float, scrapes: int) -> float:
    """Append every series at each scrape; returns seconds spent in append."""
    append = obs.tsdb.append
    totals = [0.0] * len(series)
    spent = 0.0
    for k in range(scrapes):
        t = t0 + k * SCRAPE
        rows = []
        for i, (metric, labels, kind, rate) in enumerate(series):
            if kind == "counter":
                totals[i] += rate * SCRAPE
                rows.append((metric, labels, totals[i]))
            else:
                rows.append((metric, labels, rate))
        start = time.process_time()
        for metric, labels, v in rows:
            append(metric, labels, t, v)
        spent += time.process_time() - start
    return spent


def timed(fn, repeat: int = 5) -> float:  # type: ignore[no-untyped-def]
    samples = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        samples.append(time.process_time() - start)
    return statistics.median(samples)


def main() -> None:
    rng = random.Random(7)
    clock = VirtualClock()
    t0 = clock.now()
    obs = Observability(clock)
    series = cluster_series(rng)
    scrapes = int(MINUTES * 60 / SCRAPE) + 1
    spent = fill(obs, series, t0, scrapes)
    n = len(series) * scrapes
    end = t0 + (scrapes - 1) * SCRAPE
    clock.set(end)
    print(f"cluster: {len(obs.tsdb)} series x {scrapes} scrapes = {n} samples ({MINUTES} min at {SCRAPE:.0f} s)")
    print(f"append throughput: {n / spent:,.0f} samples/s ({spent * 1e3:.1f} ms for the whole 10 minutes)")

    # the same writes with label sets kept as tuples of pairs
    tup_obs = Observability(VirtualClock())
    tup_append = tup_obs.tsdb.append
    tuples = [(metric, tuple(labels.items())) for metric, labels, _, _ in series]
    start = time.process_time()
    for k in range(scrapes):
        t = t0 + k * SCRAPE
        for metric, tl in tuples:
            tup_append(metric, tl, t, float(k))
    tup_sec = time.process_time() - start
    print(f"append with tuple labels: {n / tup_sec:,.0f} samples/s ({tup_sec * 1e3:.1f} ms for the whole 10 minutes)")

    # the same writes as whole scrapes (what the emulated cluster's telemetry does)
    scr_obs = Observability(VirtualClock())
    scrape = scr_obs.tsdb.scrape
    start = time.process_time()
    for k in range(scrapes):
        scrape("all", t0 + k * SCRAPE, [(metric, tl, float(k)) for metric, tl in tuples])
    scr_sec = time.process_time() - start
    print(f"tsdb.scrape with tuple labels: {n / scr_sec:,.0f} samples/s ({scr_sec * 1e3:.1f} ms for the whole 10 minutes)")

    # the same writes through series references (a writer that keeps the handle per series)
    refs_obs = Observability(VirtualClock())
    tsdb = refs_obs.tsdb
    refs = [tsdb.ref(metric, labels) for metric, labels, _, _ in series]
    start = time.process_time()
    append_ref = tsdb.append_ref
    for k in range(scrapes):
        t = t0 + k * SCRAPE
        for i, r in enumerate(refs):
            refs[i] = append_ref(r, t, float(k))
    ref_sec = time.process_time() - start
    print(f"append via series refs: {n / ref_sec:,.0f} samples/s ({ref_sec * 1e3:.1f} ms for the whole 10 minutes)")

    app = obs.prometheus_app
    instant = {
        "selector": 'kube_pod_status_phase{namespace="hotel-reservation", phase="Running"}',
        "sum rate by pod": 'sum by (namespace, pod) (rate(container_cpu_usage_seconds_total{container!=""}[5m]))',
        "throttling ratio": ("sum by (pod) (increase(container_cpu_cfs_throttled_periods_total[5m])) / "
                             "sum by (pod) (increase(container_cpu_cfs_periods_total[5m]))"),
        "histogram_quantile p95": ("histogram_quantile(0.95, sum by (service_name, le) "
                                   "(rate(traces_span_metrics_duration_milliseconds_bucket[5m])))"),
        "node busy": '1 - avg by (instance) (rate(node_cpu_seconds_total{mode="idle"}[5m]))',
    }
    for name, query in instant.items():
        sec = timed(lambda q=query: app("GET", "/api/v1/query", {"query": [q], "time": [str(end)]}, b""))
        status, _, body = app("GET", "/api/v1/query", {"query": [query], "time": [str(end)]}, b"")
        count = len(json.loads(body)["data"]["result"])
        print(f"instant query  {name:<24} {sec * 1e3:7.2f} ms  ({count} series, HTTP {status})")
    rng_queries = {
        "sum rate by pod": instant["sum rate by pod"],
        "histogram_quantile p95": instant["histogram_quantile p95"],
    }
    for name, query in rng_queries.items():
        params = {"query": [query], "start": [str(t0 + 300)], "end": [str(end)], "step": ["15s"]}
        sec = timed(lambda p=params: app("GET", "/api/v1/query_range", p, b""), repeat=3)
        print(f"range query    {name:<24} {sec * 1e3:7.2f} ms  (5 min at 15 s step)")

    start = time.process_time()
    snap = obs.checkpoint()
    mid = time.process_time()
    obs.restore(snap)
    print(f"checkpoint {(mid - start) * 1e3:.1f} ms, restore {(time.process_time() - mid) * 1e3:.1f} ms "
          f"({n} samples)")

    rules = sum(len(g.rules) for g in obs.rules.groups)
    start = time.process_time()
    for k in range(10):
        obs.rules.evaluate(end + 30 * (k + 1))
    print(f"rule evaluation: {rules} rules in {(time.process_time() - start) / 10 * 1e3:.1f} ms per round")

    # memory: one million samples in a fresh TSDB
    gc.collect()
    tracemalloc.start()
    db = TSDB(retention=1e9)
    base = tracemalloc.get_traced_memory()[0]
    per_series = 500
    for i in range(2000):
        labels = {"namespace": "ns", "pod": f"pod-{i}", "container": "c", "job": "kubernetes-cadvisor"}
        for k in range(per_series):
            db.append("container_cpu_usage_seconds_total", labels, t0 + k * SCRAPE, float(k))
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    print(f"memory: {used / 2**20 * 1e6 / (2000 * per_series):.1f} MiB per million samples "
          f"({db.sample_count():,} samples in 2,000 series)")

    # logs and traces
    lo = obs.logs
    start = time.process_time()
    for k in range(100_000):
        lo.append({"namespace": "hotel-reservation", "pod": f"geo-{k % 20}", "container": "hotel-reserv-geo", "app": "geo"},
                  t0 + k * 0.006, f"2026-01-05T09:00:00Z INF cmd/geo/main.go:40 > request {k} served in {k % 97}ms")
    log_sec = time.process_time() - start
    q = {"query": ['{namespace="hotel-reservation"} |= "served in 9" | logfmt'], "limit": ["100"],
         "start": [str(int(t0 * 1e9))], "end": [str(int((t0 + 600) * 1e9))]}
    lq = timed(lambda: obs.loki_app("GET", "/loki/api/v1/query_range", q, b""))
    print(f"logs: {100_000 / log_sec:,.0f} lines/s appended; query_range with filter over 100k lines {lq * 1e3:.1f} ms")
    start = time.process_time()
    for k in range(20_000):
        tid = f"{k:032x}"
        obs.traces.add([{"traceID": tid, "spanID": f"{k:016x}", "operationName": "HTTP GET /hotels", "references": [],
                         "startTime": int((t0 + k * 0.03) * 1e6), "duration": 1000 + k % 5000,
                         "tags": [{"key": "span.kind", "type": "string", "value": "server"}], "logs": [],
                         "process": {"serviceName": SERVICES[k % 8], "tags": []}}])
    tr_sec = time.process_time() - start
    tq = timed(lambda: obs.jaeger_app("GET", "/api/traces", {"service": ["geo"], "limit": ["20"]}, b""))
    print(f"traces: {20_000 / tr_sec:,.0f} spans/s added; search by service over 20k traces {tq * 1e3:.1f} ms")

    # memory of the log and trace stores at their default budgets
    gc.collect()
    tracemalloc.start()
    full = Observability(VirtualClock())
    base = tracemalloc.get_traced_memory()[0]
    for k in range(full.logs.max_lines + 10_000):
        full.logs.append({"namespace": "hotel-reservation", "pod": f"geo-{k % 40}", "container": "hotel-reserv-geo",
                          "app": "geo", "job": "hotel-reservation/geo", "node_name": "worker-1"},
                         t0 + k * 0.01, f"2026-01-05T09:00:00Z INF cmd/geo/main.go:40 > request {k} served in {k % 97}ms")
    logs_mem = tracemalloc.get_traced_memory()[0] - base
    base = tracemalloc.get_traced_memory()[0]
    for k in range(full.traces.max_spans + 5_000):
        tid = f"{k // 4:032x}"
        full.traces.add([{"traceID": tid, "spanID": f"{k:016x}", "operationName": "/geo.Geo/Nearby",
                          "references": [{"refType": "CHILD_OF", "traceID": tid, "spanID": f"{k - 1:016x}"}],
                          "startTime": int((t0 + k * 0.01) * 1e6), "duration": 1000 + k % 5000, "flags": 1,
                          "tags": [{"key": "span.kind", "type": "string", "value": "server"},
                                   {"key": "component", "type": "string", "value": "gRPC"}], "logs": [],
                          "process": {"serviceName": SERVICES[k % 8], "tags": [
                              {"key": "hostname", "type": "string", "value": "geo-7d9c6b8f5-x2kqp"}]}}])
    spans_mem = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    print(f"log store at its budget: {full.logs.line_count():,} lines, {logs_mem / 2**20:.1f} MiB; "
          f"trace store at its budget: {full.traces.span_count:,} spans, {spans_mem / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
