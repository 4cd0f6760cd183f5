"""Chaos Mesh resources and node hardware faults against the emulated cluster: selectors, modes,
records, the finalizer, recovery on delete, and the symptoms each fault family produces."""

from __future__ import annotations

import functools
import json
import re

import pytest

from kubesim.chaos import FINALIZER, parse_duration
from kubesim.cluster import SimCluster
from farm.pytest_plugin import SimClusters
from tests.kubesim.apptools import newest_pod, window

NS = "hotel-reservation"
pod = functools.partial(newest_pod, namespace=NS)


def chaos(cluster: SimCluster, kind: str, name: str, spec: dict) -> dict:
    plural = {"PodChaos": "podchaos", "NetworkChaos": "networkchaos", "IOChaos": "iochaos", "StressChaos": "stresschaos",
              "TimeChaos": "timechaos", "KernelChaos": "kernelchaos"}[kind]
    return cluster.store.create(f"{plural}.chaos-mesh.org", {"apiVersion": "chaos-mesh.org/v1alpha1", "kind": kind,
                                                             "metadata": {"name": name, "namespace": NS}, "spec": spec})


def paused_user(cluster: SimCluster, name: str, duration: str) -> dict:
    """A pod-failure experiment on the user service, 30 s on: its container is the pause image."""
    chaos(cluster, "PodChaos", name, {"action": "pod-failure", "mode": "all", "duration": duration,
                                      "selector": {"labelSelectors": {"io.kompose.service": "user"}}})
    cluster.advance(30)
    p = pod(cluster, "user")
    assert p["spec"]["containers"][0]["image"] == "gcr.io/google-containers/pause:latest"
    return p


def loki(cluster: SimCluster, query: str) -> str:
    status, _, body = cluster.obs.loki_app("GET", "/loki/api/v1/query_range", {"query": [query], "limit": ["50"]}, b"")
    assert status == 200, body
    return body.decode()


def test_durations_parse_like_go() -> None:
    assert parse_duration("1h30m") == 5400 and parse_duration("100ms") == pytest.approx(0.1)
    assert parse_duration("-10m") == -600 and parse_duration(None) is None


def test_pod_kill_with_label_selector_records_and_recreates(cluster: SimCluster) -> None:
    old = pod(cluster, "geo")["metadata"]["name"]
    chaos(cluster, "PodChaos", "kill-geo", {"action": "pod-kill", "mode": "one",
                                            "selector": {"labelSelectors": {"io.kompose.service": "geo"}}})
    cluster.advance(20)
    obj = cluster.store.get("podchaos.chaos-mesh.org", NS, "kill-geo")
    assert FINALIZER in obj["metadata"]["finalizers"]
    rec = obj["status"]["experiment"]["containerRecords"]
    assert [r["id"] for r in rec] == [f"{NS}/{old}"] and rec[0]["phase"] == "Injected"
    conds = {c["type"]: c["status"] for c in obj["status"]["conditions"]}
    assert conds["AllInjected"] == "True" and conds["Selected"] == "True"
    new = pod(cluster, "geo")
    assert new["metadata"]["name"] != old and new["status"]["phase"] == "Running"
    cluster.store.delete("podchaos.chaos-mesh.org", NS, "kill-geo")
    cluster.advance(2)
    assert cluster.store.try_get("podchaos.chaos-mesh.org", NS, "kill-geo") is None


def test_pod_failure_pauses_the_container_until_the_chaos_is_deleted(cluster: SimCluster) -> None:
    p = paused_user(cluster, "fail-user", "10m")
    assert p["status"]["containerStatuses"][0]["restartCount"] == 1
    assert cluster.kubelet.listening(p) == set()
    cluster.store.delete("podchaos.chaos-mesh.org", NS, "fail-user")
    cluster.advance(30)
    p = pod(cluster, "user")
    assert p["spec"]["containers"][0]["image"] == "yinfangchen/hotelreservation:latest"
    assert 8086 in cluster.kubelet.listening(p)


def test_network_partition_between_search_and_rate_fails_searches(cluster: SimCluster) -> None:
    base = window(cluster, 60)
    chaos(cluster, "NetworkChaos", "split", {"action": "partition", "mode": "all", "direction": "both",
                                             "selector": {"labelSelectors": {"io.kompose.service": "search"}},
                                             "target": {"mode": "all", "selector": {"labelSelectors": {"io.kompose.service": "rate"}}}})
    cluster.advance(10)
    during = window(cluster, 60)
    assert base > 95 and during < 50
    cluster.store.delete("networkchaos.chaos-mesh.org", NS, "split")
    cluster.advance(30)
    assert window(cluster, 60) > 95


def test_network_delay_on_frontend_raises_client_latency(cluster: SimCluster) -> None:
    chaos(cluster, "NetworkChaos", "slow", {"action": "delay", "mode": "one", "delay": {"latency": "3s"},
                                            "selector": {"labelSelectors": {"io.kompose.service": "frontend"}}})
    cluster.advance(90)
    timeouts = sum(v for (m, labels), v in cluster.workload.state["counters"].items()
                   if m == "wrk2_requests_total" and ("code", "timeout") in labels)
    assert timeouts > 1000


def test_iochaos_eio_on_mongo_volume_aborts_mongod_until_deleted(cluster: SimCluster) -> None:
    chaos(cluster, "IOChaos", "eio", {"action": "fault", "mode": "one", "errno": 5, "percent": 100,
                                      "volumePath": "/data/db", "path": "/data/db/**",
                                      "selector": {"labelSelectors": {"io.kompose.service": "mongodb-rate"}}})
    cluster.advance(150)
    p = pod(cluster, "mongodb-rate")
    cs = p["status"]["containerStatuses"][0]
    assert cs["restartCount"] >= 2 and cs["lastState"]["terminated"]["exitCode"] == 14
    text = cluster.read_container_log(NS, p["metadata"]["name"], previous=True)
    lines = [json.loads(x) for x in text.splitlines() if x.startswith("{")]
    wt = [x for x in lines if x["msg"] == "WiredTiger error"]
    assert wt and "Input/output error" in wt[0]["attr"]["message"] and wt[0]["attr"]["error"] == 5
    assert any(x["msg"] == "Fatal assertion" for x in lines)
    cluster.store.delete("iochaos.chaos-mesh.org", NS, "eio")
    cluster.advance(330)
    cs = pod(cluster, "mongodb-rate")["status"]["containerStatuses"][0]
    assert "running" in cs["state"]


def test_bad_disk_sectors_on_a_node_reach_mongod_and_the_kernel_log(cluster: SimCluster) -> None:
    node = pod(cluster, "mongodb-rate")["spec"]["nodeName"]
    cluster.store.create("nodefaults.sim.farm.io", {"apiVersion": "sim.farm.io/v1alpha1", "kind": "NodeFault",
                                                    "metadata": {"name": "latent-sectors"},
                                                    "spec": {"nodeName": node, "disk": {"device": "sda", "errorPercent": 100,
                                                                                        "sectorStart": 1953792, "sectorCount": 64}}})
    cluster.advance(120)
    kern = loki(cluster, f'{{job="node-kernel", node_name="{node}"}} |= "I/O error"')
    assert "blk_update_request: I/O error, dev sda, sector 1953792 op 0x1:(WRITE)" in kern
    assert "Buffer I/O error on dev sda1" in kern
    p = pod(cluster, "mongodb-rate")
    assert p["status"]["containerStatuses"][0]["restartCount"] >= 1
    assert "Input/output error" in cluster.read_container_log(NS, p["metadata"]["name"], previous=True)


def test_stress_memory_beyond_the_limit_oom_kills(cluster: SimCluster) -> None:
    def limit(d: dict) -> None:
        d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"] = "256Mi"
    cluster.store.mutate("deployments.apps", NS, "recommendation", limit)
    cluster.advance(30)
    chaos(cluster, "StressChaos", "mem", {"mode": "one", "stressors": {"memory": {"workers": 1, "size": "300MB"}},
                                          "selector": {"labelSelectors": {"io.kompose.service": "recommendation"}}})
    cluster.advance(30)
    cs = pod(cluster, "recommendation")["status"]["containerStatuses"][0]
    assert cs["lastState"]["terminated"]["reason"] == "OOMKilled"


def test_stress_cpu_throttles_rate_under_its_limit(cluster: SimCluster) -> None:
    chaos(cluster, "StressChaos", "cpu", {"mode": "one", "stressors": {"cpu": {"workers": 1, "load": 100}},
                                          "selector": {"labelSelectors": {"io.kompose.service": "rate"}}})
    cluster.advance(120)
    status, _, body = cluster.obs.prometheus_app("GET", "/api/v1/query", {"query": [
        'sum(rate(container_cpu_usage_seconds_total{namespace="hotel-reservation",container="hotel-reserv-rate"}[1m]))']}, b"")
    assert float(json.loads(body)["data"]["result"][0]["value"][1]) > 0.9


def test_time_chaos_skews_the_pods_clock_in_its_spans_and_logs(cluster: SimCluster) -> None:
    chaos(cluster, "TimeChaos", "skew", {"mode": "one", "timeOffset": "-2h",
                                         "selector": {"labelSelectors": {"io.kompose.service": "geo"}}})
    cluster.advance(60)
    now = cluster.now()
    status, _, body = cluster.obs.jaeger_app("GET", "/api/traces", {"service": ["geo"], "limit": ["20"],
                                                                    "start": [str(int((now - 7200 - 90) * 1e6))],
                                                                    "end": [str(int((now - 7200 + 30) * 1e6))]}, b"")
    assert status == 200, body
    skews = []
    for trace in json.loads(body)["data"]:
        by_service: dict[str, list[int]] = {}
        for s in trace["spans"]:
            by_service.setdefault(trace["processes"][s["processID"]]["serviceName"], []).append(s["startTime"])
        if "geo" in by_service and "frontend" in by_service and min(by_service["frontend"]) > (now - 90) * 1e6:
            skews.append(min(by_service["frontend"]) - min(by_service["geo"]))
    assert skews and all(7000e6 < s < 7300e6 for s in skews)  # geo's clock runs two hours behind its caller's


def test_metastable_retry_storm_stays_down_until_a_real_fix(sim_clusters: SimClusters) -> None:
    cluster = sim_clusters.in_process("hotel-reservation", seed=5)

    def env(deployment: str, kv: dict[str, str]) -> None:
        def edit(d: dict) -> None:
            c = d["spec"]["template"]["spec"]["containers"][0]
            cur = {e["name"]: e for e in c.get("env") or []}
            cur.update({k: {"name": k, "value": v} for k, v in kv.items()})
            c["env"] = list(cur.values())
        cluster.store.mutate("deployments.apps", NS, deployment, edit)

    def load(rps: int) -> None:
        def edit(d: dict) -> None:
            args = d["spec"]["template"]["spec"]["containers"][0]["args"]
            args[0] = re.sub(r"-R \d+", f"-R {rps}", args[0])
        cluster.store.mutate("deployments.apps", NS, "wrk2-load", edit)

    env("rate", {"RATE_BACKEND_QPS_LIMIT": "80"})
    env("search", {"RATE_RPC_MAX_ATTEMPTS": "3", "RATE_RPC_TIMEOUT_MS": "750"})
    cluster.advance(120)
    assert window(cluster, 60) > 99  # the tighter limit alone is fine at 100 req/s
    load(250)
    cluster.advance(60)
    load(100)  # the trigger is gone...
    cluster.advance(60)
    stuck = [window(cluster, 60) for _ in range(4)]
    assert max(stuck) < 45  # ...but searches (60 % of requests) keep failing: retries sustain the overload
    checkpoint = "storm"
    cluster.checkpoint(checkpoint)
    env("search", {"RATE_RPC_MAX_ATTEMPTS": "1"})  # fix 1: stop amplifying
    cluster.advance(90)
    assert window(cluster, 60) > 95
    cluster.restore(checkpoint)
    assert window(cluster, 60) < 45  # restored into the storm
    env("rate", {"RATE_BACKEND_QPS_LIMIT": "500"})  # fix 2: raise the limit
    cluster.advance(90)
    assert window(cluster, 60) > 95


def test_a_node_whose_kubelet_stops_goes_not_ready_and_its_pods_are_evicted(cluster: SimCluster) -> None:
    node = pod(cluster, "geo")["spec"]["nodeName"]
    geo = pod(cluster, "geo")["metadata"]["name"]
    cluster.store.create("nodefaults.sim.farm.io", {"apiVersion": "sim.farm.io/v1alpha1", "kind": "NodeFault",
                                                    "metadata": {"name": "dead-kubelet"},
                                                    "spec": {"nodeName": node, "kubeletStopped": True}})
    cluster.advance(60)
    n = cluster.store.get("nodes", "", node)
    ready = next(c for c in n["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["message"]) == ("Unknown", "Kubelet stopped posting node status.")
    assert {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"} in \
        [{k: t[k] for k in ("key", "effect")} for t in n["spec"]["taints"]]
    conds = {c["type"]: c["status"] for c in cluster.store.get("pods", NS, geo)["status"]["conditions"]}
    assert conds["Ready"] == "False"
    cluster.advance(300)
    # tolerationSeconds 300 ran out: deleted, but only its kubelet could finish that, so it stays Terminating
    assert cluster.store.get("pods", NS, geo)["metadata"].get("deletionTimestamp")
    moved = pod(cluster, "geo")
    assert moved["spec"]["nodeName"] != node and moved["status"]["phase"] == "Running"
    reasons = {e["reason"] for e in cluster.store.list("events", "default")}
    assert "NodeNotReady" in reasons
    cluster.store.delete("nodefaults.sim.farm.io", "", "dead-kubelet")
    cluster.advance(10)
    ready = next(c for c in cluster.store.get("nodes", "", node)["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True" and not cluster.store.get("nodes", "", node)["spec"].get("taints")
    assert cluster.store.try_get("pods", NS, geo) is None  # the kubelet, back, stopped it and let it go


def test_a_full_disk_puts_the_node_under_disk_pressure_and_evicts_pods(cluster: SimCluster) -> None:
    victim = pod(cluster, "memcached-rate")
    node = victim["spec"]["nodeName"]
    cluster.store.create("nodefaults.sim.farm.io", {"apiVersion": "sim.farm.io/v1alpha1", "kind": "NodeFault",
                                                    "metadata": {"name": "full"}, "spec": {"nodeName": node, "diskFullPercent": 97}})
    cluster.advance(45)
    n = cluster.store.get("nodes", "", node)
    assert next(c for c in n["status"]["conditions"] if c["type"] == "DiskPressure")["status"] == "True"
    evicted = [p for p in cluster.store.list("pods", NS) if (p.get("status") or {}).get("reason") == "Evicted"]
    assert evicted and all(p["status"]["phase"] == "Failed" for p in evicted)
    assert evicted[0]["status"]["message"].startswith("The node was low on resource: ephemeral-storage.")
    prefix = evicted[0]["metadata"]["name"].rsplit("-", 2)[0]
    replacement = [p for p in cluster.store.list("pods", NS) if p["metadata"]["name"].startswith(prefix + "-")
                   and p["status"].get("phase") == "Running"]
    assert replacement and replacement[0]["spec"]["nodeName"] != node
    avail = json.loads(cluster.obs.prometheus_app("GET", "/api/v1/query", {"query": [
        f'node_filesystem_avail_bytes{{node="{node}",mountpoint="/"}} / node_filesystem_size_bytes{{node="{node}",mountpoint="/"}}']},
        b"")[2])["data"]["result"]
    assert float(avail[0]["value"][1]) == pytest.approx(0.03)


def test_file_descriptor_exhaustion_on_a_node_shows_in_logs_and_errors(cluster: SimCluster) -> None:
    node = pod(cluster, "frontend")["spec"]["nodeName"]
    before = window(cluster, 30)
    cluster.store.create("nodefaults.sim.farm.io", {"apiVersion": "sim.farm.io/v1alpha1", "kind": "NodeFault",
                                                    "metadata": {"name": "fds"}, "spec": {"nodeName": node, "fileMax": 65536}})
    during = window(cluster, 60)
    assert before > 95 and during < 5
    text = cluster.read_container_log(NS, pod(cluster, "frontend")["metadata"]["name"])
    assert "accept4: too many open files" in text
    assert "VFS: file-max limit 65536 reached" in loki(cluster, f'{{job="node-kernel", node_name="{node}"}} |= "VFS"')
    fd = json.loads(cluster.obs.prometheus_app("GET", "/api/v1/query", {"query": [
        f'node_filefd_allocated{{node="{node}"}} / node_filefd_maximum{{node="{node}"}}']}, b"")[2])["data"]["result"]
    assert float(fd[0]["value"][1]) == 1.0


def test_pid_exhaustion_crashes_go_services_and_blocks_new_containers(cluster: SimCluster) -> None:
    node = pod(cluster, "search")["spec"]["nodeName"]
    cluster.store.create("nodefaults.sim.farm.io", {"apiVersion": "sim.farm.io/v1alpha1", "kind": "NodeFault",
                                                    "metadata": {"name": "pids"}, "spec": {"nodeName": node, "pidMax": 32768}})
    cluster.advance(90)
    p = pod(cluster, "search")
    cs = p["status"]["containerStatuses"][0]
    assert cs["restartCount"] >= 1
    assert "fatal error: newosproc" in loki(cluster, f'{{namespace="{NS}", container="hotel-reserv-search"}} |= "newosproc"')
    assert cs["state"].get("waiting", {}).get("reason") in ("RunContainerError", "CrashLoopBackOff")


# -- modes, duration, KernelChaos -------------------------------------------------------------------


def records(cluster: SimCluster, plural: str, name: str) -> list[dict]:
    obj = cluster.store.get(f"{plural}.chaos-mesh.org", NS, name)
    return (obj.get("status") or {}).get("experiment", {}).get("containerRecords") or []


def delay_everything(cluster: SimCluster, name: str, mode: str, value: str | None = None) -> list[dict]:
    spec: dict = {"action": "delay", "mode": mode, "delay": {"latency": "1ms"}, "selector": {"namespaces": [NS]}}
    if value is not None:
        spec["value"] = value
    chaos(cluster, "NetworkChaos", name, spec)
    cluster.advance(5)
    return records(cluster, "networkchaos", name)


def test_modes_select_as_many_pods_as_chaos_mesh_would(cluster: SimCluster) -> None:
    running = [p["metadata"]["name"] for p in cluster.store.list("pods", NS) if p["status"].get("phase") == "Running"]
    n = len(running)
    assert n >= 20
    assert len(delay_everything(cluster, "all", "all")) == n
    assert len(delay_everything(cluster, "one", "one")) == 1
    fixed = delay_everything(cluster, "fixed", "fixed", "3")
    assert len(fixed) == 3 and len({r["id"] for r in fixed}) == 3
    assert {r["id"].split("/")[1] for r in fixed} <= set(running)
    assert len(delay_everything(cluster, "fixed-many", "fixed", str(n + 5))) == n  # capped at what exists
    assert len(delay_everything(cluster, "quarter", "fixed-percent", "25")) == n * 25 // 100  # floored
    assert len(delay_everything(cluster, "whole", "fixed-percent", "100")) == n
    # A value Chaos Mesh refuses selects nothing: the experiment stays unselected.
    for name, mode, value in (("zero", "fixed", "0"), ("none", "fixed-percent", "0"), ("over", "fixed-percent", "150"),
                              ("word", "fixed", "three")):
        assert delay_everything(cluster, name, mode, value) == []
        conds = {c["type"]: c["status"] for c in cluster.store.get("networkchaos.chaos-mesh.org", NS, name)["status"]["conditions"]}
        assert conds["Selected"] == "False"
    # random-max-percent: a percentage drawn in [0, value], floored; different experiments differ.
    counts = [len(delay_everything(cluster, f"random-{i}", "random-max-percent", "50")) for i in range(8)]
    assert all(0 <= c <= n // 2 for c in counts) and len(set(counts)) > 1


def test_modes_apply_within_the_label_selector(cluster: SimCluster) -> None:
    spec = {"action": "pod-kill", "mode": "fixed-percent", "value": "50",
            "selector": {"namespaces": [NS], "expressionSelectors": [
                {"key": "io.kompose.service", "operator": "In", "values": ["geo", "rate", "profile", "user"]}]}}
    chaos(cluster, "PodChaos", "half", spec)
    cluster.advance(5)
    killed = [r["id"].split("/")[1] for r in records(cluster, "podchaos", "half")]
    assert len(killed) == 2 and all(k.split("-")[0] in ("geo", "rate", "profile", "user") for k in killed)
    for name in killed:
        assert cluster.store.try_get("pods", NS, name) is None


def test_duration_ends_pod_failure_by_itself_and_keeps_the_record(cluster: SimCluster) -> None:
    paused_user(cluster, "brief", "60s")
    cluster.advance(45)  # past the duration: recovered without anyone deleting the experiment
    obj = cluster.store.get("podchaos.chaos-mesh.org", NS, "brief")
    (rec,) = obj["status"]["experiment"]["containerRecords"]
    assert rec["phase"] == "Not Injected" and rec["recoveredCount"] == 1 and rec["injectedCount"] == 1
    assert [e["operation"] for e in rec["events"]] == ["Apply", "Recover"]
    assert obj["status"]["experiment"]["desiredPhase"] == "Stop"
    conds = {c["type"]: c["status"] for c in obj["status"]["conditions"]}
    assert conds["AllRecovered"] == "True" and conds["AllInjected"] == "False"
    assert FINALIZER in obj["metadata"]["finalizers"]  # the object stays until deleted, as in Chaos Mesh
    p = pod(cluster, "user")
    assert p["spec"]["containers"][0]["image"] == "yinfangchen/hotelreservation:latest"
    cluster.advance(30)
    assert 8086 in cluster.kubelet.listening(pod(cluster, "user"))
    cluster.advance(300)  # and is not applied again
    assert pod(cluster, "user")["spec"]["containers"][0]["image"] == "yinfangchen/hotelreservation:latest"
    assert records(cluster, "podchaos", "brief")[0]["injectedCount"] == 1


def test_duration_ends_a_network_partition_and_traffic_comes_back(cluster: SimCluster) -> None:
    base = window(cluster, 60)
    chaos(cluster, "NetworkChaos", "cut", {"action": "partition", "mode": "all", "direction": "both", "duration": "2m",
                                           "selector": {"labelSelectors": {"io.kompose.service": "search"}},
                                           "target": {"mode": "all", "selector": {"labelSelectors": {"io.kompose.service": "rate"}}}})
    cluster.advance(10)
    during = window(cluster, 60)
    cluster.advance(90)
    after = window(cluster, 60)
    assert base > 95 and during < 50 and after > 95
    assert cluster.chaos.state["effects"] == {}
    assert all(r["phase"] == "Not Injected" for r in records(cluster, "networkchaos", "cut"))


def test_pausing_an_experiment_recovers_it_until_resumed(cluster: SimCluster) -> None:
    chaos(cluster, "PodChaos", "held", {"action": "pod-failure", "mode": "all",
                                        "selector": {"labelSelectors": {"io.kompose.service": "geo"}}})
    cluster.advance(10)
    assert pod(cluster, "geo")["spec"]["containers"][0]["image"].startswith("gcr.io/google-containers/pause")

    def pause(o: dict) -> None:
        o["metadata"].setdefault("annotations", {})["experiment.chaos-mesh.org/pause"] = "true"
    cluster.store.mutate("podchaos.chaos-mesh.org", NS, "held", pause)
    cluster.advance(10)
    assert not pod(cluster, "geo")["spec"]["containers"][0]["image"].startswith("gcr.io/google-containers/pause")
    conds = {c["type"]: c["status"] for c in cluster.store.get("podchaos.chaos-mesh.org", NS, "held")["status"]["conditions"]}
    assert conds["Paused"] == "True" and conds["AllRecovered"] == "True"


def test_kernel_chaos_fails_mongods_writes_under_its_call_chain_and_recovers(cluster: SimCluster) -> None:
    node = pod(cluster, "mongodb-rate")["spec"]["nodeName"]
    chaos(cluster, "KernelChaos", "pages", {"mode": "one", "selector": {"labelSelectors": {"io.kompose.service": "mongodb-rate"}},
                                            "failKernRequest": {"callchain": [{"funcname": "ext4_file_write_iter"}],
                                                                "failtype": 1, "probability": 100, "times": 0}})
    cluster.advance(120)
    p = pod(cluster, "mongodb-rate")
    cs = p["status"]["containerStatuses"][0]
    assert cs["restartCount"] >= 1 and cs["lastState"]["terminated"]["exitCode"] == 14
    text = cluster.read_container_log(NS, p["metadata"]["name"], previous=True)
    wt = [json.loads(x) for x in text.splitlines() if x.startswith("{") and "WiredTiger error" in x]
    assert wt and "handle-write" in wt[0]["attr"]["message"]  # the write path, not reads
    assert "Buffer I/O error on dev sda1" in loki(cluster, f'{{job="node-kernel", node_name="{node}"}} |= "I/O error"')
    cluster.store.delete("kernelchaos.chaos-mesh.org", NS, "pages")
    cluster.advance(330)
    cs = pod(cluster, "mongodb-rate")["status"]["containerStatuses"][0]
    assert "running" in cs["state"]
    restarts = cs["restartCount"]
    cluster.advance(120)
    assert pod(cluster, "mongodb-rate")["status"]["containerStatuses"][0]["restartCount"] == restarts


def test_kernel_chaos_on_a_read_path_leaves_writes_alone_and_slab_failures_are_enomem(sim_clusters: SimClusters) -> None:
    from kubesim.chaos import kernel_callchain_ops

    assert kernel_callchain_ops({"callchain": [{"funcname": "ext4_file_write_iter"}]}) == {"write"}
    assert kernel_callchain_ops({"callchain": [{"funcname": "ext4_file_read_iter"}]}) == {"read"}
    assert kernel_callchain_ops({"callchain": [{"funcname": "__x64_sys_mount"}]}) == {"read", "write"}
    cluster = sim_clusters.in_process("hotel-reservation", seed=11)
    mongo = pod(cluster, "mongodb-rate")
    chaos(cluster, "KernelChaos", "slab", {"mode": "one", "selector": {"labelSelectors": {"io.kompose.service": "mongodb-rate"}},
                                           "failKernRequest": {"callchain": [{"funcname": "ext4_file_read_iter"}],
                                                               "failtype": 0, "probability": 100, "times": 0}})
    cluster.advance(5)
    assert cluster.chaos.io_error(mongo, "hotel-reserv-rate-mongo", "/data/db", "write") == 0
    assert cluster.chaos.io_error(mongo, "hotel-reserv-rate-mongo", "/data/db", "read") == 12
    node = mongo["spec"]["nodeName"]
    assert "FAULT_INJECTION: forcing a failure." in loki(cluster, f'{{job="node-kernel", node_name="{node}"}}')


def test_an_experiment_holds_only_the_pods_it_selected_when_it_started(cluster: SimCluster) -> None:
    """Chaos Mesh selects when the experiment starts: a replacement pod, even one given the same
    name (a StatefulSet's), is never injected; the experiment and its records stay."""
    base = window(cluster, 60)
    chaos(cluster, "NetworkChaos", "split-once", {
        "action": "partition", "mode": "all", "direction": "both",
        "selector": {"labelSelectors": {"io.kompose.service": "search"}},
        "target": {"mode": "all", "selector": {"labelSelectors": {"io.kompose.service": "rate"}}}})
    cluster.advance(10)
    assert window(cluster, 60) < 50
    search = pod(cluster, "search")
    twin = {"metadata": {"name": search["metadata"]["name"], "namespace": NS,
                         "labels": dict(search["metadata"]["labels"])},
            "spec": json.loads(json.dumps(search["spec"]))}
    cluster.store.delete("pods", NS, search["metadata"]["name"])
    cluster.advance(1)
    assert cluster.store.try_get("pods", NS, search["metadata"]["name"]) is None
    cluster.store.create("pods", twin)  # same name, new uid
    cluster.advance(60)
    again = cluster.store.get("pods", NS, search["metadata"]["name"])
    assert again["metadata"]["uid"] != search["metadata"]["uid"]
    assert window(cluster, 60) > 0.9 * base
    obj = cluster.store.get("networkchaos.chaos-mesh.org", NS, "split-once")
    assert any(r["phase"] == "Injected" for r in obj["status"]["experiment"]["containerRecords"])
    cluster.store.delete("networkchaos.chaos-mesh.org", NS, "split-once")
