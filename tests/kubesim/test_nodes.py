"""Node state of the emulated cluster: what the kernel prints while a node fault is active (what
`dmesg` shows, read here through Loki as the node's kernel log), the kubelet's eviction manager
(memory.available against a misconfigured evictionHard, a disk filled by a file), a powered-off
node's containers, and a kubelet that resumes after others marked its pods unready."""

from __future__ import annotations

import functools
import json
import re

import pytest

from kubesim.cluster import SimCluster
from tests.kubesim.apptools import newest_pod

NS = "hotel-reservation"
pod = functools.partial(newest_pod, namespace=NS)


def node_fault(cluster: SimCluster, name: str, node: str, **spec: object) -> None:
    cluster.store.create("nodefaults.sim.farm.io", {"apiVersion": "sim.farm.io/v1alpha1", "kind": "NodeFault",
                                                    "metadata": {"name": name}, "spec": {"nodeName": node, **spec}})


def log_lines(cluster: SimCluster, query: str) -> list[str]:
    """Loki's lines for `query`, oldest first, without dmesg's [seconds] prefix."""
    status, _, body = cluster.obs.loki_app("GET", "/loki/api/v1/query_range", {"query": [query], "limit": ["1000"]}, b"")
    assert status == 200, body
    values = sorted(v for s in json.loads(body)["data"]["result"] for v in s["values"])
    return [re.sub(r"^\[\s*\d+\.\d+\] ", "", line) for _, line in values]


def kernel(cluster: SimCluster, node: str) -> list[str]:
    return log_lines(cluster, f'{{job="node-kernel", node_name="{node}"}}')


def condition(cluster: SimCluster, node: str, kind: str) -> str:
    return next(c["status"] for c in cluster.store.get("nodes", "", node)["status"]["conditions"] if c["type"] == kind)


# -- kernel log ------------------------------------------------------------------------------------


def test_pid_exhaustion_prints_the_pids_controller_rejection_for_each_container_cgroup(cluster: SimCluster) -> None:
    rate = pod(cluster, "rate")
    node = rate["spec"]["nodeName"]
    assert not any("fork rejected" in line for line in kernel(cluster, node))
    node_fault(cluster, "pids", node, pidMax=300)
    cluster.advance(20)
    lines = [line for line in kernel(cluster, node) if "fork rejected" in line]
    cid = rate["status"]["containerStatuses"][0]["containerID"].removeprefix("containerd://")
    # rate requests CPU without a limit on memory: Burstable, so its cgroup sits under kubepods/burstable.
    assert f"cgroup: fork rejected by pids controller in /kubepods/burstable/pod{rate['metadata']['uid']}/{cid}" in lines
    assert len(lines) == len(set(lines))  # the kernel reports each cgroup's first rejection only
    cluster.advance(60)
    assert len([line for line in kernel(cluster, node) if "fork rejected" in line]) >= len(lines)


def test_nic_corruption_and_loss_print_csum_failures_the_watchdog_and_rate_limited_summaries(cluster: SimCluster) -> None:
    node = pod(cluster, "search")["spec"]["nodeName"]
    node_fault(cluster, "nic", node, nic={"corruptPercent": 20, "lossPercent": 30})
    cluster.advance(5)
    lines = kernel(cluster, node)
    assert "eth0: hw csum failure" in lines
    assert any(line.startswith(" __skb_checksum_complete+") for line in lines)  # the stack the csum fault dumps
    assert "NETDEV WATCHDOG: eth0 (hv_netvsc): transmit queue 0 timed out" in lines
    assert not any(line.startswith("net_ratelimit") for line in lines)
    cluster.advance(130)
    summaries = [line for line in kernel(cluster, node) if line.startswith("net_ratelimit:")]
    assert len(summaries) == 2 and all(re.fullmatch(r"net_ratelimit: \d+ callbacks suppressed", s) for s in summaries)
    cluster.store.delete("nodefaults.sim.farm.io", "", "nic")
    cluster.advance(130)
    assert len([line for line in kernel(cluster, node) if line.startswith("net_ratelimit:")]) == 2  # quiet once fixed


def test_clock_skew_marks_the_tsc_unstable_and_timesyncd_cannot_reach_its_servers(cluster: SimCluster) -> None:
    node = pod(cluster, "geo")["spec"]["nodeName"]
    node_fault(cluster, "skew", node, clockOffsetSeconds=-600)
    cluster.advance(10)
    lines = kernel(cluster, node)
    i = lines.index("clocksource: timekeeping watchdog on CPU0: Marking clocksource 'tsc' as unstable because the "
                    "skew is too large:")
    assert re.match(r"clocksource: +'hpet' wd_nsec: 512000000 wd_now: [0-9a-f]+ ", lines[i + 1])
    assert "tsc: Marking TSC unstable due to clocksource watchdog" in lines[i:]
    assert lines[-1] == "clocksource: Switched to clocksource hpet"
    journal = log_lines(cluster, f'{{job="node-journal", node_name="{node}", unit="systemd-timesyncd.service"}}')
    assert journal and all("systemd-timesyncd[612]: Timed out waiting for reply from" in j for j in journal)
    cluster.advance(120)
    assert len([line for line in kernel(cluster, node) if "Marking clocksource" in line]) == 1  # printed once


def test_cpu_throttling_prints_thermal_events_per_cpu_and_the_all_clear(cluster: SimCluster) -> None:
    node = pod(cluster, "frontend")["spec"]["nodeName"]
    node_fault(cluster, "hot", node, cpuThrottlePercent=80)
    cluster.advance(5)
    lines = kernel(cluster, node)
    for cpu in range(4):
        assert f"CPU{cpu}: Core temperature above threshold, cpu clock throttled (total events = 1)" in lines
        assert f"CPU{cpu}: Package temperature above threshold, cpu clock throttled (total events = 1)" in lines
    cluster.advance(310)  # therm_throt reports again after its 5-minute rate limit, with a larger count
    again = [line for line in kernel(cluster, node) if line.startswith("CPU0: Core temperature above")]
    assert len(again) == 2 and int(re.search(r"events = (\d+)", again[-1]).group(1)) > 1
    cluster.store.delete("nodefaults.sim.farm.io", "", "hot")
    cluster.advance(5)
    assert "CPU0: Core temperature/speed normal" in kernel(cluster, node)


# -- the kubelet ---------------------------------------------------------------------------------


def test_a_misconfigured_memory_eviction_threshold_evicts_pods_that_fit(cluster: SimCluster) -> None:
    mongo = pod(cluster, "mongodb-reservation")
    node = mongo["spec"]["nodeName"]
    on_node = {p["metadata"]["name"] for p in cluster.store.list("pods", NS) if p["spec"].get("nodeName") == node}
    node_fault(cluster, "evict", node, evictionHard={"memory.available": "90%"})
    cluster.advance(5)
    n = cluster.store.get("nodes", "", node)
    assert condition(cluster, node, "MemoryPressure") == "True"
    assert {"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"} in \
        [{k: t[k] for k in ("key", "effect")} for t in n["spec"]["taints"]]
    cluster.advance(55)  # one eviction per 10 s monitoring interval, largest use above request first
    evicted = [p for p in cluster.store.list("pods", NS) if (p.get("status") or {}).get("reason") == "Evicted"]
    assert len(evicted) >= 3 and {p["metadata"]["name"] for p in evicted} <= on_node
    msg = evicted[0]["status"]["message"]
    assert re.match(r"The node was low on resource: memory\. Threshold quantity: \d+, available: \d+Ki\. "
                    r"Container \S+ was using \d+Ki, request is 0, has larger consumption of memory\. $", msg), msg
    reasons = {(e["reason"], e["message"]) for e in cluster.store.list("events", "default")}
    assert ("EvictionThresholdMet", "Attempting to reclaim memory") in reasons
    assert ("NodeHasInsufficientMemory", f"Node {node} status is now: NodeHasInsufficientMemory") in reasons
    cluster.store.delete("nodefaults.sim.farm.io", "", "evict")
    cluster.advance(90)
    assert condition(cluster, node, "MemoryPressure") == "False" and not cluster.store.get("nodes", "", node)["spec"].get("taints")
    assert pod(cluster, "mongodb-reservation")["status"]["phase"] == "Running"


def test_a_file_filling_the_disk_is_disk_pressure_in_proportion_to_its_size(cluster: SimCluster) -> None:
    node = pod(cluster, "geo")["spec"]["nodeName"]
    node_fault(cluster, "small", node, diskFillBytes=10 * 2**30)  # 20 GiB used + 10 GiB of 100 GiB: no pressure
    cluster.advance(30)
    assert condition(cluster, node, "DiskPressure") == "False"
    assert cluster.nodes.fault(node, "diskFullPercent") == pytest.approx(30.0)
    cluster.store.delete("nodefaults.sim.farm.io", "", "small")
    node_fault(cluster, "big", node, diskFillBytes=200 * 2**30)  # more than the disk holds: full
    cluster.advance(30)
    assert condition(cluster, node, "DiskPressure") == "True"
    assert cluster.nodes.fault(node, "diskFullPercent") == 100.0


def test_a_node_that_powers_off_loses_its_containers_and_restarts_them_when_back(cluster: SimCluster) -> None:
    profile = pod(cluster, "profile")
    node = profile["spec"]["nodeName"]
    node_fault(cluster, "dead", node, nodeDown=True)
    cluster.advance(60)
    assert not cluster.kubelet.listening(profile)  # nothing answers on a machine that is off
    assert condition(cluster, node, "Ready") == "Unknown"
    assert "reboot: Power down" in kernel(cluster, node)
    cluster.store.delete("nodefaults.sim.farm.io", "", "dead")
    cluster.advance(60)
    status = cluster.store.get("pods", NS, profile["metadata"]["name"])["status"]
    cs = status["containerStatuses"][0]
    assert cs["restartCount"] == 1 and "running" in cs["state"]
    assert (cs["lastState"]["terminated"]["exitCode"], cs["lastState"]["terminated"]["reason"]) == (255, "Unknown")
    assert next(c for c in status["conditions"] if c["type"] == "Ready")["status"] == "True"


def test_a_kubelet_that_resumes_marks_its_pods_ready_again(cluster: SimCluster) -> None:
    geo = pod(cluster, "geo")
    node = geo["spec"]["nodeName"]
    node_fault(cluster, "stopped", node, kubeletStopped=True)
    cluster.advance(60)
    ready = next(c for c in cluster.store.get("pods", NS, geo["metadata"]["name"])["status"]["conditions"]
                 if c["type"] == "Ready")
    assert ready["status"] == "False"  # the node controller's doing; the containers still run
    cluster.store.delete("nodefaults.sim.farm.io", "", "stopped")
    cluster.advance(30)
    conds = {c["type"]: c["status"] for c in cluster.store.get("pods", NS, geo["metadata"]["name"])["status"]["conditions"]}
    assert conds["Ready"] == "True" and conds["ContainersReady"] == "True"
    assert cluster.store.get("deployments.apps", NS, "geo")["status"].get("readyReplicas") == 1


def test_a_noexecute_taint_evicts_what_does_not_tolerate_it_and_its_network_volume_follows(cluster: SimCluster) -> None:
    mongo = pod(cluster, "mongodb-reservation")
    node = mongo["spec"]["nodeName"]
    on_node = [p["metadata"]["name"] for p in cluster.store.list("pods", NS) if p["spec"].get("nodeName") == node]
    # One pod tolerates the taint for 60 s, another for good.
    def tolerate(name: str, seconds: int | None) -> None:
        def edit(d: dict) -> None:
            tol = {"key": "node.kubernetes.io/maintenance", "operator": "Exists", "effect": "NoExecute"}
            if seconds is not None:
                tol["tolerationSeconds"] = seconds
            d["spec"]["template"]["spec"]["tolerations"] = [tol]
            d["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
        cluster.store.mutate("deployments.apps", NS, name, edit)
    cluster.advance(30)

    def edit(n: dict) -> None:
        n["spec"]["taints"] = [{"key": "node.kubernetes.io/maintenance", "value": "true", "effect": "NoExecute"}]
    cluster.store.mutate("nodes", "", node, edit)
    cluster.advance(5)
    for name in on_node:
        assert cluster.store.try_get("pods", NS, name) is None, name  # none tolerates it: all evicted at once
    reasons = [e for e in cluster.store.list("events", NS) if e["reason"] == "TaintManagerEviction"]
    assert {e["involvedObject"]["name"] for e in reasons} >= set(on_node)
    cluster.advance(30)
    moved = pod(cluster, "mongodb-reservation")  # its EBS volume detached from the tainted node
    assert moved["spec"]["nodeName"] != node and moved["status"]["phase"] == "Running"
    assert any(e["reason"] == "SuccessfulAttachVolume" and e["involvedObject"]["name"] == moved["metadata"]["name"]
               for e in cluster.store.list("events", NS))
    # A pod pinned to the node that tolerates the taint for a while is evicted when that while is over.
    tolerate("mongodb-reservation", 60)
    cluster.advance(20)
    back = pod(cluster, "mongodb-reservation")
    assert back["spec"].get("nodeName") == node and back["status"]["phase"] == "Running"
    cluster.advance(50)
    assert cluster.store.try_get("pods", NS, back["metadata"]["name"]) is None
    tolerate("mongodb-reservation", None)
    cluster.advance(30)
    for_good = pod(cluster, "mongodb-reservation")
    cluster.advance(120)
    assert cluster.store.try_get("pods", NS, for_good["metadata"]["name"]) is not None
