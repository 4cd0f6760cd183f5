"""The farm's own reads of what the agent's commands touch (undo capture, the check that a command
wrote), over the cluster's REST API with the agent's credentials: the same object `kubectl get -o
json` prints (keys sorted as Go prints a map, kind and apiVersion on list items), at the cost of
one HTTP request on a kept-alive connection instead of a kubectl process (~90 ms of Go start-up).
Only kinds whose served version is fixed are read here; any other kind, or a kubeconfig this
reader cannot use (a credential plugin), is read by kubectl as before, so the result never depends
on which path read it."""

from __future__ import annotations

import base64
import hashlib
import json
import ssl
from pathlib import Path
from typing import Any

import httpx
import yaml

from core import tls

REQUEST_TIMEOUT_S = 30.0  # as the kubectl reads' --request-timeout=30s
# kind as kubectl accepts it -> (API prefix, plural, Kind, namespaced). Only group versions with
# one served version on every Kubernetes the farm runs against: kubectl would print the same.
_RESOURCES: dict[str, tuple[str, str, str, bool]] = {
    **{kind: ("/api/v1", plural, kind_name, namespaced) for kind, plural, kind_name, namespaced in (
        ("pod", "pods", "Pod", True), ("service", "services", "Service", True),
        ("configmap", "configmaps", "ConfigMap", True), ("secret", "secrets", "Secret", True),
        ("serviceaccount", "serviceaccounts", "ServiceAccount", True),
        ("endpoints", "endpoints", "Endpoints", True),
        ("persistentvolumeclaim", "persistentvolumeclaims", "PersistentVolumeClaim", True),
        ("resourcequota", "resourcequotas", "ResourceQuota", True),
        ("limitrange", "limitranges", "LimitRange", True),
        ("node", "nodes", "Node", False), ("persistentvolume", "persistentvolumes", "PersistentVolume", False),
    )},
    **{kind: ("/apis/apps/v1", plural, kind_name, True) for kind, plural, kind_name in (
        ("deployment", "deployments", "Deployment"), ("statefulset", "statefulsets", "StatefulSet"),
        ("daemonset", "daemonsets", "DaemonSet"), ("replicaset", "replicasets", "ReplicaSet"),
    )},
}
def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


class Unreadable(Exception):
    """This reader cannot read the target: kubectl reads it."""


class ReadFailed(Exception):
    """The API answered with an error (forbidden, unreachable): kubectl would have failed too."""


class RestReader:
    """Reads objects with the credentials of one kubeconfig (re-read when its file changes: the
    provider may re-issue the token after a restore), over one kept-alive connection."""

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        self.kubeconfig, self.namespace = kubeconfig, namespace
        self._stamp: tuple[int, int] | None = None
        self._http: httpx.Client | None = None
        self._server = ""
        self._usable = True

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def _client(self) -> httpx.Client:
        try:
            st = self.kubeconfig.stat()
        except OSError as exc:
            raise Unreadable(str(exc)) from None
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            self.close()
            self._stamp, self._usable = stamp, True
            try:
                self._http, self._server = self._connect()
            except Unreadable:
                self._usable = False
        if not self._usable or self._http is None:
            raise Unreadable("the kubeconfig is not one this reader can use")
        return self._http

    def _connect(self) -> tuple[httpx.Client, str]:
        try:
            doc: dict[str, Any] = yaml.safe_load(self.kubeconfig.read_text()) or {}
            current = doc.get("current-context")
            context = next(c["context"] for c in doc.get("contexts") or [] if c.get("name") == current)
            cluster = next(c["cluster"] for c in doc.get("clusters") or [] if c.get("name") == context["cluster"])
            user = next(u.get("user") or {} for u in doc.get("users") or [] if u.get("name") == context["user"])
        except (OSError, yaml.YAMLError, StopIteration, KeyError, TypeError, AttributeError) as exc:
            raise Unreadable(f"cannot read the kubeconfig: {exc}") from None
        base = self.kubeconfig.parent

        def data(entry: dict[str, Any], key: str) -> bytes | None:
            if entry.get(f"{key}-data"):
                return base64.b64decode(entry[f"{key}-data"])
            if entry.get(key):
                p = Path(entry[key])
                try:
                    return (p if p.is_absolute() else base / p).read_bytes()
                except OSError as exc:
                    raise Unreadable(str(exc)) from None
            return None

        if "exec" in user or "auth-provider" in user or user.get("tokenFile") or user.get("username"):
            raise Unreadable("credentials this reader does not handle")
        headers = {"Accept": "application/json"}
        if user.get("token"):
            headers["Authorization"] = f"Bearer {user['token']}"
        verify: ssl.SSLContext | bool = tls.ssl_context(
            data(cluster, "certificate-authority"), data(user, "client-certificate"), data(user, "client-key"))
        if cluster.get("insecure-skip-tls-verify"):
            verify = False
        server = str(cluster.get("server") or "").rstrip("/")
        if not server:
            raise Unreadable("the kubeconfig names no server")
        return httpx.Client(verify=verify, headers=headers, timeout=REQUEST_TIMEOUT_S, trust_env=False), server

    def discovery_digest(self) -> str | None:
        """A digest of the API's groups and versions (`/api`, `/apis`); None when unreadable."""
        try:
            http = self._client()
            bodies = [http.get(self._server + path) for path in ("/api", "/apis")]
        except (Unreadable, httpx.HTTPError):
            return None
        if any(b.status_code != 200 for b in bodies):
            return None
        digest = hashlib.sha256()
        for body in bodies:
            digest.update(json.dumps(body.json(), sort_keys=True).encode())
        return digest.hexdigest()

    @property
    def server(self) -> str:
        return self._server

    def get(self, kind: str, name: str | None = None, selector: str | None = None) -> dict[str, Any] | None:
        """The object (None when absent) or, without a name, the list; Unreadable when the kind or
        the credentials are not ones this reader serves, ReadFailed when the API refused."""
        if kind not in _RESOURCES:
            raise Unreadable(f"kind {kind!r} is read by kubectl")
        prefix, plural, kind_name, namespaced = _RESOURCES[kind]
        path = f"{prefix}/namespaces/{self.namespace}/{plural}" if namespaced else f"{prefix}/{plural}"
        if name:
            path += f"/{name}"
        http = self._client()
        try:
            resp = http.get(self._server + path, params={"labelSelector": selector} if selector else None)
        except httpx.HTTPError as exc:
            raise ReadFailed(type(exc).__name__) from None
        if resp.status_code == 404 and name:
            return None
        if resp.status_code != 200:
            raise ReadFailed(f"HTTP {resp.status_code}")
        body = resp.json()
        if not name:
            version = prefix.split("/", 2)[-1] if prefix.startswith("/apis/") else "v1"
            for item in body.get("items") or []:
                item.setdefault("apiVersion", version)
                item.setdefault("kind", kind_name)
        return _sorted(body)  # type: ignore[no-any-return]
