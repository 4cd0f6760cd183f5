"""Application behaviour that new fault families rely on, on the emulated hotel-reservation: a
known-buggy build of the hotel image crashes geo under load, memcached bound to the loopback
refuses its clients, the k8s-wait-for init container obeys RBAC, and Consul's dev agent forgets
every registration when its container is killed."""

from __future__ import annotations

import functools

from kubesim.apps.model import image_lookup
from kubesim.cluster import SimCluster
from farm.pytest_plugin import SimClusters
from tests.kubesim.apptools import newest_pod, window

NS = "hotel-reservation"
BUGGY = "yinfangchen/hotelreservation:sha-8f3c2e1"
pod = functools.partial(newest_pod, namespace=NS)


def container(cluster: SimCluster, deployment: str, **fields: object) -> None:
    def edit(d: dict) -> None:
        d["spec"]["template"]["spec"]["containers"][0].update(fields)
    cluster.store.mutate("deployments.apps", NS, deployment, edit)


def test_the_buggy_build_pulls_like_any_tag_and_geo_crashes_under_load(cluster: SimCluster) -> None:
    assert image_lookup(BUGGY)[1] is None
    assert image_lookup("yinfangchen/hotelreservation:sha-0000000")[1] is not None
    assert window(cluster, 60) > 95
    container(cluster, "geo", image=BUGGY)
    cluster.advance(60)
    during = window(cluster, 120)
    geo = pod(cluster, "geo")
    cs = geo["status"]["containerStatuses"][0]
    assert cs["restartCount"] >= 2 and cs["lastState"]["terminated"]["exitCode"] == 2
    text = cluster.read_container_log(NS, geo["metadata"]["name"], previous=True)
    assert "panic: runtime error: index out of range [5] with length 5" in text
    assert "services/geo/server.go:145" in text
    assert during < 70  # searches (60 % of requests) mostly fail; recommendations still work
    # The other binaries of that build are fine.
    container(cluster, "user", image=BUGGY)
    cluster.advance(120)
    assert pod(cluster, "user")["status"]["containerStatuses"][0]["restartCount"] == 0


def test_the_buggy_geo_does_not_crash_without_requests(cluster: SimCluster) -> None:
    cluster.store.mutate("deployments.apps", NS, "wrk2-load", lambda d: d["spec"].update(replicas=0))
    cluster.advance(30)
    container(cluster, "geo", image=BUGGY)
    cluster.advance(180)
    cs = pod(cluster, "geo")["status"]["containerStatuses"][0]
    assert cs["restartCount"] == 0 and "running" in cs["state"]


def test_memcached_bound_to_the_loopback_refuses_rate(cluster: SimCluster) -> None:
    container(cluster, "memcached-rate", args=["-l", "127.0.0.1"])
    cluster.advance(90)
    mmc = pod(cluster, "memcached-rate")
    assert mmc["status"]["phase"] == "Running" and cluster.kubelet.listening(mmc) == set()
    rate = pod(cluster, "rate")
    assert rate["status"]["containerStatuses"][0]["restartCount"] >= 1
    text = cluster.read_container_log(NS, rate["metadata"]["name"], previous=True)
    assert "memmcached error" in text and "connection refused" in text
    container(cluster, "memcached-rate", args=["-l", "0.0.0.0", "-p", "11211"])  # every interface again
    cluster.advance(30)
    assert cluster.kubelet.listening(pod(cluster, "memcached-rate")) == {11211}


def test_k8s_wait_for_waits_on_rbac_and_goes_on_once_allowed(cluster: SimCluster) -> None:
    rec = pod(cluster, "recommendation")
    assert rec["spec"]["serviceAccountName"] == "recommendation"
    assert "is ready." in cluster.read_container_log(NS, rec["metadata"]["name"], container="wait-for-mongodb")
    rules = cluster.store.get("roles.rbac.authorization.k8s.io", NS, "dependency-reader")["rules"]

    def drop(r: dict) -> None:
        r["rules"] = [x for x in r["rules"] if "pods" not in x["resources"]]
    cluster.store.mutate("roles.rbac.authorization.k8s.io", NS, "dependency-reader", drop)
    cluster.store.delete("pods", NS, rec["metadata"]["name"])
    cluster.advance(90)
    stuck = pod(cluster, "recommendation")
    assert stuck["status"]["phase"] == "Pending"
    (init,) = stuck["status"]["initContainerStatuses"]
    assert "running" in init["state"]
    log = cluster.read_container_log(NS, stuck["metadata"]["name"], container="wait-for-mongodb")
    assert ('Error from server (Forbidden): pods is forbidden: User "system:serviceaccount:hotel-reservation:'
            'recommendation" cannot list resource "pods" in API group "" in the namespace "hotel-reservation"') in log
    cluster.store.mutate("roles.rbac.authorization.k8s.io", NS, "dependency-reader", lambda r: r.update(rules=rules))
    cluster.advance(30)
    done = pod(cluster, "recommendation")
    assert done["metadata"]["name"] == stuck["metadata"]["name"] and done["status"]["phase"] == "Running"
    assert "terminated" in done["status"]["initContainerStatuses"][0]["state"]


def test_killing_consuls_container_empties_the_registry_until_services_restart(cluster: SimCluster) -> None:
    assert window(cluster, 60) > 95
    consul = pod(cluster, "consul")
    cluster.kubelet.terminate(NS, consul["metadata"]["name"], "consul", 137, "Error")
    cluster.advance(30)
    assert pod(cluster, "consul")["status"]["containerStatuses"][0]["restartCount"] == 1
    assert window(cluster, 60) < 1
    text = cluster.read_container_log(NS, pod(cluster, "frontend")["metadata"]["name"])
    assert "there is no address available" in text
    for name in ("search", "geo", "profile", "rate", "recommendation", "reservation", "user"):
        def restart(d: dict) -> None:
            d["spec"]["template"].setdefault("metadata", {}).setdefault("annotations", {})[
                "kubectl.kubernetes.io/restartedAt"] = "2026-01-05T10:00:00Z"
        cluster.store.mutate("deployments.apps", NS, name, restart)
    cluster.advance(90)
    assert window(cluster, 60) > 95


def test_postgres_takes_the_rotated_password_at_restart_and_stale_clients_are_refused(sim_clusters: SimClusters) -> None:
    import base64

    from kubesim.apps.datastores.postgres import heredoc_body

    assert heredoc_body("psql <<-EOSQL\n\tCREATE USER u WITH PASSWORD '$PW';\nEOSQL\n", {"PW": "s"}) == \
        "\tCREATE USER u WITH PASSWORD 's';"
    assert "$PW" in heredoc_body("psql <<'EOSQL'\nSELECT '$PW';\nEOSQL\n", {"PW": "s"})  # a quoted delimiter: no expansion
    shop = sim_clusters.in_process("astronomy-shop", seed=11)
    ns = "astronomy-shop"

    def latest(prefix: str) -> dict:
        pods = [p for p in shop.store.list("pods", ns) if p["metadata"]["name"].startswith(prefix + "-")]
        return sorted(pods, key=lambda p: p["metadata"]["creationTimestamp"])[-1]

    catalog = latest("product-catalog")
    assert catalog["status"]["containerStatuses"][0]["ready"]

    def rotate(s: dict) -> None:
        s["data"]["password"] = base64.b64encode(b"n3w-pass").decode()
    shop.store.mutate("secrets", ns, "postgresql-credentials", rotate)
    shop.store.delete("pods", ns, latest("postgresql")["metadata"]["name"])  # the server restarts onto it
    shop.advance(120)
    log = shop.read_container_log(ns, latest("product-catalog")["metadata"]["name"])
    assert 'FATAL:  password authentication failed for user \\"otelu\\"' in log  # a JSON log line
    shop.store.delete("pods", ns, latest("product-catalog")["metadata"]["name"])  # a fresh pod reads the new value
    shop.advance(60)
    fresh = latest("product-catalog")
    assert fresh["metadata"]["name"] != catalog["metadata"]["name"] and fresh["status"]["containerStatuses"][0]["ready"]


def test_a_request_below_the_limitranges_minimum_keeps_a_recreated_database_down(cluster: SimCluster) -> None:
    limits = cluster.store.get("limitranges", NS, "container-requests")["spec"]["limits"][0]
    assert limits["min"] == {"cpu": "10m"}

    def cut(d: dict) -> None:
        d["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1m"
    cluster.store.mutate("deployments.apps", NS, "mongodb-reservation", cut)
    cluster.advance(60)
    assert not [p for p in cluster.store.list("pods", NS) if p["metadata"]["name"].startswith("mongodb-reservation-")
                and not p["metadata"].get("deletionTimestamp")]  # Recreate: the old pod went first
    failed = [e["message"] for e in cluster.store.list("events", NS) if e["reason"] == "FailedCreate"]
    assert failed and failed[-1].endswith("is forbidden: minimum cpu usage per Container is 10m, but request is 1m")
    assert pod(cluster, "reservation")["status"]["containerStatuses"][0]["restartCount"] >= 1
