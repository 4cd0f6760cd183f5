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

from clusters.emulated import SimHandle
from farm.pytest_plugin import SimClusters
from tests.kubesim.servedtools import KUBECTLS, NEEDS_KUBECTL, VERSIONS, kubectl

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


# -- the controllers delete through the same graceful path ----------------------------------------

SLEEPER = {"terminationGracePeriodSeconds": 20,  # a shell sleeping as PID 1: Terminating for the whole grace period
           "containers": [{"name": "sleep", "image": "busybox:1.36", "command": ["sleep", "3600"]}]}


def namespace(cluster: SimHandle, ns: str) -> None:
    client.CoreV1Api(cluster.api_client()).create_namespace({"metadata": {"name": ns}})


def pod_rows(cluster: SimHandle, ns: str, *args: str) -> dict[str, str]:
    """NAME → STATUS as `kubectl get pods` prints them."""
    code, out = kubectl(cluster, "1.33" if KUBECTLS["1.33"].exists() else "1.20", "-n", ns, "get", "pods", "--no-headers", *args)
    assert code == 0, out
    return {line.split()[0]: line.split()[2] for line in out.splitlines()
            if line.strip() and not line.startswith("No resources found")}


def events(cluster: SimHandle, ns: str, reason: str) -> list[str]:
    return [e.message for e in client.CoreV1Api(cluster.api_client()).list_namespaced_event(ns).items if e.reason == reason]


def test_a_statefulset_makes_an_ordinal_again_only_once_its_old_pod_is_gone(cluster: SimHandle) -> None:
    ns = "graceful-sts"
    namespace(cluster, ns)
    client.AppsV1Api(cluster.api_client()).create_namespaced_stateful_set(ns, {
        "metadata": {"name": "db"},
        "spec": {"replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                 "template": {"metadata": {"labels": {"app": "db"}}, "spec": SLEEPER}}})
    cluster.advance(60)
    assert pod_rows(cluster, ns) == {"db-0": "Running", "db-1": "Running", "db-2": "Running"}
    old_uid = pod_json(cluster, "1.20", ns, "db-1")["metadata"]["uid"]

    assert kubectl(cluster, "1.20", "-n", ns, "delete", "pod", "db-1", "--wait=false")[0] == 0
    cluster.advance(10)
    assert pod_rows(cluster, ns)["db-1"] == "Terminating"  # no second db-1 while the first terminates
    assert pod_json(cluster, "1.20", ns, "db-1")["metadata"]["uid"] == old_uid
    cluster.advance(30)
    assert pod_json(cluster, "1.20", ns, "db-1")["metadata"]["uid"] != old_uid
    assert pod_rows(cluster, ns)["db-1"] == "Running"

    # scale-down: the highest ordinal first, the next only once it is gone
    assert kubectl(cluster, "1.20", "-n", ns, "scale", "statefulset", "db", "--replicas=1")[0] == 0
    cluster.advance(5)
    assert pod_rows(cluster, ns) == {"db-0": "Running", "db-1": "Running", "db-2": "Terminating"}
    code, out = kubectl(cluster, "1.20", "-n", ns, "get", "sts", "db", "-o", "jsonpath={.status.replicas} {.status.readyReplicas}")
    assert (code, out) == (0, "3 2")  # a terminating pod still counts as one of the set's replicas
    cluster.advance(20)
    assert pod_rows(cluster, ns) == {"db-0": "Running", "db-1": "Terminating"}
    cluster.advance(25)
    assert pod_rows(cluster, ns) == {"db-0": "Running"}
    assert events(cluster, ns, "SuccessfulDelete") == ["delete Pod db-2 in StatefulSet db successful",
                                                       "delete Pod db-1 in StatefulSet db successful"]


def test_a_daemonset_deletes_its_pod_gracefully_when_the_node_stops_matching(cluster: SimHandle) -> None:
    ns = "graceful-ds"
    namespace(cluster, ns)
    nodes = sorted(n.metadata.name for n in client.CoreV1Api(cluster.api_client()).list_node().items)
    for node in nodes[:2]:
        assert kubectl(cluster, "1.20", "label", "node", node, "graceful-ds=yes")[0] == 0
    client.AppsV1Api(cluster.api_client()).create_namespaced_daemon_set(ns, {
        "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}},
                              "spec": {**SLEEPER, "nodeSelector": {"graceful-ds": "yes"}, "tolerations": [
                                  {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]}}}})
    cluster.advance(30)
    code, out = kubectl(cluster, "1.20", "-n", ns, "get", "pods", "-o",
                        "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName}{\"\\n\"}{end}")
    on_node = dict(reversed(line.split()) for line in out.splitlines())
    assert sorted(on_node) == nodes[:2], out

    assert kubectl(cluster, "1.20", "label", "node", nodes[1], "graceful-ds-")[0] == 0
    cluster.advance(5)
    rows = pod_rows(cluster, ns)
    assert (rows[on_node[nodes[0]]], rows[on_node[nodes[1]]]) == ("Running", "Terminating"), rows
    assert events(cluster, ns, "SuccessfulDelete") == [f"Deleted pod: {on_node[nodes[1]]}"]
    cluster.advance(20)
    assert list(pod_rows(cluster, ns)) == [on_node[nodes[0]]]
    kubectl(cluster, "1.20", "label", "node", nodes[0], "graceful-ds-")


def job(cluster: SimHandle, ns: str, name: str, **spec: object) -> None:
    client.BatchV1Api(cluster.api_client()).create_namespaced_job(ns, {
        "metadata": {"name": name},
        "spec": {"template": {"spec": {**SLEEPER, "restartPolicy": "Never"}}, **spec}})


def job_pods(cluster: SimHandle, ns: str, name: str) -> dict[str, str]:
    return pod_rows(cluster, ns, "-l", f"job-name={name}")


def test_a_job_deletes_its_active_pods_gracefully(cluster: SimHandle) -> None:
    ns = "graceful-job"
    namespace(cluster, ns)
    batch = client.BatchV1Api(cluster.api_client())
    job(cluster, ns, "deadline", activeDeadlineSeconds=30)
    job(cluster, ns, "wide", parallelism=3, completions=10)
    job(cluster, ns, "paused")
    cluster.advance(20)
    assert set(job_pods(cluster, ns, "wide").values()) == {"Running"} and len(job_pods(cluster, ns, "wide")) == 3

    # parallelism lowered: two of the three go, Terminating; suspended: its one pod goes
    assert kubectl(cluster, "1.20", "-n", ns, "patch", "job", "wide", "-p", '{"spec":{"parallelism":1}}')[0] == 0
    assert kubectl(cluster, "1.20", "-n", ns, "patch", "job", "paused", "-p", '{"spec":{"suspend":true}}')[0] == 0
    cluster.advance(2)
    assert sorted(job_pods(cluster, ns, "wide").values()) == ["Running", "Terminating", "Terminating"]
    assert list(job_pods(cluster, ns, "paused").values()) == ["Terminating"]
    paused = batch.read_namespaced_job("paused", ns).status
    assert [(c.type, c.status, c.reason) for c in paused.conditions] == [("Suspended", "True", "JobSuspended")]
    assert not paused.active

    # the deadline passes: the job fails and its running pod terminates
    cluster.advance(10)
    deadline = batch.read_namespaced_job("deadline", ns).status
    assert [(c.type, c.reason) for c in deadline.conditions] == [("Failed", "DeadlineExceeded")]
    assert list(job_pods(cluster, ns, "deadline").values()) == ["Terminating"]
    cluster.advance(25)
    assert job_pods(cluster, ns, "deadline") == {} and job_pods(cluster, ns, "paused") == {}
    assert list(job_pods(cluster, ns, "wide").values()) == ["Running"]
    code, out = kubectl(cluster, "1.20", "-n", ns, "describe", "job", "deadline")
    assert "SuccessfulDelete" in out and "DeadlineExceeded" in out, out


def test_taint_eviction_is_graceful_and_a_pod_of_a_node_whose_kubelet_is_down_stays_terminating(cluster: SimHandle) -> None:
    ns = "graceful-taint"
    namespace(cluster, ns)
    core = client.CoreV1Api(cluster.api_client())
    node = sorted(n.metadata.name for n in core.list_node().items)[-1]
    pinned = {**SLEEPER, "nodeSelector": {"kubernetes.io/hostname": node}}
    core.create_namespaced_pod(ns, {"metadata": {"name": "plain"}, "spec": pinned})
    core.create_namespaced_pod(ns, {"metadata": {"name": "patient"}, "spec": {**pinned, "tolerations": [
        {"key": "maintenance", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}]}})
    cluster.advance(20)
    assert kubectl(cluster, "1.20", "taint", "node", node, "maintenance=now:NoExecute")[0] == 0
    cluster.advance(2)
    assert pod_rows(cluster, ns) == {"patient": "Running", "plain": "Terminating"}
    assert events(cluster, ns, "TaintManagerEviction") == [f"Marking for deletion Pod {ns}/plain"]
    cluster.advance(30)
    assert pod_rows(cluster, ns) == {"patient": "Terminating"}  # its 30 s are up; plain's grace period too
    cluster.advance(25)
    assert pod_rows(cluster, ns) == {}
    assert kubectl(cluster, "1.20", "taint", "node", node, "maintenance-")[0] == 0

    # the kubelet stops: NotReady after 40 s, unreachable evicts after the default 300 s toleration,
    # and nobody finishes the deletion but a force delete
    core.create_namespaced_pod(ns, {"metadata": {"name": "stranded"}, "spec": pinned})
    cluster.advance(20)
    fault = {"apiVersion": "sim.farm.io/v1alpha1", "kind": "NodeFault", "metadata": {"name": "graceful-taint"},
             "spec": {"nodeName": node, "kubeletStopped": True}}
    assert kubectl(cluster, "1.20", "apply", "-f", "-", stdin=json.dumps(fault))[0] == 0
    try:
        cluster.advance(360)
        assert pod_rows(cluster, ns) == {"stranded": "Terminating"}
        cluster.advance(600)
        assert pod_rows(cluster, ns) == {"stranded": "Terminating"}
        code, out = kubectl(cluster, "1.20", "-n", ns, "delete", "pod", "stranded", "--grace-period=0", "--force")
        assert code == 0 and "force deleted" in out, out
        assert pod_rows(cluster, ns) == {}
    finally:
        kubectl(cluster, "1.20", "delete", "nodefault", "graceful-taint")
        cluster.advance(30)
