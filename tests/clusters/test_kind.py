# ruff: noqa: F811  (pytest fixtures imported from test_real_support)
"""Provider "kind" with a fake `kind` (and `helm`) that record their arguments; the kubeconfig the
fake hands out points at a real Kubernetes API server (the emulated cluster's server process)."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusters.kind import NODE_IMAGE, KindProvider
from clusters.stack.releases import READY_DEPLOYMENTS, RELEASES
from core.errors import ClusterUnavailable, ConfigurationError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_real_support import ReadyMarker, api_server, fakes_on_path  # noqa: E402,F401


@pytest.fixture()
def kind_env(fakes_on_path: dict[str, Path], api_server: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
             tmp_path: Path) -> dict[str, Path]:
    monkeypatch.setenv("FAKE_KIND_SERVER", api_server["kubernetes"])
    monkeypatch.setenv("FAKE_KIND_TOKEN", api_server["admin_token"])
    monkeypatch.setenv("FAKE_KIND_CA", base64.b64encode(api_server["ca_cert"].encode()).decode())
    monkeypatch.setenv("FARM_STATE_DIR", str(tmp_path / "state"))
    return fakes_on_path


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def provider() -> KindProvider:
    return KindProvider(backoff=0.01)


def test_create_writes_a_multi_node_config_preloads_images_and_opens(kind_env: dict[str, Path],
                                                                     tmp_path: Path) -> None:
    handle = provider().open("farm-a", workers=3, preload_images=["yg397/openresty-thrift:xenial", "mongo:4.4.6"],
                             install_stack=False, reset_timeout=5)
    argv = calls(kind_env["kind"])
    assert argv[0] == ["get", "clusters"]
    create = argv[1]
    assert create[:4] == ["create", "cluster", "--name", "farm-a"]
    assert create[create.index("--image") + 1] == NODE_IMAGE
    assert create[create.index("--wait") + 1] == "5m"
    config = yaml.safe_load(Path(create[create.index("--config") + 1]).read_text())
    assert config["kind"] == "Cluster" and config["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    assert [n["role"] for n in config["nodes"]] == ["control-plane", "worker", "worker", "worker"]
    assert argv[2] == ["get", "kubeconfig", "--name", "farm-a"]
    assert argv[3] == ["load", "docker-image", "yg397/openresty-thrift:xenial", "mongo:4.4.6", "--name", "farm-a"]
    # The local Docker daemon had neither image: each was looked up, then pulled, before the load.
    assert calls(kind_env["docker"]) == [
        ["image", "inspect", "--format", "{{.Id}}", "yg397/openresty-thrift:xenial"],
        ["pull", "yg397/openresty-thrift:xenial"],
        ["image", "inspect", "--format", "{{.Id}}", "mongo:4.4.6"],
        ["pull", "mongo:4.4.6"],
    ]
    assert handle.ref == "kind:farm-a"
    assert handle.kubeconfig.stat().st_mode & 0o777 == 0o600
    health = handle.health()
    assert health.ok, health.detail
    assert "default" in handle._namespaces()  # the kubeconfig reaches the server for real
    handle.close()


def test_an_existing_cluster_is_reused_not_recreated(kind_env: dict[str, Path]) -> None:
    provider().open("farm-b", install_stack=False).close()
    provider().open("farm-b", install_stack=False).close()
    creates = [c for c in calls(kind_env["kind"]) if c[:2] == ["create", "cluster"]]
    assert len(creates) == 1


def test_open_installs_the_stack_through_helm(kind_env: dict[str, Path], api_server: dict[str, Any]) -> None:
    from clusters.kube import Kube

    with ReadyMarker(_AdminHandle(api_server["kubeconfig"]), READY_DEPLOYMENTS):
        handle = provider().open("farm-stack", stack_options={"force": True, "poll_seconds": 0.05})
    installs = [c for c in calls(kind_env["helm"]) if "upgrade" in c]
    assert [c[c.index("upgrade") + 2] for c in installs] == [r.name for r in RELEASES]
    assert all(c[c.index("--kubeconfig") + 1] == str(handle.kubeconfig) for c in installs)
    assert Kube(handle.api_client()).find("Deployment", "observe", "jaeger")
    handle.close()


class _AdminHandle:
    """What ReadyMarker needs before the provider has opened its own handle: an admin client."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig

    def api_client(self) -> Any:
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))


def test_missing_cluster_is_not_created_unless_asked(kind_env: dict[str, Path]) -> None:
    with pytest.raises(ClusterUnavailable, match="kind cluster 'ghost' does not exist.*farm cluster create kind:ghost"):
        provider().open("ghost", create=False, install_stack=False)
    assert not [c for c in calls(kind_env["kind"]) if c[0] == "create"]


def test_transient_failures_are_retried_with_backoff(kind_env: dict[str, Path],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KIND_FAIL", "create=2")
    provider().open("farm-flaky", install_stack=False).close()
    creates = [c for c in calls(kind_env["kind"]) if c[:2] == ["create", "cluster"]]
    assert len(creates) == 3


def test_too_many_transient_failures_give_up_with_the_stderr(kind_env: dict[str, Path],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KIND_FAIL", "create=9")
    with pytest.raises(ClusterUnavailable) as err:
        KindProvider(retries=2, backoff=0.01).open("farm-down", install_stack=False)
    assert "creating kind cluster 'farm-down' failed after 3 attempts" in str(err.value)
    assert "i/o timeout" in str(err.value)


def test_a_hard_failure_is_not_retried_and_keeps_kinds_words(kind_env: dict[str, Path],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KIND_FAIL", "create=1")
    monkeypatch.setenv("FAKE_KIND_STDERR", "ERROR: failed to create cluster: failed to get docker info: "
                                           "permission denied while trying to connect to the Docker daemon socket")
    with pytest.raises(ClusterUnavailable, match="permission denied while trying to connect to the Docker daemon"):
        provider().open("farm-perm", install_stack=False)
    assert len([c for c in calls(kind_env["kind"]) if c[0] == "create"]) == 1


def test_kind_missing_from_path_is_one_sentence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ClusterUnavailable) as err:
        provider().open("farm-none", install_stack=False)
    assert str(err.value).startswith("'kind' was not found on PATH: install kind (https://kind.sigs.k8s.io/")


def test_delete_only_on_request(kind_env: dict[str, Path]) -> None:
    kind = provider()
    kind.open("farm-del", install_stack=False).close()
    assert "farm-del" in kind.clusters()
    kind.delete("farm-del")
    assert ["delete", "cluster", "--name", "farm-del"] in calls(kind_env["kind"])
    assert "farm-del" not in kind.clusters()


@pytest.mark.parametrize("name", ["Farm_A", "-x", ""])
def test_bad_names_are_refused(name: str, kind_env: dict[str, Path]) -> None:
    with pytest.raises(ConfigurationError, match="lowercase"):
        provider().open(name, install_stack=False)
    assert calls(kind_env["kind"]) == []


def test_a_worker_takes_its_options_from_the_environment(kind_env: dict[str, Path],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FARM_KIND_WORKERS", "1")
    monkeypatch.setenv("FARM_KIND_PRELOAD", "mongo:4.4.6, memcached:1.6.7")
    monkeypatch.setenv("FARM_STACK", "0")
    monkeypatch.setenv("FARM_KIND_INTERNAL", "1")
    from clusters.handle import open_cluster

    open_cluster("kind:farm-env").close()
    argv = calls(kind_env["kind"])
    create = next(c for c in argv if c[:2] == ["create", "cluster"])
    config = yaml.safe_load(Path(create[create.index("--config") + 1]).read_text())
    assert len(config["nodes"]) == 2
    assert ["load", "docker-image", "mongo:4.4.6", "memcached:1.6.7", "--name", "farm-env"] in argv
    assert ["get", "kubeconfig", "--name", "farm-env", "--internal"] in argv
    assert calls(kind_env["helm"]) == []  # FARM_STACK=0
    monkeypatch.setenv("FARM_KIND_WORKERS", "many")
    with pytest.raises(ConfigurationError, match="FARM_KIND_WORKERS must be an integer"):
        KindProvider().open("farm-env")


def test_an_existing_cluster_whose_api_is_down_says_what_to_do(kind_env: dict[str, Path],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    provider().open("farm-stopped", install_stack=False).close()
    monkeypatch.setenv("FAKE_KIND_SERVER", "https://127.0.0.1:9")  # the control plane container is stopped
    with pytest.raises(ClusterUnavailable, match=r"docker start farm-stopped-control-plane"):
        provider().open("farm-stopped", install_stack=False)


def test_preload_pulls_only_the_images_the_host_lacks(kind_env: dict[str, Path],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_DOCKER_IMAGES", "mongo:4.4.6,memcached:1.6.7")
    provider().open("farm-pull", preload_images=["mongo:4.4.6", "jaegertracing/all-in-one:1.57", "memcached:1.6.7"],
                    install_stack=False).close()
    docker = calls(kind_env["docker"])
    assert [c for c in docker if c[0] == "pull"] == [["pull", "jaegertracing/all-in-one:1.57"]]
    assert len([c for c in docker if c[:2] == ["image", "inspect"]]) == 3
    load = next(c for c in calls(kind_env["kind"]) if c[0] == "load")
    assert load == ["load", "docker-image", "mongo:4.4.6", "jaegertracing/all-in-one:1.57", "memcached:1.6.7",
                    "--name", "farm-pull"]  # the fake kind refuses images the fake daemon lacks


def test_an_image_that_cannot_be_pulled_is_named(kind_env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_DOCKER_UNPULLABLE", "yinfangchen/hotelreservation:v9-missing")
    with pytest.raises(ClusterUnavailable) as err:
        provider().open("farm-nopull", preload_images=["mongo:4.4.6", "yinfangchen/hotelreservation:v9-missing"],
                        install_stack=False)
    message = str(err.value)
    assert message.startswith("pulling image yinfangchen/hotelreservation:v9-missing for kind:farm-nopull failed")
    assert "manifest for yinfangchen/hotelreservation:v9-missing not found" in message
    pulls = [c for c in calls(kind_env["docker"]) if c[0] == "pull"]
    assert pulls == [["pull", "mongo:4.4.6"], ["pull", "yinfangchen/hotelreservation:v9-missing"]]  # not retried
    assert not [c for c in calls(kind_env["kind"]) if c[0] == "load"]  # nothing half-loaded


def test_a_registry_timeout_is_retried(kind_env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_DOCKER_FAIL", "pull=2")
    provider().open("farm-slowreg", preload_images=["mongo:4.4.6"], install_stack=False).close()
    assert [c for c in calls(kind_env["docker"]) if c[0] == "pull"] == [["pull", "mongo:4.4.6"]] * 3
    assert any(c[0] == "load" for c in calls(kind_env["kind"]))


def test_a_docker_daemon_that_does_not_answer_is_not_a_missing_image(kind_env: dict[str, Path],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_DOCKER_DOWN", "1")
    with pytest.raises(ClusterUnavailable) as err:
        provider().open("farm-nodaemon", preload_images=["mongo:4.4.6"], install_stack=False)
    assert str(err.value) == ("asking the local Docker daemon for image mongo:4.4.6 failed: Cannot connect to the "
                              "Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?")
    assert [c[0] for c in calls(kind_env["docker"])] == ["image"]  # no pull attempted
