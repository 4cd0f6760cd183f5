# ruff: noqa: F811  (pytest fixtures imported from test_real_support)
"""KubeconfigClusterHandle against a Kubernetes API server for real (the emulated cluster's API
server process, over HTTPS with its admin token): health, endpoints, the agent's scoped
kubeconfig checked with a real kubectl, deploy through the lead's deploy code, and reset of
namespaces and Chaos Mesh resources, stuck finalizers included."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusters.access import AGENT_ACCOUNT as AGENT_NAME
from clusters.handle import snapshot_object
from clusters.real import KubeconfigClusterHandle
from core.errors import ResetError

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "clusters"))
from test_real_support import api_server  # noqa: E402,F401  (fixture)

KUBECTL = ROOT / ".tools" / "kubectl-root" / "usr" / "bin" / "kubectl"
CHAOS = "/apis/chaos-mesh.org/v1alpha1"


def make_handle(api_server: dict[str, Any], tmp_path: Path, **options: Any) -> KubeconfigClusterHandle:
    defaults: dict[str, Any] = dict(app_namespaces={"social-network", "astronomy-shop"}, reset_timeout=10,
                                    finalizer_grace=0.3, poll_interval=0.05, workdir=tmp_path,
                                    urls={c: api_server[c] for c in ("prometheus", "loki", "jaeger")})
    defaults.update(options)
    return KubeconfigClusterHandle("kind", "test", api_server["kubeconfig"], **defaults)


@pytest.fixture()
def handle(api_server: dict[str, Any], tmp_path: Path) -> Iterator[KubeconfigClusterHandle]:
    h = make_handle(api_server, tmp_path)
    yield h
    h.reset()
    h.close()


def namespace(h: KubeconfigClusterHandle, name: str) -> None:
    h.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def pod_chaos(h: KubeconfigClusterHandle, ns: str, name: str, finalizers: list[str] | None = None) -> None:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if finalizers:
        meta["finalizers"] = finalizers
    h.request("POST", f"{CHAOS}/namespaces/{ns}/podchaos", {
        "apiVersion": "chaos-mesh.org/v1alpha1", "kind": "PodChaos", "metadata": meta,
        "spec": {"action": "pod-failure", "mode": "all", "duration": "10m",
                 "selector": {"namespaces": [ns], "labelSelectors": {"service": "user-service"}}}})


def chaos_names(h: KubeconfigClusterHandle) -> list[str]:
    out = []
    for collection in h.chaos_resources():
        out += [i["metadata"]["name"] for i in h.request("GET", collection).get("items", [])]
    return out


def kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KUBECTL), "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True,
                          timeout=60)


def test_health_and_configured_endpoints(handle: KubeconfigClusterHandle, api_server: dict[str, Any]) -> None:
    health = handle.health()
    assert health.ok, health.detail
    assert health.detail == "readyz: ok"
    endpoints = handle.endpoints
    assert endpoints.kubernetes == api_server["kubernetes"].rstrip("/")
    assert endpoints.prometheus == api_server["prometheus"].rstrip("/")
    assert handle._forwards == {}  # configured URLs need no tunnel
    assert handle.ref == "kind:test"


def test_health_reports_an_unreachable_server(tmp_path: Path, api_server: dict[str, Any]) -> None:
    h = make_handle(api_server, tmp_path)
    config = yaml.safe_load(Path(api_server["kubeconfig"]).read_text())
    config["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:9"  # discard port: nothing listens
    dead = tmp_path / "dead.kubeconfig"
    dead.write_text(json.dumps(config))
    h._kubeconfig_path = dead
    h._drop_client()
    health = h.health()
    assert not health.ok and "unreachable" in health.detail


def test_refused_credentials_are_a_setup_failure(api_server: dict[str, Any], tmp_path: Path) -> None:
    from core.errors import ClusterUnavailable

    config = yaml.safe_load(Path(api_server["kubeconfig"]).read_text())
    config["users"][0]["user"]["token"] = "not-a-valid-token"
    bad = tmp_path / "bad.kubeconfig"
    bad.write_text(json.dumps(config))
    with pytest.raises(ClusterUnavailable, match="refuses the farm's credentials.*401"):
        KubeconfigClusterHandle("eks", "refused", bad, workdir=tmp_path)


@pytest.mark.kubectl
def test_agent_kubeconfig_reaches_only_its_namespace(handle: KubeconfigClusterHandle,
                                                     api_server: dict[str, Any]) -> None:
    namespace(handle, "social-network")
    pod_chaos(handle, "social-network", "hidden-fault")
    path = handle.agent_kubeconfig("social-network")
    assert path.stat().st_mode & 0o777 == 0o600
    assert handle.agent_kubeconfig("social-network") == path  # created once
    import yaml

    config = yaml.safe_load(path.read_text())
    assert config["users"][0]["user"]["token"] != api_server["admin_token"]  # its own token, not ours
    assert config["contexts"][0]["context"]["namespace"] == "social-network"
    role = handle.request("GET", f"/apis/rbac.authorization.k8s.io/v1/namespaces/social-network/roles/{AGENT_NAME}")
    assert all("chaos-mesh.org" not in rule["apiGroups"] for rule in role["rules"])
    ok = kubectl(path, "get", "pods")  # the context's namespace is social-network
    assert ok.returncode == 0, ok.stderr
    assert kubectl(path, "create", "configmap", "agent-note", "--from-literal=a=b").returncode == 0
    assert kubectl(path, "get", "nodes").returncode == 0  # read-only cluster view, as on the emulated cluster
    for args in (["get", "podchaos"], ["get", "pods", "-n", "default"], ["get", "namespaces"],
                 ["delete", "node", "worker-1"], ["get", "pods", "-n", "kube-system"],
                 ["get", "clusterrolebindings"]):
        denied = kubectl(path, *args)
        assert denied.returncode != 0 and "Forbidden" in denied.stderr, (args, denied.stdout, denied.stderr)


def test_agent_kubeconfig_refuses_farm_namespaces(handle: KubeconfigClusterHandle) -> None:
    from core.errors import InfrastructureError

    with pytest.raises(InfrastructureError, match="farm namespace 'observe'"):
        handle.agent_kubeconfig("observe")
    with pytest.raises(InfrastructureError, match="namespace 'nowhere' does not exist"):
        handle.agent_kubeconfig("nowhere")


def test_reset_removes_app_namespaces_new_namespaces_and_all_chaos(handle: KubeconfigClusterHandle) -> None:
    before = set(handle._namespaces())
    namespace(handle, "social-network")
    namespace(handle, "scratch-by-agent")
    pod_chaos(handle, "social-network", "fault")
    pod_chaos(handle, "default", "fault-elsewhere")
    pod_chaos(handle, "social-network", "stuck", finalizers=["chaos-mesh/records"])
    handle.agent_kubeconfig("social-network")
    binding = f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{AGENT_NAME}-social-network"
    assert handle.request("GET", binding)
    handle.reset()
    from clusters.kube import KubeError

    with pytest.raises(KubeError):  # the cluster-scoped binding went with the namespace
        handle.request("GET", binding)
    assert set(handle._namespaces()) == before
    assert "default" in before and "kube-system" in before  # never deleted
    assert chaos_names(handle) == []


def test_reset_strips_a_stuck_finalizer_only_after_the_grace(api_server: dict[str, Any], tmp_path: Path) -> None:
    h = make_handle(api_server, tmp_path, finalizer_grace=60, reset_timeout=0.5)
    namespace(h, "astronomy-shop")
    pod_chaos(h, "astronomy-shop", "stuck-fault", finalizers=["chaos-mesh/records"])
    with pytest.raises(ResetError) as err:
        h.reset()
    message = str(err.value)
    assert "kind:test: reset did not finish" in message
    assert "PodChaos astronomy-shop/stuck-fault (finalizers: ['chaos-mesh/records'])" in message
    still = h.request("GET", f"{CHAOS}/namespaces/astronomy-shop/podchaos/stuck-fault")
    assert still["metadata"].get("deletionTimestamp")  # deleted, held by its finalizer
    quick = make_handle(api_server, tmp_path, finalizer_grace=0.1, reset_timeout=10)
    quick.reset()
    assert chaos_names(quick) == []
    h.close()
    quick.close()


def client_model_snapshot(h: KubeconfigClusterHandle, ns: str) -> dict[str, list[dict[str, Any]]]:
    """The snapshot as the farm read it before issue 29: into client models and back to dicts."""
    from kubernetes import client

    api = h.api_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    listers = {"pods": core.list_namespaced_pod, "services": core.list_namespaced_service,
               "configmaps": core.list_namespaced_config_map, "events": core.list_namespaced_event,
               "deployments": apps.list_namespaced_deployment, "statefulsets": apps.list_namespaced_stateful_set}
    return {kind: [api.sanitize_for_serialization(o) for o in lister(ns).items] for kind, lister in listers.items()}


RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")


def as_times(doc: Any) -> Any:
    """`doc` with every RFC 3339 string read as the instant it names."""
    if isinstance(doc, dict):
        return {k: as_times(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [as_times(v) for v in doc]
    if isinstance(doc, str) and RFC3339.fullmatch(doc):
        return datetime.fromisoformat(doc.replace("Z", "+00:00"))
    return doc


def test_deploy_through_the_same_client_then_reset(handle: KubeconfigClusterHandle) -> None:
    from apps import load_application
    from farm.deploy import apply_manifests

    app = load_application("social-network")
    count = apply_manifests(handle, app, app.namespace)
    assert count > 60
    deployments = handle.request("GET", f"/apis/apps/v1/namespaces/{app.namespace}/deployments")["items"]
    assert {d["metadata"]["name"] for d in deployments} == set(app.services) | {app.load_generator}
    config = handle.request("GET", f"/api/v1/namespaces/{app.namespace}/configmaps/user-service")
    assert json.loads(config["data"]["service-config.json"])["user-mongodb"]["port"] == 27017
    snapshot = handle.snapshot(app.namespace)
    assert len(snapshot["deployments"]) == len(deployments)
    # Read as the server's JSON, it holds what reading through client models held, less only the
    # server's bookkeeping (issue 29: the same end state for a tenth of the CPU).
    # (Times compared as times: the server writes 'Z' where the client's models wrote '+00:00'.)
    assert as_times(snapshot) == as_times({kind: [snapshot_object(o) for o in objs]
                                           for kind, objs in client_model_snapshot(handle, app.namespace).items()})
    assert not any("managedFields" in o["metadata"] for objs in snapshot.values() for o in objs)
    handle.reset()
    assert app.namespace not in handle._namespaces()


FAKE_KUBECTL = textwrap.dedent('''\
    #!{python}
    """Stands in for `kubectl port-forward`: serves HTTP on a free port and says so as kubectl does."""
    import http.server, json, os, sys
    with open(os.environ["FAKE_KUBECTL_LOG"], "a") as log:
        log.write(json.dumps(sys.argv[1:]) + "\\n")
    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({{"status": "success", "argv": sys.argv[1:]}}).encode()
            self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
            self.wfile.write(body)
        def log_message(self, *a): pass
    server = http.server.HTTPServer(("127.0.0.1", 0), Answer)
    target = sys.argv[-3].split(":")[-1]
    print(f"Forwarding from 127.0.0.1:{{server.server_port}} -> {{target}}", flush=True)
    server.serve_forever()
''')


def test_port_forwards_are_started_on_demand_and_stopped_on_close(api_server: dict[str, Any], tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "kubectl"
    fake.write_text(FAKE_KUBECTL.format(python=sys.executable))
    fake.chmod(0o755)
    log = tmp_path / "kubectl.log"
    monkeypatch.setenv("FAKE_KUBECTL_LOG", str(log))
    h = make_handle(api_server, tmp_path, urls={}, kubectl=str(fake))
    endpoints = h.endpoints
    with urllib.request.urlopen(f"{endpoints.prometheus}/api/v1/query?query=up", timeout=10) as response:
        assert json.loads(response.read())["status"] == "success"
    argv = [json.loads(line) for line in log.read_text().splitlines()]
    targets = {tuple(a[a.index("port-forward"):a.index("port-forward") + 3]) for a in argv}
    assert targets == {("port-forward", "svc/prometheus-server", ":80"), ("port-forward", "svc/loki", ":3100"),
                       ("port-forward", "svc/jaeger-out", ":16686")}
    assert all(a[a.index("-n") + 1] == "observe" for a in argv)
    assert h.endpoints.prometheus == endpoints.prometheus  # reused while alive
    h._forwards["loki"].process.kill()  # a tunnel that died is restarted on the next use
    h._forwards["loki"].process.wait(5)
    assert h.endpoints.loki != endpoints.loki
    with urllib.request.urlopen(f"{h.endpoints.loki}/ready", timeout=10) as response:
        assert response.status == 200
    processes = [f.process for f in h._forwards.values()]
    h.close()
    assert all(p.poll() is not None for p in processes)
    assert len(log.read_text().splitlines()) == 4


def test_legacy_token_secret_works_where_token_request_is_missing(handle: KubeconfigClusterHandle) -> None:
    """Clusters without the TokenRequest API: the token controller fills a service-account-token
    Secret, and that token authenticates as the agent."""
    namespace(handle, "social-network")
    from clusters.access import grant_agent

    handle.agent_kubeconfig("social-network")
    token = grant_agent(handle._kube(), "social-network")  # no token_seconds: the Secret's token
    path = handle.workdir / "legacy.kubeconfig"
    handle._write_kubeconfig(path, "social-network", token)
    who = kubectl(path, "get", "podchaos")
    assert "system:serviceaccount:social-network:sre-agent" in who.stderr
    assert kubectl(path, "get", "pods").returncode == 0
