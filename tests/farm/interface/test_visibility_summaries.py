"""Hiding the injection machinery from telemetry, the summarised renderings, token counting."""

from __future__ import annotations

import pytest

from core.errors import ToolError
from farm.interface import summarise, visibility
from farm.interface.record import count_tokens


def test_promql_selectors_exclude_hidden_namespaces() -> None:
    q = visibility.restrict_promql('sum by (pod) (rate(container_cpu_usage_seconds_total{namespace="x"}[5m])) / count(up)')
    assert q.count('namespace!~"chaos-mesh|chaos-testing|farm-.*"') == 2
    assert 'namespace="x"' in q


def test_promql_refusals() -> None:
    with pytest.raises(ToolError, match="invalid PromQL"):
        visibility.restrict_promql("sum(")
    with pytest.raises(ToolError, match="__name__"):
        visibility.restrict_promql('{__name__=~"chaos.*"}')
    with pytest.raises(ToolError, match="not observable"):
        visibility.refuse_hidden_query('kube_pod_info{namespace="chaos-mesh"}')


def test_hidden_series_and_lines_are_dropped() -> None:
    series = [
        {"metric": {"namespace": "hotel-reservation", "pod": "geo-1"}, "value": [1, "1"]},
        {"metric": {"namespace": "chaos-mesh", "pod": "chaos-daemon-x"}, "value": [1, "1"]},
        {"metric": {"pod": "chaos-daemon-y"}, "value": [1, "1"]},
        {"metric": {"instance": "worker-1"}, "value": [1, "1"]},
    ]
    kept = visibility.filter_series(series)
    assert [s["metric"].get("pod", s["metric"].get("instance")) for s in kept] == ["geo-1", "worker-1"]
    lines = [["1", "ok line"], ["2", "injected by chaos-daemon"]]
    assert visibility.filter_lines(lines) == [["1", "ok line"]]


def test_logs_summary_groups_templates_with_counts() -> None:
    streams = [{"stream": {"pod": "geo-1"}, "values": [
        [str(int((1_700_000_000 + i) * 1e9)), f"dial tcp 10.96.0.{i}:27018: connection refused"] for i in range(30)
    ] + [[str(int(1_700_000_100e9)), "started"]]}]
    text = summarise.loki(streams)
    assert "31 lines, 2 distinct messages" in text
    assert "[geo-1] x30" in text


def test_metric_summary_reports_only_what_changed() -> None:
    data = {"resultType": "matrix", "result": [
        {"metric": {"__name__": "up", "pod": "a"}, "values": [[0, "1"], [60, "1"]]},
        {"metric": {"__name__": "errors", "pod": "geo"}, "values": [[0, "0"], [60, "5"], [120, "9"]]},
    ]}
    text = summarise.prometheus(data)
    assert "1 series changed" in text and 'pod="geo"' in text and "first 0, last 9" in text
    assert "1 series constant at 1" in text


def test_trace_summary_groups_errors_by_span() -> None:
    def span(i: int, svc: str, err: bool) -> dict:
        return {"spanID": f"s{i}", "operationName": f"{svc}.Op", "duration": 1000 * (i + 1),
                "processID": svc, "tags": [{"key": "error", "value": err}]}
    traces = [{"traceID": str(t), "processes": {"frontend": {"serviceName": "frontend"}, "geo": {"serviceName": "geo"}},
               "spans": [span(0, "frontend", True), span(1, "geo", True)]} for t in range(3)]
    text = summarise.jaeger_traces(traces)
    assert "3 traces, 3 with errors" in text
    assert "geo geo.Op: x3" in text


def test_kubectl_dedupe_collapses_similar_lines() -> None:
    text = "\n".join(f"Warning BackOff pod/geo-{i} Back-off restarting failed container" for i in range(5))
    assert "(x5 similar lines)" in summarise.dedupe_text(text.replace("geo-", "geo-1"))


def test_tokens_are_counted_offline() -> None:
    assert count_tokens("kubectl get pods") == 3  # "kubectl", " get", " pods" in cl100k_base
    assert count_tokens("word " * 100) == 101  # "word", 99 x " word", " "
    assert count_tokens("") == 0
