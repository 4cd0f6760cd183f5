"""KubeconfigClusterHandle over the emulated cluster's admin kubeconfig (provider "sim", opened
with clusters.handle.open_cluster): the same client that serves kind and EKS deploys an
application, creates the agent's scoped kubeconfig and resets namespaces and Chaos Mesh
resources, a stuck finalizer included, while the emulated cluster's controllers run."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("kubesim.chaos", reason="the emulated cluster's chaos controller has not landed yet")

from clusters.handle import ClusterHandle  # noqa: E402
from clusters.real import KubeconfigClusterHandle  # noqa: E402
from clusters.emulated import SimHandle
from farm.pytest_plugin import SimClusters

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = ROOT / ".tools" / "kubectl-root" / "usr" / "bin" / "kubectl"
CHAOS = "/apis/chaos-mesh.org/v1alpha1"


@pytest.fixture(scope="module")
def sim(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served()


@pytest.fixture()
def real(sim: ClusterHandle, tmp_path: Path) -> Iterator[KubeconfigClusterHandle]:
    handle = KubeconfigClusterHandle(
        "kind", "over-sim", sim.kubeconfig, clock=sim, workdir=tmp_path, reset_timeout=30, finalizer_grace=1.0,
        poll_interval=1.0, urls={"prometheus": sim.endpoints.prometheus, "loki": sim.endpoints.loki,
                                 "jaeger": sim.endpoints.jaeger})
    yield handle
    handle.reset()
    handle.close()


def test_the_clock_is_the_emulated_one(real: KubeconfigClusterHandle, sim: ClusterHandle) -> None:
    assert real.capabilities.virtual_clock
    before = real.now()
    real.advance(300)
    assert real.now() - before == pytest.approx(300, abs=1)
    assert sim.now() == pytest.approx(real.now(), abs=1)
    assert real.health().ok


def test_deploy_agent_credentials_and_reset(real: KubeconfigClusterHandle) -> None:
    from apps import load_application
    from farm.deploy import apply_manifests

    app = load_application("social-network")
    assert apply_manifests(real, app, app.namespace) > 60
    real.advance(60)
    pods = real.request("GET", f"/api/v1/namespaces/{app.namespace}/pods")["items"]
    assert pods, "the emulated cluster's controllers created no pods"
    path = real.agent_kubeconfig(app.namespace)
    listed = subprocess.run([str(KUBECTL), "--kubeconfig", str(path), "get", "deployments"], capture_output=True,
                            text=True, timeout=60)
    assert listed.returncode == 0 and "nginx-thrift" in listed.stdout, listed.stderr
    real.request("POST", f"{CHAOS}/namespaces/{app.namespace}/podchaos", {
        "apiVersion": "chaos-mesh.org/v1alpha1", "kind": "PodChaos",
        "metadata": {"name": "stuck", "namespace": app.namespace, "finalizers": ["farm.test/never-removed"]},
        "spec": {"action": "pod-failure", "mode": "one", "duration": "30m",
                 "selector": {"namespaces": [app.namespace], "labelSelectors": {"service": "user-service"}}}})
    hidden = subprocess.run([str(KUBECTL), "--kubeconfig", str(path), "get", "podchaos"], capture_output=True,
                            text=True, timeout=60)
    assert hidden.returncode != 0 and "Forbidden" in hidden.stderr
    real.reset()
    assert app.namespace not in real._namespaces()
    remaining = [i for c in real.chaos_resources() for i in real.request("GET", c).get("items", [])]
    assert remaining == []


def test_stack_manifests_come_up_under_the_emulated_controllers(real: KubeconfigClusterHandle, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """helm is the fake (it only records); the Jaeger manifests are applied for real and the
    emulated deployment controller and kubelet bring them to ready in virtual time."""
    from clusters.stack import install_stack

    monkeypatch.setenv("PATH", f"{ROOT / 'tests' / 'fakes'}:{KUBECTL.parent}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_HELM_LOG", str(tmp_path / "helm.log"))
    report = install_stack(real, force=True, poll_seconds=5, wait_seconds=600)
    assert not report.skipped and "Deployment/jaeger" in report.applied
    jaeger = real.request("GET", "/apis/apps/v1/namespaces/observe/deployments/jaeger")
    assert jaeger["status"].get("readyReplicas") == 1
    real.reset()
    assert "observe" in real._namespaces()  # the stack is not part of what a reset removes


def test_deploy_wait_times_out_naming_the_pod_and_why(real: KubeconfigClusterHandle) -> None:
    """A Deployment whose image tag does not exist never becomes ready: deploy's wait gives up
    after its timeout (cluster seconds) with the stuck pod and its waiting reason."""
    import re

    from core.errors import DeployError
    from farm.deploy import wait_ready

    ns = "stuck-deploy"
    real.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    real.request("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "stuck", "namespace": ns},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "stuck"}},
                 "template": {"metadata": {"labels": {"app": "stuck"}},
                              "spec": {"containers": [{"name": "db", "image": "mongo:4.4.66"}]}}}})
    start = real.now()
    with pytest.raises(DeployError) as err:
        wait_ready(real, ns, timeout_s=90)
    assert 90 <= real.now() - start < 120  # gave up at the timeout, not before and not much after
    message = str(err.value)
    pods = [p["metadata"]["name"] for p in real.request("GET", f"/api/v1/namespaces/{ns}/pods")["items"]]
    assert len(pods) == 1
    assert message.startswith(f"{ns} on kind:over-sim not ready after 90 s: deployment/stuck (0/1 ready)")
    reason = re.search(rf"pod/{re.escape(pods[0])} \((\w+)\)", message)
    assert reason and reason.group(1) in ("ImagePullBackOff", "ErrImagePull"), message
