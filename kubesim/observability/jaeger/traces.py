"""The emulated Jaeger's storage: spans grouped by trace, indexed by service and operation,
bounded by a span budget and a cluster-time retention window (oldest traces go first), with
the search and dependency semantics of Jaeger's in-memory store.

Spans arrive in the Jaeger JSON model but are kept as compact tuples whose tags and processes
are interned: a cluster repeats the same few tag sets and processes millions of times, and a
span dict with its tag dicts costs about 1.7 kB where the tuple costs a fraction of that."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, NamedTuple

DEFAULT_MAX_SPANS = 60_000  # about 0.4 kB a span stored
DEFAULT_RETENTION = 2 * 3600.0
_MAX_INTERNED = 200_000

Tag = tuple[str, str, Any]  # (key, type, value)


class StoredSpan(NamedTuple):
    trace_id: str  # as the writer spelled it
    span_id: str
    operation: str
    refs: tuple[tuple[str, str, str], ...]  # (refType, traceID, spanID)
    start: int  # µs
    duration: int  # µs
    flags: int
    tags: tuple[Tag, ...]
    logs: tuple[tuple[int, tuple[Tag, ...]], ...]
    process: tuple[str, tuple[Tag, ...]]  # (serviceName, tags)
    warnings: Any


def normalize_trace_id(tid: str) -> str:
    return tid.strip().lower().lstrip("0") or "0"


def tag_value_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass
class Trace:
    trace_id: str
    spans: list[StoredSpan] = field(default_factory=list)
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


def _span_kind(tags: tuple[Tag, ...]) -> str:
    for key, _, value in tags:
        if key == "span.kind":
            return str(value)
    return ""


def _has_tag(span: StoredSpan, key: str, value: str) -> bool:
    for tags in (span.tags, span.process[1]):
        for k, _, v in tags:
            if k == key and tag_value_string(v) == value:
                return True
    for _, fields in span.logs:
        for k, _, v in fields:
            if k == key and tag_value_string(v) == value:
                return True
    return False


def _span_matches(span: StoredSpan, q: TraceQuery) -> bool:
    if q.service and span.process[0] != q.service:
        return False
    if q.operation and span.operation != q.operation:
        return False
    if q.start_min is not None and span.start < q.start_min:
        return False
    if q.start_max is not None and span.start > q.start_max:
        return False
    if q.duration_min is not None and span.duration < q.duration_min:
        return False
    if q.duration_max is not None and span.duration > q.duration_max:
        return False
    return all(_has_tag(span, k, v) for k, v in q.tags.items())


class TraceStore:
    def __init__(self, max_spans: int = DEFAULT_MAX_SPANS, retention: float = DEFAULT_RETENTION) -> None:
        self.max_spans = max_spans
        self.retention = retention
        self._traces: dict[str, Trace] = {}  # insertion order: oldest first
        self._span_count = 0
        self._operations: dict[str, dict[tuple[str, str], None]] = {}
        self._interned: dict[Any, Any] = {}

    def _intern(self, value: Any) -> Any:
        try:
            got = self._interned.get(value)
        except TypeError:  # an unhashable tag value (a list): keep it as it is
            return value
        if got is not None:
            return got
        if len(self._interned) < _MAX_INTERNED:
            self._interned[value] = value
        return value

    def _tags(self, raw: Any) -> tuple[Tag, ...]:
        if not raw:
            return ()
        intern = self._intern
        tags = tuple([intern((t.get("key", ""), t.get("type", "string"), t.get("value"))) for t in raw])
        interned: tuple[Tag, ...] = intern(tags)
        return interned

    def _compact(self, span: dict[str, Any]) -> StoredSpan:
        proc = span.get("process") or {}
        refs = span.get("references") or ()
        logs = span.get("logs") or ()
        # sys.intern makes a trace id, and a span id named again in its children's references,
        # one string object each.
        return StoredSpan(
            trace_id=sys.intern(str(span["traceID"])),
            span_id=sys.intern(str(span.get("spanID", ""))),
            operation=self._intern(str(span.get("operationName", ""))),
            refs=tuple((sys.intern(r.get("refType", "CHILD_OF")), sys.intern(str(r.get("traceID", ""))),
                        sys.intern(str(r.get("spanID", "")))) for r in refs) if refs else (),
            start=int(span.get("startTime", 0)),
            duration=int(span.get("duration", 0)),
            flags=int(span.get("flags", 1)),
            tags=self._tags(span.get("tags")),
            logs=tuple((int(entry.get("timestamp", 0)), self._tags(entry.get("fields"))) for entry in logs) if logs else (),
            process=self._intern((self._intern(str(proc.get("serviceName", ""))), self._tags(proc.get("tags")))),
            warnings=span.get("warnings"),
        )

    def add(self, spans: list[dict[str, Any]]) -> None:
        """Store spans (each with traceID, spanID, operationName, references, startTime µs,
        duration µs, tags, logs, process {serviceName, tags})."""
        traces, ops = self._traces, self._operations
        for raw in spans:
            span = self._compact(raw)
            tid = span.trace_id if span.trace_id.islower() and span.trace_id[:1] != "0" else normalize_trace_id(span.trace_id)
            tr = traces.get(tid)
            st = span.start
            if tr is None:
                tr = traces[tid] = Trace(tid, [span], st, st)
            else:
                tr.spans.append(span)
                if st < tr.start:
                    tr.start = st
                elif st > tr.last:
                    tr.last = st
            self._span_count += 1
            svc = span.process[0]
            if svc:
                key = (span.operation, _span_kind(span.tags))
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
        if len(self._interned) >= _MAX_INTERNED:
            self._interned.clear()

    def clear(self) -> None:
        self._traces.clear()
        self._operations.clear()
        self._interned.clear()
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
        hits = [tr for tr in list(self._traces.values()) if any(_span_matches(s, q) for s in tr.spans)]
        hits.sort(key=lambda tr: tr.start, reverse=True)
        return hits[: q.limit] if q.limit > 0 else hits

    def dependencies(self, end_us: int, lookback_us: int) -> list[dict[str, Any]]:
        """Parent→child service call counts, as Jaeger's in-memory store derives them."""
        start_us = end_us - lookback_us
        counts: dict[tuple[str, str], int] = {}
        for tr in list(self._traces.values()):
            if tr.start > end_us or tr.last < start_us:
                continue
            by_id = {s.span_id: s for s in tr.spans}
            for s in tr.spans:
                if s.start < start_us or s.start > end_us:
                    continue
                for ref_type, _, parent_id in s.refs:
                    if ref_type != "CHILD_OF":
                        continue
                    parent = by_id.get(parent_id)
                    if parent is not None:
                        ps, cs = parent.process[0], s.process[0]
                        if ps and cs and ps != cs:
                            counts[(ps, cs)] = counts.get((ps, cs), 0) + 1
                    break
        return [{"parent": p, "child": c, "callCount": n} for (p, c), n in sorted(counts.items())]

    # --- state ---------------------------------------------------------------------------------
    def checkpoint(self) -> dict[str, Any]:
        # Stored spans are immutable tuples, so copying the lists is a full copy.
        return {"traces": [(tr.trace_id, list(tr.spans), tr.start, tr.last) for tr in self._traces.values()],
                "operations": {k: dict(v) for k, v in self._operations.items()}}

    def restore(self, state: dict[str, Any]) -> None:
        self.clear()
        for tid, spans, start, last in state["traces"]:
            self._traces[tid] = Trace(tid, list(spans), start, last)
            self._span_count += len(spans)
        self._operations = {k: dict(v) for k, v in state["operations"].items()}


def _tags_json(tags: tuple[Tag, ...]) -> list[dict[str, Any]]:
    return [{"key": k, "type": t, "value": v} for k, t, v in tags]


def go_duration(us: int) -> str:
    """Go's time.Duration String() for a whole number of microseconds: 250µs, 1.5ms, 2m3.5s."""
    if us == 0:
        return "0s"
    sign, u = ("-", -us) if us < 0 else ("", us)
    if u < 1_000:
        return f"{sign}{u}µs"
    if u < 1_000_000:
        return f"{sign}{f'{u // 1000}.{u % 1000:03d}'.rstrip('0').rstrip('.')}ms"
    hours, rest = divmod(u, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    secs = f"{rest // 1_000_000}.{rest % 1_000_000:06d}".rstrip("0").rstrip(".")
    out = f"{hours}h{minutes}m" if hours else f"{minutes}m" if minutes else ""
    return f"{sign}{out}{secs}s"


def _host_key(span: StoredSpan) -> str:
    for key, _, value in span.process[1]:
        if key == "ip":
            return str(value)
    return ""


def clock_skew_warnings(tr: Trace) -> dict[int, list[str]]:
    """The warnings of Jaeger's clock-skew adjuster with adjustment disabled (the query service
    default, --query.max-clock-skew-adjustment=0s): a child on another host that does not fit
    in its parent gets "clock skew adjustment disabled; not applying calculated delta of …"."""
    warnings: dict[int, list[str]] = {}
    by_id = {s.span_id: i for i, s in enumerate(tr.spans)}
    children: dict[int, list[int]] = {}
    roots = []
    for i, s in enumerate(tr.spans):
        parent_id = next((sid for kind, _, sid in s.refs if kind == "CHILD_OF"), None) or \
            (s.refs[0][2] if s.refs else None)
        if parent_id is None:
            roots.append(i)
        elif parent_id in by_id:
            children.setdefault(by_id[parent_id], []).append(i)
        else:
            warnings.setdefault(i, []).append(
                f"parent span ID={parent_id} is not in the trace; skipping clock skew adjustment")
            roots.append(i)

    def skew_of(child: StoredSpan, parent: StoredSpan) -> int:
        if child.duration > parent.duration:
            return parent.start - child.start if child.start < parent.start else 0
        if child.start >= parent.start and child.start + child.duration <= parent.start + parent.duration:
            return 0
        latency = (parent.duration - child.duration) // 2
        return parent.start + latency - child.start

    stack: list[tuple[int, int | None, str, int]] = [(r, None, _host_key(tr.spans[r]), 0) for r in roots]
    while stack:
        i, parent, host, delta = stack.pop()
        span = tr.spans[i]
        key = _host_key(span)
        if parent is not None and (key != host or key == ""):
            host, delta = key, skew_of(span, tr.spans[parent])
        if delta:
            warnings.setdefault(i, []).append(
                f"clock skew adjustment disabled; not applying calculated delta of {go_duration(delta)}")
        stack.extend((c, i, host, delta) for c in children.get(i, ()))
    return warnings


def trace_json(tr: Trace, raw: bool = False) -> dict[str, Any]:
    """A trace as Jaeger's query API returns it: spans with processID into a p1, p2... map, and
    the clock-skew adjuster's warnings unless `raw` (the API's raw=true skips adjusters)."""
    skew = {} if raw else clock_skew_warnings(tr)
    processes: dict[str, dict[str, Any]] = {}
    pids: dict[tuple[str, tuple[Tag, ...]], str] = {}
    spans = []
    seen_ids: set[str] = set()
    for idx, s in enumerate(tr.spans):
        if s.span_id in seen_ids:  # Jaeger's dedupe adjuster
            continue
        seen_ids.add(s.span_id)
        pid = pids.get(s.process)
        if pid is None:
            pid = pids[s.process] = f"p{len(pids) + 1}"
            processes[pid] = {"serviceName": s.process[0], "tags": _tags_json(s.process[1])}
        out: dict[str, Any] = {
            "traceID": s.trace_id,
            "spanID": s.span_id,
            "flags": s.flags,
            "operationName": s.operation,
            "references": [{"refType": r, "traceID": t, "spanID": i} for r, t, i in s.refs],
            "startTime": s.start,
            "duration": s.duration,
            "tags": _tags_json(s.tags),
            "logs": [{"timestamp": ts, "fields": _tags_json(fields)} for ts, fields in s.logs],
            "processID": pid,
            "warnings": (list(s.warnings or []) + skew[idx]) if idx in skew else s.warnings,
        }
        if not s.flags:
            del out["flags"]
        spans.append(out)
    return {"traceID": tr.spans[0].trace_id if tr.spans else tr.trace_id, "spans": spans,
            "processes": processes, "warnings": None}
