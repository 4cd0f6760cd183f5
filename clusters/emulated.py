"""Provider "sim": each handle owns one emulated-cluster process (`python -m kubesim.server`)
that dies with its parent; `reset()` restores the checkpoint taken right after start-up."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml

from clusters.access import AGENT_ACCOUNT, grant_agent
from clusters.handle import Capabilities, ClusterHandle, ClusterHealth, ClusterProvider, Endpoints, providers
from clusters.kube import Kube
from core import tls
from core.errors import ClusterUnavailable, ResetError

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT = 30.0
OPEN_CHECKPOINT = "open"


def _tail(path: Path, limit: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:].strip() or "(no output)"
    except OSError:
        return "(no output)"


def write_kubeconfig(path: Path, server: str, ca_pem: str, token: str, user: str, namespace: str | None = None,
                     client_cert: tuple[str, str] | None = None) -> Path:
    """`client_cert`: (certificate, key) PEM the user also authenticates with, as kind's admin has."""
    context: dict[str, Any] = {"cluster": "sim", "user": user}
    credentials: dict[str, str] = {"token": token}
    if client_cert is not None:
        credentials["client-certificate-data"] = base64.b64encode(client_cert[0].encode()).decode()
        credentials["client-key-data"] = base64.b64encode(client_cert[1].encode()).decode()
    if namespace:
        context["namespace"] = namespace
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": "sim", "preferences": {},
        "clusters": [{"name": "sim", "cluster": {"server": server,
                                                 "certificate-authority-data": base64.b64encode(ca_pem.encode()).decode()}}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": "sim", "context": context}],
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it holds a token
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    return path


class SimHandle(ClusterHandle):
    provider = "sim"

    def __init__(self, name: str, process: subprocess.Popen[bytes], ready: dict[str, Any], workdir: Path,
                 own_workdir: bool, live: bool, stderr_path: Path) -> None:
        self.name = name
        self.process = process
        self.workdir = workdir
        self._own_workdir = own_workdir
        self.live = live
        self.start: float | None = ready.get("start")  # cluster time at start-up, as the server chose it
        self._stderr_path = stderr_path
        self._admin_token: str = ready["admin_token"]
        self._ca_pem: str = ready["ca_cert"]
        self.endpoints = Endpoints(kubernetes=ready["kubernetes"], prometheus=ready["prometheus"], loki=ready["loki"],
                                   jaeger=ready["jaeger"], control=ready["control"])
        self.ca_file = workdir / "ca.crt"
        self.ca_file.write_text(self._ca_pem)
        self.kubeconfig = write_kubeconfig(workdir / "admin.kubeconfig", self.endpoints.kubernetes, self._ca_pem,
                                           self._admin_token, "farm-admin")
        # The admin kubeconfig as kind writes it, with a client certificate too (what `farm sim up`
        # hands out). The farm's own stays token-only: with a certificate, `kubectl --token` would
        # still be the admin (x509 authenticates first).
        admin_cert = (ready["admin_client_cert"], ready["admin_client_key"]) if ready.get("admin_client_cert") else None
        self.kind_kubeconfig = write_kubeconfig(workdir / "admin-x509.kubeconfig", self.endpoints.kubernetes,
                                                self._ca_pem, self._admin_token, "farm-admin",
                                                client_cert=admin_cert) if admin_cert else self.kubeconfig
        self._agent_kubeconfigs: dict[str, Path] = {}
        self._agent_tokens: dict[str, str] = {}
        self._closed = False
        # kept-alive connections to the control API (the clock is read at every tool call)
        self._http = httpx.Client(trust_env=False, verify=tls.ssl_context())

    @property
    def capabilities(self) -> Capabilities:  # type: ignore[override]
        # Node faults are NodeFault objects here; no node has a host to run a task on.
        return Capabilities(checkpoints=True, node_faults=True, node_tasks=False, virtual_clock=not self.live)

    # -- control API -----------------------------------------------------------------------
    def _control(self, method: str, path: str, body: dict[str, Any] | None = None, timeout: float = 600.0) -> Any:
        if self.process.poll() is not None:
            raise ClusterUnavailable(f"emulated cluster {self.name} exited with code {self.process.returncode}: "
                                     f"{_tail(self._stderr_path)}")
        data = json.dumps(body).encode() if body is not None else None
        try:
            resp = self._http.request(method, f"{self.endpoints.control}{path}", content=data, timeout=timeout,
                                      headers={"Content-Type": "application/json"})
        except httpx.HTTPError as exc:
            raise ClusterUnavailable(f"emulated cluster {self.name}: {method} {path} failed: "
                                     f"{type(exc).__name__}: {exc}") from exc
        if resp.status_code >= 400:
            raise ClusterUnavailable(f"emulated cluster {self.name}: {method} {path} answered {resp.status_code}: "
                                     f"{resp.text}")
        return resp.json()

    def now(self) -> float:
        return float(self._control("GET", "/sim/now")["now"])

    def _advance(self, seconds: float) -> None:
        self._control("POST", "/sim/advance", {"seconds": float(seconds)})

    def checkpoint(self, name: str) -> None:
        self._control("POST", "/sim/checkpoint", {"name": name})

    def restore(self, name: str) -> None:
        self._control("POST", "/sim/restore", {"name": name})

    def reset(self) -> None:
        try:
            self.restore(OPEN_CHECKPOINT)
        except ClusterUnavailable as exc:
            raise ResetError(f"emulated cluster {self.name} could not be reset: {exc}") from exc
        self._agent_kubeconfigs.clear()  # the agent's account was created after the checkpoint

    def health(self) -> ClusterHealth:
        try:
            info = self._control("GET", "/sim/health", timeout=10.0)
        except ClusterUnavailable as exc:
            return ClusterHealth(ok=False, detail=str(exc))
        return ClusterHealth(ok=bool(info.get("ok")), detail=f"cluster time {info.get('now')}, "
                             f"{info.get('objects')} objects, resourceVersion {info.get('resourceVersion')}")

    # -- Kubernetes credentials ------------------------------------------------------------
    def _configuration(self, token: str) -> Any:
        from kubernetes import client

        cfg = client.Configuration()
        cfg.host = self.endpoints.kubernetes
        cfg.ssl_ca_cert = str(self.ca_file)
        cfg.api_key = {"authorization": f"Bearer {token}"}
        return cfg

    def api_client(self) -> Any:
        from kubernetes import client

        return client.ApiClient(self._configuration(self._admin_token))

    def _token_valid(self, token: str) -> bool:
        ctx = tls.ssl_context(self._ca_pem)
        req = urllib.request.Request(f"{self.endpoints.kubernetes}/version", headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
                return resp.status == 200
        except urllib.error.HTTPError as exc:
            if exc.code == 401:
                return False
            raise ClusterUnavailable(f"emulated cluster {self.name}: checking a token answered {exc.code}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise ClusterUnavailable(f"emulated cluster {self.name} cannot be reached: {exc}") from exc

    def agent_kubeconfig(self, namespace: str, also: Sequence[str] = ()) -> Path:
        key = "+".join((namespace, *also))
        cached = self._agent_kubeconfigs.get(key)
        # A restore to a checkpoint taken before the account existed leaves a dead token behind.
        if cached is not None and self._token_valid(self._agent_tokens[key]):
            return cached
        # Credentials may come before the deploy here (a test, a dry run): the namespace is made.
        with self.api_client() as api:
            token = grant_agent(Kube(api), namespace, also, create_namespace=True)
        path = write_kubeconfig(self.workdir / f"agent-{namespace}.kubeconfig", self.endpoints.kubernetes, self._ca_pem,
                                token, f"{namespace}-{AGENT_ACCOUNT}", namespace)
        self._agent_kubeconfigs[key] = path
        self._agent_tokens[key] = token
        return path

    # -- lifetime --------------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._http.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        if self.process.stdin:
            self.process.stdin.close()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


@providers.register("sim")
class SimProvider(ClusterProvider):
    """Starts an emulated cluster process per `open`."""

    def open(self, name: str, seed: int = 0, live: bool = False, speed: float = 1.0,
             workdir: str | Path | None = None, cluster_factory: str | None = None, start: float | None = None,
             **options: Any) -> SimHandle:
        if options:
            raise ClusterUnavailable(f"unknown options for the sim provider: {', '.join(sorted(options))}")
        own = workdir is None
        wd = Path(tempfile.mkdtemp(prefix=f"sim-{name}-")) if own else Path(workdir)  # type: ignore[arg-type]
        wd.mkdir(parents=True, exist_ok=True)
        ready_path, stderr_path = wd / "ready.json", wd / "server.log"
        ready_path.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "kubesim.server", "--seed", str(int(seed)), "--ready-file", str(ready_path),
               "--die-with-parent"]
        if live:
            cmd += ["--live", "--speed", str(float(speed))]
        if cluster_factory:
            cmd += ["--cluster-factory", cluster_factory]
        if start is not None:  # else the cluster's time starts at the host's clock
            cmd += ["--start", repr(float(start))]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        env["PYTHONHASHSEED"] = "0"  # set iteration order must not vary: same seed, same trial
        with open(stderr_path, "wb") as err:
            process = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                       stderr=err)
        deadline = time.monotonic() + START_TIMEOUT
        while not ready_path.exists():
            if process.poll() is not None:
                raise ClusterUnavailable(f"emulated cluster {name} exited with code {process.returncode} while "
                                         f"starting: {_tail(stderr_path)}")
            if time.monotonic() > deadline:
                process.kill()
                process.wait()
                raise ClusterUnavailable(f"emulated cluster {name} was not ready after {START_TIMEOUT:.0f} s: "
                                         f"{_tail(stderr_path)}")
            time.sleep(0.01)
        handle = SimHandle(name, process, json.loads(ready_path.read_text()), wd, own, live, stderr_path)
        try:
            handle.checkpoint(OPEN_CHECKPOINT)
        except ClusterUnavailable:
            handle.close()
            raise
        return handle
