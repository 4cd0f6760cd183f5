"""The emulated Prometheus's storage: series keyed by (metric, label set), samples in two
array('d') columns (16 bytes a sample), retention by a window of cluster time."""

from __future__ import annotations

import re
import struct
from array import array
from bisect import bisect_left
from collections.abc import Iterable
from typing import Any

import promql_parser

# Prometheus marks a vanished series with this NaN payload; any other NaN is a real value.
STALE_NAN = struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000002))[0]
_STALE_BYTES = struct.pack("<d", STALE_NAN)

DEFAULT_RETENTION = 2 * 3600.0
Labels = dict[str, str] | tuple[tuple[str, str], ...]
_TRIM_EVERY = 1 << 16


def is_stale(v: float) -> bool:
    return v != v and struct.pack("<d", v) == _STALE_BYTES


class Series:
    """One time series: its labels (with __name__) and its samples in time order. `dead` is set
    when retention drops it, so a writer holding it as a reference re-resolves."""

    __slots__ = ("labels", "ts", "vs", "aliases", "dead", "stamp")

    def __init__(self, labels: dict[str, str]) -> None:
        self.labels = labels
        self.ts = array("d")
        self.vs = array("d")
        self.aliases: list[tuple[str, tuple[tuple[str, str], ...]]] = []
        self.dead = False
        self.stamp = 0  # the last scrape that wrote it


class Matcher:
    """A label matcher (=, !=, =~, !~); regexes are anchored as Prometheus anchors them."""

    __slots__ = ("name", "op", "value", "_re")

    def __init__(self, name: str, op: str, value: str) -> None:
        self.name, self.op, self.value = name, op, value
        self._re = re.compile(value, re.DOTALL) if op in ("=~", "!~") else None

    @classmethod
    def from_parser(cls, m: promql_parser.Matcher) -> Matcher:
        # MatchOp values are not hashable, so no dict lookup.
        mo = promql_parser.MatchOp
        op = "=" if m.op == mo.Equal else "!=" if m.op == mo.NotEqual else "=~" if m.op == mo.Re else "!~"
        return cls(m.name, op, m.value)

    def matches(self, v: str) -> bool:
        op = self.op
        if op == "=":
            return v == self.value
        if op == "!=":
            return v != self.value
        assert self._re is not None
        hit = self._re.fullmatch(v) is not None
        return hit if op == "=~" else not hit

    def matches_empty(self) -> bool:
        return self.matches("")

    def __repr__(self) -> str:
        return f"{self.name}{self.op}{self.value!r}"


def matches_all(labels: dict[str, str], matchers: Iterable[Matcher]) -> bool:
    for m in matchers:
        if not m.matches(labels.get(m.name, "")):
            return False
    return True


class TSDB:
    """Append-only sample store. Out-of-order samples are dropped as Prometheus drops them; a
    sample at the same timestamp replaces the last one."""

    def __init__(self, retention: float = DEFAULT_RETENTION) -> None:
        self.retention = retention
        self._series: dict[tuple[str, frozenset[tuple[str, str]]], Series] = {}
        # Fast path: the label dict's items in the writer's own order. A writer builds its label
        # dicts the same way every scrape, so this skips sorting/hashing a frozenset per sample.
        self._alias: dict[tuple[str, tuple[tuple[str, str], ...]], Series] = {}
        self._by_name: dict[str, list[Series]] = {}
        self._appends = 0
        self._newest = float("-inf")
        self._generation = 0  # bumped whenever a series is created or dropped
        self._name_generation: dict[str, int] = {}  # metric → the generation its series last changed at
        self._scrapes: dict[str, list[Series]] = {}  # target → series of its last scrape
        # A scraper that keeps its label tuples hands the same objects every scrape: id(labels) →
        # (labels, {metric: series}) finds their series without hashing the labels. The entry holds
        # the tuple, so its id cannot be reused while the entry lives.
        self._by_identity: dict[int, tuple[tuple[tuple[str, str], ...], dict[str, Series]]] = {}
        self._scrape_seq = 0
        self._select_cache: dict[tuple[tuple[str, str, str], ...], tuple[int, list[Series]]] = {}

    # --- writing -------------------------------------------------------------------------
    def append(self, metric: str, labels: Labels, t: float, value: float) -> None:
        """Add a sample. `labels` is a dict, or a tuple of (name, value) pairs, which a writer
        that keeps its label sets as tuples can pass without building a dict per sample."""
        alias = (metric, labels if labels.__class__ is tuple else tuple(labels.items()))  # type: ignore[union-attr]
        self.append_ref(self._alias.get(alias) or self._resolve(alias, metric, labels), t, value)

    def mark_stale(self, metric: str, labels: Labels, t: float) -> None:
        """Write Prometheus's staleness marker: the series stops being returned from `t` on,
        instead of lingering for the 5-minute lookback."""
        self.append(metric, labels, t, STALE_NAN)

    def ref(self, metric: str, labels: Labels) -> Series:
        """The series for (metric, labels), created if new: a writer that keeps it can call
        `append_ref` and skip the label lookup (Prometheus's appender series references)."""
        alias = (metric, labels if labels.__class__ is tuple else tuple(labels.items()))  # type: ignore[union-attr]
        return self._alias.get(alias) or self._resolve(alias, metric, labels)

    def append_ref(self, s: Series, t: float, value: float) -> Series:
        """Append to a series from `ref`; returns the live series (re-resolved if retention had
        dropped it), which the caller should keep instead."""
        if s.dead:
            labels = {k: v for k, v in s.labels.items() if k != "__name__"}
            s = self.ref(s.labels["__name__"], labels)
        ts = s.ts
        if ts and t <= ts[-1]:
            if t == ts[-1]:
                s.vs[-1] = value
            return s
        ts.append(t)
        s.vs.append(value)
        if t > self._newest:
            self._newest = t
        self._appends += 1
        if self._appends & (_TRIM_EVERY - 1) == 0:
            self.trim(self._newest)
        return s

    def scrape(self, target: str, t: float, rows: Iterable[tuple[str, Labels, float]]) -> int:
        """Write one scrape of `target` (e.g. "kube-state-metrics/10.244.0.9:8080"): every
        (metric, labels, value) at `t`, and a staleness marker for each series the previous
        scrape of that target had and this one lacks, as Prometheus does when a pod's series
        vanish from kube-state-metrics. Returns the number of samples written."""
        self._scrape_seq += 1
        stamp = self._scrape_seq
        if len(self._by_identity) > 2 * len(self._series) + 4096:  # tuples a scraper no longer hands over
            self._by_identity.clear()
        identity_get = self._by_identity.get
        current: list[Series] = []
        keep = current.append
        for metric, labels, value in rows:  # append() inlined: this loop is the cluster's hot path
            known = identity_get(id(labels))
            s = known[1].get(metric) if known is not None and known[0] is labels else None
            if s is None or s.dead:
                s = self._identify(metric, labels)
            ts = s.ts
            if ts and t <= ts[-1]:
                if t == ts[-1]:
                    s.vs[-1] = value
            else:
                ts.append(t)
                s.vs.append(value)
            s.stamp = stamp
            keep(s)
        for s in self._scrapes.get(target, ()):
            if s.stamp != stamp and not s.dead and s.vs and not is_stale(s.vs[-1]):
                self.append_ref(s, t, STALE_NAN)
        self._scrapes[target] = current
        if t > self._newest:
            self._newest = t
        before = self._appends
        self._appends += len(current)
        if before // _TRIM_EVERY != self._appends // _TRIM_EVERY:
            self.trim(self._newest)
        return len(current)

    def _identify(self, metric: str, labels: Labels) -> Series:
        """The series a scraped row writes to, remembered by its label tuple's identity."""
        if isinstance(labels, tuple):
            alias = (metric, labels)
            s = self._alias.get(alias) or self._resolve(alias, metric, labels)
            known = self._by_identity.get(id(labels))
            if known is None or known[0] is not labels:
                known = self._by_identity[id(labels)] = (labels, {})
            known[1][metric] = s
            return s
        alias = (metric, tuple(labels.items()))
        return self._alias.get(alias) or self._resolve(alias, metric, labels)

    def _resolve(self, alias: tuple[str, tuple[tuple[str, str], ...]], metric: str, labels: Labels) -> Series:
        labels = dict(labels) if isinstance(labels, tuple) else labels
        if "" in labels.values():  # Prometheus stores no empty label: {a=""} is the series without a
            labels = {k: v for k, v in labels.items() if v != ""}
        key = (metric, frozenset(labels.items()))
        s = self._series.get(key)
        if s is None:
            s = self._create(key, metric, labels)
        self._alias[alias] = s
        s.aliases.append(alias)
        return s

    def _create(self, key: tuple[str, frozenset[tuple[str, str]]], metric: str, labels: dict[str, str]) -> Series:
        full = dict(labels)
        full["__name__"] = metric
        s = Series(full)
        self._series[key] = s
        self._generation += 1
        self._name_generation[metric] = self._generation
        self._by_name.setdefault(metric, []).append(s)
        return s

    def trim(self, now: float) -> None:
        """Forget samples older than the retention window, and series left without samples."""
        cutoff = now - self.retention
        dead = []
        for key, s in self._series.items():
            ts = s.ts
            if ts and ts[0] < cutoff:
                i = bisect_left(ts, cutoff)
                del ts[:i]
                del s.vs[:i]
            if not ts:
                dead.append(key)
        if dead:
            self._generation += 1
        for key in dead:
            s = self._series.pop(key)
            s.dead = True
            for alias in s.aliases:
                self._alias.pop(alias, None)
            self._name_generation[key[0]] = self._generation
            lst = self._by_name[key[0]]
            lst.remove(s)
            if not lst:
                del self._by_name[key[0]]

    def clear(self) -> None:
        for s in self._series.values():
            s.dead = True
        self._series.clear()
        self._alias.clear()
        self._by_name.clear()
        self._scrapes.clear()
        self._by_identity.clear()
        self._generation += 1
        self._name_generation.clear()
        self._select_cache.clear()
        self._newest = float("-inf")

    # --- reading -------------------------------------------------------------------------
    def select(self, matchers: list[Matcher]) -> list[Series]:
        """Series whose labels satisfy every matcher (a missing label reads as ""). Results are
        cached until a series that could match is created or dropped (one of the selected metric,
        when the selector names one): rules ask the same selectors every round."""
        key = tuple((m.name, m.op, m.value) for m in matchers)
        name_eq = next((m.value for m in matchers if m.name == "__name__" and m.op == "="), None)
        stamp = self._generation if name_eq is None else self._name_generation.get(name_eq, 0)
        hit = self._select_cache.get(key)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        found = self._select(matchers)
        if len(self._select_cache) > 4096:
            self._select_cache.clear()
        self._select_cache[key] = (stamp, found)
        return found

    def _select(self, matchers: list[Matcher]) -> list[Series]:
        name_eq = next((m.value for m in matchers if m.name == "__name__" and m.op == "="), None)
        if name_eq is not None:
            pool: Iterable[Series] = self._by_name.get(name_eq, ())
            rest = [m for m in matchers if not (m.name == "__name__" and m.op == "=")]
        else:
            pool = list(self._series.values())  # a snapshot: writers may add series meanwhile
            rest = matchers
        return [s for s in pool if matches_all(s.labels, rest)]

    def series(self) -> list[Series]:
        return list(self._series.values())

    def metric_names(self) -> list[str]:
        return sorted(self._by_name)

    def __len__(self) -> int:
        return len(self._series)

    def sample_count(self) -> int:
        return sum(len(s.ts) for s in self._series.values())

    # --- checkpoint ----------------------------------------------------------------------
    def checkpoint(self) -> dict[str, Any]:
        def key(s: Series) -> tuple[str, frozenset[tuple[str, str]]]:
            return s.labels["__name__"], frozenset((k, v) for k, v in s.labels.items() if k != "__name__")

        return {
            "series": [(dict(s.labels), array("d", s.ts), array("d", s.vs)) for s in self._series.values()],
            "newest": self._newest,
            "scrapes": {target: [key(s) for s in members if not s.dead] for target, members in self._scrapes.items()},
        }

    def restore(self, state: dict[str, Any]) -> None:
        self.clear()
        for labels, ts, vs in state["series"]:
            labels = dict(labels)
            metric = labels.pop("__name__")
            s = self._create((metric, frozenset(labels.items())), metric, labels)
            s.ts = array("d", ts)
            s.vs = array("d", vs)
        self._newest = state["newest"]
        # which series each target's last scrape had, so the next scrape still stale-marks
        self._scrapes = {target: [self._series[k] for k in keys if k in self._series]
                         for target, keys in state.get("scrapes", {}).items()}
