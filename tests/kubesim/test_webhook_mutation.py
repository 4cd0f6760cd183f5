"""A mutating admission webhook whose server the emulator runs (SREGym's Python memory rewriter,
read from the ConfigMap its pod mounts): kube-apiserver applies the JSON patch it answers to a pod
it admits, before storing it; a pod its namespaceSelector or objectSelector does not match, or a
webhook whose backend is down (failurePolicy Fail: refused), is not rewritten."""

from __future__ import annotations

import pytest

from clusters.handle import ClusterHandle
from clusters.kube import Kube, KubeError
from farm.pytest_plugin import SimClusters
from injectors.app_admission import COMPANIONS, MutatingWebhookMemoryRewrite
from injectors.injector import faults

NS, OTHER = "demo", "elsewhere"
POD_RULES = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"],
              "scope": "Namespaced"}]


def pod(name: str, labels: dict[str, str] | None = None) -> dict:
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"containers": [{
        "name": "web", "image": "nginx:1.25", "ports": [{"containerPort": 80}],
        "resources": {"requests": {"memory": "128Mi"}, "limits": {"memory": "256Mi"}}}]}}


def memory(kube: Kube, namespace: str, name: str) -> tuple[str, str]:
    res = kube.get("Pod", namespace, name)["spec"]["containers"][0]["resources"]
    return res["requests"]["memory"], res["limits"]["memory"]


@pytest.fixture
def cluster(sim_clusters: SimClusters) -> ClusterHandle:
    cluster = sim_clusters.served(seed=8)
    kube = Kube.of(cluster)
    for ns in (NS, OTHER):
        kube.ensure_namespace(ns)
    fault = faults.create("mutating-webhook-memory-rewrite")
    assert isinstance(fault, MutatingWebhookMemoryRewrite)
    kube.ensure_namespace(fault.p.backend_namespace)
    objects, ca = fault._backend(cluster)
    for kind, ns, body in objects:
        kube.create(kind, ns, body)
    fault._wait_ready(cluster, kube, fault.p.backend_namespace, fault.p.backend)
    for name, webhook, rules, selector in COMPANIONS:
        kube.create("MutatingWebhookConfiguration", "", fault._config(name, webhook, rules, selector, NS, ca))
    kube.create("MutatingWebhookConfiguration", "", fault._config(fault.p.config, fault.p.webhook, POD_RULES, None, NS, ca))
    return cluster


def test_the_servers_patch_rewrites_the_pods_it_admits(cluster: ClusterHandle) -> None:
    kube = Kube.of(cluster)
    kube.create("Pod", NS, pod("rewritten"))
    kube.create("Pod", OTHER, pod("untouched"))
    assert memory(kube, NS, "rewritten") == ("16Mi", "16Mi")
    assert memory(kube, OTHER, "untouched") == ("128Mi", "256Mi")


def test_a_backend_that_is_down_refuses_instead(cluster: ClusterHandle) -> None:
    kube = Kube.of(cluster)
    kube.patch("Deployment", "platform-ops", "platform-policy-controller", {"spec": {"replicas": 0}})
    cluster.advance(30)
    with pytest.raises(KubeError) as refused:
        kube.create("Pod", NS, pod("refused"))
    assert 'failed calling webhook "mutation.gatekeeper.sh"' in str(refused.value)
    assert 'no endpoints available for service "platform-policy-controller"' in str(refused.value)
