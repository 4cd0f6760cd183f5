"""Plain-dict access to any Kubernetes resource through the kubernetes client of a cluster handle.

Injectors read, change and restore fragments of objects exactly, so they work on the JSON the API
server returns (no typed models that would drop fields the client does not know), and they go
through `ApiClient` so that the same code reaches the emulated cluster and kind/EKS.
"""

from __future__ import annotations

import builtins
import copy
import json
import weakref
from dataclasses import dataclass
from typing import Any

from clusters.base import ClusterHandle
from core.errors import InjectionError

Obj = dict[str, Any]


@dataclass(frozen=True)
class Kind:
    api: str  # "/api/v1" or "/apis/<group>/<version>"
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return self.api.removeprefix("/apis/").removeprefix("/api/")


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

# Server-owned metadata that must not travel with a saved object when it is created again.
_SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink")


class KubeError(InjectionError):
    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(message)


class NotFound(KubeError):
    pass


@dataclass(frozen=True)
class Ref:
    """An object's address, stored in an Injection as "Kind/namespace/name"."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"

    @classmethod
    def parse(cls, text: str) -> Ref:
        kind, namespace, name = text.split("/", 2)
        return cls(kind, namespace, name)


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
    """REST verbs on plain dicts for the kinds in KINDS (and any custom resource by api/plural)."""

    def __init__(self, cluster: ClusterHandle) -> None:
        self.cluster = cluster
        self.api = api_for(cluster)

    # -- raw ---------------------------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        query: list[tuple[str, str]] | None = None,
    ) -> Any:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        _method, url, headers, body_out, _ = self.api.param_serialize(
            method=method,
            resource_path=path,
            query_params=query or [],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            resp = self.api.call_api(method, url, header_params=headers, body=body_out)
            resp.read()
        except Exception as exc:  # urllib3 / connection errors
            raise KubeError(0, f"{method} {path}: {exc}") from exc
        text = resp.data.decode() if resp.data else ""
        if resp.status >= 400:
            try:
                message = json.loads(text).get("message", text)
            except ValueError:
                message = text
            err = NotFound if resp.status == 404 else KubeError
            raise err(resp.status, f"{method} {path}: {resp.status} {message}")
        return json.loads(text) if text else None

    # -- by kind -----------------------------------------------------------------------------
    def path(self, kind: str, namespace: str = "", name: str = "") -> str:
        k = KINDS[kind]
        base = k.api + (f"/namespaces/{namespace}" if k.namespaced else "") + f"/{k.plural}"
        return base + (f"/{name}" if name else "")

    def get(self, kind: str, namespace: str, name: str) -> Obj:
        return self.request("GET", self.path(kind, namespace, name))

    def find(self, kind: str, namespace: str, name: str) -> Obj | None:
        try:
            return self.get(kind, namespace, name)
        except NotFound:
            return None

    def list(self, kind: str, namespace: str = "", selector: str = "", fields: str = "") -> builtins.list[Obj]:
        query = []
        if selector:
            query.append(("labelSelector", selector))
        if fields:
            query.append(("fieldSelector", fields))
        return self.request("GET", self.path(kind, namespace), query=query).get("items", [])

    def create(self, kind: str, namespace: str, obj: Obj) -> Obj:
        k = KINDS[kind]
        obj = {"apiVersion": k.api_version, "kind": kind, **obj}
        return self.request("POST", self.path(kind, namespace), obj)

    def replace(self, kind: str, namespace: str, obj: Obj) -> Obj:
        return self.request("PUT", self.path(kind, namespace, obj["metadata"]["name"]), obj)

    def patch(self, kind: str, namespace: str, name: str, patch: Any, merge: bool = True) -> Obj:
        ctype = "application/merge-patch+json" if merge else "application/json-patch+json"
        return self.request("PATCH", self.path(kind, namespace, name), patch, ctype)

    def delete(self, kind: str, namespace: str, name: str, missing_ok: bool = True) -> None:
        try:
            self.request("DELETE", self.path(kind, namespace, name))
        except NotFound:
            if not missing_ok:
                raise

    def ensure_namespace(self, name: str) -> bool:
        """Create the namespace if missing; True when this call created it."""
        if self.find("Namespace", "", name) is not None:
            return False
        self.create("Namespace", "", {"metadata": {"name": name}})
        return True

    # -- workloads ---------------------------------------------------------------------------
    def workload(self, namespace: str, name: str, kind: str | None = None) -> tuple[str, Obj]:
        """A Deployment or StatefulSet by name (kind tried in that order when not given)."""
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


_SUFFIX = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(text: Any) -> float | Any:
    """A Kubernetes quantity as a number ("1000m" and "1" are the same CPU); unparsable stays."""
    import re

    m = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", str(text))
    if not m or (m.group(2) and m.group(2) not in _SUFFIX):
        return text
    return float(m.group(1)) * _SUFFIX.get(m.group(2), 1.0)


def clean_for_create(obj: Obj) -> Obj:
    """A copy of a read object that can be POSTed again (no status, no server metadata)."""
    out = copy.deepcopy(obj)
    out.pop("status", None)
    meta = out.get("metadata", {})
    for key in _SERVER_FIELDS:
        meta.pop(key, None)
    return out


def container_index(template_spec: Obj, container: str | None) -> int:
    containers = template_spec.get("containers", [])
    if not containers:
        raise InjectionError("the pod template has no containers")
    if container is None:
        return 0
    for i, c in enumerate(containers):
        if c.get("name") == container:
            return i
    names = ", ".join(c.get("name", "?") for c in containers)
    raise InjectionError(f"no container '{container}' (containers: {names})")
