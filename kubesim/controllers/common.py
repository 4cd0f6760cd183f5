"""Small helpers the controllers share: owner references, pod state predicates, template hashes,
random name suffixes, and pods built from templates."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from kubesim.store import Obj, Store, StoreError

SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def owner_ref(owner: Obj, controller: bool = True) -> dict[str, Any]:
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": controller, "blockOwnerDeletion": True}


def controller_uid(obj: Obj) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("uid")
    return None


def is_terminal(pod: Obj) -> bool:
    return pod.get("status", {}).get("phase") in ("Succeeded", "Failed")


def is_active(pod: Obj) -> bool:
    return not is_terminal(pod) and not pod["metadata"].get("deletionTimestamp")


def deletion_grace(pod: Obj, requested: int | None = None) -> int:
    """The grace period of a pod's deletion, as the pod strategy's CheckGracefulDelete decides it:
    `requested` (DeleteOptions.gracePeriodSeconds), else spec.terminationGracePeriodSeconds (30);
    none for a pod no node runs or that has ended; a negative request means the shortest, 1 s."""
    spec = pod.get("spec") or {}
    if not spec.get("nodeName") or is_terminal(pod):
        return 0
    grace = spec.get("terminationGracePeriodSeconds", 30) if requested is None else requested
    return 1 if int(grace) < 0 else int(grace)


def delete_pod(store: Store, pod: Obj, requested: int | None = None) -> bool:
    """Delete `pod` as a client's DELETE does (grace period from `requested`, else the pod's own):
    it stays Terminating until its kubelet has stopped it, so a pod on a node whose kubelet is
    down stays until someone forces it. False when it was gone already."""
    try:
        store.delete("pods", pod["metadata"]["namespace"], pod["metadata"]["name"], grace=deletion_grace(pod, requested))
    except StoreError:
        return False
    return True


def condition(obj: Obj, type_: str) -> dict[str, Any] | None:
    for c in obj.get("status", {}).get("conditions") or []:
        if c.get("type") == type_:
            return c
    return None


def is_ready(pod: Obj) -> bool:
    c = condition(pod, "Ready")
    return bool(c and c.get("status") == "True")


def ready_since(pod: Obj) -> str | None:
    c = condition(pod, "Ready")
    return c.get("lastTransitionTime") if c and c.get("status") == "True" else None


def set_condition(status: dict[str, Any], type_: str, value: str, reason: str, message: str, stamp: str,
                  heartbeat: bool = False) -> None:
    conds = status.setdefault("conditions", [])
    for c in conds:
        if c["type"] == type_:
            if c.get("status") != value:
                c["lastTransitionTime"] = stamp
            if c.get("status") != value or c.get("reason") != reason or c.get("message") != message:
                c["lastUpdateTime"] = stamp if "lastUpdateTime" in c or heartbeat else c.get("lastUpdateTime", stamp)
            c.update(status=value, reason=reason, message=message)
            return
    entry = {"type": type_, "status": value, "reason": reason, "message": message, "lastTransitionTime": stamp}
    if heartbeat:
        entry["lastUpdateTime"] = stamp
    conds.append(entry)


def normalized(value: Any) -> Any:
    """A template as the controllers' Go structs hold it: a null field is an absent one (kubectl
    rollout undo sends back `metadata.creationTimestamp: null`, which must not make it a new
    revision)."""
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return value


def template_hash(template: dict[str, Any], collision: int = 0) -> str:
    """A pod-template-hash over the normalised template, 10 characters of the safe alphabet."""
    raw = json.dumps(normalized(template), sort_keys=True, separators=(",", ":")) + (str(collision) if collision else "")
    n = int(hashlib.sha256(raw.encode()).hexdigest()[:16], 16)
    out = ""
    for _ in range(10):
        out += SUFFIX_ALPHABET[n % len(SUFFIX_ALPHABET)]
        n //= len(SUFFIX_ALPHABET)
    return out


def random_suffix(rng: Any, n: int = 5) -> str:
    return "".join(rng.choice(SUFFIX_ALPHABET) for _ in range(n))


def pod_from_template(template: dict[str, Any], name: str, namespace: str, owner: Obj,
                      extra_labels: dict[str, str] | None = None) -> Obj:
    tmpl = copy.deepcopy(template or {})
    meta = tmpl.get("metadata") or {}
    labels = dict(meta.get("labels") or {})
    labels.update(extra_labels or {})
    pod_meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels,
                                "ownerReferences": [owner_ref(owner)]}
    if meta.get("annotations"):
        pod_meta["annotations"] = dict(meta["annotations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": tmpl.get("spec") or {},
            "status": {"phase": "Pending", "qosClass": qos_class(tmpl.get("spec") or {})}}


def qos_class(spec: dict[str, Any]) -> str:
    containers = (spec.get("containers") or []) + (spec.get("initContainers") or [])
    any_set, guaranteed = False, True
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            any_set = True
        for r in ("cpu", "memory"):
            if r not in lim or (r in req and str(req[r]) != str(lim[r])):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def int_or_percent(value: Any, total: int, round_up: bool) -> int:
    if value is None:
        return 0
    if isinstance(value, str) and value.endswith("%"):
        frac = float(value[:-1]) / 100.0 * total
        import math
        return int(math.ceil(frac - 1e-9)) if round_up else int(math.floor(frac + 1e-9))
    return int(value)
