"""Deploy an application: apply its manifests through the Kubernetes API and wait until every
workload is ready, advancing the cluster clock (virtual on the emulated cluster, real sleep
elsewhere). The same code runs on every cluster provider."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from apps.application import Application
from clusters.handle import ClusterHandle
from clusters.kube import Kube, KubeError
from core.errors import DeployError

POLL_S = 5.0


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
           timeout_s: float = 600.0) -> float:
    ns = namespace or app.namespace
    start = cluster.now()
    apply_manifests(cluster, app, ns)
    for extra in app.extra_namespaces:  # an operator comes up before what it manages can
        wait_ready(cluster, extra, timeout_s)
    wait_ready(cluster, ns, max(POLL_S, timeout_s - (cluster.now() - start)))
    return cluster.now() - start
