"""Undo for the agent's mutating commands: the objects a command touches are captured (with the
agent's own credentials) before it runs; undoing restores them, deletes what it created, and
leaves alone what a controller recreates by itself (a deleted ReplicaSet pod)."""

from __future__ import annotations

import json
from typing import Any

from core.errors import ToolError
from farm.interface.kubectl import Kubectl, Parsed, Target, clean_for_restore, targets_of


def capture(kubectl: Kubectl, parsed: Parsed, manifest: str | None) -> dict[str, Any]:
    """{"kind/name": object before the change, or None when it did not exist}."""
    before: dict[str, Any] = {}
    for target in targets_of(parsed, manifest):
        for key, obj in kubectl.get_json(target):
            before[key] = obj
    return before


def wrote(kubectl: Kubectl, parsed: Parsed, manifest: str | None, before: dict[str, Any]) -> bool:
    """Whether the command changed any object it names, read back after it ran: an object came,
    went or has a new resourceVersion. A failed command may have written part of what it was
    asked (`delete pod a b` with no b, `taint nodes --all` refused on one node); one that
    succeeded may have written nothing (cordoning a cordoned node)."""
    after = capture(kubectl, parsed, manifest)
    if set(after) != set(before):
        return True
    return any(_version(before[key]) != _version(after[key]) for key in before)


def _version(obj: dict[str, Any] | None) -> str | None:
    return None if obj is None else str((obj.get("metadata") or {}).get("resourceVersion"))


def _node_patch(before: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    def fields(section: str, keys: tuple[str, ...] | None = None) -> dict[str, Any]:
        was, is_ = before.get(section) or {}, now.get(section) or {}
        names = keys if keys is not None else tuple(set(was) | set(is_))
        return {k: was.get(k) for k in names if k in was or k in is_}

    meta_was, meta_now = before.get("metadata") or {}, now.get("metadata") or {}
    meta = {part: {k: (meta_was.get(part) or {}).get(k) for k in set(meta_was.get(part) or {}) | set(meta_now.get(part) or {})}
            for part in ("labels", "annotations")}
    return {"metadata": meta, "spec": fields("spec", ("taints", "unschedulable"))}


def _controlled(obj: dict[str, Any]) -> bool:
    return any(ref.get("controller") for ref in (obj.get("metadata") or {}).get("ownerReferences") or [])


def describe_undo(before: dict[str, Any]) -> str | None:
    steps = []
    for key, obj in before.items():
        if obj is None:
            steps.append(f"delete {key}")
        elif key.startswith("pod/") and _controlled(obj):
            continue  # its ReplicaSet or StatefulSet recreates it
        else:
            steps.append(f"restore {key} as captured before the change")
    return "; ".join(steps) or None


def undo(kubectl: Kubectl, before: dict[str, Any]) -> str:
    """Apply the undo; returns what was done, raises ToolError when a step failed."""
    done: list[str] = []
    failed: list[str] = []
    for key, obj in before.items():
        kind, _, name = key.partition("/")
        if obj is None:
            res = kubectl.run_tokens(["delete", kind, name, "--ignore-not-found"])
            (done if res.returncode == 0 else failed).append(f"delete {key}: {res.text.strip()}")
            continue
        if kind == "pod" and _controlled(obj):
            continue
        clean = clean_for_restore(obj)
        now = kubectl.get_json(Target(kind, name))
        exists = bool(now and now[0][1] is not None)
        if exists and _version(now[0][1]) == _version(obj):
            continue  # unchanged since the capture (a node the command was refused on)
        if exists and kind == "node":
            # The agent may patch a node, never replace it: its spec, labels and annotations go
            # back by a merge patch (null removes what the command added). The kubelet's status
            # updates move its resourceVersion all the time: only what the agent may change counts.
            current = now[0][1] or {}
            patch = _node_patch(obj, current)
            if patch == _node_patch(current, current):
                continue
            res = kubectl.run_tokens(["patch", "node", name, "--type=merge", "-p", json.dumps(patch)])
            (done if res.returncode == 0 else failed).append(f"restore {key}: {res.text.strip()}")
            continue
        if not exists and kind == "service":
            spec = clean.get("spec") or {}
            spec.pop("clusterIP", None)
            spec.pop("clusterIPs", None)
        verb = "replace" if exists else "create"
        res = kubectl.run_tokens([verb, "-f", "-"], stdin=json.dumps(clean))
        (done if res.returncode == 0 else failed).append(f"{verb} {key}: {res.text.strip()}")
    if failed:
        raise ToolError("undo failed for part of the change: " + "; ".join(failed)
                        + ("; done: " + "; ".join(done) if done else ""))
    return "; ".join(done) or "nothing to undo (controllers recreate what was deleted)"
