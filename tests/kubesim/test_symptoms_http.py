"""The same causes and symptoms over the real protocols: the emulated cluster as a process (the
`sim` provider), hotel-reservation deployed by farm.deploy through the Kubernetes API, a
stock kubectl 1.20 to plant the fault and look at it, and Prometheus's HTTP API for the metrics."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from clusters.emulated import SimHandle
from farm.pytest_plugin import SimClusters

KUBECTL = Path(__file__).resolve().parents[2] / ".tools" / "kubectl-root" / "usr" / "bin" / "kubectl"
NS = "hotel-reservation"
pytestmark = [pytest.mark.kubectl, pytest.mark.slow,
              pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl 1.20 is installed by the test setup in .tools")]


@pytest.fixture(scope="module")
def sim(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served("hotel-reservation", seed=21, warmup=0)


def kubectl(handle: object, *args: str, check: bool = True) -> str:
    out = subprocess.run([str(KUBECTL), "--kubeconfig", str(handle.kubeconfig), "-n", NS, *args],  # type: ignore[attr-defined]
                         capture_output=True, text=True, timeout=60,
                         env={"PATH": f"{KUBECTL.parent}:/usr/bin:/bin", "HOME": "/tmp"})
    if check:
        assert out.returncode == 0, out.stderr
    return out.stdout + out.stderr


def prom(handle: object, query: str) -> list[dict]:
    url = handle.endpoints.prometheus + "/api/v1/query?" + urllib.parse.urlencode({"query": query})  # type: ignore[attr-defined]
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())["data"]["result"]


def test_deployed_hotel_reservation_looks_right_to_kubectl(sim: object) -> None:
    table = kubectl(sim, "get", "pods")
    assert table.count("Running") == 20 and "1/1" in table
    assert "Successfully registered in consul" in kubectl(sim, "logs", "deploy/geo")
    sim.advance(120)  # type: ignore[attr-defined]
    ok = prom(sim, f'sum(rate(wrk2_requests_total{{namespace="{NS}",code="200"}}[1m]))')
    assert float(ok[0]["value"][1]) > 95


def test_set_env_planting_half_a_root_user_crash_loops_mongo(sim: object) -> None:
    kubectl(sim, "set", "env", "deployment/mongodb-reservation", "MONGO_INITDB_ROOT_USERNAME=admin")
    sim.advance(90)  # type: ignore[attr-defined]
    table = kubectl(sim, "get", "pods", "-l", "io.kompose.service=mongodb-reservation")
    assert "CrashLoopBackOff" in table or "Error" in table
    name = next(line.split()[0] for line in table.splitlines()[1:] if "mongodb-reservation" in line)
    assert "both must be specified for a user to be created" in kubectl(sim, "logs", name, "--previous")
    described = kubectl(sim, "describe", "pod", name)
    assert "Back-off restarting failed container" in described and "Last State:     Terminated" in described
    restarts = prom(sim, f'max(kube_pod_container_status_restarts_total{{namespace="{NS}",pod="{name}"}})')
    sim.advance(30)  # type: ignore[attr-defined]
    assert restarts and float(restarts[0]["value"][1]) >= 1
