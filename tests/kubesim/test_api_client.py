"""The emulated API server through the official kubernetes client, over real HTTPS to a real
server process: CRUD, selectors, the three patch kinds, conflicts, Status bodies, RBAC, watch,
garbage collection, scale, tables on the virtual clock."""

from __future__ import annotations

import base64
import json
import threading
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from clusters.emulated import SimHandle
from farm.pytest_plugin import SimClusters
from tests.kubesim.standin import STANDIN, namespace_for


class Sim:
    def __init__(self, handle: SimHandle) -> None:
        self.handle = handle
        self.server = handle.endpoints.kubernetes
        self.api = handle.api_client()
        self.admin_auth: str = self.api.configuration.api_key["authorization"]  # "Bearer <token>"

    def client_for(self, token: str) -> client.ApiClient:
        cfg = client.Configuration()
        cfg.host = self.server
        cfg.ssl_ca_cert = str(self.handle.ca_file)
        cfg.api_key = {"authorization": f"Bearer {token}"}
        return client.ApiClient(cfg)


@pytest.fixture()
def sim(sim_clusters: SimClusters) -> Sim:
    return Sim(sim_clusters.served(cluster_factory=STANDIN))


@pytest.fixture()
def ns(sim: Sim, request: pytest.FixtureRequest) -> str:
    return namespace_for(request, sim.api)


def status_of(exc: ApiException) -> dict[str, Any]:
    return json.loads(exc.body)


def pod(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}], **spec}}


def deployment(name: str, env: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {
        "replicas": 2, "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
            {"name": "app", "image": "app:1", "env": env or [], "ports": [{"containerPort": 8080}]},
            {"name": "sidecar", "image": "envoy:1.29"}]}}}}


def test_configmap_crud_round_trip(sim: Sim, ns: str) -> None:
    core = client.CoreV1Api(sim.api)
    created = core.create_namespaced_config_map(ns, {"metadata": {"name": "cfg"}, "data": {"a": "1"}})
    assert created.metadata.uid and created.metadata.resource_version and created.metadata.namespace == ns
    created.data["b"] = "2"
    replaced = core.replace_namespaced_config_map("cfg", ns, created)
    assert replaced.data == {"a": "1", "b": "2"}
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
    assert [c.metadata.name for c in core.list_namespaced_config_map(ns).items] == ["cfg"]
    core.delete_namespaced_config_map("cfg", ns)
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("cfg", ns)
    assert err.value.status == 404


def test_label_and_field_selectors(sim: Sim, ns: str) -> None:
    core = client.CoreV1Api(sim.api)
    core.create_namespaced_pod(ns, pod("web-1", {"app": "web", "tier": "front"}))
    core.create_namespaced_pod(ns, pod("web-2", {"app": "web", "tier": "back"}))
    core.create_namespaced_pod(ns, pod("db-1", {"app": "db"}, nodeName="worker-1"))

    def names(**kw: str) -> list[str]:
        return [p.metadata.name for p in core.list_namespaced_pod(ns, **kw).items]

    assert names(label_selector="app=web") == ["web-1", "web-2"]
    assert names(label_selector="app=web,tier!=back") == ["web-1"]
    assert names(label_selector="tier in (front,back)") == ["web-1", "web-2"]
    assert names(label_selector="!tier") == ["db-1"]
    assert names(field_selector="metadata.name=web-2") == ["web-2"]
    assert names(field_selector="spec.nodeName=worker-1") == ["db-1"]
    assert names(field_selector="spec.nodeName!=worker-1", label_selector="tier") == ["web-1", "web-2"]
    with pytest.raises(ApiException) as err:
        core.list_namespaced_pod(ns, field_selector="spec.containers.image=nginx")
    assert err.value.status == 400 and status_of(err.value)["message"] == "field label not supported: spec.containers.image"
    across = [p.metadata.name for p in core.list_pod_for_all_namespaces(label_selector="app=db").items]
    assert "db-1" in across


def test_merge_patch(sim: Sim, ns: str) -> None:
    apps = client.AppsV1Api(sim.api)
    apps.create_namespaced_deployment(ns, deployment("web"))
    out = apps.patch_namespaced_deployment("web", ns, {"metadata": {"labels": {"team": "sre"}}, "spec": {"replicas": 5}},
                                           _content_type="application/merge-patch+json")
    assert out.spec.replicas == 5 and out.metadata.labels == {"team": "sre"}
    # A merge patch replaces lists whole.
    out = apps.patch_namespaced_deployment("web", ns, {"spec": {"template": {"spec": {"containers": [
        {"name": "only", "image": "x:1"}]}}}}, _content_type="application/merge-patch+json")
    assert [c.name for c in out.spec.template.spec.containers] == ["only"]
    out = apps.patch_namespaced_deployment("web", ns, {"metadata": {"labels": {"team": None}}},
                                           _content_type="application/merge-patch+json")
    assert not out.metadata.labels


def test_json_patch(sim: Sim, ns: str) -> None:
    apps = client.AppsV1Api(sim.api)
    apps.create_namespaced_deployment(ns, deployment("web", env=[{"name": "A", "value": "1"}]))
    out = apps.patch_namespaced_deployment("web", ns, [
        {"op": "replace", "path": "/spec/replicas", "value": 0},
        {"op": "add", "path": "/spec/template/spec/containers/0/env/-", "value": {"name": "B", "value": "2"}},
        {"op": "remove", "path": "/spec/template/spec/containers/1"},
        {"op": "test", "path": "/spec/template/spec/containers/0/image", "value": "app:1"},
    ])
    assert out.spec.replicas == 0
    assert [(e.name, e.value) for e in out.spec.template.spec.containers[0].env] == [("A", "1"), ("B", "2")]
    assert len(out.spec.template.spec.containers) == 1
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment("web", ns, [{"op": "test", "path": "/spec/replicas", "value": 9}])
    assert err.value.status == 422


def test_strategic_merge_patch_merges_lists_by_key(sim: Sim, ns: str) -> None:
    apps = client.AppsV1Api(sim.api)
    apps.create_namespaced_deployment(ns, deployment("web", env=[{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]))
    # What `kubectl set env deploy/web C=3 A-` sends.
    patch = {"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}],
        "containers": [{"name": "app", "$setElementOrder/env": [{"name": "B"}, {"name": "C"}],
                        "env": [{"name": "C", "value": "3"}, {"$patch": "delete", "name": "A"}]}]}}}}
    out = apps.patch_namespaced_deployment("web", ns, patch)  # a dict body goes as strategic merge
    app = out.spec.template.spec.containers[0]
    assert [c.name for c in out.spec.template.spec.containers] == ["app", "sidecar"]
    assert [(e.name, e.value) for e in app.env] == [("B", "2"), ("C", "3")]
    assert app.ports[0].container_port == 8080 and out.spec.template.spec.containers[1].image == "envoy:1.29"
    out = apps.patch_namespaced_deployment("web", ns, {"spec": {"template": {"spec": {"containers": [
        {"name": "sidecar", "image": "envoy:1.30"}]}}}})
    assert [c.image for c in out.spec.template.spec.containers] == ["app:1", "envoy:1.30"]
    out = apps.patch_namespaced_deployment("web", ns, {"spec": {"template": {"spec": {"containers": [
        {"name": "app", "ports": [{"containerPort": 9090}]}]}}}})
    assert [p.container_port for p in out.spec.template.spec.containers[0].ports] == [8080, 9090]
    out = apps.patch_namespaced_deployment("web", ns, {"spec": {"template": {"spec": {"containers": [
        {"name": "x", "image": "x:1"}, {"$patch": "replace"}]}}}})
    assert [c.name for c in out.spec.template.spec.containers] == ["x"]


def test_strategic_merge_patch_is_refused_for_custom_resources(sim: Sim, ns: str) -> None:
    custom = client.CustomObjectsApi(sim.api)
    custom.create_namespaced_custom_object("chaos-mesh.org", "v1alpha1", ns, "podchaos", {
        "apiVersion": "chaos-mesh.org/v1alpha1", "kind": "PodChaos", "metadata": {"name": "kill"},
        "spec": {"action": "pod-kill", "mode": "one", "selector": {"namespaces": [ns]}}})
    with pytest.raises(ApiException) as err:
        custom.patch_namespaced_custom_object("chaos-mesh.org", "v1alpha1", ns, "podchaos", "kill",
                                              {"spec": {"mode": "all"}},
                                              _content_type="application/strategic-merge-patch+json")
    assert err.value.status == 415
    out = custom.patch_namespaced_custom_object("chaos-mesh.org", "v1alpha1", ns, "podchaos", "kill",
                                                {"spec": {"mode": "all"}}, _content_type="application/merge-patch+json")
    assert out["spec"]["mode"] == "all"


def test_stale_resource_version_is_a_conflict(sim: Sim, ns: str) -> None:
    core = client.CoreV1Api(sim.api)
    first = core.create_namespaced_config_map(ns, {"metadata": {"name": "cfg"}, "data": {"a": "1"}})
    first.data["a"] = "2"
    core.replace_namespaced_config_map("cfg", ns, first)
    first.data["a"] = "3"
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_config_map("cfg", ns, first)  # still carries the old resourceVersion
    body = status_of(err.value)
    assert err.value.status == 409 and body["reason"] == "Conflict"
    assert "the object has been modified; please apply your changes to the latest version" in body["message"]
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map("cfg", ns, {"metadata": {"resourceVersion": first.metadata.resource_version},
                                                     "data": {"a": "4"}})
    assert err.value.status == 409
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "cfg"}})
    assert err.value.status == 409 and status_of(err.value)["reason"] == "AlreadyExists"
    assert status_of(err.value)["message"] == 'configmaps "cfg" already exists'


def test_not_found_and_invalid_status_bodies(sim: Sim, ns: str) -> None:
    core, apps = client.CoreV1Api(sim.api), client.AppsV1Api(sim.api)
    with pytest.raises(ApiException) as err:
        apps.read_namespaced_deployment("nope", ns)
    body = status_of(err.value)
    assert (body["kind"], body["code"], body["reason"]) == ("Status", 404, "NotFound")
    assert body["message"] == 'deployments.apps "nope" not found'
    assert body["details"] == {"name": "nope", "group": "apps", "kind": "deployments"}
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, {"metadata": {"name": "Bad_Name"}, "spec": {"containers": [{"name": "c"}]}})
    body = status_of(err.value)
    assert err.value.status == 422 and body["reason"] == "Invalid"
    assert {c["field"] for c in body["details"]["causes"]} == {"metadata.name", "spec.containers[0].image"}
    assert body["message"].startswith('Pod "Bad_Name" is invalid: [metadata.name: Invalid value: "Bad_Name"')
    bad = deployment("web")
    bad["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    with pytest.raises(ApiException) as err:
        apps.create_namespaced_deployment(ns, bad)
    assert "`selector` does not match template `labels`" in status_of(err.value)["message"]
    greedy = deployment("greedy")
    greedy["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}
    greedy["spec"]["template"]["spec"]["containers"][1]["resources"] = {"limits": {"memory": "1gb"}}
    with pytest.raises(ApiException) as err:
        apps.create_namespaced_deployment(ns, greedy)
    causes = {c["field"]: c["message"] for c in status_of(err.value)["details"]["causes"]}
    assert causes == {
        "spec.template.spec.containers[0].resources.requests": 'Invalid value: "2": must be less than or equal to cpu limit of 1',
        "spec.template.spec.containers[1].resources.limits[memory]": 'Invalid value: "1gb": quantities must match the '
                                                                     "regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"}
    apps.create_namespaced_deployment(ns, deployment("web"))
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment("web", ns, {"spec": {"strategy": {"type": "Recreate"}}})
    assert "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'" in \
        status_of(err.value)["message"]
    out = apps.patch_namespaced_deployment("web", ns, {"spec": {"strategy": {"type": "Recreate", "rollingUpdate": None}}})
    assert out.spec.strategy.type == "Recreate" and out.spec.strategy.rolling_update is None
    core.create_namespaced_pod(ns, pod("p"))
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod("p", ns, {"spec": {"containers": [{"name": "app", "env": [{"name": "X", "value": "1"}]}]}})
    assert err.value.status == 422 and "pod updates may not change fields" in status_of(err.value)["message"]
    out = core.patch_namespaced_pod("p", ns, {"spec": {"containers": [{"name": "app", "image": "nginx:1.26"}]}})
    assert out.spec.containers[0].image == "nginx:1.26"
    raw = sim.api.call_api("POST", f"{sim.server}/api/v1/namespaces/{ns}/pods/p",
                           {"Authorization": sim.admin_auth, "Content-Type": "application/json"},
                           body={"metadata": {"name": "p"}})
    raw.read()
    assert raw.status == 405 and json.loads(raw.data)["reason"] == "MethodNotAllowed"


def _scoped_token(sim: Sim, ns: str) -> str:
    core, rbac = client.CoreV1Api(sim.api), client.RbacAuthorizationV1Api(sim.api)
    core.create_namespaced_service_account(ns, {"metadata": {"name": "agent"}})
    rbac.create_namespaced_role(ns, {"metadata": {"name": "agent"}, "rules": [
        {"apiGroups": ["", "apps"], "resources": ["pods", "pods/log", "deployments"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["allowed"], "verbs": ["get"]}]})
    rbac.create_namespaced_role_binding(ns, {"metadata": {"name": "agent"},
                                             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "agent"},
                                             "subjects": [{"kind": "ServiceAccount", "name": "agent", "namespace": ns}]})
    core.create_namespaced_secret(ns, {"metadata": {"name": "agent-token", "annotations": {
        "kubernetes.io/service-account.name": "agent"}}, "type": "kubernetes.io/service-account-token"})
    secret = core.read_namespaced_secret("agent-token", ns)
    return base64.b64decode(secret.data["token"]).decode()


def test_rbac_scopes_a_service_account_token_to_its_namespace(sim: Sim, ns: str) -> None:
    token = _scoped_token(sim, ns)
    client.CoreV1Api(sim.api).create_namespaced_pod(ns, pod("mine"))
    client.CoreV1Api(sim.api).create_namespaced_config_map(ns, {"metadata": {"name": "allowed"}})
    client.CoreV1Api(sim.api).create_namespaced_config_map(ns, {"metadata": {"name": "hidden"}})
    scoped = sim.client_for(token)
    core, custom = client.CoreV1Api(scoped), client.CustomObjectsApi(scoped)
    assert [p.metadata.name for p in core.list_namespaced_pod(ns).items] == ["mine"]
    assert core.read_namespaced_config_map("allowed", ns).metadata.name == "allowed"
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("hidden", ns)
    assert err.value.status == 403
    with pytest.raises(ApiException) as err:
        core.list_namespaced_pod("default")
    body = status_of(err.value)
    assert err.value.status == 403 and body["reason"] == "Forbidden"
    assert body["message"] == (f'pods is forbidden: User "system:serviceaccount:{ns}:agent" cannot list resource '
                               f'"pods" in API group "" in the namespace "default"')
    with pytest.raises(ApiException) as err:
        custom.list_namespaced_custom_object("chaos-mesh.org", "v1alpha1", ns, "podchaos")
    assert err.value.status == 403 and 'in API group "chaos-mesh.org"' in status_of(err.value)["message"]
    with pytest.raises(ApiException) as err:
        core.list_pod_for_all_namespaces()
    assert "at the cluster scope" in status_of(err.value)["message"]
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_pod("mine", ns)
    assert err.value.status == 403
    with pytest.raises(ApiException) as err:
        client.CoreV1Api(sim.client_for("not-a-token")).list_namespaced_pod(ns)
    assert err.value.status == 401
    # Deleting the account revokes its token.
    client.CoreV1Api(sim.api).delete_namespaced_service_account("agent", ns)
    with pytest.raises(ApiException) as err:
        core.list_namespaced_pod(ns)
    assert err.value.status == 401


def test_self_subject_access_review(sim: Sim, ns: str) -> None:
    scoped = client.AuthorizationV1Api(sim.client_for(_scoped_token(sim, ns)))

    def can(verb: str, resource: str, namespace: str, group: str = "") -> bool:
        review = scoped.create_self_subject_access_review({"spec": {"resourceAttributes": {
            "verb": verb, "resource": resource, "namespace": namespace, "group": group}}})
        return bool(review.status.allowed)

    assert can("list", "pods", ns) and not can("delete", "pods", ns)
    assert not can("list", "pods", "default") and not can("get", "podchaos", ns, "chaos-mesh.org")


def test_watch_streams_changes_after_a_resource_version(sim: Sim, ns: str) -> None:
    core = client.CoreV1Api(sim.api)
    listing = core.list_namespaced_config_map(ns)

    def writer() -> None:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "w", "labels": {"k": "v"}}})
        core.patch_namespaced_config_map("w", ns, {"data": {"x": "1"}})
        core.create_namespaced_config_map(ns, {"metadata": {"name": "other"}})
        core.delete_namespaced_config_map("w", ns)

    threading.Timer(0.2, writer).start()
    seen = []
    for event in watch.Watch().stream(core.list_namespaced_config_map, ns, label_selector="k=v",
                                      resource_version=listing.metadata.resource_version, timeout_seconds=3):
        seen.append((event["type"], event["object"].metadata.name))
        if event["type"] == "DELETED":
            break
    assert seen == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]
    # Without a resourceVersion a watch starts with the current objects.
    first = next(iter(watch.Watch().stream(core.list_namespaced_config_map, ns, timeout_seconds=1)))
    assert (first["type"], first["object"].metadata.name) == ("ADDED", "other")


def test_deleting_an_owner_collects_its_dependents(sim: Sim, ns: str) -> None:
    core, apps = client.CoreV1Api(sim.api), client.AppsV1Api(sim.api)

    def tree(name: str) -> None:
        d = apps.create_namespaced_deployment(ns, deployment(name))
        rs_body = {"metadata": {"name": f"{name}-abc", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": name, "uid": d.metadata.uid, "controller": True}]},
            "spec": deployment(name)["spec"]}
        rs = apps.create_namespaced_replica_set(ns, rs_body)
        body = pod(f"{name}-abc-1", {"app": name})
        body["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs.metadata.name,
                                                "uid": rs.metadata.uid, "controller": True}]
        core.create_namespaced_pod(ns, body)

    tree("gone")
    apps.delete_namespaced_deployment("gone", ns)
    assert apps.list_namespaced_replica_set(ns).items == [] and core.list_namespaced_pod(ns).items == []
    tree("kept")
    apps.delete_namespaced_deployment("kept", ns, propagation_policy="Orphan")
    rs = apps.list_namespaced_replica_set(ns).items
    assert [r.metadata.name for r in rs] == ["kept-abc"] and not rs[0].metadata.owner_references
    assert [p.metadata.name for p in core.list_namespaced_pod(ns).items] == ["kept-abc-1"]
    core.delete_namespace(ns)
    assert core.list_namespaced_pod(ns).items == [] and apps.list_namespaced_replica_set(ns).items == []


def test_scale_subresource(sim: Sim, ns: str) -> None:
    apps = client.AppsV1Api(sim.api)
    apps.create_namespaced_deployment(ns, deployment("web"))
    scale = apps.read_namespaced_deployment_scale("web", ns)
    assert scale.spec.replicas == 2 and scale.status.selector == "app=web"
    out = apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": 4}},
                                                 _content_type="application/merge-patch+json")
    assert out.spec.replicas == 4 and apps.read_namespaced_deployment("web", ns).spec.replicas == 4
    scale = apps.read_namespaced_deployment_scale("web", ns)
    scale.spec.replicas = 1
    assert apps.replace_namespaced_deployment_scale("web", ns, scale).spec.replicas == 1
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": -1}},
                                               _content_type="application/merge-patch+json")
    assert err.value.status == 422


def test_status_subresource_is_separate(sim: Sim, ns: str) -> None:
    apps = client.AppsV1Api(sim.api)
    apps.create_namespaced_deployment(ns, deployment("web"))
    apps.patch_namespaced_deployment_status("web", ns, {"status": {"replicas": 2, "readyReplicas": 1}})
    # A write to the main resource cannot change status.
    out = apps.patch_namespaced_deployment("web", ns, {"status": {"readyReplicas": 2}, "spec": {"replicas": 3}})
    assert out.status.ready_replicas == 1 and out.spec.replicas == 3 and out.metadata.generation == 2


def test_tables_age_on_the_virtual_clock(sim: Sim, ns: str) -> None:
    core = client.CoreV1Api(sim.api)
    body = pod("crash")
    created = core.create_namespaced_pod(ns, body)
    core.patch_namespaced_pod_status("crash", ns, {"status": {"phase": "Running", "podIP": "10.244.1.7",
        "containerStatuses": [{"name": "app", "ready": False, "restartCount": 4, "image": "nginx:1.25", "imageID": "",
                               "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                               "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                                                            "finishedAt": created.metadata.creation_timestamp.strftime("%Y-%m-%dT%H:%M:%SZ")}}}]}})
    sim.handle.advance(200)
    raw = sim.api.call_api("GET", f"{sim.server}/api/v1/namespaces/{ns}/pods",
                           {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io",
                            "Authorization": sim.admin_auth})
    raw.read()
    table = json.loads(raw.data)
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"] if c["priority"] == 0] == ["Name", "Ready", "Status", "Restarts", "Age"]
    cells = table["rows"][0]["cells"]
    assert cells[:5] == ["crash", "0/1", "CrashLoopBackOff", "4 (3m20s ago)", "3m20s"]
    assert cells[5] == "10.244.1.7"
    assert table["rows"][0]["object"]["metadata"]["name"] == "crash"


def test_exec_over_websocket(sim: Sim, ns: str) -> None:
    from kubernetes.stream import stream

    core = client.CoreV1Api(sim.api)
    core.create_namespaced_pod(ns, pod("shell", nodeName="worker-1"))
    out = stream(core.connect_get_namespaced_pod_exec, "shell", ns, command=["echo", "hi", "there"],
                 stderr=True, stdin=False, stdout=True, tty=False)
    assert out == "hi there\n"
    resp = stream(core.connect_get_namespaced_pod_exec, "shell", ns, command=["fail", "4"], stderr=True,
                  stdin=False, stdout=True, tty=False, _preload_content=False)
    resp.run_forever(timeout=5)
    assert resp.returncode == 4 and resp.read_stderr() == "failing with 4\n"


def test_port_forward_over_the_websocket_channel_protocol(sim_clusters: SimClusters,
                                                         request: pytest.FixtureRequest) -> None:
    """The Python client's port-forward: v4.channel.k8s.io, a data and an error channel per port,
    each opened by the port in 2 bytes little-endian; one connection carries keep-alive requests.
    On the emulator itself (the stand-in has no kubelet to forward to)."""
    from kubernetes.stream import portforward

    sim = Sim(sim_clusters.served(warmup=0))
    ns = namespace_for(request, sim.api)
    core = client.CoreV1Api(sim.api)
    core.create_namespaced_pod(ns, pod("web"))
    for _ in range(24):
        if core.read_namespaced_pod("web", ns).status.phase == "Running":
            break
        sim.handle.advance(5)
    forwarded = portforward(core.connect_get_namespaced_pod_portforward, "web", ns, ports="80")
    sock = forwarded.socket(80)
    sock.settimeout(10)
    received = b""
    for path in ("/", "/missing"):
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: web\r\n\r\n".encode())
        while b"</html>\n" not in received and b"not found\n" not in received:
            chunk = sock.recv(65536)
            assert chunk, received
            received += chunk
        head, _, body = received.partition(b"\r\n\r\n")
        if path == "/":
            assert head.startswith(b"HTTP/1.1 200 OK") and b"<h1>Welcome to nginx!</h1>" in body
        else:
            assert head.startswith(b"HTTP/1.1 404")
        received = b""
    sock.close()
    forwarded.close()
    assert forwarded.error(80) is None


def test_a_webhook_without_endpoints_refuses_matching_requests(sim: Sim, ns: str) -> None:
    core = client.CoreV1Api(sim.api)
    admission = client.AdmissionregistrationV1Api(sim.api)
    core.create_namespace({"metadata": {"name": f"{ns}-hook"}})
    core.create_namespaced_service(f"{ns}-hook", {"metadata": {"name": "policy"}, "spec": {"ports": [{"port": 443}]}})
    admission.create_validating_webhook_configuration({
        "metadata": {"name": f"{ns}-policy"},
        "webhooks": [{"name": "pods.policy.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                      "clientConfig": {"service": {"namespace": f"{ns}-hook", "name": "policy", "path": "/validate"}},
                      "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                      "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]}]})
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, pod("blocked"))
    body = status_of(err.value)
    assert err.value.status == 500 and body["reason"] == "InternalError"
    assert body["message"] == (
        'Internal error occurred: failed calling webhook "pods.policy.example.com": failed to call webhook: '
        f'Post "https://policy.{ns}-hook.svc:443/validate?timeout=10s": no endpoints available for service "policy"')
    core.create_namespaced_config_map(ns, {"metadata": {"name": "not-a-pod"}})  # other resources pass
    core.create_namespaced_pod(f"{ns}-hook", pod("elsewhere"))  # other namespaces pass
    core.create_namespaced_endpoints(f"{ns}-hook", {"metadata": {"name": "policy"}, "subsets": [
        {"addresses": [{"ip": "10.244.0.9"}], "ports": [{"port": 443}]}]})
    assert core.create_namespaced_pod(ns, pod("admitted")).metadata.name == "admitted"
    admission.delete_validating_webhook_configuration(f"{ns}-policy")


def test_events_k8s_io_v1_is_a_view_of_core_events(sim: Sim, ns: str) -> None:
    core, events = client.CoreV1Api(sim.api), client.EventsV1Api(sim.api)
    core.create_namespaced_event(ns, {"metadata": {"name": "geo.1"}, "type": "Warning", "reason": "BackOff",
                                      "message": "Back-off restarting failed container", "count": 3,
                                      "involvedObject": {"kind": "Pod", "name": "geo", "namespace": ns},
                                      "source": {"component": "kubelet", "host": "worker-1"},
                                      "firstTimestamp": "2026-01-05T09:00:00Z", "lastTimestamp": "2026-01-05T09:01:00Z"})
    listed = events.list_namespaced_event(ns).items
    assert [(e.reason, e.note, e.regarding.name, e.deprecated_count, e.reporting_controller) for e in listed] == [
        ("BackOff", "Back-off restarting failed container", "geo", 3, "kubelet")]
    events.create_namespaced_event(ns, {"metadata": {"name": "geo.2"}, "eventTime": "2026-01-05T09:02:00.000000Z",
                                        "reportingController": "farm-test", "reportingInstance": "t1",
                                        "action": "Check", "reason": "Checked", "type": "Normal", "note": "ok",
                                        "regarding": {"kind": "Pod", "name": "geo", "namespace": ns}})
    assert core.read_namespaced_event("geo.2", ns).message == "ok"


def test_list_pages_with_limit_and_continue(sim: Sim, ns: str) -> None:
    core = client.CoreV1Api(sim.api)
    for i in range(5):
        core.create_namespaced_config_map(ns, {"metadata": {"name": f"cm-{i}"}})
    seen, token, pages = [], None, 0
    while True:
        page = core.list_namespaced_config_map(ns, limit=2, _continue=token)
        seen += [c.metadata.name for c in page.items]
        pages += 1
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count == 5 - len(seen)
    assert (seen, pages) == ([f"cm-{i}" for i in range(5)], 3)
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map(ns, limit=2, _continue="garbage")
    assert err.value.status == 410
