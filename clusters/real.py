"""A ClusterHandle over any kubeconfig: what kind and EKS share once a cluster exists.

Wall-clock time, admin access through the kubeconfig, a namespaced service account for the
agent, query endpoints through `kubectl port-forward` (or configured URLs), and a reset that
removes application namespaces and every Chaos Mesh resource, stuck finalizers included.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from clusters.access import AGENT_ACCOUNT, PROTECTED_NAMESPACES, grant_agent, refuse_protected
from clusters.handle import Capabilities, ClusterHandle, ClusterHealth, Endpoints
from clusters.kube import Kube, KubeError
from clusters.stack.services import QUERY_SERVICES, ServiceTarget
from core.errors import ClusterUnavailable, InfrastructureError, ResetError

CHAOS_GROUP = "chaos-mesh.org"


def _missing(exc: KubeError) -> bool:
    return exc.code == 404


def _text_get(api: Any, path: str, timeout: float = 10.0) -> tuple[int, str]:
    """A GET whose answer is plain text (/readyz), through the client's auth and TLS."""
    req = api.param_serialize("GET", path, header_params={"Accept": "text/plain"},
                              auth_settings=["BearerToken"])
    response = api.call_api(*req, _request_timeout=timeout)
    return response.status, (response.read() or b"").decode("utf-8", "replace")


class PortForward:
    """One `kubectl port-forward` process to a Service, on a random local port."""

    FORWARDING = re.compile(r"Forwarding from 127\.0\.0\.1:(\d+)")

    def __init__(self, kubectl: str, kubeconfig: Path, context: str | None, target: ServiceTarget) -> None:
        self.target = target
        argv = [kubectl, "--kubeconfig", str(kubeconfig)]
        if context:
            argv += ["--context", context]
        argv += ["-n", target.namespace, "port-forward", f"svc/{target.service}",
                 f":{target.port}", "--address", "127.0.0.1"]
        try:
            self.process = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        except FileNotFoundError:
            raise ClusterUnavailable(
                f"'{kubectl}' is not on PATH; install kubectl to reach {target.service}"
            ) from None
        self.url = self._wait_for_port(timeout=30.0)

    def _wait_for_port(self, timeout: float) -> str:
        found: list[str] = []
        ready = threading.Event()

        def read() -> None:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                match = self.FORWARDING.search(line)
                if match and not found:
                    found.append(f"http://127.0.0.1:{match.group(1)}")
                    ready.set()
            ready.set()  # stdout closed: the process ended

        threading.Thread(target=read, daemon=True).start()
        ready.wait(timeout)
        if not found:
            self.stop()
            err = self.process.stderr.read() if self.process.stderr else ""
            raise ClusterUnavailable(
                f"kubectl port-forward to {self.target.namespace}/{self.target.service}:"
                f"{self.target.port} did not start: {err.strip() or 'no output'}"
            )
        return found[0]

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def _default_app_namespaces() -> set[str]:
    """Namespaces of every application the farm knows (a leftover from a crashed worker is
    cleaned even though it existed when the handle was opened)."""
    apps_dir = Path(__file__).resolve().parent.parent / "farm" / "apps"
    found = set()
    for path in apps_dir.glob("*/app.yaml"):
        try:
            spec = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError:
            continue
        for namespace in [spec.get("namespace"), *(spec.get("extra_namespaces") or [])]:
            if isinstance(namespace, str):
                found.add(namespace)  # an operator's namespace goes with its application
    return found


class KubeconfigClusterHandle(ClusterHandle):
    """A real (or any kubeconfig-reachable) cluster owned by one worker."""

    def __init__(
        self,
        provider: str,
        name: str,
        kubeconfig: Path,
        *,
        context: str | None = None,
        urls: dict[str, str] | None = None,
        query_services: dict[str, ServiceTarget] | None = None,
        app_namespaces: set[str] | None = None,
        kubectl: str = "kubectl",
        workdir: Path | None = None,
        reset_timeout: float = 180.0,
        finalizer_grace: float | None = None,
        poll_interval: float = 1.0,
        token_seconds: int = 6 * 3600,
        clock: ClusterHandle | None = None,
    ) -> None:
        self.provider, self.name = provider, name
        self._kubeconfig_path = Path(kubeconfig)
        self.context = context
        self.urls = dict(urls or {})
        self.query_services = dict(query_services or QUERY_SERVICES)
        self.app_namespaces = set(app_namespaces) if app_namespaces is not None else _default_app_namespaces()
        self.kubectl = kubectl
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix=f"farm-{provider}-{name}-"))
        self.reset_timeout = reset_timeout
        # Finalizers get a chance to run (Chaos Mesh recovers the fault in its finalizer) before
        # the reset strips them.
        self.finalizer_grace = reset_timeout / 3 if finalizer_grace is None else finalizer_grace
        self.poll_interval = poll_interval
        self.token_seconds = token_seconds
        # A cluster whose clock is not the wall (the emulated one, reached through its
        # kubeconfig like any other): time is read from and advanced through it.
        self.clock = clock
        # Such a cluster is the emulated one: its clock, its modelled node faults and its hostless
        # nodes come with it (its checkpoints do not: this handle does not speak its control API).
        self.capabilities = Capabilities() if clock is None else replace(
            clock.capabilities, checkpoints=False)
        self._cluster = self._read_kubeconfig()
        self._api: Any = None
        self._rest: Kube | None = None
        self._forwards: dict[str, PortForward] = {}
        self._agent_configs: dict[str, Path] = {}
        self._lock = threading.Lock()
        self._node_specs: dict[str, dict[str, Any]] | None = None  # schedulability as the farm found it
        try:
            self._baseline = set(self._namespaces())
        except KubeError as exc:
            if exc.code in (401, 403):
                raise ClusterUnavailable(
                    f"{self.ref}: the API server refuses the farm's credentials ({exc}); the farm needs "
                    "cluster-admin (on EKS: an access entry for this IAM identity)"
                ) from exc
            raise

    # -- access ---------------------------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:  # type: ignore[override]
        """The admin kubeconfig, with fresh credentials (helm and kubectl read this file)."""
        self._refresh_credentials()
        return self._kubeconfig_path

    def _refresh_credentials(self) -> None:
        """Providers whose tokens expire (EKS) rewrite the kubeconfig here."""

    def mark_baseline(self) -> None:
        """What exists now is the clean state a reset returns to (after the stack is installed)."""
        self._baseline = set(self._namespaces())

    def _drop_client(self) -> None:
        with self._lock:
            if self._api is not None:
                try:
                    self._api.close()
                except Exception:  # closing a pool that never opened
                    pass
            self._api, self._rest = None, None

    def _read_kubeconfig(self) -> dict[str, Any]:
        try:
            config = yaml.safe_load(self._kubeconfig_path.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ClusterUnavailable(f"{self._kubeconfig_path}: cannot read kubeconfig ({exc})") from exc
        context_name = self.context or config.get("current-context")
        contexts = {c.get("name"): c.get("context", {}) for c in config.get("contexts") or []}
        clusters = {c.get("name"): c.get("cluster", {}) for c in config.get("clusters") or []}
        if context_name not in contexts:
            raise ClusterUnavailable(
                f"{self._kubeconfig_path}: field 'current-context': context '{context_name}' is not defined"
            )
        cluster = clusters.get(contexts[context_name].get("cluster"))
        if not cluster or not cluster.get("server"):
            raise ClusterUnavailable(f"{self._kubeconfig_path}: context '{context_name}' names no cluster server")
        return cluster

    def api_client(self) -> Any:
        self._refresh_credentials()
        with self._lock:
            if self._api is None:
                from kubernetes import config

                try:
                    self._api = config.new_client_from_config(
                        config_file=str(self._kubeconfig_path), context=self.context
                    )
                except Exception as exc:
                    raise ClusterUnavailable(f"{self._kubeconfig_path}: unusable kubeconfig ({exc})") from exc
            return self._api

    def _kube(self) -> Kube:
        if self._rest is None:
            self._rest = Kube(self.api_client())
        return self._rest

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        """A raw JSON call; an unreachable server becomes ClusterUnavailable."""
        try:
            return self._kube().request(method, path, body, content_type=content_type)
        except KubeError as exc:
            if exc.code == 0:
                raise ClusterUnavailable(f"{self.ref}: {exc}") from exc
            raise

    @property
    def endpoints(self) -> Endpoints:  # type: ignore[override]
        urls = {"kubernetes": self._cluster["server"].rstrip("/")}
        for component in ("prometheus", "loki", "jaeger"):
            urls[component] = self._query_url(component)
        return Endpoints(**urls)

    def _query_url(self, component: str) -> str:
        if component in self.urls:
            return self.urls[component].rstrip("/")
        with self._lock:
            forward = self._forwards.get(component)
            if forward is None or not forward.alive():
                forward = PortForward(self.kubectl, self.kubeconfig, self.context,
                                      self.query_services[component])
                self._forwards[component] = forward
            return forward.url

    # -- clock ----------------------------------------------------------------------------
    def now(self) -> float:
        return self.clock.now() if self.clock is not None else time.time()

    def _advance(self, seconds: float) -> None:
        if self.clock is not None:
            self.clock.advance(seconds)
        elif seconds > 0:
            time.sleep(seconds)

    # -- health ---------------------------------------------------------------------------
    def health(self) -> ClusterHealth:
        try:
            status, text = _text_get(self.api_client(), "/readyz")
        except Exception as exc:  # connection refused, TLS, timeouts
            return ClusterHealth(ok=False, detail=f"{self.ref}: API unreachable ({exc})")
        if status == 200:
            return ClusterHealth(ok=text.strip() == "ok", detail=f"readyz: {text.strip()[:200]}")
        if status not in (401, 403, 404):
            return ClusterHealth(ok=False, detail=f"readyz answered {status}: {text.strip()[:200]}")
        try:
            version = self.request("GET", "/version")
        except InfrastructureError as exc:
            return ClusterHealth(ok=False, detail=str(exc))
        return ClusterHealth(ok=True, detail=f"version {version.get('gitVersion', '?')}")

    # -- the agent's credentials ----------------------------------------------------------
    def agent_kubeconfig(self, namespace: str, also: Sequence[str] = ()) -> Path:
        refuse_protected((namespace, *also))  # before any read of the cluster
        key = "+".join((namespace, *also))
        cached = self._agent_configs.get(key)
        if cached is not None and cached.exists():
            return cached
        if self._node_specs is None:
            self._node_specs = self._read_node_specs()  # before any agent may cordon or taint
        token = grant_agent(self._kube(), namespace, also, token_seconds=self.token_seconds)
        path = self.workdir / f"agent-{namespace}.kubeconfig"
        self._write_kubeconfig(path, namespace, token)
        self._agent_configs[key] = path
        return path

    def _write_kubeconfig(self, path: Path, namespace: str, token: str) -> None:
        cluster: dict[str, Any] = {"server": self._cluster["server"]}
        if self._cluster.get("certificate-authority-data"):
            cluster["certificate-authority-data"] = self._cluster["certificate-authority-data"]
        elif self._cluster.get("certificate-authority"):
            ca = Path(self._cluster["certificate-authority"])
            if not ca.is_absolute():
                ca = self._kubeconfig_path.parent / ca
            cluster["certificate-authority-data"] = base64.b64encode(ca.read_bytes()).decode()
        if self._cluster.get("insecure-skip-tls-verify"):
            cluster["insecure-skip-tls-verify"] = True
        if self._cluster.get("tls-server-name"):
            cluster["tls-server-name"] = self._cluster["tls-server-name"]
        name = f"{self.provider}-{self.name}"
        config = {
            "apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": name, "cluster": cluster}],
            "users": [{"name": f"{AGENT_ACCOUNT}@{namespace}", "user": {"token": token}}],
            "contexts": [{"name": f"{AGENT_ACCOUNT}@{name}",
                          "context": {"cluster": name, "user": f"{AGENT_ACCOUNT}@{namespace}",
                                      "namespace": namespace}}],
            "current-context": f"{AGENT_ACCOUNT}@{name}",
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            yaml.safe_dump(config, out, sort_keys=False)

    # -- reset ----------------------------------------------------------------------------
    def _namespaces(self) -> list[str]:
        listing = self.request("GET", "/api/v1/namespaces")
        return [item["metadata"]["name"] for item in (listing or {}).get("items", [])]

    def _reset_targets(self) -> list[str]:
        present = set(self._namespaces())
        targets = (present - self._baseline) | (present & self.app_namespaces)
        return sorted(targets - PROTECTED_NAMESPACES)

    def chaos_resources(self) -> list[str]:
        """Collection paths of every Chaos Mesh kind the cluster serves (none without the CRDs)."""
        try:
            group = self.request("GET", f"/apis/{CHAOS_GROUP}")
        except KubeError as exc:
            if _missing(exc):
                return []
            raise
        version = (group.get("preferredVersion") or {}).get("groupVersion") or f"{CHAOS_GROUP}/v1alpha1"
        try:
            resources = self.request("GET", f"/apis/{version}").get("resources", [])
        except KubeError as exc:
            if _missing(exc):
                return []
            raise
        return [f"/apis/{version}/{r['name']}" for r in resources
                if "/" not in r["name"] and "list" in r.get("verbs", ["list"])]

    def _chaos_objects(self, collections: list[str]) -> list[dict[str, Any]]:
        found = []
        for collection in collections:
            try:
                items = self.request("GET", collection).get("items", [])
            except KubeError as exc:
                if _missing(exc):
                    continue
                raise
            for item in items:
                meta = item.get("metadata", {})
                group, version, plural = collection.rsplit("/", 3)[-3:]
                ns = meta.get("namespace")
                path = (f"/apis/{group}/{version}/namespaces/{ns}/{plural}/{meta['name']}" if ns
                        else f"/apis/{group}/{version}/{plural}/{meta['name']}")
                found.append({"path": path, "kind": item.get("kind", plural), "name": meta["name"],
                              "namespace": ns, "finalizers": meta.get("finalizers") or [],
                              "deleting": bool(meta.get("deletionTimestamp"))})
        return found

    def _delete(self, path: str) -> None:
        try:
            self.request("DELETE", path, {"kind": "DeleteOptions", "apiVersion": "v1",
                                          "propagationPolicy": "Background"})
        except KubeError as exc:
            if not _missing(exc):
                raise

    def _strip_finalizers(self, path: str) -> None:
        try:
            self.request("PATCH", path, {"metadata": {"finalizers": None}},
                         content_type="application/merge-patch+json")
        except KubeError as exc:
            if not _missing(exc):
                raise

    def _wait(self, seconds: float) -> None:
        """Between reset polls: real clusters converge on their own; a virtual clock must run."""
        if self.clock is not None:
            self.clock.advance(seconds)
        time.sleep(min(seconds, 0.05) if self.capabilities.virtual_clock else seconds)

    def reset(self) -> None:
        try:
            self._reset()
        except ResetError:
            raise
        except InfrastructureError as exc:
            raise ResetError(f"{self.ref}: reset failed: {exc}") from exc
        finally:
            self._agent_configs.clear()

    def _read_node_specs(self) -> dict[str, dict[str, Any]]:
        return {n["metadata"]["name"]: {"unschedulable": bool((n.get("spec") or {}).get("unschedulable")),
                                        "taints": (n.get("spec") or {}).get("taints") or []}
                for n in self.request("GET", "/api/v1/nodes").get("items", [])}

    def _restore_node_specs(self) -> None:
        """The agent may cordon and taint nodes (an SRE's fix for a broken node): put every node's
        schedulability and taints back as the farm found them, so that no trial inherits them."""
        if self._node_specs is None:
            return
        for name, now in self._read_node_specs().items():
            was = self._node_specs.get(name)
            if was is not None and was != now:
                self.request("PATCH", f"/api/v1/nodes/{name}",
                             {"spec": {"unschedulable": was["unschedulable"] or None, "taints": was["taints"] or None}},
                             content_type="application/merge-patch+json")

    def _reset(self) -> None:
        self._restore_node_specs()
        collections = self.chaos_resources()
        for obj in self._chaos_objects(collections):
            self._delete(obj["path"])
        targets = self._reset_targets()
        for namespace in targets:
            # Cluster-scoped, so it outlives the namespace: the agent's view of nodes and volumes.
            self._delete(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{AGENT_ACCOUNT}-{namespace}")
            self._delete(f"/api/v1/namespaces/{namespace}")
        started = time.monotonic()
        stripped: set[str] = set()
        while True:
            chaos = self._chaos_objects(collections)
            present = set(self._namespaces())
            waiting = [ns for ns in targets if ns in present]
            if not chaos and not waiting:
                return
            elapsed = time.monotonic() - started
            if elapsed >= self.finalizer_grace:
                for obj in chaos:
                    if obj["finalizers"] and obj["path"] not in stripped:
                        self._strip_finalizers(obj["path"])
                        stripped.add(obj["path"])
                    if not obj["deleting"]:
                        self._delete(obj["path"])
            if elapsed >= self.reset_timeout:
                raise ResetError(self._stuck_report(chaos, waiting))
            self._wait(self.poll_interval)

    def _stuck_report(self, chaos: list[dict[str, Any]], namespaces: list[str]) -> str:
        parts = []
        for obj in chaos:
            where = f"{obj['namespace']}/" if obj["namespace"] else ""
            parts.append(f"{obj['kind']} {where}{obj['name']} (finalizers: {obj['finalizers'] or 'none'})")
        for namespace in namespaces:
            detail = ""
            try:
                status = self.request("GET", f"/api/v1/namespaces/{namespace}").get("status", {})
                messages = [c.get("message", "") for c in status.get("conditions") or []
                            if c.get("status") == "True" and c.get("message")]
                detail = f" ({status.get('phase', '?')}: {'; '.join(messages)})" if messages else \
                    f" ({status.get('phase', '?')})"
            except InfrastructureError:
                pass
            parts.append(f"namespace {namespace}{detail}")
        return f"{self.ref}: reset did not finish within {self.reset_timeout:.0f} s; still present: " + \
            ", ".join(parts)

    # -- lifetime -------------------------------------------------------------------------
    def close(self) -> None:
        for forward in self._forwards.values():
            forward.stop()
        self._forwards.clear()
        self._drop_client()
