"""The observability tools: plain HTTP to the cluster's Prometheus, Loki and Jaeger query APIs,
on the cluster's clock, with the farm's machinery filtered out, rendered raw or summarised."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx

from core import tls
from core.errors import ToolError
from farm.interface import scope, summarise, visibility

_RELATIVE = re.compile(r"^(?:now)?\s*(?:-\s*(\d+(?:\.\d+)?)\s*([smhd]))?$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_time(value: str | float | int | None, now: float) -> float:
    """Unix seconds, RFC 3339, or relative to cluster time: "now", "now-15m", "-2h"."""
    if value is None or value == "":
        return now
    if isinstance(value, int | float):
        return float(value)
    text = value.strip()
    try:
        return float(text)
    except ValueError:
        pass
    match = _RELATIVE.match(text)
    if match:
        amount, unit = match.groups()
        return now - (float(amount) * _UNITS[unit] if amount else 0.0)
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise ToolError(f"cannot read time '{value}': use unix seconds, RFC 3339, or 'now-15m'") from None


def parse_step(value: str | float | int) -> float:
    if isinstance(value, int | float):
        step = float(value)
    else:
        text = value.strip()
        match = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd]?)", text)
        if not match:
            raise ToolError(f"cannot read step '{value}': use seconds or a duration like 30s, 1m")
        step = float(match.group(1)) * _UNITS.get(match.group(2) or "s", 1)
    if step <= 0:
        raise ToolError("step must be positive")
    return step


def _namespace_of(item: dict[str, Any]) -> str | None:
    labels = item.get("stream") or item.get("metric") or {}
    return next((labels[k] for k in visibility.NAMESPACE_LABELS if k in labels), None)


class Telemetry:
    """One session's view of the three query APIs."""

    def __init__(self, prometheus: str, loki: str, jaeger: str, now: Callable[[], float],
                 namespace: str, summarised: bool, timeout_s: float = 20.0, also: tuple[str, ...] = ()) -> None:
        self.prometheus, self.loki, self.jaeger = prometheus, loki, jaeger
        self.now, self.namespace, self.summarised = now, namespace, summarised
        self.namespaces = (namespace, *also)  # what every query is scoped to (farm/interface/scope.py)
        self.http = httpx.Client(timeout=timeout_s, trust_env=False, verify=tls.ssl_context())

    def close(self) -> None:
        self.http.close()

    def _get(self, base: str, path: str, params: dict[str, Any], what: str) -> Any:
        try:
            resp = self.http.get(base + path, params=params)
        except httpx.TimeoutException:
            raise ToolError(f"{what} did not answer in time") from None
        except httpx.HTTPError as exc:
            raise ToolError(f"{what} is unreachable: {type(exc).__name__}") from None
        try:
            body = resp.json()
        except ValueError:
            body = None
        if resp.status_code >= 400:
            detail = (body or {}).get("error") if isinstance(body, dict) else None
            raise ToolError(f"{what} refused the query (HTTP {resp.status_code}): {detail or resp.text[:300]}")
        if body is None:
            raise ToolError(f"{what} returned something that is not JSON")
        if isinstance(body, dict) and body.get("status") == "error":
            raise ToolError(f"{what} query failed: {body.get('errorType', '')} {body.get('error', '')}".strip())
        return body

    # -- Prometheus ------------------------------------------------------------------------
    def _prom(self, path: str, query: str, params: dict[str, Any]) -> dict[str, Any]:
        visibility.refuse_hidden_query(query)
        params["query"] = scope.scope_promql(query, self.namespaces)
        data = self._get(self.prometheus, path, params, "Prometheus")["data"]
        if isinstance(data.get("result"), list) and data.get("resultType") in ("vector", "matrix"):
            data["result"] = visibility.filter_series(data["result"])
        return data

    def prometheus_query(self, query: str, time: str | float | None = None) -> str:
        data = self._prom("/api/v1/query", query, {"time": parse_time(time, self.now())})
        return summarise.prometheus(data) if self.summarised else json.dumps(data)

    def prometheus_query_range(self, query: str, start: str | float, end: str | float,
                               step: str | float = "60s") -> str:
        now = self.now()
        t0, t1, dt = parse_time(start, now), parse_time(end, now), parse_step(step)
        if t1 < t0:
            raise ToolError("end is before start")
        if (t1 - t0) / dt > 11000:
            raise ToolError("too many points: widen the step (at most 11000 points per series)")
        data = self._prom("/api/v1/query_range", query, {"start": t0, "end": t1, "step": dt})
        return summarise.prometheus(data) if self.summarised else json.dumps(data)

    def get_alerts(self) -> str:
        alerts = self._get(self.prometheus, "/api/v1/alerts", {}, "Prometheus")["data"]["alerts"]
        # Alerts of the session's namespaces, and the cluster's own (no namespace: a node's).
        firing = [a for a in alerts if a.get("state") == "firing"
                  and _namespace_of({"metric": a.get("labels") or {}}) in (None, "", *self.namespaces)
                  and not visibility.labels_hidden(a.get("labels") or {})
                  and not visibility.mentions_hidden(json.dumps(a.get("annotations") or {}))]
        if not firing:
            return "No firing alerts"
        if not self.summarised:
            return json.dumps(firing)
        lines = [f"{len(firing)} firing alerts:"]
        for a in firing:
            labels = a.get("labels") or {}
            where = ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k not in ("alertname", "severity"))
            summary = (a.get("annotations") or {}).get("summary") or (a.get("annotations") or {}).get("description", "")
            lines.append(f"  {labels.get('alertname')} [{labels.get('severity', '')}] {where} "
                         f"since {a.get('activeAt', '?')}: {summary}")
        return "\n".join(lines)

    # -- Loki ------------------------------------------------------------------------------
    def loki_query(self, query: str, minutes: float = 15) -> str:
        if minutes <= 0:
            raise ToolError("minutes must be positive")
        visibility.refuse_hidden_query(query)
        now = self.now()
        params = {"query": scope.scope_logql(query, self.namespaces),
                  "start": int((now - minutes * 60) * 1e9), "end": int(now * 1e9),
                  "limit": 1000 if self.summarised else 100, "direction": "backward"}
        data = self._get(self.loki, "/loki/api/v1/query_range", params, "Loki")["data"]
        # The query read only the session's streams; a stream that still names another namespace
        # (a label_format wrote it) or the farm's machinery is dropped all the same.
        result = [r for r in visibility.filter_series(data.get("result") or [])
                  if _namespace_of(r) in (None, "", *self.namespaces)]
        if data.get("resultType") == "streams":
            for stream in result:
                stream["values"] = visibility.filter_lines(stream.get("values") or [])
            if self.summarised:
                return summarise.loki(result)
            rows = []
            for stream in result:
                labels = ", ".join(f"{k}={v}" for k, v in sorted((stream.get("stream") or {}).items()))
                for ts, line in stream.get("values") or []:
                    rows.append((int(ts), f"[{summarise.fmt_time(int(ts) / 1e9)}] [{labels}] {line}"))
            rows.sort()
            return "\n".join(r for _, r in rows) or "No logs found matching the query."
        # a metric query (count_over_time, rate): same shape as Prometheus
        data["result"] = result
        return summarise.prometheus(data) if self.summarised else json.dumps(data)

    def loki_labels(self) -> str:
        now = self.now()
        # Label names and values of the session's own streams only (Loki's `query` parameter).
        span: dict[str, Any] = {"start": int((now - 3600) * 1e9), "end": int(now * 1e9),
                                "query": "{" + scope.logql_matcher(self.namespaces) + "}"}
        names = self._get(self.loki, "/loki/api/v1/labels", dict(span), "Loki").get("data") or []
        lines = ["Available labels:"]
        for name in names:
            if visibility.mentions_hidden(name) or name.startswith("__"):
                continue
            values = self._get(self.loki, f"/loki/api/v1/label/{name}/values", dict(span), "Loki").get("data") or []
            shown = [v for v in values if not visibility.mentions_hidden(v)
                     and not (name in visibility.NAMESPACE_LABELS and v not in self.namespaces)]
            more = f" (+{len(shown) - 20} more)" if len(shown) > 20 else ""
            lines.append(f"  - {name}: {', '.join(shown[:20])}{more}")
        return "\n".join(lines)

    # -- Jaeger ----------------------------------------------------------------------------
    def jaeger_services(self) -> str:
        services = self._get(self.jaeger, "/api/services", {}, "Jaeger").get("data") or []
        visible = sorted(s for s in services if not visibility.mentions_hidden(s))
        return json.dumps(visible) if not self.summarised else ", ".join(visible) or "no services"

    def jaeger_operations(self, service: str) -> str:
        visibility.refuse_hidden_query(service)
        body = self._get(self.jaeger, "/api/operations", {"service": service}, "Jaeger")
        ops = body.get("data") or []
        if self.summarised:
            return ", ".join(sorted({o.get("name", "?") if isinstance(o, dict) else str(o) for o in ops})) or (
                f"no operations recorded for {service}")
        return json.dumps(ops)

    def jaeger_traces(self, service: str, minutes: float = 15, limit: int = 20) -> str:
        if minutes <= 0 or limit <= 0:
            raise ToolError("minutes and limit must be positive")
        visibility.refuse_hidden_query(service)
        now = self.now()
        params = {"service": service, "start": int((now - minutes * 60) * 1e6), "end": int(now * 1e6),
                  "limit": min(int(limit), 1500)}
        traces = self._get(self.jaeger, "/api/traces", params, "Jaeger").get("data") or []
        for trace in traces:
            processes = trace.get("processes") or {}
            trace["spans"] = [s for s in trace.get("spans") or [] if not visibility.span_hidden(s, processes)]
            trace["processes"] = {k: p for k, p in processes.items()
                                  if not visibility.mentions_hidden(str(p.get("serviceName", "")))}
        traces = [t for t in traces if t["spans"]]
        return summarise.jaeger_traces(traces) if self.summarised else json.dumps(traces)

    def jaeger_dependencies(self, minutes: float = 60) -> str:
        now = self.now()
        body = self._get(self.jaeger, "/api/dependencies",
                         {"endTs": int(now * 1000), "lookback": int(minutes * 60 * 1000)}, "Jaeger")
        links = [d for d in body.get("data") or []
                 if not visibility.mentions_hidden(f"{d.get('parent')} {d.get('child')}")]
        if self.summarised:
            return "\n".join(f"{d.get('parent')} -> {d.get('child')} ({d.get('callCount', 0)} calls)"
                             for d in sorted(links, key=lambda d: (d.get("parent"), d.get("child")))) or "no dependencies"
        return json.dumps({"data": links})
