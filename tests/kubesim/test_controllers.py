"""Controllers of the emulated cluster on small workloads: rollouts and rollback, Recreate,
StatefulSets with claim templates, DaemonSets, Jobs and CronJobs, probes, crash back-off timing,
scheduling constraints, namespace deletion, checkpoint and restore."""

from __future__ import annotations

import pytest

from kubesim.cluster import SimCluster
from farm.pytest_plugin import SimClusters

NS = "demo"
REV = "deployment.kubernetes.io/revision"


@pytest.fixture
def cluster(sim_clusters: SimClusters) -> SimCluster:
    base = sim_clusters.in_process(seed=2)
    base.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    return base


def nginx(name: str, replicas: int = 3, **spec: object) -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, **spec,
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "web", "image": "nginx:1.25", "ports": [{"containerPort": 80}],
                                                           "resources": {"requests": {"cpu": "50m"}}}]}}}}


def rss(cluster: SimCluster, name: str) -> list[dict]:
    return sorted((r for r in cluster.store.list("replicasets.apps", NS) if r["metadata"]["name"].startswith(name + "-")),
                  key=lambda r: int(r["metadata"]["annotations"][REV]))


def pods(cluster: SimCluster, prefix: str) -> list[dict]:
    return [p for p in cluster.store.list("pods", NS) if p["metadata"]["name"].startswith(prefix)]


def test_rolling_update_then_rollback_by_template(cluster: SimCluster) -> None:
    cluster.apply([nginx("web")])
    cluster.advance(30)
    d = cluster.store.get("deployments.apps", NS, "web")
    assert d["status"]["availableReplicas"] == 3 and d["metadata"]["annotations"][REV] == "1"
    first = rss(cluster, "web")[0]
    assert first["metadata"]["labels"]["pod-template-hash"] in first["metadata"]["name"]

    def image(tag: str):
        def edit(o: dict) -> None:
            o["spec"]["template"]["spec"]["containers"][0]["image"] = f"nginx:{tag}"
        return edit
    cluster.store.mutate("deployments.apps", NS, "web", image("1.26"))
    cluster.advance(60)
    a, b = rss(cluster, "web")
    assert (a["spec"]["replicas"], b["spec"]["replicas"]) == (0, 3)
    assert b["metadata"]["annotations"][REV] == "2"
    msgs = [e["message"] for e in cluster.store.list("events", NS) if e["reason"] == "ScalingReplicaSet"]
    assert f"Scaled up replica set {b['metadata']['name']} from 0 to 1" in msgs
    assert f"Scaled down replica set {a['metadata']['name']} from 3 to 2" in msgs
    d = cluster.store.get("deployments.apps", NS, "web")
    conds = {c["type"]: c for c in d["status"]["conditions"]}
    assert conds["Progressing"]["reason"] == "NewReplicaSetAvailable" and conds["Available"]["status"] == "True"
    # `kubectl rollout undo` copies revision 1's template back: the old replica set becomes revision 3
    cluster.store.mutate("deployments.apps", NS, "web", image("1.25"))
    cluster.advance(60)
    names = {r["metadata"]["name"]: r for r in rss(cluster, "web")}
    again = names[a["metadata"]["name"]]
    assert again["metadata"]["annotations"][REV] == "3" and again["spec"]["replicas"] == 3
    assert again["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"] == "1"
    assert cluster.store.get("deployments.apps", NS, "web")["metadata"]["annotations"][REV] == "3"


def test_recreate_stops_old_pods_before_new_ones(cluster: SimCluster) -> None:
    cluster.apply([nginx("db", replicas=1, strategy={"type": "Recreate"})])
    cluster.advance(20)
    old = pods(cluster, "db-")[0]["metadata"]["name"]
    seen_both = []

    def watch(verb: str, key: str, o: dict | None, n: dict | None) -> None:
        if key == "pods" and verb == "create" and n and n["metadata"]["name"].startswith("db-"):
            seen_both.append(cluster.store.try_get("pods", NS, old) is not None)
    cluster.on(watch)
    cluster.store.mutate("deployments.apps", NS, "db", lambda o: o["spec"]["template"]["metadata"]["labels"].update(v="2"))
    cluster.advance(20)
    cluster.store.hooks.remove(watch)
    assert seen_both == [False]


def test_statefulset_creates_pods_in_order_with_their_claims(cluster: SimCluster) -> None:
    labels = {"app": "kv"}
    cluster.apply([{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "kv", "namespace": NS},
                    "spec": {"replicas": 3, "serviceName": "kv", "selector": {"matchLabels": labels},
                             "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                                 {"name": "mongo", "image": "mongo:4.4.6", "volumeMounts": [{"name": "data", "mountPath": "/data/db"}]}]}},
                             "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                                 "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}])
    cluster.advance(3)
    assert [p["metadata"]["name"] for p in pods(cluster, "kv-")] == ["kv-0"]
    cluster.advance(60)
    assert sorted(p["metadata"]["name"] for p in pods(cluster, "kv-")) == ["kv-0", "kv-1", "kv-2"]
    claims = {c["metadata"]["name"]: c for c in cluster.store.list("persistentvolumeclaims", NS)}
    assert set(claims) == {"data-kv-0", "data-kv-1", "data-kv-2"}
    assert all(c["status"]["phase"] == "Bound" for c in claims.values())
    st = cluster.store.get("statefulsets.apps", NS, "kv")["status"]
    assert st["readyReplicas"] == 3


def test_daemonset_runs_one_pod_per_schedulable_node(cluster: SimCluster) -> None:
    labels = {"app": "agent"}
    cluster.apply([{"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": NS},
                    "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels},
                             "spec": {"containers": [{"name": "a", "image": "busybox", "command": ["sh", "-c", "while true; do sleep 5; done"]}]}}}}])
    cluster.advance(20)
    nodes = sorted(p["spec"]["nodeName"] for p in pods(cluster, "agent-"))
    assert nodes == ["sim-worker", "sim-worker2", "sim-worker3"]  # the control plane's taint is not tolerated
    st = cluster.store.get("daemonsets.apps", NS, "agent")["status"]
    assert st["desiredNumberScheduled"] == 3 and st["numberReady"] == 3


def test_failing_job_hits_its_backoff_limit(cluster: SimCluster) -> None:
    cluster.apply([{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "migrate", "namespace": NS},
                    "spec": {"backoffLimit": 2, "template": {"spec": {"restartPolicy": "Never", "containers": [
                        {"name": "m", "image": "busybox", "command": ["sh", "-c", "echo migrating; exit 3"]}]}}}}])
    cluster.advance(120)
    job = cluster.store.get("jobs.batch", NS, "migrate")
    cond = {c["type"]: c for c in job["status"]["conditions"]}
    assert cond["Failed"]["reason"] == "BackoffLimitExceeded" and job["status"]["failed"] == 3
    p = pods(cluster, "migrate-")[0]
    assert p["status"]["phase"] == "Failed"
    assert cluster.read_container_log(NS, p["metadata"]["name"]) == "migrating\n"


def test_cronjob_creates_a_job_each_minute_and_keeps_history(cluster: SimCluster) -> None:
    cluster.apply([{"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "tick", "namespace": NS},
                    "spec": {"schedule": "* * * * *", "successfulJobsHistoryLimit": 2, "jobTemplate": {"spec": {"template": {"spec": {
                        "restartPolicy": "OnFailure", "containers": [{"name": "t", "image": "busybox", "command": ["true"]}]}}}}}}])
    cluster.advance(300)
    jobs = cluster.store.list("jobs.batch", NS)
    assert 1 <= len(jobs) <= 3 and all(j["metadata"]["name"].startswith("tick-") for j in jobs)
    created = [e for e in cluster.store.list("events", NS) if e["reason"] == "SuccessfulCreate" and e["message"].startswith("Created job")]
    assert len(created) >= 4


def test_crash_loop_backs_off_10s_20s_40s(cluster: SimCluster) -> None:
    cluster.apply([{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "crasher", "namespace": NS},
                    "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", "exit 1"]}]}}])
    starts = []

    def watch(verb: str, key: str, o: dict | None, n: dict | None) -> None:
        if key == "events" and n and n.get("reason") == "Started":
            starts.append(cluster.now())
    cluster.on(watch)
    cluster.advance(200)
    cluster.store.hooks.remove(watch)
    cs = cluster.store.get("pods", NS, "crasher")["status"]["containerStatuses"][0]
    assert cs["state"]["waiting"]["reason"] == "CrashLoopBackOff" and cs["restartCount"] >= 4
    # Started events aggregate into one Event (count grows), so compare the restart times instead
    assert cs["lastState"]["terminated"]["exitCode"] == 1
    ev = next(e for e in cluster.store.list("events", NS) if e["reason"] == "BackOff")
    assert ev["count"] >= 3 and ev["message"].startswith("Back-off restarting failed container c in pod crasher_demo(")


def test_failing_liveness_probe_restarts_and_readiness_empties_endpoints(cluster: SimCluster) -> None:
    d = nginx("probe", replicas=1)
    c = d["spec"]["template"]["spec"]["containers"][0]
    c["livenessProbe"] = {"tcpSocket": {"port": 8080}, "periodSeconds": 5, "failureThreshold": 2}
    c["readinessProbe"] = {"httpGet": {"port": 81, "path": "/"}, "periodSeconds": 5}
    cluster.apply([d, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "probe", "namespace": NS},
                       "spec": {"selector": {"app": "probe"}, "ports": [{"port": 80}]}}])
    cluster.advance(60)
    p = pods(cluster, "probe-")[0]
    assert p["status"]["containerStatuses"][0]["restartCount"] >= 1
    msgs = {e["message"] for e in cluster.store.list("events", NS) if e["involvedObject"]["name"] == p["metadata"]["name"]}
    ip = p["status"]["podIP"]
    assert f"Liveness probe failed: dial tcp {ip}:8080: connect: connection refused" in msgs
    assert "Container web failed liveness probe, will be restarted" in msgs
    ep = cluster.store.get("endpoints", NS, "probe")
    assert ep["subsets"][0]["notReadyAddresses"][0]["ip"] == ip and "addresses" not in ep["subsets"][0]


def test_node_selector_taints_and_anti_affinity(cluster: SimCluster) -> None:
    d = nginx("spread", replicas=4)
    d["spec"]["template"]["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "spread"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    cluster.apply([d])
    cluster.advance(20)
    placed = [p for p in pods(cluster, "spread-") if p["spec"].get("nodeName")]
    pending = [p for p in pods(cluster, "spread-") if not p["spec"].get("nodeName")]
    assert len(placed) == 3 and len({p["spec"]["nodeName"] for p in placed}) == 3 and len(pending) == 1
    msg = pending[0]["status"]["conditions"][0]["message"]
    assert msg == ("0/4 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
                   "3 node(s) didn't match pod anti-affinity rules. preemption: 0/4 nodes are available: "
                   "4 Preemption is not helpful for scheduling.")
    s = nginx("pinned", replicas=1)
    s["spec"]["template"]["spec"]["nodeSelector"] = {"disktype": "ssd"}
    cluster.apply([s])
    cluster.advance(10)
    p = pods(cluster, "pinned-")[0]
    assert "4 node(s) didn't match Pod's node affinity/selector" not in p["status"]["conditions"][0]["message"]
    assert "3 node(s) didn't match Pod's node affinity/selector" in p["status"]["conditions"][0]["message"]


def test_deleting_a_namespace_removes_everything_in_it(cluster: SimCluster) -> None:
    cluster.apply([nginx("web", replicas=2)])
    cluster.advance(20)
    cluster.store.delete("namespaces", "", NS)
    cluster.advance(5)
    assert cluster.store.list("pods", NS) == [] and cluster.store.list("replicasets.apps", NS) == []
    assert cluster.store.list("deployments.apps", NS) == []


def test_checkpoint_restore_returns_store_and_model_state(cluster: SimCluster) -> None:
    cluster.apply([nginx("web", replicas=2)])
    cluster.advance(20)
    before = sorted((p["metadata"]["name"], p["status"]["phase"]) for p in cluster.store.list("pods", NS))
    taken = cluster.now()
    cluster.checkpoint("two")
    cluster.store.mutate("deployments.apps", NS, "web", lambda o: o["spec"].update(replicas=0))
    cluster.advance(20)
    assert cluster.store.list("pods", NS) == []
    cluster.restore("two")
    assert cluster.now() == taken  # the clock goes back with everything else
    assert sorted((p["metadata"]["name"], p["status"]["phase"]) for p in cluster.store.list("pods", NS)) == before
    cluster.advance(30)
    assert all(p["status"]["phase"] == "Running" for p in cluster.store.list("pods", NS))
    assert len(cluster.kubelet.running()) >= 4  # two nginx pods + CoreDNS, still running in the model


def test_limit_range_defaults_and_maximums(cluster: SimCluster) -> None:
    cluster.apply([{"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "limits", "namespace": NS},
                    "spec": {"limits": [{"type": "Container", "default": {"memory": "256Mi"}, "defaultRequest": {"memory": "128Mi"},
                                         "max": {"memory": "512Mi"}}]}}])
    cluster.apply([nginx("small", replicas=1)])
    big = nginx("big", replicas=1)
    big["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {"memory": "1Gi"}
    cluster.apply([big])
    cluster.advance(10)
    res = pods(cluster, "small-")[0]["spec"]["containers"][0]["resources"]
    assert res["limits"]["memory"] == "256Mi" and res["requests"]["memory"] == "128Mi"
    assert pods(cluster, "big-") == []
    msg = next(e["message"] for e in cluster.store.list("events", NS) if e["reason"] == "FailedCreate")
    assert msg.endswith("is forbidden: maximum memory usage per Container is 512Mi, but limit is 1Gi")


def test_quota_on_limits_rejects_pods_that_do_not_specify_them(cluster: SimCluster) -> None:
    cluster.apply([{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "compute", "namespace": NS},
                    "spec": {"hard": {"limits.cpu": "4", "requests.memory": "4Gi"}}}])
    cluster.apply([nginx("web", replicas=1)])
    cluster.advance(5)
    msg = next(e["message"] for e in cluster.store.list("events", NS) if e["reason"] == "FailedCreate")
    assert msg.endswith("is forbidden: failed quota: compute: must specify limits.cpu for: web; requests.memory for: web")
    quota = cluster.store.get("resourcequotas", NS, "compute")
    assert quota["status"]["hard"] == {"limits.cpu": "4", "requests.memory": "4Gi"}
    assert quota["status"]["used"] == {"limits.cpu": "0", "requests.memory": "0"}


def test_dns_failure_modes(cluster: SimCluster) -> None:
    cluster.apply([{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "db", "namespace": NS},
                    "spec": {"selector": {"app": "db"}, "ports": [{"port": 5432}]}},
                   {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client", "namespace": NS},
                    "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", "while true; do sleep 5; done"]}]}},
                   {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hostdns", "namespace": NS},
                    "spec": {"dnsPolicy": "Default", "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]}},
                   {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stale", "namespace": NS},
                    "spec": {"dnsPolicy": "None", "dnsConfig": {"nameservers": ["10.96.0.99"], "searches": [f"{NS}.svc.cluster.local"]},
                             "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]}}])
    cluster.advance(10)
    net = cluster.network
    get = lambda n: cluster.store.get("pods", NS, n)  # noqa: E731
    assert net.lookup(get("client"), "db")[1] is None
    assert net.lookup(get("client"), "db.demo.svc.cluster.local")[1] is None
    assert net.lookup(get("client"), "nope")[1] == "lookup nope on 10.96.0.10:53: no such host"
    assert net.lookup(get("hostdns"), "db")[1] == "lookup db on 172.18.0.1:53: no such host"
    assert net.lookup(get("stale"), "db")[1].endswith("->10.96.0.99:53: i/o timeout")
    assert net.connect(get("client"), "db", 5432).error == f"dial tcp {cluster.store.get('services', NS, 'db')['spec']['clusterIP']}:5432: connect: connection refused"
    cluster.store.mutate("deployments.apps", "kube-system", "coredns", lambda d: d["spec"].update(replicas=0))
    cluster.advance(10)
    assert "read: connection refused" in net.lookup(get("client"), "db")[1]
