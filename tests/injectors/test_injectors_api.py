"""Injectors against the emulated cluster's real Kubernetes API: each family writes its cause
through the kubernetes client, answers is_active while the cause is in place, and recover puts
every touched object back exactly (the objects compared field by field)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from clusters.handle import ClusterHandle
from clusters.kube import Kube
from farm.problems.validate import LEAK_WORDS
from farm.pytest_plugin import SimClusters
from injectors.injector import faults
from injectors.fault import CHAOS_NAMESPACE
from injectors.objects import Ref
from tests.injectors.nodes import worker_node

NS = "hotel-reservation"
FLAGS = {"flags": {"paymentFailure": {"state": "ENABLED", "variants": {"100%": 1, "off": 0}, "defaultVariant": "off"}}}


def deployment(name: str, container: str, port: int, env: list[dict[str, str]] | None = None, **spec: Any) -> dict:
    labels = {"io.kompose.service": name}
    pod_spec: dict[str, Any] = {"containers": [{"name": container, "image": "ghcr.io/sregym/hotel-reservation:latest",
                                                "command": [name], "ports": [{"containerPort": port}],
                                                "env": env or [], "resources": {"requests": {"cpu": "100m"},
                                                                                "limits": {"cpu": "1000m"}}}]}
    pod_spec.update(spec)
    return {"metadata": {"name": name, "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": pod_spec}}}


@pytest.fixture(scope="module")
def app(sim_clusters: SimClusters) -> ClusterHandle:
    api_cluster = sim_clusters.served(seed=3)
    kube = Kube.of(api_cluster)
    kube.ensure_namespace(NS)
    kube.create("Deployment", NS, deployment("search", "hotel-reserv-search", 8082,
                                             [{"name": "RATE_RPC_TIMEOUT_MS", "value": "1000"},
                                              {"name": "RATE_RPC_MAX_ATTEMPTS", "value": "2"}]))
    kube.create("Deployment", NS, deployment(
        "mongodb-rate", "hotel-reserv-rate-mongo", 27017,
        volumes=[{"name": "rate", "persistentVolumeClaim": {"claimName": "rate-pvc"}}]))
    kube.create("Deployment", NS, deployment("load-generator", "locust", 8089))
    kube.create("Deployment", NS, deployment("flagd", "flagd", 8013))
    for name, port in (("search", 8082), ("mongodb-rate", 27017)):
        kube.create("Service", NS, {"metadata": {"name": name}, "spec": {
            "selector": {"io.kompose.service": name}, "ports": [{"name": str(port), "port": port, "targetPort": port}]}})
        kube.create("Pod", NS, {"metadata": {"name": f"{name}-7d9f8-abcde", "labels": {"io.kompose.service": name}},
                                "spec": {"nodeName": worker_node(api_cluster), "containers": [{"name": "c", "image": "x"}]}})
    kube.create("ConfigMap", NS, {"metadata": {"name": "flagd-config"}, "data": {"demo.flagd.json": json.dumps(FLAGS)}})
    kube.create("ConfigMap", NS, {"metadata": {"name": "mongo-rate-script"}, "data": {"k8s-rate-mongo.sh": "pwd=admin\n"}})
    kube.create("Secret", NS, {"metadata": {"name": "mongodb-tls"}, "type": "kubernetes.io/tls",
                               "data": {"tls.crt": base64.b64encode(b"old").decode(), "tls.key": base64.b64encode(b"k").decode()}})
    kube.create("Role", NS, {"metadata": {"name": "collector"}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["endpoints"], "verbs": ["get"]}]})
    kube.create("TidbCluster", NS, {"metadata": {"name": "basic"}, "spec": {
        "version": "v7.5.0", "pd": {"replicas": 3}, "tikv": {"replicas": 3}, "tidb": {"replicas": 2}}})
    kube.ensure_namespace("tidb-admin")
    kube.create("Deployment", "tidb-admin", deployment("tidb-controller-manager", "tidb-operator", 10262))
    return api_cluster


def snapshot(kube: Kube, refs: list[str]) -> dict[str, Any]:
    out = {}
    for text in refs:
        ref = Ref.parse(text)
        if ref.kind == "NodeFault" or ref.kind.endswith("Chaos"):
            continue
        obj = kube.find(ref.kind, ref.namespace, ref.name)
        if obj is not None:
            obj = {k: v for k, v in obj.items() if k not in ("status", "metadata")}
        out[text] = obj
    return out


CASES = [
    ("env-var-wrong", {"service": "search", "var": "RATE_RPC_TIMEOUT_MS", "value": "5"}),
    ("env-var-missing", {"service": "search", "var": "RATE_RPC_MAX_ATTEMPTS"}),
    ("env-var-shadowed", {"service": "search", "var": "RATE_RPC_TIMEOUT_MS", "value": "3"}),
    ("retry-amplification", {"service": "search", "settings": {"RATE_RPC_MAX_ATTEMPTS": "9"}}),
    ("service-wrong-target-port", {"service": "mongodb-rate", "port": 27018}),
    ("service-wrong-selector", {"service": "search", "key": "io.kompose.service", "value": "serch"}),
    ("service-missing", {"service": "search"}),
    ("configmap-missing", {"configmap": "mongo-rate-script"}),
    ("configmap-drift", {"configmap": "mongo-rate-script", "key": "k8s-rate-mongo.sh", "replace": {"admin": "root"}}),
    ("feature-flag-enabled", {"flag": "paymentFailure", "variant": "100%"}),
    ("image-wrong-tag", {"service": "search", "tag": "v9.9.9"}),
    ("command-wrong-binary", {"service": "search", "command": ["geo"]}),
    ("probe-misconfigured", {"service": "search", "port": 9999}),
    ("init-container-hang", {"service": "mongodb-rate", "wait_for": "nowhere"}),
    ("sidecar-port-conflict", {"service": "search"}),
    ("memory-limit-too-low", {"service": "mongodb-rate", "memory": "32Mi"}),
    ("requests-too-large", {"service": "search", "cpu": "64"}),
    ("scale-to-zero", {"service": "search"}),
    ("node-selector-missing-node", {"service": "mongodb-rate"}),
    ("anti-affinity-deadlock", {"service": "mongodb-rate"}),
    ("pvc-claim-mismatch", {"service": "mongodb-rate", "claim": "rate-pvc-v2"}),
    ("node-taint-no-toleration", {"service": "mongodb-rate"}),
    ("network-policy-block", {"dependency": "mongodb-rate"}),
    ("dns-config-stale", {"service": "search"}),
    ("db-tls-required", {"service": "mongodb-rate"}),
    ("gc-pressure", {"service": "search", "memory": "48Mi"}),
    ("certificate-expired", {"secret": "mongodb-tls"}),
    ("rbac-role-rule-dropped", {"role": "collector", "resource": "endpoints"}),
    ("resource-quota-below-usage", {"below_usage": 1}),
    ("admission-webhook-outage", {}),
    ("tidb-replicas-beyond-capacity", {"component": "tikv", "replicas": 30}),
    ("tidb-toleration-invalid", {"component": "pd"}),
    ("tidb-version-wrong", {}),
    ("tidb-operator-image-wrong", {}),
    ("network-delay", {"service": "search", "latency": "800ms"}),
    ("network-partition", {"service": "search", "target": "mongodb-rate"}),
    ("io-latency", {"service": "mongodb-rate"}),
    ("stress-cpu", {"service": "search"}),
    ("node-clock-skew", {"service": "search", "offset": "-3h"}),
    ("disk-latent-sector-errors", {"service": "mongodb-rate", "percent": 40}),
    ("disk-silent-corruption", {"service": "mongodb-rate"}),
    ("nic-packet-loss", {"service": "search", "percent": 50}),
    ("kernel-fault", {"service": "mongodb-rate"}),
]


@pytest.mark.parametrize(("name", "params"), CASES, ids=[c[0] for c in CASES])
def test_inject_is_active_and_recover_exactly(app: ClusterHandle, name: str, params: dict[str, Any]) -> None:
    kube = Kube.of(app)
    injector = faults.create(name, **params)
    # What the injection will touch, read before it runs (for objects it deletes or changes).
    probe = injector.inject(app, NS)
    injector.recover(app, probe)
    refs = probe.touched
    before = snapshot(kube, refs)
    injection = injector.inject(app, NS)
    assert injection.injector == name and injection.namespace == NS and injection.touched == refs
    assert injector.is_active(app, injection) is True
    during = snapshot(kube, refs)
    assert during != before or any(Ref.parse(r).kind.endswith("Chaos") or Ref.parse(r).kind == "Node" for r in refs)
    for text in refs:  # nothing the fault creates is named after what it is
        assert not any(w in Ref.parse(text).name.lower() for w in LEAK_WORDS), text
    injector.recover(app, injection)
    assert injector.is_active(app, injection) is False
    assert snapshot(kube, refs) == before
    # Recover twice is harmless.
    injector.recover(app, injection)
    assert snapshot(kube, refs) == before


def test_chaos_experiments_live_in_the_farm_namespace(app: ClusterHandle) -> None:
    from kubernetes import client

    injector = faults.create("network-loss", service="search", loss=30)
    injection = injector.inject(app, NS)
    try:
        api = client.CustomObjectsApi(app.api_client())
        items = api.list_namespaced_custom_object("chaos-mesh.org", "v1alpha1", CHAOS_NAMESPACE, "networkchaos")["items"]
        (exp,) = [i for i in items if i["metadata"]["name"] == Ref.parse(injection.saved["chaos"]).name]
        assert exp["spec"]["selector"] == {"namespaces": [NS], "labelSelectors": {"io.kompose.service": "search"}}
        assert exp["spec"]["loss"]["loss"] == "30"
        assert not (exp["metadata"].get("labels") or {}) and not (exp["metadata"].get("annotations") or {})
        assert Kube.of(app).list("NetworkPolicy", NS) == []  # nothing in the app namespace
    finally:
        injector.recover(app, injection)
    assert not injector.is_active(app, injection)


def test_the_mutated_value_going_away_makes_the_fault_inactive(app: ClusterHandle) -> None:
    """An agent's own fix (not the injector's recover) is what is_active must notice."""
    kube = Kube.of(app)
    injector = faults.create("env-var-wrong", service="search", var="RATE_RPC_TIMEOUT_MS", value="5")
    injection = injector.inject(app, NS)
    dep = kube.get("Deployment", NS, "search")
    dep["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = "1000"
    kube.replace("Deployment", NS, dep)
    assert injector.is_active(app, injection) is False
    injector.recover(app, injection)


def test_load_spike_is_a_trigger_that_is_over_when_inject_returns(app: ClusterHandle) -> None:
    kube = Kube.of(app)
    spike = faults.create("load-spike", load_generator="load-generator", multiplier=4, duration_seconds=30)
    t0 = app.now()
    injection = spike.inject(app, NS)
    assert app.now() - t0 >= 30
    assert kube.get("Deployment", NS, "load-generator")["spec"]["replicas"] == 1
    assert injection.saved["replicas_before"] == 1
    assert spike.is_active(app, injection) is False
