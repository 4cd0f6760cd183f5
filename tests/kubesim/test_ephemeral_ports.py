"""A pod's net.ipv4.ip_local_port_range sysctl in the emulated hotel-reservation: each Consul watch
of frontend's gRPC resolver holds a connection to the agent, so with four ephemeral ports the
fifth (srv-reservation, in the order frontend dials its clients) fails with EADDRNOTAVAIL, that
backend is never resolved and hotel searches fail while every pod is Running; the container sees
the range in /proc/sys."""

from __future__ import annotations

from typing import Any

from kubesim.cluster import SimCluster
from tests.kubesim.apptools import newest_pod, window

NS = "hotel-reservation"
SYSCTL = "net.ipv4.ip_local_port_range"


def narrow(cluster: SimCluster, deployment: str, value: str) -> None:
    def edit(d: dict[str, Any]) -> None:
        d["spec"]["template"]["spec"]["securityContext"] = {"sysctls": [{"name": SYSCTL, "value": value}]}
    cluster.store.mutate("deployments.apps", NS, deployment, edit)


def test_four_ports_leave_frontends_fifth_consul_watch_unresolved(cluster: SimCluster) -> None:
    assert window(cluster, 60) > 95
    narrow(cluster, "frontend", "32000 32003")
    cluster.advance(60)
    during = window(cluster, 120)
    assert during < 60  # /hotels (60 % of requests) needs reservation
    pod = newest_pod(cluster, "frontend", NS)
    assert pod["status"]["containerStatuses"][0]["ready"]
    log = cluster.read_container_log(NS, pod["metadata"]["name"])
    assert "[Consul resolver] Couldn't fetch endpoints. target={service='srv-reservation'" in log
    assert "connect: cannot assign requested address" in log
    assert "srv-search'" not in log and "srv-user'" not in log  # the first four watches got their ports
    assert "there is no address available" in log
    code, out, _ = cluster.kubelet.exec(NS, pod["metadata"]["name"], None, ["cat", "/proc/sys/" + SYSCTL.replace(".", "/")])
    assert (code, out) == (0, "32000\t32003\n")


def test_five_ports_are_enough_for_frontends_watches(cluster: SimCluster) -> None:
    narrow(cluster, "frontend", "32000 32004")
    cluster.advance(60)
    assert window(cluster, 120) > 95
    log = cluster.read_container_log(NS, newest_pod(cluster, "frontend", NS)["metadata"]["name"])
    assert "cannot assign requested address" not in log
