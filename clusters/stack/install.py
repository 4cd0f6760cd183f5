"""Install the observability and chaos stack on a cluster: the pinned helm releases, the
manifests applied through the Kubernetes API, then wait until the stack's workloads are ready.
Idempotent: a fingerprint ConfigMap lets a reused cluster skip what is already installed."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import yaml

from clusters.handle import ClusterHandle
from clusters.kube import Kube, KubeError
from clusters.stack.releases import MANIFESTS, READY_DEPLOYMENTS, RELEASES, REPOSITORIES, HelmRelease
from clusters.stack.tools import run_tool
from core.errors import ClusterUnavailable
from core.namespaces import STACK_NAMESPACE

MARKER = "sre-farm-stack"


@dataclass
class StackReport:
    skipped: bool = False
    fingerprint: str = ""
    commands: list[list[str]] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)


def fingerprint(releases: list[HelmRelease] = RELEASES) -> str:
    digest = hashlib.sha256()
    for release in releases:
        digest.update(json.dumps([release.name, release.chart_ref, release.version, release.namespace]).encode())
        digest.update(release.values_file.read_bytes())
    for path in MANIFESTS:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _documents() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in MANIFESTS:
        docs.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return docs


def install_stack(
    handle: ClusterHandle,
    *,
    helm: str = "helm",
    releases: list[HelmRelease] = RELEASES,
    force: bool = False,
    helm_timeout: str = "10m",
    wait_seconds: float = 600.0,
    poll_seconds: float = 5.0,
    retry_backoff: float = 5.0,
) -> StackReport:
    """Raises ClusterUnavailable (a setup failure) with the tool's or the API's message."""
    rest = Kube(handle.api_client())
    report = StackReport(fingerprint=fingerprint(releases))
    try:
        if not force and _installed_fingerprint(rest) == report.fingerprint:
            report.skipped = True
            return report
        docs = _documents()
        for doc in docs:  # namespaces first: helm releases install into them
            if doc["kind"] == "Namespace":
                rest.apply(doc)
                report.applied.append(f"Namespace/{doc['metadata']['name']}")
        _helm_releases(handle, helm, releases, helm_timeout, retry_backoff, report)
        for doc in docs:
            if doc["kind"] != "Namespace":
                rest.apply(doc)
                report.applied.append(f"{doc['kind']}/{doc['metadata']['name']}")
        _wait_ready(handle, rest, wait_seconds, poll_seconds)
        rest.apply({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": MARKER, "namespace": STACK_NAMESPACE},
            "data": {"fingerprint": report.fingerprint,
                     "releases": json.dumps({r.name: f"{r.chart_ref}@{r.version}" for r in releases})},
        })
    except KubeError as exc:
        raise ClusterUnavailable(f"installing the stack on {handle.ref} failed: {exc}") from exc
    return report


def _installed_fingerprint(rest: Kube) -> str | None:
    try:
        marker = rest.find("ConfigMap", STACK_NAMESPACE, MARKER)
    except KubeError as exc:
        if exc.code == 404:  # namespace absent
            return None
        raise
    return (marker or {}).get("data", {}).get("fingerprint")


def _helm_base(handle: ClusterHandle, helm: str) -> list[str]:
    argv = [helm, "--kubeconfig", str(handle.kubeconfig)]
    if handle.context:
        argv += ["--kube-context", handle.context]
    return argv


def _helm_releases(handle: ClusterHandle, helm: str, releases: list[HelmRelease], timeout: str,
                   backoff: float, report: StackReport) -> None:
    base = _helm_base(handle, helm)
    for repo in sorted({r.repository for r in releases if r.repository}):
        argv = [helm, "repo", "add", repo, REPOSITORIES[repo], "--force-update"]
        run_tool(argv, what=f"helm repo add {repo}", backoff=backoff)
        report.commands.append(argv)
    if any(r.repository for r in releases):
        argv = [helm, "repo", "update"]
        run_tool(argv, what="helm repo update", backoff=backoff)
        report.commands.append(argv)
    for release in releases:
        argv = base + [
            "upgrade", "--install", release.name, release.chart_ref,
            "--version", release.version,
            "--namespace", release.namespace, "--create-namespace",
            "--values", str(release.values_file),
            "--wait", "--timeout", timeout,
        ]
        run_tool(argv, what=f"installing {release.chart_ref} {release.version} on {handle.ref}",
                 retries=2, backoff=backoff)
        report.commands.append(argv)


def _wait_ready(handle: ClusterHandle, rest: Kube, wait_seconds: float, poll_seconds: float) -> None:
    start = handle.now()
    while True:
        pending = []
        for namespace, name in READY_DEPLOYMENTS:
            deployment = rest.find("Deployment", namespace, name) or {}
            want = deployment.get("spec", {}).get("replicas", 1)
            ready = deployment.get("status", {}).get("readyReplicas", 0) or 0
            if ready < want:
                pending.append(f"deployment {namespace}/{name} ({ready}/{want} ready)")
        if not pending:
            return
        if handle.now() - start >= wait_seconds:
            raise ClusterUnavailable(
                f"the stack on {handle.ref} was not ready after {wait_seconds:.0f} s: {', '.join(pending)}"
            )
        handle.advance(poll_seconds)
