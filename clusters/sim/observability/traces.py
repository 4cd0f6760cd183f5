"""The emulated Jaeger's storage: spans in the Jaeger JSON model grouped by trace, indexed by
service and operation, bounded by a span budget and a cluster-time retention window (oldest
traces go first), with the search and dependency semantics of Jaeger's in-memory store."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

DEFAULT_MAX_SPANS = 200_000
DEFAULT_RETENTION = 2 * 3600.0

Span = dict[str, Any]


def normalize_trace_id(tid: str) -> str:
    tid = tid.strip().lower()
    stripped = tid.lstrip("0")
    return stripped or "0"


def tag_value_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(value)
    return str(value)


def span_kind(span: Span) -> str:
    for t in span.get("tags") or ():
        if t.get("key") == "span.kind":
            return str(t.get("value", ""))
    return ""


def service_of(span: Span) -> str:
    return str((span.get("process") or {}).get("serviceName", ""))


@dataclass
class Trace:
    trace_id: str
    spans: list[Span] = field(default_factory=list)
    start: int = 0  # µs of the earliest span
    last: int = 0  # µs of the latest span start


@dataclass
class TraceQuery:
    service: str = ""
    operation: str = ""
    tags: dict[str, str] = field(default_factory=dict)
    start_min: int | None = None  # µs
    start_max: int | None = None
    duration_min: int | None = None  # µs
    duration_max: int | None = None
    limit: int = 100


def _span_has_tag(span: Span, key: str, value: str) -> bool:
    for t in span.get("tags") or ():
        if t.get("key") == key and tag_value_string(t.get("value")) == value:
            return True
    for t in (span.get("process") or {}).get("tags") or ():
        if t.get("key") == key and tag_value_string(t.get("value")) == value:
            return True
    for log in span.get("logs") or ():
        for t in log.get("fields") or ():
            if t.get("key") == key and tag_value_string(t.get("value")) == value:
                return True
    return False


def _span_matches(span: Span, q: TraceQuery) -> bool:
    if q.service and service_of(span) != q.service:
        return False
    if q.operation and span.get("operationName") != q.operation:
        return False
    st = int(span.get("startTime", 0))
    if q.start_min is not None and st < q.start_min:
        return False
    if q.start_max is not None and st > q.start_max:
        return False
    d = int(span.get("duration", 0))
    if q.duration_min is not None and d < q.duration_min:
        return False
    if q.duration_max is not None and d > q.duration_max:
        return False
    return all(_span_has_tag(span, k, v) for k, v in q.tags.items())


class TraceStore:
    def __init__(self, max_spans: int = DEFAULT_MAX_SPANS, retention: float = DEFAULT_RETENTION) -> None:
        self.max_spans = max_spans
        self.retention = retention
        self._traces: dict[str, Trace] = {}  # insertion order: oldest first
        self._span_count = 0
        self._operations: dict[str, dict[tuple[str, str], None]] = {}

    def add(self, spans: list[Span]) -> None:
        """Store spans (each with traceID, spanID, operationName, references, startTime µs,
        duration µs, tags, logs, process {serviceName, tags})."""
        traces, ops = self._traces, self._operations
        for span in spans:
            raw = span["traceID"]
            tid = raw if raw.islower() and raw[:1] != "0" else normalize_trace_id(str(raw))
            st = span.get("startTime", 0)
            tr = traces.get(tid)
            if tr is None:
                tr = traces[tid] = Trace(tid, [span], st, st)
            else:
                tr.spans.append(span)
                if st < tr.start:
                    tr.start = st
                elif st > tr.last:
                    tr.last = st
            self._span_count += 1
            svc = (span.get("process") or {}).get("serviceName")
            if svc:
                key = (span.get("operationName", ""), span_kind(span))
                known = ops.get(svc)
                if known is None:
                    ops[svc] = {key: None}
                elif key not in known:
                    known[key] = None
        while self._span_count > self.max_spans and traces:
            old = traces.pop(next(iter(traces)))
            self._span_count -= len(old.spans)

    def trim(self, now: float) -> None:
        cutoff = int((now - self.retention) * 1e6)
        for tid in [t for t, tr in self._traces.items() if tr.last < cutoff]:
            self._span_count -= len(self._traces.pop(tid).spans)

    def clear(self) -> None:
        self._traces.clear()
        self._operations.clear()
        self._span_count = 0

    def __len__(self) -> int:
        return len(self._traces)

    @property
    def span_count(self) -> int:
        return self._span_count

    # --- queries -------------------------------------------------------------------------------
    def services(self) -> list[str]:
        return sorted(self._operations)

    def operations(self, service: str, kind: str = "") -> list[tuple[str, str]]:
        ops = self._operations.get(service, {})
        return sorted((name, k) for name, k in ops if not kind or k == kind)

    def get(self, trace_id: str) -> Trace | None:
        return self._traces.get(normalize_trace_id(trace_id))

    def find(self, q: TraceQuery) -> list[Trace]:
        hits = [tr for tr in self._traces.values() if any(_span_matches(s, q) for s in tr.spans)]
        hits.sort(key=lambda tr: tr.start, reverse=True)
        return hits[: q.limit] if q.limit > 0 else hits

    def dependencies(self, end_us: int, lookback_us: int) -> list[dict[str, Any]]:
        """Parent→child service call counts, as Jaeger's in-memory store derives them."""
        start_us = end_us - lookback_us
        counts: dict[tuple[str, str], int] = {}
        for tr in self._traces.values():
            if tr.start > end_us or tr.last < start_us:
                continue
            by_id = {str(s.get("spanID")): s for s in tr.spans}
            for s in tr.spans:
                st = int(s.get("startTime", 0))
                if st < start_us or st > end_us:
                    continue
                for ref in s.get("references") or ():
                    if ref.get("refType") != "CHILD_OF":
                        continue
                    parent = by_id.get(str(ref.get("spanID")))
                    if parent is None:
                        continue
                    ps, cs = service_of(parent), service_of(s)
                    if ps and cs and ps != cs:
                        counts[(ps, cs)] = counts.get((ps, cs), 0) + 1
                    break
        return [{"parent": p, "child": c, "callCount": n} for (p, c), n in sorted(counts.items())]

    # --- state ---------------------------------------------------------------------------------
    def checkpoint(self) -> dict[str, Any]:
        return {"traces": [(tr.trace_id, [copy.copy(s) for s in tr.spans], tr.start, tr.last)
                           for tr in self._traces.values()],
                "operations": {k: dict(v) for k, v in self._operations.items()}}

    def restore(self, state: dict[str, Any]) -> None:
        self.clear()
        for tid, spans, start, last in state["traces"]:
            self._traces[tid] = Trace(tid, [copy.copy(s) for s in spans], start, last)
            self._span_count += len(spans)
        self._operations = {k: dict(v) for k, v in state["operations"].items()}


def trace_json(tr: Trace) -> dict[str, Any]:
    """A trace as Jaeger's query API returns it: spans with processID into a p1, p2... map."""
    processes: dict[str, dict[str, Any]] = {}
    keys: dict[str, str] = {}
    spans = []
    seen_ids: set[str] = set()
    for s in tr.spans:
        sid = str(s.get("spanID"))
        if sid in seen_ids:  # Jaeger's dedupe adjuster
            continue
        seen_ids.add(sid)
        proc = s.get("process") or {"serviceName": "", "tags": []}
        pkey_src = repr((proc.get("serviceName"), sorted((t.get("key"), repr(t.get("value"))) for t in proc.get("tags") or [])))
        pid = keys.get(pkey_src)
        if pid is None:
            pid = keys[pkey_src] = f"p{len(keys) + 1}"
            processes[pid] = {"serviceName": proc.get("serviceName", ""), "tags": list(proc.get("tags") or [])}
        out: dict[str, Any] = {
            "traceID": s.get("traceID"),
            "spanID": sid,
            "flags": s.get("flags", 1),
            "operationName": s.get("operationName", ""),
            "references": list(s.get("references") or []),
            "startTime": int(s.get("startTime", 0)),
            "duration": int(s.get("duration", 0)),
            "tags": list(s.get("tags") or []),
            "logs": list(s.get("logs") or []),
            "processID": pid,
            "warnings": s.get("warnings"),
        }
        if not out["flags"]:
            del out["flags"]
        spans.append(out)
    return {"traceID": tr.spans[0].get("traceID") if tr.spans else tr.trace_id, "spans": spans,
            "processes": processes, "warnings": None}
