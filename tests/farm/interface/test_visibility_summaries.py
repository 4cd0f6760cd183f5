"""Hiding the injection machinery from telemetry, the summarised renderings, token counting."""

from __future__ import annotations

import pytest

from core.errors import ToolError
from farm.interface import scope, summarise, visibility
from farm.interface.record import count_tokens

NS = ("hotel-reservation",)


def test_every_promql_selector_is_scoped_to_the_session() -> None:
    q = scope.scope_promql('sum by (pod) (rate(container_cpu_usage_seconds_total{namespace="x"}[5m])) / count(up)', NS)
    assert q.count('namespace=~"hotel-reservation|"') == 2
    assert 'namespace="x"' in q
    rewritten = scope.scope_promql('label_replace(kube_pod_info{namespace="kube-system"}, "namespace", "hotel-reservation", '
                                   '"", "") or rate(x[5m:1m] offset 5m) or absent(y @ 100)', NS)
    assert rewritten.count('namespace=~"hotel-reservation|"') == 3, rewritten


def test_promql_refusals() -> None:
    with pytest.raises(ToolError, match="invalid PromQL"):
        scope.scope_promql("sum(", NS)
    with pytest.raises(ToolError, match="__name__"):
        scope.scope_promql('{__name__=~"chaos.*"}', NS)
    with pytest.raises(ToolError, match="not observable"):
        visibility.refuse_hidden_query('kube_pod_info{namespace="chaos-mesh"}')


@pytest.mark.parametrize(("query", "selectors"), [
    ('{app="geo"}', 1),
    ('{}', 1),
    ('{namespace=~".+"} | label_format namespace="hotel-reservation"', 1),
    (r"""{job=~".+"} | drop namespace | line_format "{{ regexReplaceAll \"x\" .pod \"{y}\" }}" """, 1),
    ('sum(rate({app="a"}[5m])) / sum(rate({app="b"} |= "}{" [5m]))', 2),
    ('{app="a"} |= `{namespace="kube-system"}`', 1),
])
def test_every_logql_stream_selector_is_scoped_to_the_session(query: str, selectors: int) -> None:
    scoped = scope.scope_logql(query, NS)
    assert scoped.count('{namespace="hotel-reservation"') == selectors, scoped
    assert scoped.replace('{namespace="hotel-reservation", ', "{").replace('{namespace="hotel-reservation"', "{") == query


@pytest.mark.parametrize(("query", "reason"), [
    ('{app="a"} # comment', "comments"),
    ('{app="a"} |= "unclosed', "not closed"),
    ('sum(rate(x[5m]))', "stream selector"),
])
def test_logql_the_scoping_cannot_read_is_refused(query: str, reason: str) -> None:
    with pytest.raises(ToolError, match=reason):
        scope.scope_logql(query, NS)


def test_several_namespaces_are_one_matcher() -> None:
    assert scope.logql_matcher(("a", "b-op")) == 'namespace=~"a|b-op"'
    with pytest.raises(ValueError):
        scope.logql_matcher(("a|.*",))


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
