"""The metadata spy (no tests here): an agent that names the faulted component from change
metadata alone, reading what an agent reads — `kubectl get ... -o json` with its own kubeconfig —
and nothing of the application's behaviour. It looks at three tells:

- `metadata.generation` on a kind whose API server strategy sets none (a Service, a ConfigMap):
  only an object the farm wrote in a way the API server does not would carry it;
- the latest managedFields time after the object's creation (something changed it since);
- an object of the namespace created later than the rest (the agent's account made at injection).

It returns the component it would name (an object's `io.kompose.service`/`app` label, else its
name) and the candidates it chose among, so a caller can compare its hit rate with chance."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

KINDS = "deployments,statefulsets,daemonsets,services,configmaps,secrets,serviceaccounts,persistentvolumeclaims"
COMPONENT_LABELS = ("io.kompose.service", "app.kubernetes.io/component", "app.kubernetes.io/name", "app", "name")
# kinds kube-apiserver gives a generation (kubesim/store.py GENERATION_KINDS, the spy's copy)
WITH_GENERATION = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob"}
# kubesim/controllers/churn.py's ANNOTATION and FIRST_SYNC_S, the spy's copy
SYNC_REVISION = "fluxcd.io/sync-revision"
FIRST_SYNC_S = 60.0


def _time(stamp: str | None) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() if stamp else 0.0


def component_of(obj: dict[str, Any]) -> str:
    labels = obj["metadata"].get("labels") or {}
    return next((labels[k] for k in COMPONENT_LABELS if labels.get(k)), obj["metadata"]["name"])


def read_objects(kubectl: str, kubeconfig: Path, namespace: str) -> list[dict[str, Any]]:
    argv = [kubectl, f"--kubeconfig={kubeconfig}", "-n", namespace, "get", KINDS, "-o", "json"]
    out = subprocess.run([*argv, "--show-managed-fields"], capture_output=True, text=True, timeout=60)
    if "unknown flag" in out.stderr:  # kubectl before 1.21 shows managedFields unasked
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"kubectl get failed: {out.stderr.strip()}")
    return list(json.loads(out.stdout)["items"])


def fault_time(objects: list[dict[str, Any]], account: str = "sre-agent") -> float | None:
    """When the agent's own account was made, if well after the application: an account made at
    injection dates the fault."""
    first = min((_time(o["metadata"].get("creationTimestamp")) for o in objects), default=0.0)
    mine = [_time(o["metadata"].get("creationTimestamp")) for o in objects
            if o.get("kind") == "ServiceAccount" and o["metadata"]["name"] == account]
    return mine[0] if mine and mine[0] - first > 300 else None


def tells(objects: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """Per component, how strongly its objects' metadata says "changed by someone when the fault
    came": (generation where none belongs, closeness of its last change to the fault time, or
    its recency when the time is unknown); the greatest names the component."""
    when = fault_time(objects)
    score: dict[str, tuple[float, float]] = {}
    for obj in objects:
        meta = obj["metadata"]
        name = component_of(obj)
        born = _time(meta.get("creationTimestamp"))
        if obj.get("kind") == "ServiceAccount" and meta["name"] == "sre-agent":
            continue  # the spy's own account
        wrong_generation = float("generation" in meta and obj.get("kind") not in WITH_GENERATION)
        updates = [_time(e.get("time")) for e in meta.get("managedFields") or []
                   if e.get("subresource") != "status" and e.get("time")]
        last = max(updates, default=born)
        changed = -1e12 if last - born <= 1 else (-abs(last - when) if when is not None else last)
        score[name] = max(score.get(name, (0.0, -1e12)), (wrong_generation, changed))
    return score


def guess(objects: list[dict[str, Any]]) -> tuple[str | None, list[str]]:
    """(the component the spy names, or None when nothing stands out; every candidate)."""
    score = tells(objects)
    candidates = sorted(score)
    if not score or max(score.values()) == (0.0, -1e12):
        return None, candidates
    return max(candidates, key=lambda c: score[c]), candidates


def guess_by_rollout(objects: list[dict[str, Any]]) -> tuple[str | None, list[str]]:
    """A second spy (helper h23b's adversarial pass): the workload whose spec changed most often
    (the greatest `generation`, when one has more than its first), as `kubectl get deploy -o
    yaml` shows it. A rollout is behaviour as much as metadata: the fault's own rollout is what an
    SRE would look at first, but here it is the only one, where a real cluster has a history."""
    candidates = sorted(tells(objects))
    workloads = [(int(o["metadata"].get("generation") or 0), component_of(o)) for o in objects
                 if o.get("kind") in WITH_GENERATION]
    top = max(workloads, default=(0, ""))
    return (top[1] if top[0] > 1 else None), candidates


def guess_by_sync_revision(objects: list[dict[str, Any]]) -> tuple[str | None, list[str]]:
    """A third spy (helper adv2): the churn controller (kubesim/controllers/churn.py) counts its
    syncs in `fluxcd.io/sync-revision` and makes the first within FIRST_SYNC_S (60 s) of an object's
    creation, the next ~600 s later; an object still at revision 1 (or 0) whose deployer's write is
    more than 60 s after its creation was written by something that is not a sync. Names the latest
    such object's component."""
    candidates = sorted(tells(objects))
    off_schedule = []
    for obj in objects:
        meta = obj["metadata"]
        value = (meta.get("annotations") or {}).get(SYNC_REVISION)
        if value is not None and not str(value).isdigit():
            continue  # a revision that is no count (a digest) says nothing of how often it was synced
        revision = int(value or 0)
        born = _time(meta.get("creationTimestamp"))
        writes = [_time(e.get("time")) for e in meta.get("managedFields") or []
                  if e.get("subresource") != "status" and e.get("time")]
        if revision <= 1 and max(writes, default=born) - born > FIRST_SYNC_S + 1:
            off_schedule.append((max(writes), component_of(obj)))
    return (max(off_schedule)[1] if off_schedule else None), candidates
