"""The Jaeger query HTTP API (v1, as the Jaeger UI and SREGym's MCP server call it): services,
operations, trace search, trace by id and dependencies, in Jaeger's {data, total, limit, offset,
errors} envelope."""

from __future__ import annotations

import json
import re
from typing import Any

from kubesim.clock import VirtualClock
from kubesim.observability.formats import parse_go_duration
from kubesim.observability.httpapp import Response, first, json_response, text_response
from kubesim.observability.jaeger.traces import TraceQuery, TraceStore, trace_json

DEFAULT_LIMIT = 100
DEFAULT_LOOKBACK_US = 2 * 86400 * 1_000_000  # Jaeger's search default when no start is given
DEFAULT_DEPENDENCY_LOOKBACK_MS = 86400 * 1000
_HEX = re.compile(r"^[0-9a-fA-F]{1,32}$")


class QueryError(Exception):
    def __init__(self, code: int, msg: str) -> None:
        super().__init__(msg)
        self.code, self.msg = code, msg


def _envelope(data: Any, total: int = 0, status: int = 200, errors: list[dict[str, Any]] | None = None) -> Response:
    return json_response(status, {"data": data, "total": total, "limit": 0, "offset": 0, "errors": errors})


def _int_param(params: dict[str, list[str]], name: str) -> int | None:
    raw = first(params, name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError as e:
        raise QueryError(400, f'strconv.ParseInt: parsing "{raw}": invalid syntax') from e


class JaegerAPI:
    def __init__(self, store: TraceStore, clock: VirtualClock) -> None:
        self.store, self.clock = store, clock

    def __call__(self, method: str, path: str, query: dict[str, list[str]], body: bytes) -> Response:
        try:
            return self._route(method, path, query)
        except QueryError as e:
            return _envelope(None, status=e.code, errors=[{"code": e.code, "msg": e.msg}])

    def _route(self, method: str, path: str, params: dict[str, list[str]]) -> Response:
        path = path.rstrip("/") or "/"
        if path == "/":
            return text_response(200, "Jaeger UI\n")
        if method != "GET":
            return text_response(405, "405 method not allowed\n")
        if path == "/api/services":
            services = self.store.services()
            return _envelope(services, len(services))
        if path.startswith("/api/services/") and path.endswith("/operations"):
            svc = path[len("/api/services/"):-len("/operations")]
            names = sorted({name for name, _ in self.store.operations(svc)})
            return _envelope(names, len(names))
        if path == "/api/operations":
            service = first(params, "service")
            if not service:
                raise QueryError(400, "parameter 'service' is required")
            ops = [{"name": name, "spanKind": kind}
                   for name, kind in self.store.operations(service, first(params, "spanKind", "") or "")]
            return _envelope(ops, len(ops))
        if path == "/api/traces":
            return self._search(params)
        if path.startswith("/api/traces/"):
            return self._trace(path[len("/api/traces/"):], raw=first(params, "raw") == "true")
        if path == "/api/dependencies":
            return self._dependencies(params)
        return text_response(404, "404 page not found\n")

    def _trace(self, tid: str, raw: bool = False) -> Response:
        if not _HEX.match(tid):
            raise QueryError(400, f'cannot parse traceID param: strconv.ParseUint: parsing "{tid}": invalid syntax')
        tr = self.store.get(tid)
        if tr is None:
            raise QueryError(404, "trace not found")
        return _envelope([trace_json(tr, raw=raw)])

    def _search(self, params: dict[str, list[str]]) -> Response:
        trace_ids = params.get("traceID") or []
        if trace_ids:
            found = []
            for tid in trace_ids:
                if not _HEX.match(tid):
                    raise QueryError(400, f'cannot parse traceID param: strconv.ParseUint: parsing "{tid}": invalid syntax')
                tr = self.store.get(tid)
                if tr is not None:
                    found.append(trace_json(tr))
            return _envelope(found)
        q = self._parse_query(params)
        traces = [trace_json(tr) for tr in self.store.find(q)]
        return _envelope(traces)

    def _parse_query(self, params: dict[str, list[str]]) -> TraceQuery:
        service = first(params, "service", "") or ""
        if not service:
            raise QueryError(400, "parameter 'service' is required")
        now_us = int(self.clock.now() * 1e6)
        end = _int_param(params, "end")
        start = _int_param(params, "start")
        end = end if end is not None else now_us
        if start is None:
            # The UI always sends start with lookback; a bare `lookback=1h` narrows the default window.
            lb = first(params, "lookback")
            start = end - DEFAULT_LOOKBACK_US
            if lb and lb != "custom":
                try:
                    start = end - int(parse_go_duration(lb) * 1e6)
                except ValueError as e:
                    raise QueryError(400, f"unable to parse param 'lookback': {e}") from e
        limit = _int_param(params, "limit")
        tags: dict[str, str] = {}
        for raw in params.get("tag") or []:
            if ":" not in raw:
                raise QueryError(400, f"malformed 'tag' parameter, expecting key:value, received: {raw}")
            k, v = raw.split(":", 1)
            tags[k] = v
        for raw in params.get("tags") or []:
            try:
                obj = json.loads(raw)
                if not isinstance(obj, dict):
                    raise ValueError("tags must be a JSON object")
            except ValueError as e:
                raise QueryError(400, f"malformed 'tags' parameter, cannot unmarshal JSON: {e}") from e
            for k, v in obj.items():
                tags[str(k)] = v if isinstance(v, str) else json.dumps(v)
        dmin = self._duration(params, "minDuration")
        dmax = self._duration(params, "maxDuration")
        if dmin is not None and dmax is not None and dmax < dmin:
            raise QueryError(400, "'maxDuration' should be greater than 'minDuration'")
        return TraceQuery(service=service, operation=first(params, "operation", "") or "", tags=tags,
                          start_min=start, start_max=end, duration_min=dmin, duration_max=dmax,
                          limit=limit if limit is not None else DEFAULT_LIMIT)

    @staticmethod
    def _duration(params: dict[str, list[str]], name: str) -> int | None:
        raw = first(params, name)
        if not raw:
            return None
        try:
            return int(parse_go_duration(raw) * 1e6)
        except ValueError as e:
            raise QueryError(400, f"cannot not parse {name}: {e}") from e

    def _dependencies(self, params: dict[str, list[str]]) -> Response:
        end_ms = _int_param(params, "endTs")
        if end_ms is None:
            end_ms = int(self.clock.now() * 1000)
        lookback_ms = _int_param(params, "lookback")
        if lookback_ms is None:
            lookback_ms = DEFAULT_DEPENDENCY_LOOKBACK_MS
        deps = self.store.dependencies(end_ms * 1000, lookback_ms * 1000)
        svc = first(params, "service")
        if svc:
            deps = [d for d in deps if svc in (d["parent"], d["child"])]
        return _envelope(deps, len(deps))
