"""events.k8s.io/v1 Events: the same objects as core/v1 Events (one store bucket), converted
field by field the way kube-apiserver converts between the two versions."""

from __future__ import annotations

from typing import Any

from kubesim.store import Obj


def _micro(stamp: str | None) -> str | None:
    if not stamp:
        return None
    return stamp if "." in stamp else stamp.replace("Z", ".000000Z")


def to_v1(ev: Obj) -> Obj:
    out: dict[str, Any] = {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": ev.get("metadata", {}),
        "eventTime": ev.get("eventTime") or _micro(ev.get("firstTimestamp")) or _micro(ev["metadata"].get("creationTimestamp")),
        "reportingController": ev.get("reportingComponent") or (ev.get("source") or {}).get("component", ""),
        "reportingInstance": ev.get("reportingInstance") or (ev.get("source") or {}).get("host", ""),
        "action": ev.get("action", ""), "reason": ev.get("reason", ""), "regarding": ev.get("involvedObject", {}),
        "note": ev.get("message", ""), "type": ev.get("type", ""),
    }
    for core, v1 in (("related", "related"), ("series", "series"), ("source", "deprecatedSource"),
                     ("firstTimestamp", "deprecatedFirstTimestamp"), ("lastTimestamp", "deprecatedLastTimestamp")):
        if ev.get(core):
            out[v1] = ev[core]
    if ev.get("count"):
        out["deprecatedCount"] = ev["count"]
    return out


def to_core(ev: Obj) -> Obj:
    source = dict(ev.get("deprecatedSource") or {})
    if not source and ev.get("reportingController"):
        source = {"component": ev["reportingController"]}
        if ev.get("reportingInstance"):
            source["host"] = ev["reportingInstance"]
    out: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Event", "metadata": ev.get("metadata", {}),
        "involvedObject": ev.get("regarding", {}), "reason": ev.get("reason", ""), "message": ev.get("note", ""),
        "type": ev.get("type", ""), "source": source, "eventTime": ev.get("eventTime"),
        "reportingComponent": ev.get("reportingController", ""), "reportingInstance": ev.get("reportingInstance", ""),
        "action": ev.get("action", ""),
    }
    for v1, core in (("related", "related"), ("series", "series"), ("deprecatedFirstTimestamp", "firstTimestamp"),
                     ("deprecatedLastTimestamp", "lastTimestamp"), ("deprecatedCount", "count")):
        if ev.get(v1) is not None:
            out[core] = ev[v1]
    return out
