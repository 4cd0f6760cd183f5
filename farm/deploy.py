"""Deploy an application: apply its manifests through the Kubernetes API, give its workloads the
rollout history an application that has lived has, and wait until every workload is ready,
advancing the cluster clock (virtual on the emulated cluster, real sleep elsewhere). The same code
runs on every cluster provider.

The history: without it the fault's rollout is the only one (every other workload at generation 1,
revision 1, one ReplicaSet) and `kubectl get deploy -o yaml` names the faulted workload (issue 23;
tests/security/test_metadata_tells.py). Each Deployment and StatefulSet gets a seeded number of
restarts (`kubectl rollout restart`'s annotation: a new revision, old ReplicaSets scaled to 0) and
of scale changes that were undone (generation without a revision, as an autoscaler or an operator's `kubectl
scale` leaves). The counts are geometric with no cap, so the fault's one more write seldom makes
its workload the one with the most; seeded per trial, so no fixed history tells it either."""

from __future__ import annotations

import copy
import random
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from apps.application import Application
from clusters.handle import ClusterHandle
from clusters.kube import Kube, KubeError
from core.errors import DeployError

POLL_S = 5.0
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"  # what `kubectl rollout restart` writes (injectors/workload.py)
# Means of the geometric counts of past restarts and of undone scale changes per workload: a few
# each, the greatest of some twenty workloads near ten (a trial's deploy pays one step per restart
# of the busiest workload).
MEAN_RESTARTS = 3.0
MEAN_SCALES = 1.0
HISTORY_STEP_S = 1.0  # between restarts, so the deployment controller sees each (the emulator passes once a second)


@cache
def _parsed(app_name: str, files: tuple[Path, ...]) -> tuple[dict[str, Any], ...]:
    docs: list[dict[str, Any]] = []
    for path in files:
        for doc in yaml.load_all(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
            if doc:
                docs.append(doc)
    return tuple(docs)


def manifests(app: Application) -> list[dict[str, Any]]:
    """The application's manifests, parsed once per process; callers get their own copies."""
    return copy.deepcopy(list(_parsed(app.name, tuple(app.manifest_files()))))


def apply_manifests(cluster: ClusterHandle, app: Application, namespace: str) -> int:
    rest = Kube(cluster.api_client())
    try:
        rest.ensure_namespace(namespace)
        for extra in app.extra_namespaces:
            rest.ensure_namespace(extra)
        docs = manifests(app)
        for doc in docs:
            # A manifest that names one of the application's other namespaces (its operator's)
            # goes there; everything else goes to the namespace the application is deployed into.
            own = (doc.get("metadata") or {}).get("namespace")
            rest.apply(doc, own if own in app.extra_namespaces else namespace)
    except KubeError as exc:
        raise DeployError(f"applying {app.name} to {cluster.ref}/{namespace} failed: {exc}") from exc
    return len(docs)


def _geometric(rng: random.Random, mean: float) -> int:
    """A count >= 0 with the given mean and no upper bound."""
    return int(rng.expovariate(1.0 / (mean + 0.5)))  # floor of an exponential: geometric, mean ~ `mean`


def rollout_history(seed: int, app: str, kind: str, namespace: str, name: str) -> tuple[int, int]:
    """(restarts, undone scale changes) a workload had before the trial, drawn from the trial's seed
    and the workload's identity (string seeding is a SHA-512 of the string, whatever the hash seed)."""
    rng = random.Random(f"{seed}/{app}/{kind}/{namespace}/{name}")
    return _geometric(rng, MEAN_RESTARTS), _geometric(rng, MEAN_SCALES)


def replay_history(cluster: ClusterHandle, app: Application, namespace: str, seed: int) -> int:
    """Give each workload of the application its rollout history (see the module's docstring), at
    no replicas: right after the apply, before a pod ran, so no pod starts and crashes once per
    past revision (a dependent's crash-loop back-off would outlast a trial's waits); then every
    workload is scaled to its manifest's count. Returns how many writes that took."""
    rest = Kube(cluster.api_client())
    plan: list[tuple[str, str, str, int, int, int]] = []
    for doc in manifests(app):
        kind, meta = doc.get("kind"), doc.get("metadata") or {}
        if kind not in ("Deployment", "StatefulSet"):
            continue  # a DaemonSet has no replica count to hold its pods at none (nor a revision annotation)
        own = meta.get("namespace")
        ns = own if own in app.extra_namespaces else namespace
        replicas = int((doc.get("spec") or {}).get("replicas", 1))
        plan.append((str(kind), ns, str(meta["name"]), replicas,
                     *rollout_history(seed, app.name, str(kind), ns, str(meta["name"]))))
    writes = 0
    try:
        for kind, ns, name, _, _, _ in plan:
            rest.patch(kind, ns, name, {"spec": {"replicas": 0}})
        # Scale changes, each undone at once: generation moves, no pod comes of them.
        for kind, ns, name, _, _, scales in plan:
            for _ in range(scales):
                rest.patch(kind, ns, name, {"spec": {"replicas": 1}})
                rest.patch(kind, ns, name, {"spec": {"replicas": 0}})
                writes += 2
        steps = max((p[4] for p in plan), default=0)
        # The restarts happened over the days before the trial, oldest first: stamped now, they
        # would all date from the deploy's last seconds, and a `kubectl rollout restart` in the
        # trial's first second would write the same stamp (an empty patch, which kubectl refuses).
        gaps = random.Random(f"{seed}/{app.name}/history").choices(range(3600, 3 * 86400), k=steps)
        for step in range(1, steps + 1):
            ago = sum(gaps[step - 1:])
            when = datetime.fromtimestamp(cluster.now() - ago, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            for kind, ns, name, _, restarts, _ in plan:
                if restarts >= step:
                    rest.patch(kind, ns, name, {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: when}}}}})
                    writes += 1
            cluster.advance(HISTORY_STEP_S)
        for kind, ns, name, replicas, _, _ in plan:
            rest.patch(kind, ns, name, {"spec": {"replicas": replicas}})
    except KubeError as exc:
        raise DeployError(f"replaying the rollout history of {app.name} on {cluster.ref}/{namespace} failed: {exc}") from exc
    return writes + 2 * len(plan)


def not_ready(rest: Kube, namespace: str) -> list[str]:
    """Workloads and pods that are not ready, each with why, e.g. `pod/geo-7d9 (CrashLoopBackOff)`."""
    waiting: list[str] = []
    for kind in ("Deployment", "StatefulSet"):
        for obj in rest.list(kind, namespace):
            want = obj.get("spec", {}).get("replicas", 1)
            ready = obj.get("status", {}).get("readyReplicas", 0) or 0
            if ready < want:
                waiting.append(f"{kind.lower()}/{obj['metadata']['name']} ({ready}/{want} ready)")
    if not waiting:
        return []
    for pod in rest.list("Pod", namespace):
        status = pod.get("status", {})
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions", []))
        if ready or status.get("phase") == "Succeeded":
            continue
        reason = status.get("phase", "Unknown")
        for cs in status.get("containerStatuses", []) or []:
            w = (cs.get("state") or {}).get("waiting")
            if w and w.get("reason"):
                reason = w["reason"]
                break
        waiting.append(f"pod/{pod['metadata']['name']} ({reason})")
    return waiting


def wait_ready(cluster: ClusterHandle, namespace: str, timeout_s: float = 600.0) -> float:
    """Returns the cluster seconds it took; DeployError naming what is not ready on timeout."""
    rest = Kube(cluster.api_client())
    start = cluster.now()
    while True:
        try:
            pending = not_ready(rest, namespace)
        except KubeError as exc:
            raise DeployError(f"cannot read workloads of {namespace} on {cluster.ref}: {exc}") from exc
        if not pending:
            return cluster.now() - start
        if cluster.now() - start >= timeout_s:
            shown = ", ".join(pending[:12]) + (f" and {len(pending) - 12} more" if len(pending) > 12 else "")
            raise DeployError(f"{namespace} on {cluster.ref} not ready after {timeout_s:.0f} s: {shown}")
        cluster.advance(POLL_S)


def deploy(cluster: ClusterHandle, app: Application, namespace: str | None = None,
           timeout_s: float = 600.0, seed: int = 0) -> float:
    """Returns the cluster seconds it took; `seed` draws the workloads' rollout history (the trial's)."""
    ns = namespace or app.namespace
    start = cluster.now()
    apply_manifests(cluster, app, ns)
    replay_history(cluster, app, ns, seed)
    for extra in app.extra_namespaces:  # an operator comes up before what it manages can
        wait_ready(cluster, extra, timeout_s)
    wait_ready(cluster, ns, max(POLL_S, timeout_s - (cluster.now() - start)))
    return cluster.now() - start
