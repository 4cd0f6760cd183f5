"""kubectl 1.20 against the full emulated cluster (A2's SimCluster: controllers, kubelet): rollout
status, history and undo through the deployment controller's revisions, describe with the
kubelet's events, logs from the container model."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from kubernetes import client

from clusters.emulated import SimHandle
from farm.pytest_plugin import SimClusters

KUBECTL = Path(__file__).resolve().parents[2] / ".tools" / "kubectl-root" / "usr" / "bin" / "kubectl"


pytestmark = [pytest.mark.kubectl, pytest.mark.slow,
              pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl 1.20 is installed by the test setup in .tools")]

MANIFEST = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: "nginx:1.25", ports: [{containerPort: 80}]}
"""


@pytest.fixture(scope="module")
def cluster(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served(seed=1)


def kubectl(cluster: SimHandle, *args: str, check: bool = True, timeout: float = 60, kubeconfig: Path | None = None) -> str:
    env = {"PATH": f"{KUBECTL.parent}:/usr/bin:/bin", "HOME": str(cluster.workdir),
           "KUBECONFIG": str(kubeconfig or cluster.kubeconfig)}
    proc = subprocess.run(["kubectl", *args], env=env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc.stdout + ("" if check else proc.stderr)


def image(cluster: SimHandle) -> str:
    d = client.AppsV1Api(cluster.api_client()).read_namespaced_deployment("web", "shop")
    return d.spec.template.spec.containers[0].image


def test_rollout_status_history_and_undo(cluster: SimHandle, tmp_path: Path) -> None:
    client.CoreV1Api(cluster.api_client()).create_namespace({"metadata": {"name": "shop"}})
    manifest = tmp_path / "web.yaml"
    manifest.write_text(MANIFEST)
    kubectl(cluster, "apply", "-f", str(manifest))
    cluster.advance(60)
    assert 'deployment "web" successfully rolled out' in kubectl(cluster, "rollout", "status", "deploy/web", "-n", "shop",
                                                                  "--timeout=20s")
    pods = kubectl(cluster, "get", "pods", "-n", "shop", "-l", "app=web", "--no-headers").split("\n")
    assert len([p for p in pods if " Running " in p and " 1/1 " in p]) == 2
    kubectl(cluster, "set", "image", "deploy/web", "web=nginx:1.26", "-n", "shop")
    cluster.advance(120)
    kubectl(cluster, "rollout", "status", "deploy/web", "-n", "shop", "--timeout=20s")
    assert image(cluster) == "nginx:1.26"
    history = kubectl(cluster, "rollout", "history", "deploy/web", "-n", "shop")
    assert [line.split()[0] for line in history.strip().splitlines()[2:]] == ["1", "2"]
    assert "deployment.apps/web rolled back" in kubectl(cluster, "rollout", "undo", "deploy/web", "-n", "shop")
    cluster.advance(120)
    assert image(cluster) == "nginx:1.25"
    kubectl(cluster, "rollout", "status", "deploy/web", "-n", "shop", "--timeout=20s")


def test_rollout_status_waits_for_the_clock(cluster: SimHandle) -> None:
    kubectl(cluster, "scale", "deploy/web", "-n", "shop", "--replicas=3")
    proc = subprocess.Popen(["kubectl", "rollout", "status", "deploy/web", "-n", "shop", "--timeout=30s"],
                            env={"PATH": f"{KUBECTL.parent}:/usr/bin:/bin", "HOME": str(cluster.workdir),
                                 "KUBECONFIG": str(cluster.kubeconfig)}, stdout=subprocess.PIPE, text=True)
    time.sleep(1.0)
    assert proc.poll() is None  # nothing moves while the virtual clock stands still
    cluster.advance(60)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and 'deployment "web" successfully rolled out' in out


def test_describe_pod_shows_kubelet_events(cluster: SimHandle) -> None:
    name = kubectl(cluster, "get", "pods", "-n", "shop", "-l", "app=web", "-o", "jsonpath={.items[0].metadata.name}")
    out = kubectl(cluster, "describe", "pod", name, "-n", "shop")
    events = out.split("Events:", 1)[1]
    assert "Scheduled" in events and "Started" in events


def test_undo_right_after_set_env_reuses_the_old_revisions_replicaset(cluster: SimHandle, tmp_path: Path) -> None:
    # No clock advance between the agent's writes: the deployment controller acts on a write
    # before its response leaves, as a real one does within milliseconds.
    client.CoreV1Api(cluster.api_client()).create_namespace({"metadata": {"name": "shop2"}})
    manifest = tmp_path / "web.yaml"
    manifest.write_text(MANIFEST.replace("namespace: shop", "namespace: shop2"))
    kubectl(cluster, "apply", "-f", str(manifest))
    cluster.advance(30)
    agent = cluster.agent_kubeconfig("shop2")
    kubectl(cluster, "set", "env", "deploy/web", "FOO=bar", "-n", "shop2", kubeconfig=agent)
    assert "deployment.apps/web rolled back" in kubectl(cluster, "rollout", "undo", "deploy/web", "-n", "shop2",
                                                        kubeconfig=agent)
    rss = client.AppsV1Api(cluster.api_client()).list_namespaced_replica_set("shop2").items
    revisions = {rs.metadata.name: rs.metadata.annotations["deployment.kubernetes.io/revision"] for rs in rss}
    first = next(rs.metadata.name for rs in rss if not rs.spec.template.spec.containers[0].env)
    assert len(rss) == 2 and revisions[first] == "3", revisions
    history = kubectl(cluster, "rollout", "history", "deploy/web", "-n", "shop2")
    assert [line.split()[0] for line in history.strip().splitlines()[2:]] == ["2", "3"]
