"""Debian's kubectl 1.20 as a real process against the emulated API server (stand-in cluster, no
controllers): get (table, wide, yaml, json, -l, -w), describe, logs, scale, set env, patch,
rollout restart, delete, apply -f, auth can-i."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from clusters.emulated import SimHandle, write_kubeconfig
from farm.pytest_plugin import SimClusters
from tests.kubesim.standin import STANDIN, namespace_for
from tests.conftest import KUBECTLS

KUBECTL = KUBECTLS["1.20"]

pytestmark = [pytest.mark.kubectl,
              pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl 1.20 is installed by the test setup in .tools")]


class Kubectl:
    def __init__(self, handle: SimHandle) -> None:
        self.handle, self.tmp = handle, handle.workdir
        self.kubeconfig = handle.kubeconfig
        self.env = {"PATH": f"{KUBECTL.parent}:/usr/bin:/bin", "HOME": str(self.tmp), "KUBECONFIG": str(self.kubeconfig)}
        self.api = handle.api_client()
        assert shutil.which("kubectl", path=self.env["PATH"]) == str(KUBECTL)

    def __call__(self, *args: str, check: bool = True, kubeconfig: Path | None = None, stdin: str | None = None) -> str:
        env = dict(self.env, KUBECONFIG=str(kubeconfig or self.kubeconfig))
        proc = subprocess.run(["kubectl", *args], env=env, capture_output=True, text=True, timeout=60, input=stdin)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
        return proc.stdout if check else proc.stdout + proc.stderr


@pytest.fixture()
def kubectl(sim_clusters: SimClusters) -> Kubectl:
    return Kubectl(sim_clusters.served(cluster_factory=STANDIN))


@pytest.fixture()
def ns(kubectl: Kubectl, request: pytest.FixtureRequest) -> str:
    return namespace_for(request, kubectl.api)


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def make_pod(kubectl: Kubectl, ns: str, name: str, labels: dict[str, str], status: dict[str, Any],
             annotations: dict[str, str] | None = None) -> Any:
    core = client.CoreV1Api(kubectl.api)
    created = core.create_namespaced_pod(ns, {"metadata": {"name": name, "labels": labels, "annotations": annotations or {}},
                                              "spec": {"nodeName": "worker-1", "containers": [{"name": "app", "image": "app:1"}]}})
    core.patch_namespaced_pod_status(name, ns, {"status": status})
    return created


RUNNING = {"phase": "Running", "podIP": "10.244.1.5", "conditions": [{"type": "Ready", "status": "True"}],
           "containerStatuses": [{"name": "app", "ready": True, "restartCount": 0, "image": "app:1", "imageID": "",
                                  "state": {"running": {"startedAt": "2026-01-05T09:00:00Z"}}}]}
CRASHING = {"phase": "Running", "podIP": "10.244.1.6",
            "containerStatuses": [{"name": "app", "ready": False, "restartCount": 3, "image": "app:1", "imageID": "",
                                   "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}


def test_get_prints_server_side_tables(kubectl: Kubectl, ns: str) -> None:
    make_pod(kubectl, ns, "web-1", {"app": "web"}, RUNNING)
    make_pod(kubectl, ns, "web-2", {"app": "web"}, CRASHING)
    make_pod(kubectl, ns, "db-1", {"app": "db"}, {"phase": "Pending"})
    out = rows(kubectl("get", "pods", "-n", ns))
    assert out[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert {r[0]: r[1:4] for r in out[1:]} == {"db-1": ["0/1", "Pending", "0"], "web-1": ["1/1", "Running", "0"],
                                               "web-2": ["0/1", "CrashLoopBackOff", "3"]}
    wide = rows(kubectl("get", "pods", "-n", ns, "-o", "wide", "-l", "app=web"))
    assert wide[0][:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    assert [(r[0], r[5], r[6]) for r in wide[1:]] == [("web-1", "10.244.1.5", "worker-1"), ("web-2", "10.244.1.6", "worker-1")]
    assert [r[0] for r in rows(kubectl("get", "po", "-n", ns, "-l", "app!=web", "--no-headers"))] == ["db-1"]
    labels = rows(kubectl("get", "pods", "-n", ns, "--show-labels", "-l", "app=db"))
    assert labels[1][-1] == "app=db"
    all_ns = rows(kubectl("get", "pods", "-A", "-l", "app=db"))
    assert all_ns[0][0] == "NAMESPACE" and all_ns[1][:2] == [ns, "db-1"]
    nodes = rows(kubectl("get", "nodes"))
    assert nodes[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"] and nodes[1][:2] == ["worker-1", "Ready"]
    node = kubectl("describe", "node", "worker-1")
    assert re.search(r"Lease:\n\s+HolderIdentity:\s+worker-1\n", node)


def test_get_yaml_and_json(kubectl: Kubectl, ns: str) -> None:
    make_pod(kubectl, ns, "web-1", {"app": "web"}, RUNNING)
    doc = yaml.safe_load(kubectl("get", "pod", "web-1", "-n", ns, "-o", "yaml"))
    assert (doc["kind"], doc["metadata"]["name"], doc["status"]["podIP"]) == ("Pod", "web-1", "10.244.1.5")
    listing = json.loads(kubectl("get", "pods", "-n", ns, "-o", "json"))
    assert listing["kind"] == "List" and [i["metadata"]["name"] for i in listing["items"]] == ["web-1"]
    assert kubectl("get", "pod", "web-1", "-n", ns, "-o", "jsonpath={.spec.containers[0].image}") == "app:1"
    missing = kubectl("get", "pod", "nope", "-n", ns, check=False)
    assert 'Error from server (NotFound): pods "nope" not found' in missing


def test_describe_pod_shows_its_events(kubectl: Kubectl, ns: str) -> None:
    pod = make_pod(kubectl, ns, "web-1", {"app": "web"}, CRASHING)
    core = client.CoreV1Api(kubectl.api)
    for name, uid in (("web-1.1", pod.metadata.uid), ("other.1", "another-uid")):
        core.create_namespaced_event(ns, {
            "metadata": {"name": name}, "type": "Warning", "reason": "BackOff", "count": 7,
            "message": f"Back-off restarting failed container app in pod {name}",
            "involvedObject": {"kind": "Pod", "name": "web-1" if uid == pod.metadata.uid else "other",
                               "namespace": ns, "uid": uid, "fieldPath": "spec.containers{app}"},
            "source": {"component": "kubelet", "host": "worker-1"},
            "firstTimestamp": "2026-01-05T09:00:00Z", "lastTimestamp": "2026-01-05T09:00:00Z"})
    out = kubectl("describe", "pod", "web-1", "-n", ns)
    assert "Status:       Running" in out and "CrashLoopBackOff" in out and "Restart Count:  3" in out
    events = out.split("Events:", 1)[1]
    assert "Back-off restarting failed container app in pod web-1.1" in events and "other.1" not in events
    listed = rows(kubectl("get", "events", "-n", ns, "--field-selector", "involvedObject.name=web-1"))
    assert listed[0] == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert listed[1][1:4] == ["Warning", "BackOff", "pod/web-1"]


def _deployment(name: str, replicas: int = 2) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]}]}}}}


def test_describe_deployment_finds_its_replica_set(kubectl: Kubectl, ns: str) -> None:
    apps = client.AppsV1Api(kubectl.api)
    d = apps.create_namespaced_deployment(ns, _deployment("web"))
    apps.create_namespaced_replica_set(ns, {
        "metadata": {"name": "web-5d4f9", "labels": {"app": "web"},
                     "annotations": {"deployment.kubernetes.io/revision": "1"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                          "uid": d.metadata.uid, "controller": True, "blockOwnerDeletion": True}]},
        "spec": {**_deployment("web")["spec"]}})
    out = kubectl("describe", "deployment", "web", "-n", ns)
    assert re.search(r"Replicas:\s+2 desired", out) and re.search(r"\n\s+A:\s+1\n", out)
    assert "NewReplicaSet:   web-5d4f9" in out or "web-5d4f9" in out.split("OldReplicaSets", 1)[1]
    assert rows(kubectl("get", "rs", "-n", ns))[0] == ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]


def test_logs(kubectl: Kubectl, ns: str) -> None:
    make_pod(kubectl, ns, "web-1", {"app": "web"}, RUNNING,
             {"standin.test/log": "starting\nlistening on :8080\npanic: MONGO_URL is not set"})
    assert kubectl("logs", "web-1", "-n", ns) == "starting\nlistening on :8080\npanic: MONGO_URL is not set\n"
    assert kubectl("logs", "web-1", "-n", ns, "--tail=1", "-c", "app") == "panic: MONGO_URL is not set\n"
    # The stamp of a cluster whose clock starts at the host's: RFC 3339 in UTC, then the line.
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z panic: MONGO_URL is not set\n",
                        kubectl("logs", "web-1", "-n", ns, "--timestamps", "--tail=1"))
    previous = kubectl("logs", "web-1", "-n", ns, "--previous", check=False)
    assert 'previous terminated container "app" in pod "web-1" not found' in previous


def test_scale_set_env_patch_and_rollout_restart(kubectl: Kubectl, ns: str) -> None:
    apps = client.AppsV1Api(kubectl.api)
    apps.create_namespaced_deployment(ns, _deployment("web"))
    assert "deployment.apps/web scaled" in kubectl("scale", "deployment/web", "--replicas=5", "-n", ns)
    assert apps.read_namespaced_deployment("web", ns).spec.replicas == 5
    kubectl("set", "env", "deployment/web", "B=2", "-n", ns)
    kubectl("set", "env", "deployment/web", "A-", "-n", ns)
    kubectl("set", "image", "deployment/web", "app=app:2", "-n", ns)
    c = apps.read_namespaced_deployment("web", ns).spec.template.spec.containers[0]
    assert [(e.name, e.value) for e in c.env] == [("B", "2")] and c.image == "app:2"
    kubectl("patch", "deployment", "web", "-n", ns, "-p", '{"spec":{"template":{"spec":{"containers":[{"name":"app","resources":{"limits":{"memory":"256Mi"}}}]}}}}')
    kubectl("patch", "deployment", "web", "-n", ns, "--type=merge", "-p", '{"metadata":{"labels":{"team":"sre"}}}')
    kubectl("patch", "deployment", "web", "-n", ns, "--type=json", "-p", '[{"op":"replace","path":"/spec/replicas","value":3}]')
    d = apps.read_namespaced_deployment("web", ns)
    assert d.spec.template.spec.containers[0].resources.limits == {"memory": "256Mi"}
    assert d.metadata.labels == {"team": "sre"} and d.spec.replicas == 3
    assert "deployment.apps/web restarted" in kubectl("rollout", "restart", "deployment/web", "-n", ns)
    annotations = apps.read_namespaced_deployment("web", ns).spec.template.metadata.annotations
    assert "kubectl.kubernetes.io/restartedAt" in annotations


def test_delete_pod(kubectl: Kubectl, ns: str) -> None:
    make_pod(kubectl, ns, "web-1", {"app": "web"}, RUNNING)
    # no kubelet runs here to stop the containers: a graceful delete leaves the pod Terminating
    assert 'pod "web-1" deleted' in kubectl("delete", "pod", "web-1", "-n", ns, "--wait=false")
    assert client.CoreV1Api(kubectl.api).read_namespaced_pod("web-1", ns).metadata.deletion_timestamp
    assert "Terminating" in kubectl("get", "pod", "web-1", "-n", ns)
    kubectl("delete", "pod", "web-1", "-n", ns, "--grace-period=0", "--force")
    assert client.CoreV1Api(kubectl.api).list_namespaced_pod(ns).items == []


MANIFEST = """
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: "%s"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  replicas: 1
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
      - {name: api, image: "api:%s", ports: [{containerPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: api}
spec:
  selector: {app: api}
  ports: [{port: 80, targetPort: 8080}]
"""


def test_apply_creates_then_configures(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    manifest = tmp_path / "app.yaml"
    manifest.write_text(MANIFEST % ("a", "1"))
    out = kubectl("apply", "-n", ns, "-f", str(manifest))
    assert out.split("\n")[:3] == ["configmap/settings created", "deployment.apps/api created", "service/api created"]
    manifest.write_text(MANIFEST % ("b", "2"))
    out = kubectl("apply", "-n", ns, "-f", str(manifest))
    assert "configmap/settings configured" in out and "deployment.apps/api configured" in out and "service/api unchanged" in out
    apps, core = client.AppsV1Api(kubectl.api), client.CoreV1Api(kubectl.api)
    assert apps.read_namespaced_deployment("api", ns).spec.template.spec.containers[0].image == "api:2"
    cm = core.read_namespaced_config_map("settings", ns)
    assert cm.data == {"mode": "b"} and "kubectl.kubernetes.io/last-applied-configuration" in cm.metadata.annotations
    bad = kubectl("apply", "-n", ns, "-f", "-", check=False, stdin="apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: []}\n")
    assert 'The Pod "x" is invalid: spec.containers: Required value' in bad


def test_get_watch_prints_changes(kubectl: Kubectl, ns: str) -> None:
    core = client.CoreV1Api(kubectl.api)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "before"}})
    proc = subprocess.Popen(["kubectl", "get", "configmaps", "-n", ns, "-w"], env=kubectl.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    threading.Thread(target=reader, daemon=True).start()
    deadline = time.monotonic() + 20
    while not any(line.startswith("before") for line in lines) and time.monotonic() < deadline:
        time.sleep(0.05)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "during"}, "data": {"k": "v"}})
    while not any(line.startswith("during") for line in lines) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.terminate()
    proc.wait(timeout=10)
    assert lines[0].split() == ["NAME", "DATA", "AGE"]
    assert [line.split()[:2] for line in lines[1:]] == [["before", "0"], ["during", "1"]]


def test_auth_can_i_for_a_scoped_account(kubectl: Kubectl, ns: str) -> None:
    core, rbac = client.CoreV1Api(kubectl.api), client.RbacAuthorizationV1Api(kubectl.api)
    core.create_namespaced_service_account(ns, {"metadata": {"name": "agent"}})
    rbac.create_namespaced_role(ns, {"metadata": {"name": "r"}, "rules": [
        {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}]})
    rbac.create_namespaced_role_binding(ns, {"metadata": {"name": "r"}, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
        "subjects": [{"kind": "ServiceAccount", "name": "agent", "namespace": ns}]})
    core.create_namespaced_secret(ns, {"metadata": {"name": "t", "annotations": {"kubernetes.io/service-account.name": "agent"}},
                                       "type": "kubernetes.io/service-account-token"})
    import base64

    token = base64.b64decode(core.read_namespaced_secret("t", ns).data["token"]).decode()
    scoped = write_kubeconfig(kubectl.tmp / f"{ns}.kubeconfig", kubectl.handle.endpoints.kubernetes,
                              kubectl.handle.ca_file.read_text(), token, "agent", ns)
    assert kubectl("auth", "can-i", "list", "pods", kubeconfig=scoped).strip() == "yes"
    assert kubectl("auth", "can-i", "get", "pods/log", kubeconfig=scoped).strip() == "yes"
    assert kubectl("auth", "can-i", "delete", "pods", kubeconfig=scoped, check=False).strip().startswith("no")
    assert kubectl("auth", "can-i", "list", "podchaos.chaos-mesh.org", kubeconfig=scoped, check=False).strip().startswith("no")
    listed = rows(kubectl("auth", "can-i", "--list", kubeconfig=scoped))
    assert listed[0][:2] == ["Resources", "Non-Resource"]
    assert ["pods", "[]", "[]", "[get", "list]"] in listed and ["pods/log", "[]", "[]", "[get", "list]"] in listed
    denied = kubectl("get", "pods", "-n", "default", kubeconfig=scoped, check=False)
    assert (f'Error from server (Forbidden): pods is forbidden: User "system:serviceaccount:{ns}:agent" cannot list '
            f'resource "pods" in API group "" in the namespace "default"') in denied
    assert os.environ.get("KUBECONFIG") != str(scoped)


def test_exec_over_spdy(kubectl: Kubectl, ns: str) -> None:
    make_pod(kubectl, ns, "web-1", {"app": "web"}, RUNNING)
    assert kubectl("exec", "web-1", "-n", ns, "--", "echo", "hello", "world") == "hello world\n"
    env = dict(kubectl.env)
    proc = subprocess.run(["kubectl", "exec", "web-1", "-n", ns, "-c", "app", "--", "fail", "3"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3
    assert "failing with 3" in proc.stderr and "command terminated with exit code 3" in proc.stderr
    completed = make_pod(kubectl, ns, "job-1", {"app": "job"}, {"phase": "Succeeded"})
    assert completed.metadata.name == "job-1"
    done = kubectl("exec", "job-1", "-n", ns, "--", "echo", "x", check=False)
    assert "cannot exec into a container in a completed pod; current phase is Succeeded" in done


def test_top_pods_and_nodes_from_cadvisor_samples(kubectl: Kubectl, ns: str) -> None:
    make_pod(kubectl, ns, "busy", {"app": "busy"}, RUNNING,
             {"standin.test/cpu": "0.25", "standin.test/memory": str(300 * 1024 * 1024)})
    make_pod(kubectl, ns, "idle", {"app": "idle"}, RUNNING, {"standin.test/cpu": "0.002", "standin.test/memory": "8388608"})
    kubectl.handle.advance(60)
    top = rows(kubectl("top", "pods", "-n", ns))
    assert top[0] == ["NAME", "CPU(cores)", "MEMORY(bytes)"]
    assert {r[0]: r[1:] for r in top[1:]} == {"busy": ["250m", "300Mi"], "idle": ["2m", "8Mi"]}
    assert rows(kubectl("top", "pods", "-n", ns, "-l", "app=busy", "--no-headers")) == [["busy", "250m", "300Mi"]]
    node = rows(kubectl("top", "node", "worker-1", "--no-headers"))
    assert node[0][0] == "worker-1" and node[0][1].endswith("m") and int(node[0][1][:-1]) >= 252
