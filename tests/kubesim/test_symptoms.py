"""Faults planted as causes in the emulated cluster, and the symptoms that emerge from them, read
back the way an SRE would: pod statuses, events, container logs, PromQL, LogQL and traces."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kubesim.cluster import SimCluster
from farm.pytest_plugin import SimClusters
from tests.kubesim.apptools import scalar

NS = "hotel-reservation"


@pytest.fixture
def cluster(sim_app: Callable[..., SimCluster]) -> SimCluster:
    return sim_app("hotel-reservation", seed=7)  # this module's own seed


def pod(cluster: SimCluster, prefix: str) -> dict:
    pods = [p for p in cluster.store.list("pods", NS) if p["metadata"]["name"].startswith(prefix + "-")
            and not p["metadata"].get("deletionTimestamp")]
    assert pods, f"no pod {prefix}-*"
    return sorted(pods, key=lambda p: p["metadata"]["creationTimestamp"])[-1]


def events(cluster: SimCluster, name: str) -> list[dict]:
    return [e for e in cluster.store.list("events", NS) if e["involvedObject"]["name"] == name]


def set_env(cluster: SimCluster, deployment: str, env: dict[str, str | None]) -> None:
    def edit(d: dict) -> None:
        c = d["spec"]["template"]["spec"]["containers"][0]
        cur = {e["name"]: e for e in c.get("env") or []}
        for k, v in env.items():
            if v is None:
                cur.pop(k, None)
            else:
                cur[k] = {"name": k, "value": v}
        c["env"] = list(cur.values())
    cluster.store.mutate("deployments.apps", NS, deployment, edit)


def success_rate(cluster: SimCluster, window: str = "2m") -> float:
    return scalar(cluster, f'sum(rate(wrk2_requests_total{{namespace="{NS}",code="200"}}[{window}])) / '
                           f'sum(rate(wrk2_requests_total{{namespace="{NS}"}}[{window}]))')


def test_deployed_app_is_healthy_and_serves_the_load(cluster: SimCluster) -> None:
    pods = cluster.store.list("pods", NS)
    assert len(pods) == 20
    not_ready = [p["metadata"]["name"] for p in pods
                 if not any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"]["conditions"])]
    assert not_ready == []
    cluster.advance(180)
    assert success_rate(cluster) > 0.99
    assert scalar(cluster, f'sum(rate(wrk2_requests_total{{namespace="{NS}"}}[2m]))') == pytest.approx(100, rel=0.05)
    logs = cluster.read_container_log(NS, pod(cluster, "geo")["metadata"]["name"])
    assert "INF cmd/geo/main.go" in logs and "Successfully registered in consul" in logs


def test_missing_root_password_crash_loops_mongo_with_its_entrypoint_error(cluster: SimCluster) -> None:
    set_env_db = {"MONGO_INITDB_ROOT_USERNAME": "admin", "MONGO_INITDB_ROOT_PASSWORD": None}
    set_env(cluster, "mongodb-user", set_env_db)
    cluster.advance(90)
    p = pod(cluster, "mongodb-user")
    cs = p["status"]["containerStatuses"][0]
    assert cs["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert cs["lastState"]["terminated"]["exitCode"] == 1 and cs["restartCount"] >= 2
    log = cluster.read_container_log(NS, p["metadata"]["name"], previous=True)
    assert "error: missing 'MONGO_INITDB_ROOT_USERNAME' or 'MONGO_INITDB_ROOT_PASSWORD'" in log
    reasons = {e["reason"] for e in events(cluster, p["metadata"]["name"])}
    assert {"BackOff", "Started", "Created"} <= reasons


def test_env_from_a_missing_config_map_key_is_create_container_config_error(cluster: SimCluster) -> None:
    def edit(d: dict) -> None:
        d["spec"]["template"]["spec"]["containers"][0]["env"].append(
            {"name": "LOG_LEVEL", "valueFrom": {"configMapKeyRef": {"name": "hotel-config", "key": "log-level"}}})
    cluster.store.mutate("deployments.apps", NS, "geo", edit)
    cluster.advance(30)
    p = pod(cluster, "geo")
    waiting = p["status"]["containerStatuses"][0]["state"]["waiting"]
    assert waiting == {"reason": "CreateContainerConfigError", "message": 'configmap "hotel-config" not found'}
    assert any(e["message"] == 'Error: configmap "hotel-config" not found' for e in events(cluster, p["metadata"]["name"]))


def test_wrong_memcached_target_port_crashes_profile_and_gives_5xx_at_the_client(cluster: SimCluster) -> None:
    def edit(s: dict) -> None:
        s["spec"]["ports"][0]["targetPort"] = 11212
    cluster.store.mutate("services", NS, "memcached-profile", edit)
    cluster.advance(240)
    ep = cluster.store.get("endpoints", NS, "memcached-profile")
    assert ep["subsets"][0]["ports"][0]["port"] == 11212  # a numeric targetPort is taken as written
    p = pod(cluster, "profile")
    assert p["status"]["containerStatuses"][0]["restartCount"] >= 2
    prev = cluster.read_container_log(NS, p["metadata"]["name"], previous=True)
    assert "PNC" in prev and "memmcached error" in prev and "connect: connection refused" in prev
    assert scalar(cluster, f'sum(rate(wrk2_requests_total{{namespace="{NS}",code="500"}}[2m]))') > 10
    assert success_rate(cluster) < 0.5
    err = scalar(cluster, 'sum(rate(traces_span_metrics_calls_total{service_name="frontend",status_code="STATUS_CODE_ERROR"}[2m]))')
    assert err > 10
    assert scalar(cluster, 'sum(rate(http_server_request_duration_seconds_count{service_name="frontend",'
                           'http_response_status_code="500"}[2m]))') > 10


def test_named_target_port_the_pod_lacks_leaves_endpoints_empty(cluster: SimCluster) -> None:
    def edit(s: dict) -> None:
        s["spec"]["ports"][0]["targetPort"] = "http"
    cluster.store.mutate("services", NS, "frontend", edit)
    cluster.advance(60)
    assert not cluster.store.get("endpoints", NS, "frontend").get("subsets")
    assert scalar(cluster, f'sum(rate(wrk2_requests_total{{namespace="{NS}",code="connect_error"}}[1m]))') > 50


def test_quota_too_small_gives_failed_create_events(cluster: SimCluster) -> None:
    cluster.store.create("resourcequotas", {"metadata": {"name": "capacity-restraint", "namespace": NS},
                                            "spec": {"hard": {"pods": "20", "requests.cpu": "2"}}})
    cluster.store.mutate("deployments.apps", NS, "frontend", lambda d: d["spec"].update(replicas=3))
    cluster.advance(30)
    rs = [r for r in cluster.store.list("replicasets.apps", NS) if r["metadata"]["name"].startswith("frontend-")][0]
    failed = [e for e in events(cluster, rs["metadata"]["name"]) if e["reason"] == "FailedCreate"]
    assert failed and failed[0]["type"] == "Warning"
    msg = failed[0]["message"]
    assert msg.startswith(f'Error creating: pods "{rs["metadata"]["name"]}-')
    assert "is forbidden: exceeded quota: capacity-restraint, requested: pods=1,requests.cpu=100m, used: pods=20,requests.cpu=2, limited: pods=20,requests.cpu=2" in msg
    d = cluster.store.get("deployments.apps", NS, "frontend")
    assert {c["type"]: c["status"] for c in d["status"]["conditions"]}["ReplicaFailure"] == "True"


def test_unknown_image_tag_fails_the_pull_with_containerds_error(cluster: SimCluster) -> None:
    def edit(d: dict) -> None:
        d["spec"]["template"]["spec"]["containers"][0]["image"] = "yinfangchen/hotelreservation:v9.9"
    cluster.store.mutate("deployments.apps", NS, "user", edit)
    cluster.advance(40)
    p = pod(cluster, "user")
    waiting = p["status"]["containerStatuses"][0]["state"]["waiting"]
    assert waiting["reason"] in ("ErrImagePull", "ImagePullBackOff")
    msgs = [e["message"] for e in events(cluster, p["metadata"]["name"])]
    assert any("docker.io/yinfangchen/hotelreservation:v9.9: not found" in m for m in msgs)
    assert 'Back-off pulling image "yinfangchen/hotelreservation:v9.9"' in msgs
    old = [x for x in cluster.store.list("pods", NS) if x["metadata"]["name"].startswith("user-") and x is not p]
    assert any(x["status"]["containerStatuses"][0].get("ready") for x in old)  # the rollout keeps the old pod


def test_requests_too_large_are_unschedulable_with_the_schedulers_message(cluster: SimCluster) -> None:
    def edit(d: dict) -> None:
        d["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"] = "64Gi"
    cluster.store.mutate("deployments.apps", NS, "recommendation", edit)
    cluster.advance(10)
    p = pod(cluster, "recommendation")
    assert p["status"]["phase"] == "Pending"
    msg = next(e["message"] for e in events(cluster, p["metadata"]["name"]) if e["reason"] == "FailedScheduling")
    assert msg == ("0/4 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
                   "3 Insufficient memory. preemption: 0/4 nodes are available: 1 Preemption is not helpful for "
                   "scheduling, 3 No preemption victims found for incoming pod.")


def test_memory_limit_below_the_working_set_is_oomkilled(cluster: SimCluster) -> None:
    def edit(d: dict) -> None:
        d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"] = "8Mi"
    cluster.store.mutate("deployments.apps", NS, "geo", edit)
    cluster.advance(60)
    cs = pod(cluster, "geo")["status"]["containerStatuses"][0]
    assert cs["lastState"]["terminated"]["reason"] == "OOMKilled" and cs["lastState"]["terminated"]["exitCode"] == 137
    assert scalar(cluster, f'max(kube_pod_container_status_last_terminated_reason{{namespace="{NS}",reason="OOMKilled"}})') == 1
    status, _, body = cluster.obs.loki_app("GET", "/loki/api/v1/query_range",
                                           {"query": ['{job="node-kernel"} |= "Memory cgroup out of memory"'], "limit": ["10"]}, b"")
    assert status == 200 and "Killed process" in body.decode()


def test_scaling_the_load_generator_to_zero_stops_client_requests(cluster: SimCluster) -> None:
    cluster.store.mutate("deployments.apps", NS, "wrk2-load", lambda d: d["spec"].update(replicas=0))
    cluster.advance(240)
    assert scalar(cluster, f'sum(rate(wrk2_requests_total{{namespace="{NS}"}}[1m]))') == 0


def test_revoked_roles_on_geo_db_crash_geo_at_its_next_start(cluster: SimCluster) -> None:
    mongo = pod(cluster, "mongodb-geo")["metadata"]["name"]
    code, out, err = cluster.exec(NS, mongo, None, ["mongo", "admin", "-u", "root", "-p", "root", "--authenticationDatabase",
                                                    "admin", "--eval", "db.revokeRolesFromUser('admin', [{role: 'readWrite', db: 'geo-db'}]);"])
    assert code == 0, err
    cluster.store.delete("pods", NS, pod(cluster, "geo")["metadata"]["name"])
    cluster.advance(60)
    p = pod(cluster, "geo")
    assert p["status"]["containerStatuses"][0]["restartCount"] >= 1
    log = cluster.read_container_log(NS, p["metadata"]["name"], previous=True)
    assert "(Unauthorized) not authorized on geo-db" in log


def test_same_seed_same_observations() -> None:
    a, b = SimClusters.new("hotel-reservation", seed=3, settle=150), SimClusters.new("hotel-reservation", seed=3, settle=150)

    def view(c: SimCluster) -> tuple:
        pods = sorted((p["metadata"]["name"], p["spec"].get("nodeName"), p["status"].get("podIP")) for p in c.store.list("pods", NS))
        evs = sorted((e["involvedObject"]["name"], e["reason"], e["message"], e["count"]) for e in c.store.list("events", NS))
        counters = sorted((k, round(v, 6)) for k, v in c.workload.state["counters"].items())
        return pods, evs, counters
    assert view(a) == view(b)


def test_mongo_requiring_tls_refuses_the_plaintext_service_at_its_next_start(cluster: SimCluster) -> None:
    cluster.store.create("secrets", {"metadata": {"name": "mongo-tls", "namespace": NS}, "type": "Opaque",
                                     "data": {"server.pem": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="}})

    def edit(d: dict) -> None:
        spec = d["spec"]["template"]["spec"]
        c = spec["containers"][0]
        c["args"] = ["--auth", "--tlsMode", "requireTLS", "--tlsCertificateKeyFile", "/etc/tls/server.pem"]
        c["volumeMounts"].append({"name": "tls", "mountPath": "/etc/tls"})
        spec["volumes"].append({"name": "tls", "secret": {"secretName": "mongo-tls"}})
    cluster.store.mutate("deployments.apps", NS, "mongodb-rate", edit)
    cluster.advance(30)
    assert "running" in pod(cluster, "mongodb-rate")["status"]["containerStatuses"][0]["state"]
    cluster.store.delete("pods", NS, pod(cluster, "rate")["metadata"]["name"])
    cluster.advance(60)
    p = pod(cluster, "rate")
    assert p["status"]["containerStatuses"][0]["restartCount"] >= 1
    assert "socket was unexpectedly closed: EOF" in cluster.read_container_log(NS, p["metadata"]["name"], previous=True)


def test_mongo_without_its_tls_key_file_does_not_start(cluster: SimCluster) -> None:
    def edit(d: dict) -> None:
        d["spec"]["template"]["spec"]["containers"][0]["args"] = ["--tlsMode", "requireTLS", "--tlsCertificateKeyFile",
                                                                   "/etc/tls/server.pem"]
    cluster.store.mutate("deployments.apps", NS, "mongodb-profile", edit)
    cluster.advance(40)
    p = pod(cluster, "mongodb-profile")
    assert p["status"]["containerStatuses"][0]["restartCount"] >= 1
    assert "cannot read certificate file" in cluster.read_container_log(NS, p["metadata"]["name"], previous=True)
