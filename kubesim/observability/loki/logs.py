"""The emulated Loki's storage: log lines per stream (a promtail label set), nanosecond
timestamps in array('q'), bounded by a cluster-time retention window and a line budget per
stream, so a chatty pod cannot grow the cluster's memory without end."""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from typing import Any

DEFAULT_RETENTION = 2 * 3600.0
DEFAULT_MAX_LINES_PER_STREAM = 10_000
DEFAULT_MAX_LINES = 150_000  # about 25 MB of typical pod log lines
_TRIM_EVERY = 1 << 14


def to_ns(t: float) -> int:
    # Microsecond resolution keeps replays deterministic across float rounding.
    return int(round(t * 1e6)) * 1000


class Stream:
    __slots__ = ("key", "labels", "ts", "lines")

    def __init__(self, key: frozenset[tuple[str, str]], labels: dict[str, str]) -> None:
        self.key = key  # the writer's label set; `labels` adds what Loki derives at ingestion
        self.labels = labels
        self.ts = array("q")
        self.lines: list[str] = []

    def window(self, start_ns: int, end_ns: int) -> tuple[int, int]:
        """Index range of entries with start <= ts < end (Loki's half-open interval)."""
        return bisect_left(self.ts, start_ns), bisect_left(self.ts, end_ns)

    def window_closed(self, start_ns: int, end_ns: int) -> tuple[int, int]:
        """Index range of entries with start < ts <= end (range aggregations)."""
        return bisect_right(self.ts, start_ns), bisect_right(self.ts, end_ns)


# Loki 3.x (SREGym's chart runs 3.x) adds service_name at ingestion from the first of these
# labels (limits_config.discover_service_name), else "unknown_service".
SERVICE_NAME_SOURCES = ("service", "app", "application", "app_name", "name", "app_kubernetes_io_name", "container",
                        "container_name", "k8s_container_name", "component", "workload", "job", "k8s_job_name")


def with_service_name(labels: dict[str, str]) -> dict[str, str]:
    if "service_name" in labels:
        return dict(labels)
    name = next((labels[k] for k in SERVICE_NAME_SOURCES if labels.get(k)), "unknown_service")
    return {**labels, "service_name": name}


class LogStore:
    def __init__(self, retention: float = DEFAULT_RETENTION,
                 max_lines_per_stream: int = DEFAULT_MAX_LINES_PER_STREAM, max_lines: int = DEFAULT_MAX_LINES) -> None:
        self.retention = retention
        self.max_lines_per_stream = max_lines_per_stream
        self.max_lines = max_lines
        self._lines = 0
        self._streams: dict[frozenset[tuple[str, str]], Stream] = {}
        self._appends = 0
        self._newest = 0

    def append(self, stream_labels: dict[str, str], t: float, line: str) -> None:
        key = frozenset(stream_labels.items())
        s = self._streams.get(key)
        if s is None:
            s = self._streams[key] = Stream(key, with_service_name(stream_labels))
        ns = to_ns(t)
        self._lines += 1
        if not s.ts or ns >= s.ts[-1]:
            s.ts.append(ns)
            s.lines.append(line)
        else:  # Loki accepts out-of-order writes; keep the stream sorted
            i = bisect_right(s.ts, ns)
            s.ts.insert(i, ns)
            s.lines.insert(i, line)
        if ns > self._newest:
            self._newest = ns
        if len(s.lines) > self.max_lines_per_stream + self.max_lines_per_stream // 4:
            cut = len(s.lines) - self.max_lines_per_stream
            del s.ts[:cut]
            del s.lines[:cut]
            self._lines -= cut
        self._appends += 1
        if self._appends & (_TRIM_EVERY - 1) == 0 or self._lines > self.max_lines + self.max_lines // 4:
            self.trim(self._newest / 1e9)

    def trim(self, now: float) -> None:
        """Drop lines older than the retention window; if more than `max_lines` remain, drop the
        oldest lines across all streams (a cutoff time found by bisection) until they fit."""
        cutoff = to_ns(now - self.retention)
        if self._lines > self.max_lines:
            lo, hi = cutoff, self._newest + 1
            while hi - lo > 1_000:  # microsecond precision is plenty
                mid = (lo + hi) // 2
                if sum(len(s.ts) - bisect_left(s.ts, mid) for s in self._streams.values()) > self.max_lines:
                    lo = mid
                else:
                    hi = mid
            cutoff = max(cutoff, hi)
        dead = []
        for key, s in self._streams.items():
            if s.ts and s.ts[0] < cutoff:
                i = bisect_left(s.ts, cutoff)
                del s.ts[:i]
                del s.lines[:i]
                self._lines -= i
            if not s.ts:
                dead.append(key)
        for key in dead:
            del self._streams[key]

    def streams(self) -> list[Stream]:
        return list(self._streams.values())

    def clear(self) -> None:
        self._streams.clear()
        self._newest = 0
        self._lines = 0

    def line_count(self) -> int:
        return self._lines

    def checkpoint(self) -> dict[str, Any]:
        return {"streams": [(s.key, dict(s.labels), array("q", s.ts), list(s.lines)) for s in self._streams.values()],
                "newest": self._newest}

    def restore(self, state: dict[str, Any]) -> None:
        self.clear()
        for key, labels, ts, lines in state["streams"]:
            s = Stream(key, dict(labels))
            s.ts, s.lines = array("q", ts), list(lines)
            self._streams[key] = s
            self._lines += len(s.lines)
        self._newest = state["newest"]


__all__ = ["LogStore", "Stream", "to_ns"]
