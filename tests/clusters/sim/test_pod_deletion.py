"""Graceful pod deletion as kube-apiserver and the kubelet do it, seen through kubectl 1.20 and 1.33
as real processes: a deleted pod shows Terminating with deletionTimestamp and
deletionGracePeriodSeconds, its ReplicaSet replaces it at once and stops counting it, Endpoints
drop it (EndpointSlices keep it, terminating and not ready), a watch sees MODIFIED then DELETED,
the kubelet removes it once its containers stopped (a shell sleeping as PID 1 only when the
grace period ends), `--grace-period=0 --force` removes it at once, and finalizers keep it until
they are removed."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from kubernetes import client

from clusters.sim.provider import SimHandle
from farm.pytest_plugin import SimClusters
from tests.clusters.sim.servedtools import KUBECTLS, NEEDS_KUBECTL, VERSIONS, kubectl

pytestmark = NEEDS_KUBECTL


@pytest.fixture(scope="module")
def cluster(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served(seed=4)


def web(cluster: SimHandle, ns: str, replicas: int = 2) -> list[str]:
    """A namespace with a Deployment of nginx (which exits on SIGTERM) and its Service; its pod names."""
    api = cluster.api_client()
    client.CoreV1Api(api).create_namespace({"metadata": {"name": ns}})
    client.AppsV1Api(api).create_namespaced_deployment(ns, {
        "metadata": {"name": "web"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}]}}}})
    client.CoreV1Api(api).create_namespaced_service(ns, {
        "metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})
    cluster.advance(30)
    return sorted(p.metadata.name for p in client.CoreV1Api(api).list_namespaced_pod(ns).items)


def pod_json(cluster: SimHandle, version: str, ns: str, name: str) -> dict:
    code, out = kubectl(cluster, version, "-n", ns, "get", "pod", name, "-o", "json")
    assert code == 0, out
    return json.loads(out)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_deleted_pod_terminates_gracefully_and_is_replaced_at_once(cluster: SimHandle, version: str) -> None:
    ns = f"graceful-{version.replace('.', '-')}"
    victim, other = web(cluster, ns)
    # as the agent: on a virtual clock the controllers act on its writes at once (the farm's wait for the next advance)
    agent = cluster.agent_kubeconfig(ns)
    code, out = kubectl(cluster, version, "-n", ns, "delete", "pod", victim, "--wait=false", kubeconfig=agent)
    assert code == 0 and f'pod "{victim}" deleted' in out, out

    meta = pod_json(cluster, version, ns, victim)["metadata"]
    assert meta["deletionGracePeriodSeconds"] == 30 and meta["deletionTimestamp"]
    code, out = kubectl(cluster, version, "-n", ns, "get", "pods", "--no-headers")
    rows = {line.split()[0]: line.split()[2] for line in out.splitlines()}
    assert rows[victim] == "Terminating" and rows[other] == "Running", out
    assert len(rows) == 3, out  # the replacement exists while the victim terminates
    rs = client.AppsV1Api(cluster.api_client()).list_namespaced_replica_set(ns).items[0]
    assert rs.status.replicas == 2  # the terminating pod is not counted
    victim_ip = pod_json(cluster, version, ns, victim)["status"]["podIP"]
    endpoints = client.CoreV1Api(cluster.api_client()).read_namespaced_endpoints("web", ns)
    addresses = {a.ip for s in endpoints.subsets or [] for a in (s.addresses or []) + (s.not_ready_addresses or [])}
    assert victim_ip not in addresses
    [eps] = client.DiscoveryV1Api(cluster.api_client()).list_namespaced_endpoint_slice(
        ns, label_selector="kubernetes.io/service-name=web").items
    conditions = {e.target_ref.name: e.conditions for e in eps.endpoints}
    assert (conditions[victim].ready, conditions[victim].terminating) == (False, True)  # serving: its readiness
    assert (conditions[other].ready, conditions[other].terminating) == (True, False)

    cluster.advance(5)  # nginx exits on SIGTERM within a second or two: the kubelet then removes the pod
    code, out = kubectl(cluster, version, "-n", ns, "get", "pod", victim)
    assert code != 0 and "NotFound" in out, out
    code, out = kubectl(cluster, version, "-n", ns, "get", "events", "--field-selector", f"involvedObject.name={victim}")
    assert "Killing" in out and "Stopping container web" in out, out

    code, out = kubectl(cluster, version, "-n", ns, "delete", "pod", other, "--grace-period=0", "--force", kubeconfig=agent)
    assert code == 0 and "force deleted" in out, out
    code, out = kubectl(cluster, version, "-n", ns, "get", "pod", other)
    assert code != 0 and "NotFound" in out, out


def test_a_watch_sees_the_deletion_marked_then_the_pod_removed(cluster: SimHandle) -> None:
    ns = "graceful-watch"
    victim = web(cluster, ns, replicas=1)[0]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cluster.workdir / "home-watch"), "KUBECONFIG": str(cluster.kubeconfig)}
    watch = subprocess.Popen([str(KUBECTLS["1.20"]), "-n", ns, "get", "pod", victim, "--watch-only", "--output-watch-events",
                              "-o", "json"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(1.0)  # the watch is established
        assert kubectl(cluster, "1.20", "-n", ns, "delete", "pod", victim, "--grace-period=7", "--wait=false")[0] == 0
        cluster.advance(5)
        time.sleep(1.0)
    finally:
        watch.terminate()
        out = watch.communicate(timeout=10)[0]
    events, decoder, rest = [], json.JSONDecoder(), out.strip()
    while rest:
        event, end = decoder.raw_decode(rest)
        events.append((event["type"], event["object"]["metadata"].get("deletionGracePeriodSeconds")))
        rest = rest[end:].strip()
    assert events[0] == ("MODIFIED", 7) and events[-1][0] == "DELETED", out


def test_a_shell_as_pid_1_ignores_sigterm_and_is_killed_at_the_end_of_the_grace_period(cluster: SimHandle) -> None:
    ns = "graceful-sleep"
    client.CoreV1Api(cluster.api_client()).create_namespace({"metadata": {"name": ns}})
    client.CoreV1Api(cluster.api_client()).create_namespaced_pod(ns, {
        "metadata": {"name": "sleeper"},
        "spec": {"terminationGracePeriodSeconds": 12,
                 "containers": [{"name": "sleep", "image": "busybox:1.36", "command": ["sleep", "3600"]}]}})
    cluster.advance(20)
    assert kubectl(cluster, "1.20", "-n", ns, "delete", "pod", "sleeper", "--wait=false")[0] == 0
    cluster.advance(5)
    assert pod_json(cluster, "1.20", ns, "sleeper")["metadata"]["deletionGracePeriodSeconds"] == 12  # still terminating
    cluster.advance(10)
    code, out = kubectl(cluster, "1.20", "-n", ns, "get", "pod", "sleeper")
    assert code != 0 and "NotFound" in out, out


def test_finalizers_keep_a_deleted_pod_until_they_are_removed(cluster: SimHandle) -> None:
    ns = "graceful-finalizer"
    core = client.CoreV1Api(cluster.api_client())
    core.create_namespace({"metadata": {"name": ns}})
    core.create_namespaced_pod(ns, {"metadata": {"name": "held", "finalizers": ["example.com/hold"]},
                                    "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}})
    cluster.advance(20)
    assert kubectl(cluster, "1.20", "-n", ns, "delete", "pod", "held", "--wait=false")[0] == 0
    cluster.advance(10)
    pod = pod_json(cluster, "1.20", ns, "held")
    assert pod["metadata"]["deletionTimestamp"] and pod["metadata"]["finalizers"] == ["example.com/hold"]
    assert "running" not in pod["status"]["containerStatuses"][0]["state"]  # the containers stopped all the same
    code, out = kubectl(cluster, "1.20", "-n", ns, "patch", "pod", "held", "--type=json",
                        "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')
    assert code == 0, out
    code, out = kubectl(cluster, "1.20", "-n", ns, "get", "pod", "held")
    assert code != 0 and "NotFound" in out, out


def test_kubectl_delete_waits_for_the_pod_to_go_on_a_live_cluster(sim_clusters: SimClusters) -> None:
    handle = sim_clusters.served(seed=4, live=True)
    core = client.CoreV1Api(handle.api_client())
    core.create_namespace({"metadata": {"name": "live"}})
    core.create_namespaced_pod("live", {"metadata": {"name": "web"},
                                        "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}})
    deadline = time.monotonic() + 30
    while core.read_namespaced_pod("web", "live").status.phase != "Running":
        assert time.monotonic() < deadline, "the pod never ran"
        time.sleep(0.2)
    code, out = kubectl(handle, "1.20", "-n", "live", "delete", "pod", "web", "--timeout=30s")  # waits for the removal
    assert code == 0 and 'pod "web" deleted' in out, out
    assert not core.list_namespaced_pod("live").items
