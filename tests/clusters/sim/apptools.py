"""What the application test modules share: an application deployed once per module on an
emulated cluster process, a stock kubectl 1.20 against it, and the observability APIs over HTTP."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from apps import load_application
from clusters.base import open_cluster
from farm.deploy import deploy

KUBECTL = Path(__file__).resolve().parents[3] / ".tools" / "kubectl-root" / "usr" / "bin" / "kubectl"
NEEDS_KUBECTL = [pytest.mark.kubectl, pytest.mark.slow,
                 pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl 1.20 is installed by the test setup in .tools")]


def deployed(app: str, seed: int) -> Iterator[object]:
    """A module fixture's body: `app` deployed, warmed up 180 s and checkpointed as "deployed"."""
    handle = open_cluster("sim", seed=seed)
    try:
        deploy(handle, load_application(app))
        handle.advance(180)  # type: ignore[attr-defined]
        handle.checkpoint("deployed")  # type: ignore[attr-defined]
        yield handle
    finally:
        handle.close()


def run_kubectl(handle: object, *args: str, namespace: str, check: bool = True, stdin: str | None = None,
                kubectl: Path = KUBECTL) -> str:
    """kubectl as a process with the cluster's admin kubeconfig; stdout and stderr together."""
    out = subprocess.run([str(kubectl), "--kubeconfig", str(handle.kubeconfig), "-n", namespace, *args],  # type: ignore[attr-defined]
                         capture_output=True, text=True, timeout=60, input=stdin,
                         env={"PATH": f"{kubectl.parent}:/usr/bin:/bin", "HOME": "/tmp"})
    if check:
        assert out.returncode == 0, out.stderr
    return out.stdout + out.stderr


def get(handle: object, base: str, path: str, **params: str) -> dict:
    """GET one of the cluster's endpoints (`prometheus`, `loki`, `jaeger`) as JSON."""
    url = getattr(handle.endpoints, base) + path + "?" + urllib.parse.urlencode(params)  # type: ignore[attr-defined]
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


def prom(handle: object, query: str) -> dict[str, float]:
    """{the first label value of each series: value}."""
    out = {}
    for r in get(handle, "prometheus", "/api/v1/query", query=query)["data"]["result"]:
        key = next(iter(r["metric"].values()), "") if r["metric"] else ""
        out[key] = float(r["value"][1])
    return out


def newest_pod(cluster: object, prefix: str, namespace: str) -> dict:
    """The newest pod of a workload (its name is `prefix-...`) in the in-process cluster's store."""
    pods = [p for p in cluster.store.list("pods", namespace)  # type: ignore[attr-defined]
            if p["metadata"]["name"].startswith(prefix + "-")]
    assert pods, prefix
    return sorted(pods, key=lambda p: p["metadata"]["creationTimestamp"])[-1]
