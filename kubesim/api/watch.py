"""Watch streams: newline-delimited JSON watch events from the store's event log, from a
resourceVersion (or a synthetic ADDED list first), filtered by namespace and selectors, ended by
timeoutSeconds; a resourceVersion older than the log answers 410 Expired so clients relist."""

from __future__ import annotations

import bisect
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from kubesim.store import (
    Obj,
    Store,
    fields_match,
    labels_match_query,
    parse_field_selector,
    parse_label_selector,
)

Encoder = Callable[[str, Obj], Any]
# How often a quiet watch wakes to check its deadline and whether the client went away.
_WAKE_SECONDS = 1.0


class Filter:
    def __init__(self, namespace: str | None, label_selector: str | None, field_selector: str | None,
                 extra: Callable[[Obj], bool] | None = None) -> None:
        self.namespace = namespace
        self.extra = extra
        self.labels = parse_label_selector(label_selector)
        self.fields = parse_field_selector(field_selector)

    def __call__(self, obj: Obj) -> bool:
        meta = obj.get("metadata") or {}
        if self.namespace and meta.get("namespace") != self.namespace:
            return False
        if self.labels and not labels_match_query(self.labels, meta.get("labels")):
            return False
        if self.fields and not fields_match(self.fields, obj):
            return False
        return self.extra is None or self.extra(obj)


def expired(resource_version: int, current: int) -> Obj:
    return {"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f"too old resource version: {resource_version} ({current})", "reason": "Expired", "code": 410}}


def _lost_history(store: Store, since: int) -> bool:
    """True when events after `since` were trimmed or wiped by a restore (every bump of the
    store's resourceVersion emits one event, so a gap means history is gone)."""
    if store.resource_version <= since:
        return False
    return not store.events or store.events[0].rv > since + 1


def initial_events_end(api_version: str, kind: str) -> Obj:
    """The bookmark that closes a watch-list's initial state (sendInitialEvents=true), which
    client-go's reflector (helm 4, kubectl >= 1.32) waits for before it trusts the list."""
    return {"kind": kind, "apiVersion": api_version, "metadata": {
        "resourceVersion": "", "annotations": {"k8s.io/initial-events-end": "true"}}}


def stream(store: Store, key: str, flt: Filter, resource_version: str | None, timeout: float,
           encode: Encoder, alive: Callable[[], bool], initial_end: Obj | None = None) -> Iterator[bytes]:
    """`initial_end` set (a watch-list): the current state first, whatever resourceVersion says,
    then that bookmark with the store's resourceVersion."""
    def line(type_: str, obj: Obj) -> bytes:
        return (json.dumps({"type": type_, "object": encode(type_, obj)}, separators=(",", ":")) + "\n").encode()

    deadline = time.monotonic() + timeout
    with store.lock:
        if resource_version in (None, "", "0") or initial_end is not None:
            initial = sorted((o for o in store.iter_raw(key) if flt(o)),
                             key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
            out = [line("ADDED", o) for o in initial]
            last = store.resource_version
            if initial_end is not None:
                initial_end["metadata"]["resourceVersion"] = str(last)
                out.append((json.dumps({"type": "BOOKMARK", "object": initial_end}, separators=(",", ":"))
                            + "\n").encode())
        else:
            try:
                last = int(resource_version)
            except ValueError:
                last = store.resource_version
            if _lost_history(store, last):
                out = [(json.dumps(expired(last, store.resource_version)) + "\n").encode()]
                last = -1
            else:
                out = []
    yield from out
    if last < 0:
        return
    while True:
        with store.lock:
            idx = bisect.bisect_right(store.events, last, key=lambda e: e.rv)
            if idx >= len(store.events):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                store.changed.wait(min(remaining, _WAKE_SECONDS))
                idx = bisect.bisect_right(store.events, last, key=lambda e: e.rv)
            if _lost_history(store, last):
                out = [(json.dumps(expired(last, store.resource_version)) + "\n").encode()]
                last = -1
            else:
                batch = store.events[idx:]
                out = [line(e.type, e.obj) for e in batch if e.resource == key and flt(e.obj)]
                if batch:
                    last = batch[-1].rv
        yield from out
        if last < 0 or time.monotonic() >= deadline:
            return
        if not out and not alive():
            return
