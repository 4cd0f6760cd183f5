"""The API server's documents and semantics kubectl depends on, with kubectl 1.20 (and 1.33 when
`.tools/kubectl-v33` holds it) as real processes against the served cluster: /openapi/v2 (JSON
and the protobuf kubectl asks for) so `explain`, client-side validation, `apply --dry-run=server`
and `diff` work; fieldValidation Strict/Warn; CRDs for the custom kinds (the admin's, not the
agent's); SelfSubjectReview; one Kubernetes version throughout."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from kubernetes import client

from clusters.emulated import SimHandle
from farm.pytest_plugin import SimClusters
from tests.kubesim.servedtools import KUBECTLS, NEEDS_KUBECTL, VERSIONS, kubectl

pytestmark = NEEDS_KUBECTL

MANIFEST = """apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %(ns)s}
spec:
  replicas: %(replicas)d
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: "nginx:1.25", %(extra)s ports: [{containerPort: 80}]}
"""


@pytest.fixture(scope="module")
def cluster(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served(seed=2)


def namespace(cluster: SimHandle, name: str) -> str:
    client.CoreV1Api(cluster.api_client()).create_namespace({"metadata": {"name": name}})
    return name


def raw(cluster: SimHandle, method: str, path: str, body: object = None, accept: str = "application/json",
        ) -> tuple[int, dict[str, str], bytes]:
    ctx = ssl.create_default_context(cafile=str(cluster.ca_file))
    req = urllib.request.Request(cluster.endpoints.kubernetes + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {cluster._admin_token}", "Accept": accept,
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def test_openapi_v2_describes_every_served_kind_in_json_and_protobuf(cluster: SimHandle) -> None:
    status, _, body = raw(cluster, "GET", "/openapi/v2")
    doc = json.loads(body)
    assert status == 200
    tagged = {(g["group"], g["kind"]) for d in doc["definitions"].values() for g in d.get("x-kubernetes-group-version-kind", [])}
    assert {("apps", "Deployment"), ("", "Pod"), ("batch", "CronJob"), ("chaos-mesh.org", "PodChaos")} <= tagged
    assert ("sim.farm.io", "NodeFault") not in tagged  # the farm's own kinds stay out of what agents read
    patch = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert {"dryRun", "fieldValidation", "fieldManager"} <= {p["name"] for p in patch["parameters"]}
    containers = doc["definitions"]["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    status, headers, pb = raw(cluster, "GET", "/openapi/v2", accept="application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
    assert status == 200 and "protobuf" in headers["Content-Type"] and pb[:2] == b"\x0a\x03" and b"io.k8s.api.apps.v1.Deployment" in pb


@pytest.mark.parametrize("version", VERSIONS)
def test_explain_dry_run_and_diff(cluster: SimHandle, version: str, tmp_path: Path) -> None:
    ns = namespace(cluster, f"explain-{version.replace('.', '-')}")
    code, out = kubectl(cluster, version, "explain", "deployment.spec.replicas")
    assert code == 0 and "Number of desired pods" in out and "<integer>" in out, out
    manifest = tmp_path / "web.yaml"
    manifest.write_text(MANIFEST % {"ns": ns, "replicas": 2, "extra": ""})
    assert kubectl(cluster, version, "apply", "-f", str(manifest))[0] == 0
    code, out = kubectl(cluster, version, "apply", "--dry-run=server", "-f", str(manifest))
    assert code == 0 and "(server dry run)" in out, out
    manifest.write_text(MANIFEST % {"ns": ns, "replicas": 5, "extra": ""})
    code, out = kubectl(cluster, version, "apply", "--dry-run=server", "-f", str(manifest))
    assert code == 0 and "configured (server dry run)" in out, out
    code, out = kubectl(cluster, version, "diff", "-f", str(manifest))
    assert code == 1 and "-  replicas: 2" in out and "+  replicas: 5" in out, out
    d = client.AppsV1Api(cluster.api_client()).read_namespaced_deployment("web", ns)
    assert d.spec.replicas == 2  # neither the dry run nor the diff wrote anything


@pytest.mark.parametrize("version", VERSIONS)
def test_an_unknown_field_is_refused(cluster: SimHandle, version: str, tmp_path: Path) -> None:
    # 1.20 validates against the schema itself; 1.33 asks the server (fieldValidation=Strict).
    ns = namespace(cluster, f"strict-{version.replace('.', '-')}")
    manifest = tmp_path / "web.yaml"
    manifest.write_text(MANIFEST % {"ns": ns, "replicas": 1, "extra": "bogusField: 1,"})
    code, out = kubectl(cluster, version, "apply", "-f", str(manifest))
    assert code != 0 and "bogusField" in out and "unknown field" in out, out
    assert not client.AppsV1Api(cluster.api_client()).list_namespaced_deployment(ns).items


def test_field_validation_strict_refuses_and_warn_drops_with_a_warning(cluster: SimHandle) -> None:
    ns = namespace(cluster, "fieldvalidation")
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "colour": "red"}, "data": {"k": "v"}}
    status, _, body = raw(cluster, "POST", f"/api/v1/namespaces/{ns}/configmaps?fieldValidation=Strict", cm)
    assert status == 400 and 'strict decoding error: unknown field "metadata.colour"' in json.loads(body)["message"]
    status, headers, body = raw(cluster, "POST", f"/api/v1/namespaces/{ns}/configmaps", cm)
    assert status == 201 and headers["Warning"] == '299 - "unknown field \\"metadata.colour\\""'
    assert "colour" not in json.loads(body)["metadata"]
    status, _, body = raw(cluster, "POST", f"/api/v1/namespaces/{ns}/configmaps?fieldValidation=Sloppy", cm)
    assert status == 400 and "fieldValidation" in json.loads(body)["message"]


def test_crds_list_the_custom_kinds_for_the_admin_only(cluster: SimHandle) -> None:
    code, out = kubectl(cluster, "1.20", "get", "crd", "-o", "name")
    crds = set(out.split())
    kinds = {"podchaos", "networkchaos", "iochaos", "stresschaos", "timechaos", "kernelchaos", "httpchaos", "dnschaos",
             "schedules", "workflows"}
    assert code == 0 and {f"customresourcedefinition.apiextensions.k8s.io/{k}.chaos-mesh.org" for k in kinds} <= crds
    assert "customresourcedefinition.apiextensions.k8s.io/tidbclusters.pingcap.com" in crds
    code, out = kubectl(cluster, "1.20", "api-resources", "--api-group=chaos-mesh.org", "-o", "name")
    assert {f"{k}.chaos-mesh.org" for k in kinds} <= set(out.split())
    namespace(cluster, "agent-ns")
    code, out = kubectl(cluster, "1.20", "get", "crd", kubeconfig=cluster.agent_kubeconfig("agent-ns"))
    assert code != 0 and "forbidden" in out.lower(), out


def test_self_subject_review_and_one_version_throughout(cluster: SimHandle) -> None:
    status, _, body = raw(cluster, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                          {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    assert status == 201 and "system:masters" in json.loads(body)["status"]["userInfo"]["groups"]
    if KUBECTLS["1.33"].exists():
        namespace(cluster, "whoami")
        code, out = kubectl(cluster, "1.33", "auth", "whoami", kubeconfig=cluster.agent_kubeconfig("whoami"))
        assert code == 0 and "system:serviceaccount:whoami:" in out, out
    server = json.loads(raw(cluster, "GET", "/version")[2])["gitVersion"]
    kubelets = {n.status.node_info.kubelet_version for n in client.CoreV1Api(cluster.api_client()).list_node().items}
    assert kubelets == {server}


def test_a_cbor_body_is_refused_as_an_unsupported_media_type(cluster: SimHandle) -> None:
    # client-go falls back to JSON after a 415 to CBOR (and only to CBOR): the server says which types it accepts
    ctx = ssl.create_default_context(cafile=str(cluster.ca_file))
    req = urllib.request.Request(cluster.endpoints.kubernetes + "/api/v1/namespaces/default/configmaps", method="POST",
                                 data=b"\xd9\xd9\xf7\xa0", headers={
                                     "Authorization": f"Bearer {cluster._admin_token}", "Content-Type": "application/cbor"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, context=ctx, timeout=30)
    status = json.loads(err.value.read())
    assert err.value.code == 415 and status["reason"] == "UnsupportedMediaType" and "application/json" in status["message"]


def test_openapi_v3_index_and_group_version_documents(cluster: SimHandle) -> None:
    status, _, body = raw(cluster, "GET", "/openapi/v3")
    index = json.loads(body)["paths"]
    assert status == 200 and {"api/v1", "apis/apps/v1", "apis/batch/v1", "apis/chaos-mesh.org/v1alpha1"} <= set(index)
    assert not any("sim.farm.io" in gv for gv in index)
    url = index["apis/apps/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/apis/apps/v1?hash=") and len(url.split("hash=")[1]) == 128
    status, headers, body = raw(cluster, "GET", url)
    doc = json.loads(body)
    assert status == 200 and doc["openapi"] == "3.0.0" and "immutable" in headers["Cache-Control"]
    deployment = doc["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"]
    assert deployment["x-kubernetes-group-version-kind"] == [{"group": "apps", "kind": "Deployment", "version": "v1"}]
    assert "io.k8s.api.core.v1.Probe" in doc["components"]["schemas"]  # what the kind reaches is in the document
    assert "/apis/apps/v1/namespaces/{namespace}/deployments/{name}" in doc["paths"]
    refs = json.dumps(doc)
    assert "#/definitions/" not in refs and "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in refs
    assert raw(cluster, "GET", "/openapi/v3/apis/no.such.group/v1")[0] == 404


@pytest.mark.parametrize("version", VERSIONS)
def test_explain_a_nested_field(cluster: SimHandle, version: str) -> None:
    code, out = kubectl(cluster, version, "explain", "deployment.spec.template.spec.containers.livenessProbe")
    assert code == 0 and "Minimum consecutive failures for the probe" in out and "periodSeconds" in out, out
    if version == "1.33":  # from /openapi/v3, in the format kubectl prints it with
        assert "GROUP:      apps" in out and "FIELD: livenessProbe <Probe>" in out and "httpGet\t<HTTPGetAction>" in out, out
    else:  # from /openapi/v2
        assert "RESOURCE: livenessProbe <Object>" in out, out
