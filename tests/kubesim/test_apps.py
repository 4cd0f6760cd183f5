"""Every application under apps deploys healthy on the emulated cluster and its load
generator's client-side success query reads 1; the registry knows exactly the tags the manifests
name; hotel-reservation's services start the way the Go binaries do."""

from __future__ import annotations

import json

import pytest

from apps import load_application
from kubesim.apps.model import image_lookup
from kubesim.cluster import SimCluster
from farm.pytest_plugin import SimClusters


def query(cluster: SimCluster, q: str) -> list[dict]:
    status, _, body = cluster.obs.prometheus_app("GET", "/api/v1/query", {"query": [q]}, b"")
    assert status == 200, body
    return json.loads(body)["data"]["result"]


@pytest.mark.parametrize("name", ["hotel-reservation", "social-network", "astronomy-shop", "train-ticket"])
def test_application_deploys_ready_and_its_clients_succeed(sim_clusters: SimClusters, name: str) -> None:
    app = load_application(name)
    cluster = sim_clusters.in_process(name, seed=1, settle=240)
    pods = cluster.store.list("pods", app.namespace)
    assert pods
    not_ready = [p["metadata"]["name"] for p in pods
                 if not any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))]
    assert not_ready == []
    cluster.advance(120)
    ok = query(cluster, app.client_success_query.replace("{window}", "1m"))
    rate = query(cluster, app.client_request_rate_query.replace("{window}", "1m"))
    assert float(ok[0]["value"][1]) > 0.99 and float(rate[0]["value"][1]) > 0


def test_registry_knows_the_manifest_tags_and_nothing_else() -> None:
    assert image_lookup("ghcr.io/open-telemetry/demo:2.2.0-checkout")[1] is None
    err = image_lookup("ghcr.io/open-telemetry/demo:9.9.9-checkout")[1]
    assert err and err.endswith("ghcr.io/open-telemetry/demo:9.9.9-checkout: not found")
    assert "pull access denied" in (image_lookup("example/nothing-here:1")[1] or "")


def test_a_wait_for_init_container_holds_the_pod_until_its_dependency_answers(sim_clusters: SimClusters) -> None:
    cluster = sim_clusters.in_process(seed=4)
    cluster.apply([{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app", "namespace": "demo"}, "spec": {
        "initContainers": [{"name": "wait-for-db", "image": "busybox",
                            "command": ["sh", "-c", "until nc -z -v -w30 db 5432; do echo waiting for db; sleep 2; done;"]}],
        "containers": [{"name": "app", "image": "nginx:1.25"}]}}])
    cluster.advance(60)
    st = cluster.store.get("pods", "demo", "app")["status"]
    assert st["initContainerStatuses"][0]["state"].get("running") and st["phase"] == "Pending"
    assert "waiting for db" in cluster.read_container_log("demo", "app", "wait-for-db")
    cluster.apply([{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "db", "namespace": "demo", "labels": {"app": "db"}},
                    "spec": {"containers": [{"name": "pg", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}]}},
                   {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "db", "namespace": "demo"},
                    "spec": {"selector": {"app": "db"}, "ports": [{"port": 5432, "targetPort": 80}]}}])
    cluster.advance(30)
    st = cluster.store.get("pods", "demo", "app")["status"]
    assert st["initContainerStatuses"][0]["state"]["terminated"]["reason"] == "Completed" and st["phase"] == "Running"


def test_hotel_services_depend_on_consul_at_start(sim_clusters: SimClusters) -> None:
    cluster = sim_clusters.in_process("hotel-reservation", seed=2)
    ns = "hotel-reservation"
    cluster.store.delete("services", ns, "consul")
    victim = next(p for p in cluster.store.list("pods", ns) if p["metadata"]["name"].startswith("user-"))
    cluster.store.delete("pods", ns, victim["metadata"]["name"])
    cluster.advance(60)
    new = next(p for p in cluster.store.list("pods", ns) if p["metadata"]["name"].startswith("user-"))
    log = cluster.read_container_log(ns, new["metadata"]["name"], previous=True)
    assert 'FTL' in log and 'failed register: Put "http://consul:8500/v1/agent/service/register": dial tcp: lookup consul on 10.96.0.10:53: no such host' in log


def test_apps_without_a_call_graph_model_still_feel_their_dependencies(sim_clusters: SimClusters) -> None:
    ns = "astronomy-shop"
    app = load_application(ns)
    cluster = sim_clusters.in_process(ns, seed=1, settle=240)

    def success() -> float:
        return float(query(cluster, app.client_success_query.replace("{window}", "1m"))[0]["value"][1])
    cluster.advance(90)
    assert success() > 0.99
    cluster.store.mutate("deployments.apps", ns, "product-catalog", lambda d: d["spec"].update(replicas=0))
    cluster.advance(120)
    assert success() < 0.99

    def drop(d: dict) -> None:
        c = d["spec"]["template"]["spec"]["containers"][0]
        c["env"] = [e for e in c["env"] if e["name"] != "CART_ADDR"]
    cluster.store.mutate("deployments.apps", ns, "checkout", drop)
    cluster.advance(60)
    p = sorted((p for p in cluster.store.list("pods", ns) if p["metadata"]["name"].startswith("checkout-")),
               key=lambda p: p["metadata"]["creationTimestamp"])[-1]
    assert p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert 'panic: environment variable "CART_ADDR" not set' in cluster.read_container_log(ns, p["metadata"]["name"], "checkout", previous=True)
