"""What the application test modules share once farm.pytest_plugin's `sim_clusters.served(app)`
has given them a deployed application: a stock kubectl 1.20 against it, and the observability
APIs over HTTP."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

KUBECTL = Path(__file__).resolve().parents[2] / ".tools" / "kubectl-root" / "usr" / "bin" / "kubectl"
NEEDS_KUBECTL = [pytest.mark.kubectl, pytest.mark.slow,
                 pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl 1.20 is installed by the test setup in .tools")]


def run_kubectl(handle: object, *args: str, namespace: str, check: bool = True, stdin: str | None = None,
                kubectl: Path = KUBECTL) -> str:
    """kubectl as a process with the cluster's admin kubeconfig; stdout and stderr together."""
    out = subprocess.run([str(kubectl), "--kubeconfig", str(handle.kubeconfig), "-n", namespace, *args],  # type: ignore[attr-defined]
                         capture_output=True, text=True, timeout=60, input=stdin,
                         env={"PATH": f"{kubectl.parent}:/usr/bin:/bin", "HOME": "/tmp"})
    if check:
        assert out.returncode == 0, out.stderr
    return out.stdout + out.stderr


def deny_ingress(handle: object, namespace: str, name: str, match_labels: dict[str, str]) -> None:
    """A NetworkPolicy, applied with kubectl, that lets no traffic into the pods `match_labels` selects."""
    policy = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
              "metadata": {"name": name, "namespace": namespace},
              "spec": {"podSelector": {"matchLabels": match_labels}, "policyTypes": ["Ingress"], "ingress": []}}
    run_kubectl(handle, "apply", "--validate=false", "-f", "-", namespace=namespace, stdin=json.dumps(policy))


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


def goodput(cluster: object) -> float:
    """The wrk2 load generators' successful requests so far, read from the in-process cluster."""
    return sum(v for (m, labels), v in cluster.workload.state["counters"].items()  # type: ignore[attr-defined]
               if m == "wrk2_requests_total" and ("code", "200") in labels)


def window(cluster: object, seconds: float) -> float:
    """Successful requests per second over the next `seconds` of cluster time."""
    g0 = goodput(cluster)
    cluster.advance(seconds)  # type: ignore[attr-defined]
    return (goodput(cluster) - g0) / seconds


def promql(cluster: object, query: str) -> list[dict]:
    """An instant query against the in-process cluster's Prometheus API: its result vector."""
    status, _, body = cluster.obs.prometheus_app("GET", "/api/v1/query", {"query": [query]}, b"")  # type: ignore[attr-defined]
    assert status == 200, body
    return json.loads(body)["data"]["result"]


def scalar(cluster: object, query: str) -> float:
    """The first series' value of an instant query; NaN when there is none."""
    result = promql(cluster, query)
    return float(result[0]["value"][1]) if result else float("nan")
