"""Helpers for the real-cluster tests (no tests here): a Kubernetes API server for real (the
emulated cluster's server process serving the API tests' stand-in cluster, from the plugin), the fake kind/helm executables
first on PATH, and a stand-in for the controller that marks the stack's Deployments ready."""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from farm.pytest_plugin import SimClusters
from tests.kubesim.standin import STANDIN

ROOT = Path(__file__).resolve().parents[2]
FAKES = ROOT / "tests" / "fakes"


@pytest.fixture(scope="module")
def api_server(sim_clusters: SimClusters) -> dict[str, Any]:
    """What a kubeconfig-reached cluster's tests know of the server: its URLs, the admin's token and
    kubeconfig, the CA."""
    handle = sim_clusters.served(cluster_factory=STANDIN)
    with handle.api_client() as api:
        token = api.configuration.api_key["authorization"].removeprefix("Bearer ")
    return {**handle.endpoints.model_dump(), "admin_token": token, "ca_cert": handle.ca_file.read_text(),
            "kubeconfig": handle.kubeconfig}


@pytest.fixture()
def fakes_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Path]:
    """tests/fakes first on PATH; the fakes log their argv to these files."""
    monkeypatch.setenv("PATH", f"{FAKES}:{ROOT / '.tools' / 'kubectl-root' / 'usr' / 'bin'}:/usr/bin:/bin")
    logs = {"kind": tmp_path / "kind.log", "helm": tmp_path / "helm.log", "docker": tmp_path / "docker.log"}
    monkeypatch.setenv("FAKE_KIND_LOG", str(logs["kind"]))
    monkeypatch.setenv("FAKE_KIND_STATE", str(tmp_path / "kind-state"))
    monkeypatch.setenv("FAKE_HELM_LOG", str(logs["helm"]))
    monkeypatch.setenv("FAKE_DOCKER_LOG", str(logs["docker"]))
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(tmp_path / "docker-state"))
    return logs


class ReadyMarker:
    """Plays the deployment controller for the stack's Deployments: once one exists, its status
    says all replicas are ready (A1's stand-in cluster runs no controllers)."""

    def __init__(self, handle: Any, deployments: list[tuple[str, str]]) -> None:
        self.handle, self.deployments = handle, deployments
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from clusters.kube import Kube

        rest = Kube(self.handle.api_client())
        while not self.stop.wait(0.05):
            for namespace, name in self.deployments:
                path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
                try:
                    current = rest.request("GET", path)
                    want = current["spec"].get("replicas", 1)
                    if (current.get("status") or {}).get("readyReplicas") != want:
                        rest.request("PATCH", f"{path}/status", {"status": {"replicas": want, "readyReplicas": want,
                                                                         "availableReplicas": want}},
                                  content_type="application/merge-patch+json")
                except Exception:  # not created yet
                    continue

    def __enter__(self) -> ReadyMarker:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)


class TcpRelay:
    """A loopback TCP relay in front of a server: `cut()` makes the server unreachable the way a
    lost network or a stopped control plane does (connections reset, new ones refused), `mend()`
    brings it back on the same port."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 443)
        self.scheme = parts.scheme
        self.port = 0
        self._listener: Any = None
        self._conns: list[Any] = []
        self._lock = threading.Lock()
        self.mend()

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def mend(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: Any) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # closed by cut()
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: Any, dst: Any) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        try:  # wakes the thread blocked in accept(); close() alone leaves the port listening
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass
