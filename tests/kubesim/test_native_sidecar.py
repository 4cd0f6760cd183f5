"""Native sidecars (KEP-753): an init container with restartPolicy Always starts before the pod's
containers and runs beside them; once they have all exited the kubelet stops it (SIGTERM, killed
at the end of the grace period if it has no handler), so a Job's pod completes. The same daemon
as a regular container keeps the pod Running and its Job active. The API server accepts a
container's restartPolicy on init containers only, and only Always."""

from __future__ import annotations

import pytest

from clusters.kube import Kube, KubeError
from farm.pytest_plugin import SimClusters
from kubesim.cluster import SimCluster
from kubesim.store import Obj

NS = "demo"
PRIMARY = {"name": "work", "image": "busybox:1.36", "command": ["sh", "-c", "echo working\nsleep 1\necho done\n"]}
DAEMON = {"name": "shipper", "image": "busybox:1.36", "command": ["sh", "-c", "echo shipping\nexec nc -lk -p 24224 -e cat\n"],
          "ports": [{"containerPort": 24224}],
          "startupProbe": {"tcpSocket": {"port": 24224}, "periodSeconds": 1, "failureThreshold": 30}}


def job(name: str, native: bool) -> Obj:
    pod = ({"initContainers": [{**DAEMON, "restartPolicy": "Always"}], "containers": [PRIMARY]} if native
           else {"containers": [PRIMARY, DAEMON]})
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": NS},
            "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", **pod}}}}


def statuses(pod: Obj) -> dict[str, Obj]:
    st = pod["status"]
    return {s["name"]: s for s in (st.get("containerStatuses") or []) + (st.get("initContainerStatuses") or [])}


def the_pod(cluster: SimCluster, job_name: str) -> Obj:
    (pod,) = [p for p in cluster.store.list("pods", NS) if p["metadata"]["labels"].get("job-name") == job_name]
    return pod


def test_a_native_sidecar_is_stopped_once_the_job_container_exits(sim_clusters: SimClusters) -> None:
    cluster = sim_clusters.in_process(seed=3)
    cluster.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
                   job("native", True), job("regular", False)])
    cluster.advance(10)
    native = statuses(the_pod(cluster, "native"))
    assert "terminated" in native["work"]["state"] and "running" in native["shipper"]["state"]
    assert the_pod(cluster, "native")["status"]["phase"] == "Running"  # its sidecar is being stopped
    cluster.advance(60)
    pod = the_pod(cluster, "native")
    assert pod["status"]["phase"] == "Succeeded"
    # nc as PID 1 has no SIGTERM handler: killed when the 30 s grace period ends
    assert statuses(pod)["shipper"]["state"]["terminated"]["exitCode"] == 137
    events = [(e["reason"], e["message"]) for e in cluster.store.list("events", NS)
              if e["involvedObject"]["name"] == pod["metadata"]["name"]]
    assert ("Killing", "Stopping container shipper") in events
    done = cluster.store.get("jobs.batch", NS, "native")["status"]
    assert done["succeeded"] == 1 and any(c["type"] == "Complete" for c in done["conditions"])

    stuck = the_pod(cluster, "regular")
    assert stuck["status"]["phase"] == "Running"
    assert "terminated" in statuses(stuck)["work"]["state"] and "running" in statuses(stuck)["shipper"]["state"]
    assert cluster.store.get("jobs.batch", NS, "regular")["status"]["active"] == 1


def test_a_native_sidecar_starts_before_the_pod_containers(sim_clusters: SimClusters) -> None:
    cluster = sim_clusters.in_process(seed=3)
    cluster.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, job("native", True)])
    cluster.advance(10)
    pod = the_pod(cluster, "native")
    started = {s["name"]: s["state"].get("running", s["state"].get("terminated", {})).get("startedAt")
               for s in statuses(pod).values()}
    assert started["shipper"] <= started["work"]
    assert {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Initialized"] == "True"


@pytest.mark.parametrize(("where", "policy", "message"), [
    ("containers", "Always", "spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers"),
    ("initContainers", "Never", 'spec.initContainers[0].restartPolicy: Unsupported value: "Never": supported values: "Always"'),
])
def test_the_api_server_takes_a_container_restart_policy_on_init_containers_only(
        sim_clusters: SimClusters, where: str, policy: str, message: str) -> None:
    kube = Kube.of(sim_clusters.served(seed=3))
    kube.ensure_namespace(NS)
    spec: Obj = {"containers": [dict(PRIMARY)]}
    spec.setdefault(where, [dict(PRIMARY)])[0]["restartPolicy"] = policy
    with pytest.raises(KubeError) as refused:
        kube.create("Pod", NS, {"metadata": {"name": "p"}, "spec": spec})
    assert message in str(refused.value)
