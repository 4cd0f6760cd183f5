"""The Prometheus HTTP API (v1) over the emulated TSDB and rule manager: query, query_range,
series, labels, label values, alerts, rules, targets, buildinfo and health, GET or form POST,
with Prometheus's envelope, value formats and error types."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import promql_parser as pp

from kubesim.clock import VirtualClock, rfc3339
from kubesim.observability.formats import (
    format_time,
    format_value,
    parse_prom_duration,
    parse_prom_time,
    rfc3339_nano,
)
from kubesim.observability.httpapp import Response, first, form_params, json_response, text_response
from kubesim.observability.prometheus.metadata import METADATA, SYNTHETIC
from kubesim.observability.prometheus.promql import (
    LOOKBACK,
    Evaluator,
    PromQLError,
    RangeVector,
    Scalar,
    String,
    parse,
    range_query,
)
from kubesim.observability.prometheus.rules import RuleManager
from kubesim.observability.prometheus.tsdb import TSDB, Matcher, matches_all

# The Prometheus SREGym deploys (prometheus-community chart 25.6.0, appVersion v2.47.2); the
# evaluator follows its 2.x semantics (closed range windows, lookback including its bound).
BUILD_INFO = {
    "version": "2.47.2",
    "revision": "3f3172cde1ee37f1c7b3a5f3d9b031190509b3ad",
    "branch": "HEAD",
    "buildUser": "root@79f2ad339b75",
    "buildDate": "20231012-16:07:10",
    "goVersion": "go1.21.3",
}
_STATUS_BY_TYPE = {"bad_data": 400, "execution": 422, "timeout": 503, "canceled": 503, "internal": 500}


def _error(error_type: str, message: str) -> Response:
    return json_response(_STATUS_BY_TYPE.get(error_type, 400),
                         {"status": "error", "errorType": error_type, "error": message})


def _success(data: Any, warnings: list[str] | None = None) -> Response:
    body: dict[str, Any] = {"status": "success", "data": data}
    if warnings:
        body["warnings"] = warnings
    return json_response(200, body)


def _vector_json(vec: list[tuple[dict[str, str], float]], t: float) -> list[dict[str, Any]]:
    ft = format_time(t)
    return [{"metric": _sorted(labels), "value": [ft, format_value(v)]} for labels, v in vec]


def _sorted(labels: dict[str, str]) -> dict[str, str]:
    """Labels in Prometheus's order (sorted, so __name__ comes first)."""
    return dict(sorted(labels.items()))


def _selector_matchers(text: str) -> list[Matcher]:
    try:
        expr = pp.parse(text)
    except ValueError as e:
        raise PromQLError("bad_data", f'invalid parameter "match[]": parse error: {e}') from e
    if not isinstance(expr, pp.VectorSelector):
        raise PromQLError("bad_data", 'invalid parameter "match[]": parse error: expected vector selector')
    ms = [Matcher.from_parser(m) for m in expr.matchers.matchers]
    if expr.name:
        ms.append(Matcher("__name__", "=", expr.name))
    if all(m.matches_empty() for m in ms):
        raise PromQLError("bad_data", 'invalid parameter "match[]": parse error: vector selector must contain '
                          "at least one non-empty matcher")
    return ms


class PrometheusAPI:
    """The app callable the cluster's server mounts on its Prometheus port."""

    def __init__(self, tsdb: TSDB, clock: VirtualClock, rules: RuleManager) -> None:
        self.tsdb, self.clock, self.rules = tsdb, clock, rules

    def __call__(self, method: str, path: str, query: dict[str, list[str]], body: bytes) -> Response:
        params = form_params(query, body) if method == "POST" else query
        try:
            return self._route(method, path, params)
        except PromQLError as e:
            return _error(e.error_type, e.message)

    def _route(self, method: str, path: str, params: dict[str, list[str]]) -> Response:
        path = path.rstrip("/") or "/"
        if path == "/-/healthy":
            return text_response(200, "Prometheus Server is Healthy.\n")
        if path == "/-/ready":
            return text_response(200, "Prometheus Server is Ready.\n")
        if not path.startswith("/api/v1/"):
            return text_response(404, "404 page not found\n")
        endpoint = path[len("/api/v1/"):]
        post_ok = endpoint in ("query", "query_range", "series", "labels")
        if method not in ("GET", "HEAD") and not (method == "POST" and post_ok):
            return text_response(405, "Method Not Allowed\n")
        if endpoint == "query":
            return self._query(params)
        if endpoint == "query_range":
            return self._query_range(params)
        if endpoint == "series":
            return self._series(params)
        if endpoint == "labels":
            return self._labels(params)
        if endpoint.startswith("label/") and endpoint.endswith("/values"):
            return self._label_values(endpoint[len("label/"):-len("/values")], params)
        if endpoint == "alerts":
            return _success({"alerts": self.rules.alerts_json()})
        if endpoint == "rules":
            return self._rules(params)
        if endpoint == "targets":
            return _success(self._targets(first(params, "state", "any") or "any"))
        if endpoint == "status/buildinfo":
            return _success(BUILD_INFO)
        if endpoint == "status/runtimeinfo":
            # Prometheus came up with the cluster's monitoring stack, five minutes before its start.
            started = rfc3339(getattr(self.clock, "start", self.clock.now()) - 300.0)
            return _success({"startTime": started, "CWD": "/prometheus", "reloadConfigSuccess": True,
                             "lastConfigTime": started, "storageRetention": "15d"})
        if endpoint == "metadata":
            return _success(self._metadata(first(params, "metric"), self._limit(params)))
        return text_response(404, "404 page not found\n")

    # --- params ----------------------------------------------------------------------------
    def _time(self, params: dict[str, list[str]], name: str, default: float | None) -> float:
        raw = first(params, name)
        if raw is None or raw == "":
            if default is None:
                raise PromQLError("bad_data", f'invalid parameter "{name}": cannot parse "" to a valid timestamp')
            return default
        return _parsed(name, raw, parse_prom_time)

    def _lookback(self, params: dict[str, list[str]]) -> float:
        raw = first(params, "lookback_delta")
        if not raw:
            return LOOKBACK
        return _parsed("lookback_delta", raw, parse_prom_duration)

    # --- endpoints ---------------------------------------------------------------------------
    def _query(self, params: dict[str, list[str]]) -> Response:
        t = self._time(params, "time", self.clock.now())
        expr = parse(first(params, "query", "") or "")
        val = Evaluator(self.tsdb, t, t, self._lookback(params)).eval(expr, t)
        ft = format_time(t)
        if isinstance(val, Scalar):
            return _success({"resultType": "scalar", "result": [ft, format_value(val.v)]})
        if isinstance(val, String):
            return _success({"resultType": "string", "result": [ft, val.s]})
        if isinstance(val, RangeVector):
            result = [
                {"metric": _sorted(labels), "values": [[format_time(a), format_value(b)] for a, b in zip(ts, vs, strict=True)]}
                for labels, ts, vs in sorted(val.series, key=lambda s: sorted(s[0].items()))
            ]
            return _success({"resultType": "matrix", "result": result})
        limit = self._limit(params)
        warnings = None
        if limit and len(val) > limit:
            val = val[:limit]
            warnings = ["results truncated due to limit"]
        return _success({"resultType": "vector", "result": _vector_json(val, t)}, warnings)

    def _limit(self, params: dict[str, list[str]]) -> int:
        raw = first(params, "limit")
        if not raw:
            return 0
        try:
            n = int(raw)
        except ValueError as e:
            raise PromQLError("bad_data", f'invalid parameter "limit": cannot parse "{raw}" to a valid limit') from e
        if n < 0:
            raise PromQLError("bad_data", 'invalid parameter "limit": limit must be non-negative')
        return n

    def _query_range(self, params: dict[str, list[str]]) -> Response:
        start = self._time(params, "start", None)
        end = self._time(params, "end", None)
        raw_step = first(params, "step")
        if not raw_step:
            raise PromQLError("bad_data", 'invalid parameter "step": cannot parse "" to a valid duration')
        try:
            step = parse_prom_duration(raw_step)
        except ValueError as e:
            raise PromQLError("bad_data", f'invalid parameter "step": {e}') from e
        rows = range_query(self.tsdb, first(params, "query", "") or "", start, end, step, self._lookback(params))
        result = [
            {"metric": _sorted(labels), "values": [[format_time(t), format_value(v)] for t, v in points]}
            for labels, points in rows
        ]
        return _success({"resultType": "matrix", "result": result})

    def _matching_series(self, params: dict[str, list[str]], required: bool) -> list[dict[str, str]]:
        selectors = params.get("match[]") or []
        if not selectors and required:
            raise PromQLError("bad_data", "no match[] parameter provided")
        start = self._time(params, "start", -math.inf)
        end = self._time(params, "end", math.inf)
        groups = [_selector_matchers(s) for s in selectors]
        out: dict[frozenset[tuple[str, str]], dict[str, str]] = {}
        for s in self.tsdb.series():
            if groups and not any(matches_all(s.labels, g) for g in groups):
                continue
            ts = s.ts
            if not ts or ts[-1] < start or ts[0] > end:
                continue
            out[frozenset(s.labels.items())] = _sorted(s.labels)
        return sorted(out.values(), key=lambda labels: sorted(labels.items()))

    def _series(self, params: dict[str, list[str]]) -> Response:
        return _success(self._matching_series(params, required=True))

    def _labels(self, params: dict[str, list[str]]) -> Response:
        names: set[str] = set()
        for labels in self._matching_series(params, required=False):
            names.update(k for k, v in labels.items() if v != "")
        return _success(sorted(names))

    def _label_values(self, name: str, params: dict[str, list[str]]) -> Response:
        values = {labels.get(name, "") for labels in self._matching_series(params, required=False)}
        values.discard("")
        return _success(sorted(values))

    def _rules(self, params: dict[str, list[str]]) -> Response:
        kind = first(params, "type")
        if kind not in (None, "", "alert", "record"):
            raise PromQLError("bad_data", f'invalid parameter "type": not supported value "{kind}"')
        return _success(self.rules.rules_json(
            kind=kind or None,
            rule_names=set(params.get("rule_name[]") or []),
            group_names=set(params.get("rule_group[]") or []),
            files=set(params.get("file[]") or []),
            exclude_alerts=(first(params, "exclude_alerts") or "").lower() == "true",
        ))

    def _metadata(self, metric: str | None, limit: int = 0) -> dict[str, list[dict[str, str]]]:
        """Help and type of every metric family stored, as the exporters declare them
        (observability/metadata.py); a family no table knows gets its type from the naming
        conventions and no help, as an exporter that writes no HELP line gives."""
        out: dict[str, list[dict[str, str]]] = {}
        names = set(self.tsdb.metric_names())
        for name in sorted(names):
            if name in SYNTHETIC or ":" in name:  # Prometheus's own series and recording rules
                continue
            family, kind = name, "gauge"
            for suffix in ("_bucket", "_sum", "_count"):
                if name.endswith(suffix) and f"{name[: -len(suffix)]}_bucket" in names:
                    family, kind = name[: -len(suffix)], "histogram"
            if kind == "gauge" and name.endswith("_total"):
                kind = "counter"
            if metric and family != metric:
                continue
            if family not in out and limit and len(out) >= limit:
                break
            kind, text = METADATA.get(family, (kind, ""))
            out.setdefault(family, [{"type": kind, "help": text, "unit": ""}])
        return out

    def _targets(self, state: str) -> dict[str, Any]:
        """Scrape targets as the `up` series that the cluster writes describe them."""
        active = []
        if state in ("any", "active"):
            for s in self.tsdb.select([Matcher("__name__", "=", "up")]):
                if not s.ts:
                    continue
                labels = {k: v for k, v in s.labels.items() if k != "__name__"}
                health = "up" if s.vs[-1] == 1 else "down"
                inst = labels.get("instance", "")
                active.append({
                    "discoveredLabels": {"__address__": inst, "job": labels.get("job", "")},
                    "labels": labels,
                    "scrapePool": labels.get("job", ""),
                    "scrapeUrl": f"http://{inst}/metrics",
                    "globalUrl": f"http://{inst}/metrics",
                    "lastError": "" if health == "up" else f'Get "http://{inst}/metrics": context deadline exceeded',
                    "lastScrape": rfc3339_nano(s.ts[-1]),
                    "lastScrapeDuration": 0.012,
                    "health": health,
                    "scrapeInterval": "15s",
                    "scrapeTimeout": "10s",
                })
        return {"activeTargets": active, "droppedTargets": [], "droppedTargetCounts": {}}


def _parsed(name: str, raw: str, parse: Callable[[str], float]) -> float:
    """Parameter `name` read by `parse`; what it cannot read is the API's bad_data error."""
    try:
        return parse(raw)
    except ValueError as e:
        raise PromQLError("bad_data", f'invalid parameter "{name}": {e}') from e
