"""The Loki HTTP API over the emulated log store: query_range, query, labels, label values,
series, push and readiness, with Loki's response shapes (ns timestamp strings, stats block) and
its plain-text 400 errors."""

from __future__ import annotations

import json
import math
import time
from typing import Any

from kubesim.clock import VirtualClock
from kubesim.observability.formats import format_time, format_value, parse_loki_time, parse_prom_duration
from kubesim.observability.httpapp import Response, first, form_params, json_response, text_response
from kubesim.observability.loki import logql
from kubesim.observability.loki.logql_eval import MetricEvaluator, select_logs
from kubesim.observability.loki.logs import LogStore, to_ns
from kubesim.observability.prometheus.tsdb import matches_all

DEFAULT_LIMIT = 100
MAX_LIMIT = 5000
MAX_POINTS = 11000


class BadRequest(Exception):
    pass


def _stats(lines: int, nbytes: int, exec_time: float, returned: int) -> dict[str, Any]:
    store: dict[str, Any] = {"totalChunksRef": 0, "totalChunksDownloaded": 0, "chunksDownloadTime": 0,
             "chunk": {"headChunkBytes": 0, "headChunkLines": 0, "decompressedBytes": 0, "decompressedLines": 0,
                       "compressedBytes": 0, "totalDuplicates": 0}}
    return {
        "summary": {
            "bytesProcessedPerSecond": int(nbytes / exec_time) if exec_time else 0,
            "linesProcessedPerSecond": int(lines / exec_time) if exec_time else 0,
            "totalBytesProcessed": nbytes, "totalLinesProcessed": lines, "execTime": exec_time,
            "queueTime": 0, "subqueries": 0, "totalEntriesReturned": returned, "splits": 1, "shards": 1,
            "totalPostFilterLines": returned, "totalChunksMatched": 0,
        },
        "querier": {"store": store},
        "ingester": {
            "totalReached": 1, "totalChunksMatched": 1 if lines else 0, "totalBatches": 1 if lines else 0,
            "totalLinesSent": returned,
            "store": {**store, "chunk": {**store["chunk"], "headChunkBytes": nbytes, "headChunkLines": lines}},
        },
        "cache": {name: {"entriesFound": 0, "entriesRequested": 0, "entriesStored": 0, "bytesReceived": 0,
                         "bytesSent": 0, "requests": 0, "downloadTime": 0}
                  for name in ("chunk", "index", "result", "statsResult", "volumeResult")},
    }


class LokiAPI:
    def __init__(self, store: LogStore, clock: VirtualClock) -> None:
        self.store, self.clock = store, clock

    def __call__(self, method: str, path: str, query: dict[str, list[str]], body: bytes) -> Response:
        try:
            return self._route(method, path, query, body)
        except (BadRequest, logql.LogQLError) as e:
            return text_response(400, str(e))

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: bytes) -> Response:
        path = path.rstrip("/") or "/"
        if path == "/ready":
            return text_response(200, "ready\n")
        if path == "/loki/api/v1/push" and method == "POST":
            return self._push(body)
        params = form_params(query, body) if method == "POST" else query
        if path == "/loki/api/v1/query_range":
            return self._query_range(params)
        if path == "/loki/api/v1/query":
            return self._query(params)
        if path == "/loki/api/v1/labels":
            return self._labels(params)
        if path.startswith("/loki/api/v1/label/") and path.endswith("/values"):
            return self._label_values(path[len("/loki/api/v1/label/"):-len("/values")], params)
        if path == "/loki/api/v1/series":
            return self._series(params)
        if path == "/loki/api/v1/status/buildinfo":
            return json_response(200, {"version": "3.1.1", "revision": "1f7d6f4", "branch": "HEAD",
                                       "buildUser": "root@a1b2c3", "buildDate": "2024-08-08T14:38:27Z",
                                       "goVersion": "go1.22.5"})
        return text_response(404, "404 page not found\n")

    # --- params ----------------------------------------------------------------------------
    def _time(self, params: dict[str, list[str]], name: str, default: float) -> float:
        raw = first(params, name)
        if not raw:
            return default
        try:
            return parse_loki_time(raw)
        except ValueError as e:
            raise BadRequest(f'invalid {name} parameter: {e}') from e

    def _window(self, params: dict[str, list[str]], default_span: float) -> tuple[float, float]:
        now = self.clock.now()
        end = self._time(params, "end", now)
        since = first(params, "since")
        span = default_span
        if since:
            try:
                span = parse_prom_duration(since)
            except ValueError as e:
                raise BadRequest(f"invalid since parameter: {e}") from e
        start = self._time(params, "start", end - span)
        if end < start:
            raise BadRequest("the end timestamp must not be before the start time")
        return start, end

    @staticmethod
    def _limit(params: dict[str, list[str]]) -> int:
        raw = first(params, "limit")
        if not raw:
            return DEFAULT_LIMIT
        try:
            n = int(raw)
        except ValueError as e:
            raise BadRequest(f'invalid limit parameter: strconv.ParseInt: parsing "{raw}": invalid syntax') from e
        if n <= 0:
            raise BadRequest("limit must be a positive value")
        if n > MAX_LIMIT:
            raise BadRequest(f"max entries limit per query exceeded, limit > max_entries_limit_per_query ({n} > {MAX_LIMIT})")
        return n

    @staticmethod
    def _direction(params: dict[str, list[str]]) -> str:
        d = (first(params, "direction") or "backward").lower()
        if d not in ("backward", "forward"):
            raise BadRequest(f"invalid direction '{d}'")
        return d

    # --- endpoints ---------------------------------------------------------------------------
    def _query_range(self, params: dict[str, list[str]]) -> Response:
        t0 = time.perf_counter()
        start, end = self._window(params, 3600.0)
        node = logql.parse(first(params, "query", "") or "")
        limit = self._limit(params)
        if logql.is_log_query(node):
            # Loki's end is exclusive, but the virtual clock stands still between advances: a
            # query reaching the present must see what was logged at this very instant.
            reaches_now = end >= self.clock.now()
            streams, scanned, nbytes = select_logs(self.store, node, start, end, limit, self._direction(params),
                                                   end_inclusive=reaches_now)
            returned = sum(len(v) for _, v in streams)
            result = [{"stream": dict(sorted(labels.items())), "values": [[str(ns), line] for ns, line in values]}
                      for labels, values in streams]
            return self._ok("streams", result, _stats(scanned, nbytes, time.perf_counter() - t0, returned))
        step = self._step(params, start, end)
        ev = MetricEvaluator(self.store)
        acc: dict[frozenset[tuple[str, str]], tuple[dict[str, str], list[list[Any]]]] = {}
        n = int(math.floor((end - start) / step + 1e-9))
        for i in range(n + 1):
            t = start + i * step
            val = ev.eval(node, t)
            if isinstance(val, float):
                val = [({}, val)]
            for labels, v in val:
                acc.setdefault(frozenset(labels.items()), (labels, []))[1].append([format_time(t), format_value(v)])
        result = [{"metric": dict(sorted(labels.items())), "values": values}
                  for labels, values in sorted(acc.values(), key=lambda e: sorted(e[0].items()))]
        return self._ok("matrix", result, _stats(ev.lines_scanned, ev.bytes_scanned, time.perf_counter() - t0, 0))

    def _step(self, params: dict[str, list[str]], start: float, end: float) -> float:
        raw = first(params, "step")
        if raw:
            try:
                step = parse_prom_duration(raw)
            except ValueError as e:
                raise BadRequest(f"invalid step parameter: {e}") from e
        else:
            # Loki's default resolution: about 250 points over the range, at least 1s.
            step = max(1.0, math.ceil((end - start) / 250))
        if step <= 0:
            raise BadRequest("zero or negative query resolution step widths are not accepted. Try a positive integer")
        if (end - start) / step > MAX_POINTS:
            raise BadRequest("exceeded maximum resolution of 11,000 points per timeseries. Try increasing the "
                             "value of the step parameter")
        return step

    def _query(self, params: dict[str, list[str]]) -> Response:
        t0 = time.perf_counter()
        t = self._time(params, "time", self.clock.now())
        node = logql.parse(first(params, "query", "") or "")
        if logql.is_log_query(node):
            raise BadRequest("log queries are not supported as an instant query type, please change your query "
                             "to a range query type")
        ev = MetricEvaluator(self.store)
        val = ev.eval(node, t)
        stats = _stats(ev.lines_scanned, ev.bytes_scanned, time.perf_counter() - t0, 0)
        if isinstance(val, float):
            return self._ok("scalar", [format_time(t), format_value(val)], stats)
        result = [{"metric": dict(sorted(labels.items())), "value": [format_time(t), format_value(v)]}
                  for labels, v in sorted(val, key=lambda s: sorted(s[0].items()))]
        return self._ok("vector", result, stats)

    @staticmethod
    def _ok(kind: str, result: Any, stats: dict[str, Any]) -> Response:
        return json_response(200, {"status": "success", "data": {"resultType": kind, "result": result, "stats": stats}})

    def _streams_in(self, params: dict[str, list[str]], selectors: list[str]) -> list[dict[str, str]]:
        start, end = self._window(params, 6 * 3600.0)
        s_ns, e_ns = to_ns(start), to_ns(end) + (1 if end >= self.clock.now() else 0)
        groups = []
        for sel in selectors:
            node = logql.parse(sel)
            if not logql.is_log_query(node):
                raise BadRequest("parse error : only stream selectors are allowed here")
            groups.append(node.matchers)
        out = []
        for s in self.store.streams():
            if groups and not any(matches_all(s.labels, g) for g in groups):
                continue
            i0, i1 = s.window(s_ns, e_ns)
            if i1 > i0:
                out.append(s.labels)
        return out

    def _labels(self, params: dict[str, list[str]]) -> Response:
        sel = first(params, "query")
        names: set[str] = set()
        for labels in self._streams_in(params, [sel] if sel else []):
            names.update(labels)
        return json_response(200, {"status": "success", "data": sorted(names)})

    def _label_values(self, name: str, params: dict[str, list[str]]) -> Response:
        sel = first(params, "query")
        values = {labels[name] for labels in self._streams_in(params, [sel] if sel else []) if name in labels}
        return json_response(200, {"status": "success", "data": sorted(values)})

    def _series(self, params: dict[str, list[str]]) -> Response:
        selectors = params.get("match[]") or params.get("match") or []
        if not selectors:
            raise BadRequest("at least one match[] argument is required")
        found = {frozenset(labels.items()): dict(sorted(labels.items())) for labels in self._streams_in(params, selectors)}
        data = sorted(found.values(), key=lambda labels: sorted(labels.items()))
        return json_response(200, {"status": "success", "data": data})

    def _push(self, body: bytes) -> Response:
        try:
            doc = json.loads(body or b"{}")
            for st in doc.get("streams", []):
                labels = {str(k): str(v) for k, v in (st.get("stream") or {}).items()}
                for ts, line, *_ in st.get("values", []):
                    self.store.append(labels, int(ts) / 1e9, str(line))
        except (ValueError, TypeError, AttributeError) as e:
            raise BadRequest(f"error parsing push request: {e}") from e
        return 204, "text/plain", b""
