"""Field ownership and server-side apply, with kubectl 1.20 and 1.33 as real processes: every write
records metadata.managedFields (manager, operation, apiVersion, time, FieldsV1), `apply
--server-side` merges and takes ownership, a field another manager set differently is a 409
listing the conflicts unless `--force-conflicts`, a field its applier stops applying is removed,
and `--dry-run=server` and `diff --server-side` change nothing."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request

import pytest
from kubernetes import client

from kubesim.api import fieldmanager
from clusters.emulated import SimHandle
from farm.pytest_plugin import SimClusters
from tests.kubesim.servedtools import KUBECTLS, NEEDS_KUBECTL, VERSIONS, kubectl

pytestmark = NEEDS_KUBECTL

MANIFEST = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: %(ns)s
  labels: {%(labels)s}
spec:
  replicas: %(replicas)d
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: "nginx:1.25", ports: [{containerPort: 80}]}
"""


@pytest.fixture(scope="module")
def cluster(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served(seed=3)


def manifest(ns: str, replicas: int = 2, labels: str = "tier: web") -> str:
    return MANIFEST % {"ns": ns, "replicas": replicas, "labels": labels}


def managed(cluster: SimHandle, ns: str) -> list[dict]:
    code, out = kubectl(cluster, "1.20", "-n", ns, "get", "deploy", "web", "-o", "json")
    assert code == 0, out
    return json.loads(out)["metadata"]["managedFields"]


@pytest.mark.parametrize("version", VERSIONS)
def test_apply_server_side_owns_fields_and_conflicts_with_other_managers(cluster: SimHandle, version: str) -> None:
    ns = f"ssa-{version.replace('.', '-')}"
    client.CoreV1Api(cluster.api_client()).create_namespace({"metadata": {"name": ns}})
    code, out = kubectl(cluster, version, "apply", "--server-side", "-f", "-", stdin=manifest(ns))
    assert code == 0 and "deployment.apps/web serverside-applied" in out, out
    [entry] = managed(cluster, ns)
    assert (entry["manager"], entry["operation"], entry["apiVersion"], entry["fieldsType"]) == \
        ("kubectl", "Apply", "apps/v1", "FieldsV1")
    fields = entry["fieldsV1"]
    assert "f:replicas" in fields["f:spec"] and fields["f:metadata"]["f:labels"] == {"f:tier": {}}
    container = fields["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"web"}']
    assert container["."] == {} and "f:image" in container

    # another manager takes spec.replicas: re-applying the old value conflicts, as the real server answers
    assert kubectl(cluster, version, "-n", ns, "scale", "deploy/web", "--replicas=3")[0] == 0
    code, out = kubectl(cluster, version, "apply", "--server-side", "-f", "-", stdin=manifest(ns))
    assert code != 0 and "Apply failed with 1 conflict: conflict with" in out and ".spec.replicas" in out, out
    assert "--force-conflicts" in out  # kubectl's advice, printed from the 409's causes
    code, out = kubectl(cluster, version, "apply", "--server-side", "--force-conflicts", "-f", "-", stdin=manifest(ns))
    assert code == 0, out
    apps = client.AppsV1Api(cluster.api_client())
    assert apps.read_namespaced_deployment("web", ns).spec.replicas == 2
    scale = [e for e in managed(cluster, ns) if e.get("subresource") == "scale"]
    assert all("f:replicas" not in (e["fieldsV1"].get("f:spec") or {}) for e in scale)  # forced away

    # a label the applier stops applying is removed; a dry run and a diff change nothing
    code, out = kubectl(cluster, version, "apply", "--server-side", "-f", "-", stdin=manifest(ns, labels=""))
    assert code == 0, out
    assert "tier" not in (apps.read_namespaced_deployment("web", ns).metadata.labels or {})
    code, out = kubectl(cluster, version, "apply", "--server-side", "--dry-run=server", "-f", "-",
                        stdin=manifest(ns, replicas=5, labels=""))
    assert code == 0 and "(server dry run)" in out, out
    code, out = kubectl(cluster, version, "diff", "--server-side", "-f", "-", stdin=manifest(ns, replicas=5, labels=""))
    assert code == 1 and "+  replicas: 5" in out, out
    assert apps.read_namespaced_deployment("web", ns).spec.replicas == 2


def test_updates_record_their_manager_and_show_with_show_managed_fields(cluster: SimHandle) -> None:
    ns = "ssa-update"
    client.CoreV1Api(cluster.api_client()).create_namespace({"metadata": {"name": ns}})
    assert kubectl(cluster, "1.20", "apply", "-f", "-", stdin=manifest(ns))[0] == 0
    assert kubectl(cluster, "1.20", "-n", ns, "label", "deploy", "web", "owner=sre")[0] == 0
    entries = {(e["manager"], e["operation"]): e for e in managed(cluster, ns)}
    assert ("kubectl-client-side-apply", "Update") in entries, entries
    label = entries.get(("kubectl-label", "Update")) or entries.get(("kubectl", "Update"))
    assert label is not None and label["fieldsV1"]["f:metadata"]["f:labels"] == {"f:owner": {}}, entries
    assert "f:owner" not in entries[("kubectl-client-side-apply", "Update")]["fieldsV1"]["f:metadata"].get("f:labels", {})
    if KUBECTLS["1.33"].exists():
        code, out = kubectl(cluster, "1.33", "-n", ns, "get", "deploy", "web", "-o", "yaml")
        assert code == 0 and "managedFields" not in out  # kubectl >= 1.21 hides them by default
        code, out = kubectl(cluster, "1.33", "-n", ns, "get", "deploy", "web", "-o", "yaml", "--show-managed-fields")
        assert code == 0 and "managedFields:" in out and "fieldsType: FieldsV1" in out and "operation: Update" in out, out


def test_the_conflict_is_a_409_with_one_cause_per_field(cluster: SimHandle) -> None:
    ns = "ssa-raw"
    client.CoreV1Api(cluster.api_client()).create_namespace({"metadata": {"name": ns}})
    assert kubectl(cluster, "1.20", "apply", "--server-side", "--field-manager=team-a", "-f", "-", stdin=manifest(ns))[0] == 0
    body = json.loads(json.dumps({"apiVersion": "apps/v1", "kind": "Deployment",
                                  "metadata": {"name": "web", "labels": {"tier": "db"}}, "spec": {"replicas": 4}}))
    ctx = ssl.create_default_context(cafile=str(cluster.ca_file))
    req = urllib.request.Request(
        cluster.endpoints.kubernetes + f"/apis/apps/v1/namespaces/{ns}/deployments/web?fieldManager=team-b",
        method="PATCH", data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {cluster._admin_token}", "Content-Type": "application/apply-patch+yaml"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, context=ctx, timeout=30)
    status = json.loads(err.value.read())
    assert err.value.code == 409 and status["reason"] == "Conflict"
    assert status["message"].startswith('Apply failed with 2 conflicts: conflicts with "team-a" using apps/v1:\n')
    assert sorted(c["field"] for c in status["details"]["causes"]) == [".metadata.labels.tier", ".spec.replicas"]
    assert {c["reason"] for c in status["details"]["causes"]} == {"FieldManagerConflict"}


def test_field_paths_print_as_structured_merge_diff_does() -> None:
    path = ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"web"}', "f:ports",
            'k:{"containerPort":80,"protocol":"TCP"}', "f:containerPort")
    assert fieldmanager.path_string(path) == '.spec.template.spec.containers[name="web"].ports[containerPort=80,protocol="TCP"].containerPort'
    assert fieldmanager.path_string(("f:metadata", "f:finalizers", 'v:"a"')) == '.metadata.finalizers[="a"]'


def entries_of(obj: dict) -> dict[tuple[str, str, str], dict]:
    """managedFields by (manager, operation, subresource)."""
    return {(e["manager"], e["operation"], e.get("subresource", "")): e["fieldsV1"] for e in obj["metadata"]["managedFields"]}


def test_status_writes_record_the_component_or_client_that_made_them(cluster: SimHandle) -> None:
    ns = "ssa-status"
    client.CoreV1Api(cluster.api_client()).create_namespace({"metadata": {"name": ns}})
    assert kubectl(cluster, "1.20", "apply", "-f", "-", stdin=manifest(ns, replicas=1))[0] == 0
    client.CoreV1Api(cluster.api_client()).create_namespaced_pod(ns, {
        "metadata": {"name": "stuck"},
        "spec": {"nodeSelector": {"no-such": "node"}, "containers": [{"name": "web", "image": "nginx:1.25"}]}})
    cluster.advance(30)

    def get(*what: str) -> dict:
        code, out = kubectl(cluster, "1.20", "-n", ns, "get", *what, "-o", "json")  # 1.20 prints managedFields
        assert code == 0, out
        return json.loads(out)

    [pod] = get("pods", "-l", "app=web")["items"]
    fields = entries_of(pod)
    assert ("kube-controller-manager", "Update", "") in fields  # its ReplicaSet made it
    kubelet = fields[("kubelet", "Update", "status")]["f:status"]
    assert {"f:phase", "f:podIP", "f:containerStatuses", "f:startTime"} <= set(kubelet), kubelet
    assert 'k:{"type":"Ready"}' in kubelet["f:conditions"]
    for kind in ("deploy/web", "rs"):
        obj = get(kind)
        obj = obj["items"][0] if "items" in obj else obj
        status = entries_of(obj)[("kube-controller-manager", "Update", "status")]["f:status"]
        assert "f:availableReplicas" in status and "f:readyReplicas" in status, status
    scheduler = entries_of(get("pod", "stuck"))[("kube-scheduler", "Update", "status")]["f:status"]
    assert 'k:{"type":"PodScheduled"}' in scheduler["f:conditions"]

    # a client's own status write, under its field manager
    client.CoreV1Api(cluster.api_client()).patch_namespace_status(
        ns, {"status": {"conditions": [{"type": "NamespaceDeletionDiscoveryFailure", "status": "False",
                                        "reason": "ResourcesDiscovered", "message": "All resources successfully discovered"}]}},
        field_manager="sre-tool")
    code, out = kubectl(cluster, "1.20", "get", "namespace", ns, "-o", "json")
    assert code == 0, out
    mine = entries_of(json.loads(out))[("sre-tool", "Update", "status")]["f:status"]
    assert 'k:{"type":"NamespaceDeletionDiscoveryFailure"}' in mine["f:conditions"], mine
    if KUBECTLS["1.33"].exists():  # hidden unless asked for
        code, out = kubectl(cluster, "1.33", "-n", ns, "get", "pods", "-o", "yaml")
        assert code == 0 and "managedFields" not in out
        code, out = kubectl(cluster, "1.33", "-n", ns, "get", "pods", "-o", "yaml", "--show-managed-fields")
        assert code == 0 and "manager: kubelet" in out and "subresource: status" in out, out
