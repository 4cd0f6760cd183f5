"""The "sim" cluster provider: a real server process per handle, clock control, reset by
checkpoint, the agent's scoped kubeconfig, health, and no process left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from clusters.handle import open_cluster
from clusters.emulated import SimHandle
from core.errors import ClusterUnavailable, ResetError
from tests.kubesim.standin import STANDIN

HERE = Path(__file__).resolve().parent


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[SimHandle]:
    handle = open_cluster("sim", seed=3, workdir=tmp_path, cluster_factory=STANDIN)
    assert isinstance(handle, SimHandle)
    yield handle
    handle.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_clock_advances_only_when_asked(cluster: SimHandle) -> None:
    assert cluster.capabilities.virtual_clock and cluster.ref == "sim:sim"
    t0 = cluster.now()
    time.sleep(0.3)
    assert cluster.now() == t0
    cluster.advance(90)
    assert cluster.now() == pytest.approx(t0 + 90)
    assert cluster.health().ok


def test_reset_returns_to_the_state_after_open(cluster: SimHandle) -> None:
    core = client.CoreV1Api(cluster.api_client())
    core.create_namespace({"metadata": {"name": "trial"}})
    core.create_namespaced_config_map("trial", {"metadata": {"name": "leftover"}})
    first = cluster.agent_kubeconfig("trial")
    cluster.reset()
    names = [n.metadata.name for n in core.list_namespace().items]
    assert "trial" not in names and "default" in names
    # The agent's account went with the reset and is made again on request.
    second = cluster.agent_kubeconfig("trial")
    assert second == first and "trial" in [n.metadata.name for n in core.list_namespace().items]


def test_agent_kubeconfig_reaches_its_namespace_only(cluster: SimHandle) -> None:
    admin = client.CoreV1Api(cluster.api_client())
    admin.create_namespace({"metadata": {"name": "app"}})
    admin.create_namespace({"metadata": {"name": "farm-private"}})
    admin.create_namespaced_config_map("app", {"metadata": {"name": "settings"}})
    admin.create_namespaced_config_map("farm-private", {"metadata": {"name": "answer"}})
    client.CustomObjectsApi(cluster.api_client()).create_namespaced_custom_object(
        "chaos-mesh.org", "v1alpha1", "app", "podchaos",
        {"apiVersion": "chaos-mesh.org/v1alpha1", "kind": "PodChaos", "metadata": {"name": "fault"},
         "spec": {"action": "pod-kill", "mode": "one", "selector": {"namespaces": ["app"]}}})
    path = cluster.agent_kubeconfig("app")
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    agent_api = config.new_client_from_config(str(path))
    core, custom = client.CoreV1Api(agent_api), client.CustomObjectsApi(agent_api)
    assert [c.metadata.name for c in core.list_namespaced_config_map("app").items] == ["settings"]
    core.patch_namespaced_config_map("settings", "app", {"data": {"fixed": "yes"}})
    assert [n.metadata.name for n in core.list_node().items] == ["worker-1"]
    for forbidden in (lambda: core.list_namespaced_config_map("farm-private"),
                      lambda: core.list_namespace(),
                      lambda: custom.list_namespaced_custom_object("chaos-mesh.org", "v1alpha1", "app", "podchaos"),
                      lambda: custom.delete_namespaced_custom_object("chaos-mesh.org", "v1alpha1", "app", "podchaos", "fault"),
                      lambda: client.RbacAuthorizationV1Api(agent_api).create_namespaced_role_binding("app", {
                          "metadata": {"name": "escalate"}, "subjects": [],
                          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}})):
        with pytest.raises(ApiException) as err:
            forbidden()
        assert err.value.status == 403


def test_close_leaves_no_process(tmp_path: Path) -> None:
    handle = open_cluster("sim:second", workdir=tmp_path, cluster_factory=STANDIN)
    pid = handle.process.pid
    assert _alive(pid)
    handle.close()
    assert not _alive(pid)
    with pytest.raises(ResetError):
        handle.reset()
    assert not handle.health().ok


def test_server_dies_with_its_parent(tmp_path: Path) -> None:
    script = (f"import sys; sys.path.insert(0, {str(HERE)!r})\n"
              "from clusters.handle import open_cluster\n"
              f"h = open_cluster('sim', workdir={str(tmp_path)!r}, cluster_factory={STANDIN!r})\n"
              "print(h.process.pid, flush=True)\n"
              "import time; time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, cwd=HERE.parents[1],
                              env={**os.environ, "PYTHONPATH": f"{HERE.parents[1]}:{HERE}"})
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert _alive(child)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def test_a_server_that_cannot_start_is_reported_with_its_stderr(tmp_path: Path) -> None:
    with pytest.raises(ClusterUnavailable) as err:
        open_cluster("sim:broken", workdir=tmp_path, cluster_factory="no_such_module:Nothing")
    assert "no_such_module" in str(err.value) and "exited with code" in str(err.value)


def test_live_clock_follows_wall_time(tmp_path: Path) -> None:
    with open_cluster("sim:live", workdir=tmp_path, cluster_factory=STANDIN, live=True, speed=20.0) as handle:
        assert not handle.capabilities.virtual_clock
        t0 = handle.now()
        time.sleep(1.0)
        elapsed = handle.now() - t0
        assert 10 <= elapsed <= 40  # 20 cluster seconds per wall second, ticks of 0.25 s
        handle.advance(600)  # an explicit jump still works in live mode
        assert handle.now() - t0 >= 600


def test_control_api_rejects_bad_requests(cluster: SimHandle) -> None:
    import json as _json
    import urllib.error
    import urllib.request

    def post(path: str, body: bytes) -> tuple[int, dict]:
        req = urllib.request.Request(cluster.endpoints.control + path, data=body, method="POST")
        try:
            with urllib.request.urlopen(req) as resp:
                return resp.status, _json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _json.loads(exc.read())

    assert post("/sim/advance", b"not json")[0] == 400
    assert post("/sim/advance", b'{"seconds": -1}')[0] == 400
    assert post("/sim/restore", b'{"name": "never-taken"}')[0] == 404
    assert post("/sim/checkpoint", b"{}") == (400, {"error": "field 'name' (a non-empty string) is required"})
    assert post("/sim/checkpoint", b'{"name": "mine"}')[0] == 200
    assert post("/sim/restore", b'{"name": "mine"}')[0] == 200
    assert post("/sim/nothing", b"{}")[0] == 404


def test_agent_does_not_see_events_of_fault_injection_objects(cluster: SimHandle) -> None:
    admin = client.CoreV1Api(cluster.api_client())
    admin.create_namespace({"metadata": {"name": "app"}})
    chaos = client.CustomObjectsApi(cluster.api_client()).create_namespaced_custom_object(
        "chaos-mesh.org", "v1alpha1", "app", "podchaos",
        {"apiVersion": "chaos-mesh.org/v1alpha1", "kind": "PodChaos", "metadata": {"name": "kill-geo"},
         "spec": {"action": "pod-kill", "mode": "one", "selector": {"namespaces": ["app"]}}})
    pod = admin.create_namespaced_pod("app", {"metadata": {"name": "geo-1"},
                                              "spec": {"containers": [{"name": "geo", "image": "geo:1"}]}})
    for name, kind, api_version, obj_name, uid in (
            ("kill-geo.1", "PodChaos", "chaos-mesh.org/v1alpha1", "kill-geo", chaos["metadata"]["uid"]),
            ("geo-1.1", "Pod", "v1", "geo-1", pod.metadata.uid)):
        admin.create_namespaced_event("app", {"metadata": {"name": name}, "type": "Normal", "reason": "Applied",
                                              "message": f"{kind} applied", "involvedObject": {
                                                  "kind": kind, "apiVersion": api_version, "name": obj_name,
                                                  "namespace": "app", "uid": uid}})
    assert len(admin.list_namespaced_event("app").items) == 2
    agent = client.CoreV1Api(config.new_client_from_config(str(cluster.agent_kubeconfig("app"))))
    assert [e.metadata.name for e in agent.list_namespaced_event("app").items] == ["geo-1.1"]
    with pytest.raises(ApiException) as err:
        agent.read_namespaced_event("kill-geo.1", "app")
    assert err.value.status == 404


def test_agent_kubeconfig_survives_restores(cluster: SimHandle) -> None:
    client.CoreV1Api(cluster.api_client()).create_namespace({"metadata": {"name": "app"}})
    cluster.checkpoint("before-agent")
    path = cluster.agent_kubeconfig("app")
    cluster.checkpoint("with-agent")
    cluster.restore("before-agent")  # the account is gone: the next call makes it again
    assert cluster.agent_kubeconfig("app") == path
    agent = client.CoreV1Api(config.new_client_from_config(str(path)))
    assert agent.list_namespaced_pod("app").items == []
    # Uids replay after a restore, so the account made again has the very same token.
    cluster.restore("with-agent")
    assert agent.list_namespaced_pod("app").items == []
    client.CoreV1Api(cluster.api_client()).delete_namespaced_service_account("sre-agent", "app")
    with pytest.raises(ApiException) as err:
        agent.list_namespaced_pod("app")
    assert err.value.status == 401
    again = client.CoreV1Api(config.new_client_from_config(str(cluster.agent_kubeconfig("app"))))
    assert again.list_namespaced_pod("app").items == []


def test_farm_groups_are_not_discovered_by_the_agent(cluster: SimHandle) -> None:
    admin = client.CoreV1Api(cluster.api_client())
    admin.create_namespace({"metadata": {"name": "app"}})
    agent = config.new_client_from_config(str(cluster.agent_kubeconfig("app")))
    admin_groups = {g.name for g in client.ApisApi(cluster.api_client()).get_api_versions().groups}
    agent_groups = {g.name for g in client.ApisApi(agent).get_api_versions().groups}
    assert "chaos-mesh.org" in agent_groups  # a stock cluster with Chaos Mesh shows its CRDs
    assert "sim.farm.io" in admin_groups and admin_groups - agent_groups == {"sim.farm.io"}


def test_agent_kubeconfig_refuses_farm_namespaces_on_the_emulated_cluster(cluster: SimHandle) -> None:
    """One grant for every cluster kind: the emulated cluster refuses the farm's and the system's
    namespaces as a real cluster does, also as an application's other namespace, and creates no
    account there."""
    from core.errors import InfrastructureError

    for namespace, also in (("observe", ()), ("chaos-mesh", ()), ("kube-system", ()), ("app", ("default",))):
        with pytest.raises(InfrastructureError, match=f"farm namespace '{also[0] if also else namespace}'"):
            cluster.agent_kubeconfig(namespace, also=also)
    core = client.CoreV1Api(cluster.api_client())
    for namespace in ("kube-system", "default"):
        accounts = [sa.metadata.name for sa in core.list_namespaced_service_account(namespace).items]
        assert "sre-agent" not in accounts
