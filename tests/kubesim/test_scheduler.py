"""The emulated scheduler's node filters that decide where stateful and pinned pods can go:
required node affinity (matchExpressions In/NotIn/Exists/DoesNotExist/Gt/Lt, matchFields, terms
ORed, ANDed with nodeSelector) and volume node affinity (a static PV pinned to a node, and
local-path volumes pinned to the node their first consumer landed on), with the FailedScheduling
messages kube-scheduler writes; and a network-attached (EBS CSI) volume, which pins nothing and
follows its pod once the old pod lets go of it (Multi-Attach error until then)."""

from __future__ import annotations

import pytest

from kubesim.cluster import SimCluster
from kubesim.store import Obj
from farm.pytest_plugin import SimClusters

NS = "demo"
TAINT = "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }"
PREEMPT = "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."


@pytest.fixture
def cluster(sim_clusters: SimClusters) -> SimCluster:
    base = sim_clusters.in_process(seed=4)
    base.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])

    def label(name: str, labels: dict[str, str]) -> None:
        def edit(o: Obj) -> None:
            o["metadata"]["labels"].update(labels)
        base.store.mutate("nodes", "", name, edit)
    label("sim-worker", {"disktype": "hdd", "generation": "3"})
    label("sim-worker2", {"disktype": "ssd", "generation": "5", "zone": "b"})
    label("sim-worker3", {"disktype": "ssd", "generation": "2"})
    return base


def deployment(name: str, replicas: int = 1, **pod_spec: object) -> dict:
    labels = {"app": name}
    spec = {"containers": [{"name": "web", "image": "nginx:1.25", "ports": [{"containerPort": 80}],
                            "resources": {"requests": {"cpu": "50m"}}}], **pod_spec}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": spec}}}


def required(*terms: dict) -> dict:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def pods(cluster: SimCluster, prefix: str) -> list[dict]:
    return [p for p in cluster.store.list("pods", NS) if p["metadata"]["name"].startswith(prefix + "-")]


def placed(cluster: SimCluster, prefix: str) -> set[str | None]:
    return {p["spec"].get("nodeName") for p in pods(cluster, prefix)}


def unschedulable(cluster: SimCluster, prefix: str) -> str:
    (pod,) = pods(cluster, prefix)
    assert not pod["spec"].get("nodeName") and pod["status"]["phase"] == "Pending"
    cond = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert cond["reason"] == "Unschedulable"
    events = [e for e in cluster.store.list("events", NS)
              if e["involvedObject"]["name"] == pod["metadata"]["name"] and e["reason"] == "FailedScheduling"]
    assert events and events[-1]["message"] == cond["message"] and events[-1]["type"] == "Warning"
    return cond["message"]


def test_required_node_affinity_operators(cluster: SimCluster) -> None:
    cluster.apply([
        deployment("fast", replicas=2, affinity=required({"matchExpressions": [
            {"key": "disktype", "operator": "In", "values": ["ssd"]},
            {"key": "generation", "operator": "Gt", "values": ["4"]}]})),
        deployment("old", affinity=required({"matchExpressions": [
            {"key": "generation", "operator": "Lt", "values": ["3"]}]})),
        deployment("not-hdd", replicas=3, affinity=required({"matchExpressions": [
            {"key": "disktype", "operator": "NotIn", "values": ["hdd"]},
            {"key": "disktype", "operator": "Exists"}]})),
        deployment("no-zone", replicas=3, affinity=required({"matchExpressions": [
            {"key": "zone", "operator": "DoesNotExist"},
            {"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"}]})),
    ])
    cluster.advance(20)
    assert placed(cluster, "fast") == {"sim-worker2"}  # both replicas: only one node qualifies
    assert placed(cluster, "old") == {"sim-worker3"}
    assert placed(cluster, "not-hdd") == {"sim-worker2", "sim-worker3"}
    assert placed(cluster, "no-zone") == {"sim-worker", "sim-worker3"}
    assert all(p["status"]["phase"] == "Running" for p in cluster.store.list("pods", NS))


def test_terms_are_ored_match_fields_pin_by_name_and_node_selector_still_applies(cluster: SimCluster) -> None:
    cluster.apply([
        deployment("either", affinity=required(
            {"matchExpressions": [{"key": "disktype", "operator": "In", "values": ["nvme"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["sim-worker"]}]})),
        # nodeSelector and the affinity must both hold: ssd (worker2, worker3) and generation < 3 (worker3)
        deployment("both", nodeSelector={"disktype": "ssd"}, affinity=required(
            {"matchExpressions": [{"key": "generation", "operator": "Lt", "values": ["3"]}]})),
        # a Gt on a label that is not a number matches nothing
        deployment("nan", affinity=required({"matchExpressions": [
            {"key": "disktype", "operator": "Gt", "values": ["1"]}]})),
    ])
    cluster.advance(20)
    assert placed(cluster, "either") == {"sim-worker"}
    assert placed(cluster, "both") == {"sim-worker3"}
    assert unschedulable(cluster, "nan") == (
        f"0/4 nodes are available: 1 {TAINT}, 3 node(s) didn't match Pod's node affinity/selector. {PREEMPT}")


def test_required_node_affinity_is_ignored_during_execution(cluster: SimCluster) -> None:
    cluster.apply([deployment("ssd-only", affinity=required(
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}))])
    cluster.advance(20)
    (pod,) = pods(cluster, "ssd-only")
    assert pod["spec"]["nodeName"] == "sim-worker2"

    def relabel(o: Obj) -> None:
        o["metadata"]["labels"]["zone"] = "c"
    cluster.store.mutate("nodes", "", "sim-worker2", relabel)
    cluster.advance(60)
    (still,) = pods(cluster, "ssd-only")
    assert still["metadata"]["uid"] == pod["metadata"]["uid"] and still["status"]["phase"] == "Running"
    cluster.store.delete("pods", NS, still["metadata"]["name"])  # its replacement is scheduled afresh
    cluster.advance(20)
    assert unschedulable(cluster, "ssd-only") == (
        f"0/4 nodes are available: 1 {TAINT}, 3 node(s) didn't match Pod's node affinity/selector. {PREEMPT}")


def static_volume(cluster: SimCluster, node: str) -> None:
    cluster.apply([
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "data-pv"},
         "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "manual",
                  "persistentVolumeReclaimPolicy": "Retain", "local": {"path": "/mnt/disks/ssd1"},
                  "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                      {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": NS},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "manual", "volumeName": "data-pv",
                  "resources": {"requests": {"storage": "5Gi"}}}},
    ])


def test_a_pod_goes_where_its_volume_is(cluster: SimCluster) -> None:
    static_volume(cluster, "sim-worker3")
    cluster.advance(5)
    assert cluster.store.get("persistentvolumeclaims", NS, "data")["status"]["phase"] == "Bound"
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    cluster.apply([deployment("db", volumes=volumes)])
    cluster.advance(20)
    assert placed(cluster, "db") == {"sim-worker3"}
    # Cordoned, the volume's node cannot take the replacement, and no other node may.
    cluster.store.mutate("nodes", "", "sim-worker3", lambda o: o["spec"].update(unschedulable=True))
    (pod,) = pods(cluster, "db")
    cluster.store.delete("pods", NS, pod["metadata"]["name"])
    cluster.advance(20)
    assert unschedulable(cluster, "db") == (
        f"0/4 nodes are available: 1 {TAINT}, 1 node(s) were unschedulable, 2 node(s) had volume node affinity "
        f"conflict. {PREEMPT}")
    cluster.store.mutate("nodes", "", "sim-worker3", lambda o: o["spec"].pop("unschedulable"))
    cluster.advance(70)  # retried on the next cluster change or within the scheduler's retry period
    assert placed(cluster, "db") == {"sim-worker3"}


def test_volume_and_node_affinity_that_disagree_leave_the_pod_pending(cluster: SimCluster) -> None:
    static_volume(cluster, "sim-worker")
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    cluster.apply([deployment("split", volumes=volumes, nodeSelector={"disktype": "ssd"})])
    cluster.advance(20)
    assert unschedulable(cluster, "split") == (
        # kube-scheduler sorts the "count reason" strings
        f"0/4 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 {TAINT}, "
        f"2 node(s) had volume node affinity conflict. {PREEMPT}")


def test_a_local_path_volume_pins_later_pods_to_its_first_consumers_node(cluster: SimCluster) -> None:
    cluster.apply([{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "cache", "namespace": NS},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}])
    cluster.advance(5)
    assert cluster.store.get("persistentvolumeclaims", NS, "cache")["status"]["phase"] == "Pending"  # WaitForFirstConsumer
    volumes = [{"name": "cache", "persistentVolumeClaim": {"claimName": "cache"}}]
    cluster.apply([deployment("first", volumes=volumes, affinity=required(
        {"matchExpressions": [{"key": "generation", "operator": "In", "values": ["5"]}]}))])
    cluster.advance(20)
    assert placed(cluster, "first") == {"sim-worker2"}
    claim = cluster.store.get("persistentvolumeclaims", NS, "cache")
    pv = cluster.store.get("persistentvolumes", "", claim["spec"]["volumeName"])
    assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["sim-worker2"]
    cluster.apply([deployment("second", volumes=volumes)])  # no affinity of its own: the volume decides
    cluster.advance(20)
    assert placed(cluster, "second") == {"sim-worker2"}


def test_a_network_volume_follows_its_pod_to_another_node_once_the_old_pod_lets_go(cluster: SimCluster) -> None:
    cluster.apply([
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "ebs-gp3"},
         "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Delete"},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "db-data", "namespace": NS},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "ebs-gp3",
                  "resources": {"requests": {"storage": "1Gi"}}}},
        deployment("db", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "db-data"}}]),
    ])
    cluster.advance(30)
    (first,) = pods(cluster, "db")
    old_node = first["spec"]["nodeName"]
    assert first["status"]["phase"] == "Running"
    pv = cluster.store.get("persistentvolumes", "", cluster.store.get("persistentvolumeclaims", NS, "db-data")["spec"]["volumeName"])
    assert pv["spec"]["csi"]["driver"] == "ebs.csi.aws.com" and "nodeAffinity" not in pv["spec"]

    def reasons(pod: dict) -> list[tuple[str, str]]:
        return [(e["reason"], e["message"]) for e in cluster.store.list("events", NS)
                if e["involvedObject"]["name"] == pod["metadata"]["name"]]
    assert ("SuccessfulAttachVolume", f'AttachVolume.Attach succeeded for volume "{pv["metadata"]["name"]}"') in reasons(first)
    # A rolling update off a cordoned node: the new pod cannot attach while the old one holds the volume.
    cluster.store.mutate("nodes", "", old_node, lambda o: o["spec"].update(unschedulable=True))
    cluster.store.mutate("deployments.apps", NS, "db",
                         lambda d: d["spec"]["template"]["metadata"].setdefault("annotations", {}).update(rev="2"))
    cluster.advance(30)
    (second,) = [p for p in pods(cluster, "db") if p["metadata"]["name"] != first["metadata"]["name"]]
    assert second["spec"]["nodeName"] not in (None, old_node) and second["status"]["phase"] == "Pending"
    assert ("FailedAttachVolume", f'Multi-Attach error for volume "{pv["metadata"]["name"]}" Volume is already used by '
            f'pod(s) {first["metadata"]["name"]}') in reasons(second)
    cluster.store.delete("pods", NS, first["metadata"]["name"])
    cluster.advance(30)
    moved = cluster.store.get("pods", NS, second["metadata"]["name"])
    assert moved["status"]["phase"] == "Running"
    assert ("SuccessfulAttachVolume", f'AttachVolume.Attach succeeded for volume "{pv["metadata"]["name"]}"') in reasons(moved)


def test_a_host_port_the_node_exporter_holds_fits_no_node(cluster: SimCluster) -> None:
    """The observability stack's node exporter holds host port 9100 on every node (the control plane
    too: it tolerates NoSchedule), so a pod asking for that host port fits nowhere; another host
    port is free."""
    exporters = cluster.store.list("pods", "observe")
    assert {p["spec"]["nodeName"] for p in exporters if p["status"]["phase"] == "Running"} == set(cluster.nodes.names)
    assert all(p["spec"]["containers"][0]["ports"][0]["hostPort"] == 9100 for p in exporters)
    taken = deployment("taken")
    taken["spec"]["template"]["spec"]["containers"][0]["ports"][0]["hostPort"] = 9100
    free = deployment("free")
    free["spec"]["template"]["spec"]["containers"][0]["ports"][0]["hostPort"] = 9200
    cluster.apply([taken, free])
    cluster.advance(20)
    assert unschedulable(cluster, "taken") == (
        f"0/4 nodes are available: 1 {TAINT}, 3 node(s) didn't have free ports for the requested pod ports. {PREEMPT}")
    (pod,) = pods(cluster, "free")
    assert pod["spec"]["nodeName"] and pod["status"]["phase"] == "Running"
