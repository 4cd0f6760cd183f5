"""kubectl 1.33's `create <type>` commands as a real process: their typed clients send protobuf
bodies (client-go falls back to JSON only for CBOR), which the server decodes (api/protobuf.py),
so the objects are stored as the same commands with kubectl 1.20 (JSON) store them."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest
from kubernetes import client

from clusters.emulated import SimHandle
from farm.pytest_plugin import SimClusters

ROOT = Path(__file__).resolve().parents[2]
KUBECTL_133 = ROOT / ".tools" / "kubectl-v33" / "kubectl"
pytestmark = [pytest.mark.kubectl,
              pytest.mark.skipif(not KUBECTL_133.exists(), reason="kubectl 1.33 is installed by ./scripts/setup.sh --dev")]


@pytest.fixture
def cluster(sim_clusters: SimClusters) -> SimHandle:
    handle = sim_clusters.served(seed=6)
    client.CoreV1Api(handle.api_client()).create_namespace({"metadata": {"name": "pb"}})
    return handle


def create(cluster: SimHandle, *args: str) -> str:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cluster.workdir / "home"), "KUBECONFIG": str(cluster.kubeconfig)}
    proc = subprocess.run([str(KUBECTL_133), "-v=9", "-n", "pb", "create", *args], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert '-XPOST' in proc.stderr and '"Content-Type: application/vnd.kubernetes.protobuf"' in proc.stderr  # as sent
    return proc.stdout


def test_create_deployment_with_replicas_port_and_command(cluster: SimHandle) -> None:
    assert "deployment.apps/web created" in create(cluster, "deployment", "web", "--image=nginx:1.25", "--replicas=3", "--port=80")
    assert "deployment.apps/sleeper created" in create(cluster, "deployment", "sleeper", "--image=busybox:1.36", "--",
                                                       "sleep", "3600")
    apps = client.AppsV1Api(cluster.api_client())
    web = apps.read_namespaced_deployment("web", "pb")
    assert web.spec.replicas == 3 and web.spec.selector.match_labels == {"app": "web"}
    [c] = web.spec.template.spec.containers
    assert (c.name, c.image, c.ports[0].container_port) == ("nginx", "nginx:1.25", 80)
    sleeper = apps.read_namespaced_deployment("sleeper", "pb").spec.template.spec.containers[0]
    assert sleeper.command == ["sleep", "3600"]
    assert web.metadata.managed_fields[0].manager == "kubectl-create"
    cluster.advance(30)
    assert apps.read_namespaced_deployment("web", "pb").status.ready_replicas == 3  # the controllers run it


def test_create_configmap_secret_service_job_and_rbac(cluster: SimHandle) -> None:
    create(cluster, "configmap", "settings", "--from-literal=mode=fast", "--from-literal=level=3")
    create(cluster, "secret", "generic", "creds", "--from-literal=password=hunter2")
    create(cluster, "service", "clusterip", "front", "--tcp=80:8080")
    create(cluster, "job", "once", "--image=busybox:1.36", "--", "echo", "hi")
    create(cluster, "serviceaccount", "robot")
    create(cluster, "role", "reader", "--verb=get,list", "--resource=pods")
    create(cluster, "rolebinding", "robot-reads", "--role=reader", "--serviceaccount=pb:robot")
    core = client.CoreV1Api(cluster.api_client())
    assert core.read_namespaced_config_map("settings", "pb").data == {"mode": "fast", "level": "3"}
    secret = core.read_namespaced_secret("creds", "pb")
    assert secret.type == "Opaque" and base64.b64decode(secret.data["password"]) == b"hunter2"
    port = core.read_namespaced_service("front", "pb").spec.ports[0]
    assert (port.port, port.target_port, port.protocol) == (80, 8080, "TCP")
    job = client.BatchV1Api(cluster.api_client()).read_namespaced_job("once", "pb")
    assert job.spec.template.spec.containers[0].command == ["echo", "hi"] and job.spec.template.spec.restart_policy == "Never"
    binding = client.RbacAuthorizationV1Api(cluster.api_client()).read_namespaced_role_binding("robot-reads", "pb")
    assert binding.role_ref.name == "reader" and binding.subjects[0].name == "robot"


def test_a_kind_without_a_decoder_is_refused_by_name(cluster: SimHandle) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cluster.workdir / "home"), "KUBECONFIG": str(cluster.kubeconfig)}
    proc = subprocess.run([str(KUBECTL_133), "-n", "pb", "create", "ingress", "web", "--rule=example.com/=web:80"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "not Ingress" in proc.stderr and "application/json" in proc.stderr, proc.stderr
