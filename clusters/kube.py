"""The farm's one Kubernetes REST client: objects as plain dicts, over a kubernetes.client.ApiClient.

Deploy, reset, the agent's credentials, injectors and oracles read, change and restore objects
exactly, so they work on the JSON the API server returns (no typed models that would drop fields
the client does not know), and they go through `ApiClient` so that the same code reaches the
emulated cluster and kind/EKS. Built-in kinds come from KINDS; any other kind (a custom resource)
is found by discovery from its apiVersion. Every failure is one KubeError carrying the HTTP code
and the API's Status.
"""

from __future__ import annotations

import builtins
import json
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from clusters.handle import ClusterHandle
from core.errors import InfrastructureError, InjectionError

Obj = dict[str, Any]


class KubeError(InfrastructureError):
    """A Kubernetes API call failed: `code` is the HTTP status (0 when the server could not be
    reached), `status` the API's Status object (`reason`, `message`, `details`)."""

    # A failed API call belongs to the step that made it (deploy, inject, reset...), which the
    # trial knows: no phase of its own.
    phase = ""

    def __init__(self, code: int, status: Obj, what: str) -> None:
        self.code, self.status = code, status
        self.reason: str = status.get("reason", "") or ""
        message = status.get("message", "")
        super().__init__(" ".join(filter(None, [f"{what}: {code}", self.reason and f"{self.reason}:", message])))


class NotFound(KubeError):
    """404: the object (or the kind) does not exist."""


def kube_error(code: int, status: Obj, what: str) -> KubeError:
    return (NotFound if code == 404 else KubeError)(code, status, what)


@dataclass(frozen=True)
class Kind:
    api: str  # "/api/v1" or "/apis/<group>/<version>"
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return self.api.removeprefix("/apis/").removeprefix("/api/")


def _api_root(api_version: str) -> str:
    return f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"


KINDS: dict[str, Kind] = {
    "Pod": Kind("/api/v1", "pods"),
    "Service": Kind("/api/v1", "services"),
    "Endpoints": Kind("/api/v1", "endpoints"),
    "ConfigMap": Kind("/api/v1", "configmaps"),
    "Secret": Kind("/api/v1", "secrets"),
    "ServiceAccount": Kind("/api/v1", "serviceaccounts"),
    "PersistentVolumeClaim": Kind("/api/v1", "persistentvolumeclaims"),
    "PersistentVolume": Kind("/api/v1", "persistentvolumes", False),
    "ResourceQuota": Kind("/api/v1", "resourcequotas"),
    "LimitRange": Kind("/api/v1", "limitranges"),
    "Event": Kind("/api/v1", "events"),
    "Node": Kind("/api/v1", "nodes", False),
    "Namespace": Kind("/api/v1", "namespaces", False),
    "Deployment": Kind("/apis/apps/v1", "deployments"),
    "StatefulSet": Kind("/apis/apps/v1", "statefulsets"),
    "DaemonSet": Kind("/apis/apps/v1", "daemonsets"),
    "ReplicaSet": Kind("/apis/apps/v1", "replicasets"),
    "Job": Kind("/apis/batch/v1", "jobs"),
    "CronJob": Kind("/apis/batch/v1", "cronjobs"),
    "NetworkPolicy": Kind("/apis/networking.k8s.io/v1", "networkpolicies"),
    "Role": Kind("/apis/rbac.authorization.k8s.io/v1", "roles"),
    "RoleBinding": Kind("/apis/rbac.authorization.k8s.io/v1", "rolebindings"),
    "ClusterRole": Kind("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": Kind("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "ValidatingWebhookConfiguration": Kind(
        "/apis/admissionregistration.k8s.io/v1", "validatingwebhookconfigurations", False
    ),
    "MutatingWebhookConfiguration": Kind(
        "/apis/admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", False
    ),
    "StorageClass": Kind("/apis/storage.k8s.io/v1", "storageclasses", False),
    "PriorityClass": Kind("/apis/scheduling.k8s.io/v1", "priorityclasses", False),
    "TidbCluster": Kind("/apis/pingcap.com/v1alpha1", "tidbclusters"),
}

_CLIENTS: weakref.WeakKeyDictionary[ClusterHandle, Any] = weakref.WeakKeyDictionary()


def api_for(cluster: ClusterHandle) -> Any:
    """One ApiClient per cluster handle, so its connection pool (and TLS sessions) are reused."""
    try:
        return _CLIENTS[cluster]
    except (KeyError, TypeError):
        api = cluster.api_client()
        try:
            _CLIENTS[cluster] = api
        except TypeError:  # a handle that cannot be weakly referenced
            pass
        return api


class Kube:
    """REST verbs on plain dicts. `kind` is a KINDS name, or any kind when its `api_version` is
    given (resolved by discovery, once per apiVersion)."""

    def __init__(self, api_client: Any) -> None:
        self.api = api_client
        self._discovered: dict[str, dict[str, Kind]] = {}  # apiVersion -> kind -> where it is served

    @classmethod
    def of(cls, cluster: ClusterHandle) -> Kube:
        """A client over the handle's farm credentials, sharing one connection pool per handle."""
        return cls(api_for(cluster))

    # -- raw ---------------------------------------------------------------------------------
    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                query: Mapping[str, Any] | None = None) -> Any:
        from kubernetes.client.exceptions import ApiException

        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        what = f"{method} {path}"
        params = [(k, v) for k, v in (query or {}).items() if v not in (None, "")]
        try:
            req = self.api.param_serialize(method, path, query_params=params, header_params=headers, body=body,
                                           auth_settings=["BearerToken"])
            resp = self.api.call_api(*req)
            resp.read()
        except ApiException as exc:  # TLS failures, requests the client cannot build
            raise kube_error(exc.status or 0, _status_of(exc.body, str(exc.reason or exc)), what) from None
        except Exception as exc:  # connection refused, timeouts: the cluster is unreachable
            raise KubeError(0, {"reason": "Unreachable", "message": str(exc)}, what) from exc
        text = resp.data.decode("utf-8", "replace") if resp.data else ""
        if resp.status >= 400:
            raise kube_error(resp.status, _status_of(text, text), what)
        return json.loads(text) if text else None

    # -- where a kind lives ------------------------------------------------------------------
    def kind(self, kind: str, api_version: str | None = None) -> Kind:
        known = KINDS.get(kind)
        if known is not None and api_version in (None, known.api_version):
            return known
        if api_version is None:
            raise KubeError(404, {"reason": "NotFound", "message": f'kind "{kind}" needs its apiVersion'},
                            "discovery")
        if api_version not in self._discovered:
            root = _api_root(api_version)
            listing = self.request("GET", root) or {}
            self._discovered[api_version] = {
                r["kind"]: Kind(root, r["name"], bool(r.get("namespaced")))
                for r in listing.get("resources", []) if "/" not in r["name"]
            }
        try:
            return self._discovered[api_version][kind]
        except KeyError:
            raise NotFound(404, {"reason": "NotFound", "message": f'no kind "{kind}" in {api_version}'},
                           "discovery") from None

    def path(self, kind: str, namespace: str = "", name: str = "", api_version: str | None = None) -> str:
        k = self.kind(kind, api_version)
        base = k.api + (f"/namespaces/{namespace}" if k.namespaced and namespace else "") + f"/{k.plural}"
        return base + (f"/{name}" if name else "")

    # -- verbs -------------------------------------------------------------------------------
    def get(self, kind: str, namespace: str, name: str, api_version: str | None = None) -> Obj:
        return self.request("GET", self.path(kind, namespace, name, api_version))

    def find(self, kind: str, namespace: str, name: str, api_version: str | None = None) -> Obj | None:
        try:
            return self.get(kind, namespace, name, api_version)
        except NotFound:
            return None

    def list(self, kind: str, namespace: str = "", selector: str = "", fields: str = "",
             api_version: str | None = None) -> builtins.list[Obj]:
        answer = self.request("GET", self.path(kind, namespace, api_version=api_version),
                              query={"labelSelector": selector, "fieldSelector": fields})
        return list((answer or {}).get("items", []))

    def create(self, kind: str, namespace: str, obj: Obj) -> Obj:
        k = self.kind(kind, obj.get("apiVersion"))
        body = {"apiVersion": k.api_version, "kind": kind, **obj}
        return self.request("POST", self.path(kind, namespace, api_version=k.api_version), body)

    def replace(self, kind: str, namespace: str, obj: Obj) -> Obj:
        return self.request("PUT", self.path(kind, namespace, obj["metadata"]["name"], obj.get("apiVersion")), obj)

    def patch(self, kind: str, namespace: str, name: str, patch: Any, merge: bool = True,
              api_version: str | None = None) -> Obj:
        ctype = "application/merge-patch+json" if merge else "application/json-patch+json"
        return self.request("PATCH", self.path(kind, namespace, name, api_version), patch, ctype)

    def delete(self, kind: str, namespace: str, name: str, missing_ok: bool = True,
               api_version: str | None = None) -> None:
        try:
            self.request("DELETE", self.path(kind, namespace, name, api_version))
        except NotFound:
            if not missing_ok:
                raise

    def ensure_namespace(self, name: str) -> bool:
        """Create the namespace if missing; True when this call created it."""
        if self.find("Namespace", "", name) is not None:
            return False
        self.create("Namespace", "", {"metadata": {"name": name}})
        return True

    def apply(self, obj: Obj, namespace: str | None = None) -> Obj:
        """Create, or replace what exists (keeping its resourceVersion), as `kubectl apply` would
        for objects the farm owns entirely; `namespace` overrides the manifest's own."""
        body = json.loads(json.dumps(obj))
        kind, api_version = body["kind"], body["apiVersion"]
        meta = body.setdefault("metadata", {})
        ns = (namespace or meta.get("namespace") or "") if self.kind(kind, api_version).namespaced else ""
        if ns:
            meta["namespace"] = ns
        try:
            return self.create(kind, ns, body)
        except KubeError as exc:
            if exc.code != 409:
                raise
        current = self.get(kind, ns, meta["name"], api_version)
        meta["resourceVersion"] = current["metadata"]["resourceVersion"]
        if kind == "Service" and "clusterIP" in current.get("spec", {}):
            body.setdefault("spec", {}).setdefault("clusterIP", current["spec"]["clusterIP"])
        return self.replace(kind, ns, body)

    # -- workloads ---------------------------------------------------------------------------
    def workload(self, namespace: str, name: str, kind: str | None = None) -> tuple[str, Obj]:
        """A Deployment, StatefulSet or DaemonSet by name (tried in that order when not given)."""
        for candidate in [kind] if kind else ["Deployment", "StatefulSet", "DaemonSet"]:
            obj = self.find(candidate, namespace, name)
            if obj is not None:
                return candidate, obj
        raise InjectionError(f"no workload '{name}' in namespace '{namespace}'")

    def pods_of(self, namespace: str, workload: Obj) -> builtins.list[Obj]:
        labels = workload["spec"]["selector"].get("matchLabels", {})
        selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        return self.list("Pod", namespace, selector)

    def node_of(self, namespace: str, workload_name: str) -> str:
        _, obj = self.workload(namespace, workload_name)
        for pod in self.pods_of(namespace, obj):
            node = pod.get("spec", {}).get("nodeName")
            if node:
                return node
        raise InjectionError(f"no pod of '{workload_name}' is scheduled on a node yet")


def _status_of(text: Any, fallback: str) -> Obj:
    """The Status object of an error answer (a bare message when the body is not one)."""
    try:
        status = json.loads(text or "{}")
    except (TypeError, ValueError):
        status = None
    return status if isinstance(status, dict) else {"message": str(fallback)[:500]}
