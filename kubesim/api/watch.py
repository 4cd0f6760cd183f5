"""Watch streams and the resourceVersion semantics of list and watch, as kube-apiserver's
watch cache (staging/src/k8s.io/apiserver/pkg/storage/cacher) and ValidateListOptions have them:
newline-delimited JSON watch events from the store's event log, from a resourceVersion (or a
synthetic ADDED list first), filtered by namespace and selectors, ended by timeoutSeconds; a
resourceVersion older than the log answers 410 Expired so clients relist; bookmarks every minute
and 2 s before the deadline when the client allows them; lists at an exact past resourceVersion
rebuilt from the event log; a resourceVersion the store has not reached waited for 3 s, then
504 Too large resource version."""

from __future__ import annotations

import bisect
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from kubesim.store import (
    Obj,
    Store,
    StoreError,
    fields_match,
    labels_match_query,
    parse_field_selector,
    parse_label_selector,
)

Encoder = Callable[[str, Obj], Any]
# How often a quiet watch wakes to check its deadline and whether the client went away.
_WAKE_SECONDS = 1.0
# The cacher's bookmark cadence: "roughly every minute", and 2 s before the watch's deadline so a
# client that re-watches on timeout resumes from a recent resourceVersion (nextBookmarkTime).
BOOKMARK_EVERY = 60.0
BOOKMARK_BEFORE_DEADLINE = 2.0
# How long after a write its event reaches a watch (etcd watch -> cacher -> watcher, a few ms
# on a kind cluster).
PROPAGATION_DELAY = 0.02
# How long a read waits for a resourceVersion the store has not reached (the watch cache's
# waitUntilFreshAndBlock blocks up to 3 s before "Too large resource version").
FRESHNESS_WAIT = 3.0


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


def too_large(resource_version: int, current: int) -> StoreError:
    """storage.NewTooLargeResourceVersionError as the handler answers it: 504 Timeout, retry after 1 s."""
    return StoreError(504, "Timeout", f"Too large resource version: {resource_version}, current: {current}",
                      {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                       "retryAfterSeconds": 1})


def wait_fresh(store: Store, resource_version: int) -> None:
    """Block (the store's lock held) until the store has reached `resource_version`, for at most
    FRESHNESS_WAIT; past that, 504 as kube-apiserver answers."""
    deadline = time.monotonic() + FRESHNESS_WAIT
    while store.resource_version < resource_version:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise too_large(resource_version, store.resource_version)
        store.changed.wait(remaining)


def state_at(store: Store, key: str, resource_version: int) -> list[Obj]:
    """The objects of `key` as they were at `resource_version` (the store's lock held): the current
    ones with every later event of `key` undone, each object's earlier state taken from its previous
    event in the log. 410 when the log no longer reaches back that far (etcd's compaction)."""
    gone = StoreError(410, "Expired", "The resourceVersion for the provided list is too old.")
    if _lost_history(store, resource_version):
        raise gone
    later = store.events[bisect.bisect_right(store.events, resource_version, key=lambda e: e.rv):]
    touched = {(e.obj["metadata"].get("namespace", ""), e.obj["metadata"]["name"]) for e in later if e.resource == key}
    state = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in store.iter_raw(key)}
    if not touched:
        return list(state.values())
    for ident in touched:
        state.pop(ident, None)
    earlier = store.events[:len(store.events) - len(later)]
    missing = set(touched)
    for e in reversed(earlier):
        if e.resource != key:
            continue
        ident = (e.obj["metadata"].get("namespace", ""), e.obj["metadata"]["name"])
        if ident in missing:
            missing.discard(ident)
            if e.type != "DELETED":
                state[ident] = e.obj
            if not missing:
                break
    # No event of its own at or before `resource_version`: it did not exist then if its first later
    # event created it; otherwise its earlier state fell out of the log.
    first_later: dict[tuple[str, str], str] = {}
    for e in later:
        if e.resource == key:
            first_later.setdefault((e.obj["metadata"].get("namespace", ""), e.obj["metadata"]["name"]), e.type)
    if any(first_later.get(ident) != "ADDED" for ident in missing):
        raise gone
    return list(state.values())


class ListOptions:
    """The list/watch query parameters that select a resourceVersion, validated as
    ValidateListOptions does (422 Invalid on ListOptions.meta.k8s.io)."""

    def __init__(self, arg: Callable[[str], str | None], watch: bool) -> None:
        self.resource_version = arg("resourceVersion") or ""
        self.match = arg("resourceVersionMatch") or ""
        self.continue_token = arg("continue") or ""
        self.allow_bookmarks = (arg("allowWatchBookmarks") or "").lower() in ("true", "1")
        sie = arg("sendInitialEvents")
        self.send_initial_events: bool | None = None if sie in (None, "") else sie.lower() in ("true", "1")
        errors = self._watch_errors() if watch else self._list_errors()
        if errors:
            text = ", ".join(f"{f}: {m}" for _, f, m in errors)
            raise StoreError(422, "Invalid", 'ListOptions.meta.k8s.io "" is invalid: '
                             + (f"[{text}]" if len(errors) > 1 else text),
                             {"group": "meta.k8s.io", "kind": "ListOptions",
                              "causes": [{"reason": r, "message": m, "field": f} for r, f, m in errors]})

    def _list_errors(self) -> list[tuple[str, str, str]]:
        out = []
        field = "resourceVersionMatch"
        if self.match:
            if not self.resource_version:
                out.append(("FieldValueForbidden", field,
                            "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"))
            if self.continue_token:
                out.append(("FieldValueForbidden", field,
                            "Forbidden: resourceVersionMatch is forbidden when continue is provided"))
            if self.match not in ("Exact", "NotOlderThan"):
                out.append(("FieldValueNotSupported", field, f'Unsupported value: "{self.match}": supported values: '
                            '"Exact", "NotOlderThan", ""'))
            if self.match == "Exact" and self.resource_version == "0":
                out.append(("FieldValueForbidden", field,
                            'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"'))
        if self.send_initial_events is not None:
            out.append(("FieldValueForbidden", "sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list"))
        return out

    def _watch_errors(self) -> list[tuple[str, str, str]]:
        out = []
        field = "resourceVersionMatch"
        if self.send_initial_events is not None and self.match != "NotOlderThan":
            out.append(("FieldValueForbidden", field,
                        "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"))
        if self.match:
            if self.send_initial_events is None:
                out.append(("FieldValueForbidden", field, "Forbidden: resourceVersionMatch is forbidden for watch "
                            "unless sendInitialEvents is provided"))
            if self.match != "NotOlderThan":
                out.append(("FieldValueNotSupported", field,
                            f'Unsupported value: "{self.match}": supported values: "NotOlderThan"'))
            if self.continue_token:
                out.append(("FieldValueForbidden", field,
                            "Forbidden: resourceVersionMatch is forbidden when continue is provided"))
        return out

    def version(self) -> int | None:
        """The requested resourceVersion as a number; None for unset, "0" or unparsable (any)."""
        try:
            rv = int(self.resource_version)
        except ValueError:
            return None
        return rv if rv > 0 else None


def bookmark(api_version: str, kind: str, resource_version: int) -> Obj:
    """A BOOKMARK's object: an empty object of the watched kind carrying only the resourceVersion."""
    return {"kind": kind, "apiVersion": api_version, "metadata": {"resourceVersion": str(resource_version)}}


def initial_events_end(api_version: str, kind: str) -> Obj:
    """The bookmark that closes a watch-list's initial state (sendInitialEvents=true), which
    client-go's reflector (helm 4, kubectl >= 1.32) waits for before it trusts the list."""
    return {"kind": kind, "apiVersion": api_version, "metadata": {
        "resourceVersion": "", "annotations": {"k8s.io/initial-events-end": "true"}}}


def stream(store: Store, key: str, flt: Filter, opts: ListOptions, timeout: float, encode: Encoder,
           alive: Callable[[], bool], api_version: str, kind: str) -> Iterator[bytes]:
    """The events of `key` after the requested resourceVersion. A synthetic ADDED per object first
    when the watch starts from "any" version (resourceVersion unset or "0") or asks for initial
    events (sendInitialEvents=true, which then ends them with a bookmark annotated
    k8s.io/initial-events-end, client-go's watch-list); bookmarks as the cacher sends them when
    allowWatchBookmarks is set."""
    def line(type_: str, obj: Obj) -> bytes:
        return (json.dumps({"type": type_, "object": encode(type_, obj)}, separators=(",", ":")) + "\n").encode()

    def mark(obj: Obj) -> bytes:
        return (json.dumps({"type": "BOOKMARK", "object": obj}, separators=(",", ":")) + "\n").encode()

    started = time.monotonic()
    deadline = started + timeout
    requested = opts.version()
    with store.lock:
        initial = opts.send_initial_events if opts.send_initial_events is not None else requested is None
        if initial:
            objects = sorted((o for o in store.iter_raw(key) if flt(o)),
                             key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
            out = [line("ADDED", o) for o in objects]
            last = store.resource_version
            if opts.send_initial_events and opts.allow_bookmarks:
                end = initial_events_end(api_version, kind)
                end["metadata"]["resourceVersion"] = str(last)
                out.append(mark(end))
        elif requested is None:  # sendInitialEvents=false from "any" version: changes from now on
            out, last = [], store.resource_version
        else:
            last = requested
            if _lost_history(store, last):
                out = [(json.dumps(expired(last, store.resource_version)) + "\n").encode()]
                last = -1
            else:
                out = []
    yield from out
    if last < 0:
        return
    next_bookmark = min(started + BOOKMARK_EVERY, deadline - BOOKMARK_BEFORE_DEADLINE)
    if next_bookmark <= started:  # a watch shorter than 2 s gets none (nextBookmarkTime: not scheduled)
        next_bookmark = deadline
    while True:
        with store.lock:
            idx = bisect.bisect_right(store.events, last, key=lambda e: e.rv)
            now = time.monotonic()
            waited = False
            if idx >= len(store.events) and not (opts.allow_bookmarks and now >= next_bookmark):
                if now >= deadline:
                    return
                wake = deadline - now
                if opts.allow_bookmarks:
                    wake = min(wake, next_bookmark - now)
                waited = store.changed.wait(min(wake, _WAKE_SECONDS))
        if waited:
            # A write reaches watchers through etcd's watch and the watch cache, after its own
            # response: clients that stop watching once their write returns rely on that order.
            time.sleep(PROPAGATION_DELAY)
        with store.lock:
            idx = bisect.bisect_right(store.events, last, key=lambda e: e.rv)
            if _lost_history(store, last):
                out = [(json.dumps(expired(last, store.resource_version)) + "\n").encode()]
                last = -1
            else:
                batch = store.events[idx:]
                out = [line(e.type, e.obj) for e in batch if e.resource == key and flt(e.obj)]
                if batch:
                    last = batch[-1].rv
                now = time.monotonic()
                if opts.allow_bookmarks and now >= next_bookmark and now < deadline:
                    # the watcher has seen every event up to the store's version, matching or not
                    out.append(mark(bookmark(api_version, kind, max(last, store.resource_version))))
                    last = max(last, store.resource_version)
                    next_bookmark = min(now + BOOKMARK_EVERY, deadline - BOOKMARK_BEFORE_DEADLINE)
                    if next_bookmark <= now:
                        next_bookmark = deadline  # the pre-deadline one is sent: none after it
        yield from out
        if last < 0 or time.monotonic() >= deadline:
            return
        if not out and not alive():
            return
