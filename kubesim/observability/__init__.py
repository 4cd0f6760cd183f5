"""The emulated cluster's observability back ends: a TSDB with PromQL and alert rules, a log store
with LogQL, a trace store, and the Prometheus, Loki and Jaeger HTTP query protocols over them."""

from __future__ import annotations

import threading
from typing import Any

from kubesim.clock import VirtualClock
from kubesim.observability.httpapp import App, AppServer, Response
from kubesim.observability.jaeger.api import JaegerAPI
from kubesim.observability.jaeger.traces import DEFAULT_MAX_SPANS, TraceStore
from kubesim.observability.loki.api import LokiAPI
from kubesim.observability.loki.logs import DEFAULT_MAX_LINES, DEFAULT_MAX_LINES_PER_STREAM, LogStore
from kubesim.observability.prometheus.api import PrometheusAPI
from kubesim.observability.prometheus.rules import DEFAULT_RULE_SETS, RuleManager
from kubesim.observability.prometheus.tsdb import TSDB

__all__ = ["Observability", "TSDB", "LogStore", "TraceStore", "RuleManager", "AppServer", "App"]

DEFAULT_RETENTION = 2 * 3600.0


class Observability:
    """One cluster's metrics, logs and traces on the cluster's clock, and the three query APIs.

    The cluster writes with `tsdb.append` (or, cheaper, `tsdb.ref` once per series then
    `tsdb.append_ref`; `tsdb.mark_stale` when a series disappears, as Prometheus does),
    `logs.append` and `traces.add`, calls `evaluate_rules(now)` every 15-30 s of cluster time,
    and mounts `prometheus_app`, `loki_app` and `jaeger_app` on its ports. The apps hold `lock`
    while they answer: pass the lock the cluster holds while it advances. Everything older than
    `retention` seconds of cluster time is forgotten, and logs and spans have budgets, so memory
    stays bounded however long a cluster lives."""

    def __init__(self, clock: VirtualClock, lock: threading.RLock | None = None, retention: float = DEFAULT_RETENTION,
                 rule_sets: tuple[str, ...] = DEFAULT_RULE_SETS, max_spans: int = DEFAULT_MAX_SPANS,
                 max_lines: int = DEFAULT_MAX_LINES, max_lines_per_stream: int = DEFAULT_MAX_LINES_PER_STREAM) -> None:
        self.clock = clock
        # Queries run on server threads while the cluster writes; pass the lock the cluster holds
        # while it advances (its store's RLock) so a query never sees a half-written scrape.
        self.lock = lock if lock is not None else threading.RLock()
        self.retention = retention
        self.tsdb = TSDB(retention=retention)
        self.logs = LogStore(retention=retention, max_lines=max_lines, max_lines_per_stream=max_lines_per_stream)
        self.traces = TraceStore(max_spans=max_spans, retention=retention)
        self.rules = RuleManager(self.tsdb, rule_sets=rule_sets)
        self.prometheus_app: App = self._locked(PrometheusAPI(self.tsdb, clock, self.rules))
        self.loki_app: App = self._locked(LokiAPI(self.logs, clock))
        self.jaeger_app: App = self._locked(JaegerAPI(self.traces, clock))
        self._last_trim = float("-inf")

    def _locked(self, app: App) -> App:
        def serve(method: str, path: str, query: dict[str, list[str]], body: bytes) -> Response:
            with self.lock:
                return app(method, path, query, body)

        return serve

    def evaluate_rules(self, now: float | None = None) -> None:
        """Evaluate the rule groups that are due at `now` (cluster time), then apply retention."""
        t = self.clock.now() if now is None else now
        with self.lock:
            self.rules.evaluate(t)
            self.trim(t)

    def trim(self, now: float) -> None:
        """Apply retention; at most once a minute of cluster time, since it walks every store."""
        if now < self._last_trim + 60.0:
            return
        self._last_trim = now
        self.tsdb.trim(now)
        self.logs.trim(now)
        self.traces.trim(now)

    def reset(self) -> None:
        """Drop every sample, line, span and alert (cluster reset)."""
        with self.lock:
            self.tsdb.clear()
            self.logs.clear()
            self.traces.clear()
            self.rules.clear()
            self._last_trim = float("-inf")

    def checkpoint(self) -> dict[str, Any]:
        """A copy of all stored telemetry and alert state; `restore` accepts it any number of times."""
        with self.lock:
            return self._checkpoint()

    def _checkpoint(self) -> dict[str, Any]:
        return {
            "tsdb": self.tsdb.checkpoint(),
            "logs": self.logs.checkpoint(),
            "traces": self.traces.checkpoint(),
            "rules": self.rules.checkpoint(),
            "last_trim": self._last_trim,
        }

    def restore(self, state: dict[str, Any]) -> None:
        with self.lock:
            self.tsdb.restore(state["tsdb"])
            self.logs.restore(state["logs"])
            self.traces.restore(state["traces"])
            self.rules.restore(state["rules"])
            self._last_trim = state.get("last_trim", float("-inf"))

    def stats(self) -> dict[str, int]:
        return {"series": len(self.tsdb), "samples": self.tsdb.sample_count(),
                "log_lines": self.logs.line_count(), "traces": len(self.traces), "spans": self.traces.span_count}
