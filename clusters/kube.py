"""A small generic REST layer over a kubernetes.client.ApiClient: objects as plain dicts,
resource paths found by discovery, and the API's Status carried by one project error. Deploy,
reset and injectors use it for kinds the typed client does not know (custom resources)."""

from __future__ import annotations

import json
from typing import Any

from core.errors import InfrastructureError

Obj = dict[str, Any]


class KubeError(InfrastructureError):
    """A Kubernetes API call failed; `status` is the API's Status body, `code` its HTTP code."""

    def __init__(self, code: int, status: Obj, what: str) -> None:
        self.code, self.status = code, status
        self.reason = status.get("reason", "")
        super().__init__(f"{what}: {code} {self.reason}: {status.get('message', '')}".strip())


class KubeRest:
    def __init__(self, api_client: Any) -> None:
        self.api = api_client
        self._resources: dict[str, dict[str, tuple[str, bool]]] = {}  # apiVersion -> kind -> (plural, namespaced)

    # -- raw calls -------------------------------------------------------------------------
    def call(self, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None,
             content_type: str = "application/json") -> Any:
        from kubernetes.client.exceptions import ApiException

        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        q = [(k, v) for k, v in (query or {}).items() if v is not None]
        try:
            req = self.api.param_serialize(method, path, query_params=q, header_params=headers, body=body,
                                           auth_settings=["BearerToken"])
            resp = self.api.call_api(*req)
            resp.read()
            data = resp.data
        except ApiException as exc:
            try:
                status = json.loads(exc.body or "{}")
            except ValueError:
                status = {"message": str(exc.body)[:500]}
            raise KubeError(exc.status or 0, status, f"{method} {path}") from None
        except Exception as exc:  # connection refused, timeouts: the cluster is unreachable
            raise KubeError(0, {"reason": "Unreachable", "message": str(exc)}, f"{method} {path}") from exc
        if resp.status >= 400:
            raise KubeError(resp.status, json.loads(data or b"{}"), f"{method} {path}")
        return json.loads(data) if data else None

    # -- discovery -------------------------------------------------------------------------
    def resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        if api_version not in self._resources:
            base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            listing = self.call("GET", base)
            self._resources[api_version] = {
                r["kind"]: (r["name"], r["namespaced"]) for r in listing.get("resources", []) if "/" not in r["name"]
            }
        try:
            return self._resources[api_version][kind]
        except KeyError:
            raise KubeError(404, {"reason": "NotFound", "message": f'no kind "{kind}" in {api_version}'},
                            "discovery") from None

    def path(self, api_version: str, kind: str, namespace: str | None = None, name: str | None = None) -> str:
        plural, namespaced = self.resource(api_version, kind)
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        if namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{plural}"
        return f"{base}/{name}" if name else base

    # -- verbs on dicts --------------------------------------------------------------------
    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj:
        return self.call("GET", self.path(api_version, kind, namespace, name))

    def try_get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        try:
            return self.get(api_version, kind, name, namespace)
        except KubeError as exc:
            if exc.code == 404:
                return None
            raise

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str | None = None, field_selector: str | None = None) -> list[Obj]:
        out = self.call("GET", self.path(api_version, kind, namespace),
                        query={"labelSelector": label_selector, "fieldSelector": field_selector})
        return list(out.get("items", []))

    def create(self, obj: Obj, namespace: str | None = None) -> Obj:
        ns = namespace or obj.get("metadata", {}).get("namespace")
        return self.call("POST", self.path(obj["apiVersion"], obj["kind"], ns), body=obj)

    def replace(self, obj: Obj) -> Obj:
        meta = obj["metadata"]
        return self.call("PUT", self.path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"]), body=obj)

    def patch(self, api_version: str, kind: str, name: str, patch: Any, namespace: str | None = None,
              kind_of_patch: str = "merge") -> Obj:
        ctype = {"merge": "application/merge-patch+json", "json": "application/json-patch+json",
                 "strategic": "application/strategic-merge-patch+json"}[kind_of_patch]
        return self.call("PATCH", self.path(api_version, kind, namespace, name), body=patch, content_type=ctype)

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None,
               missing_ok: bool = True) -> None:
        try:
            self.call("DELETE", self.path(api_version, kind, namespace, name),
                      body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})
        except KubeError as exc:
            if not (missing_ok and exc.code == 404):
                raise

    def apply(self, obj: Obj, namespace: str | None = None) -> Obj:
        """Create, or replace what exists (keeping its resourceVersion), as `kubectl apply` would
        for objects the farm owns entirely."""
        ns = namespace or obj.get("metadata", {}).get("namespace")
        body = json.loads(json.dumps(obj))
        plural, namespaced = self.resource(body["apiVersion"], body["kind"])
        if namespaced and ns:
            body.setdefault("metadata", {})["namespace"] = ns
        try:
            return self.create(body, ns if namespaced else None)
        except KubeError as exc:
            if exc.code != 409:
                raise
        cur = self.get(body["apiVersion"], body["kind"], body["metadata"]["name"], ns if namespaced else None)
        body["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"]
        if body["kind"] == "Service" and "clusterIP" in cur.get("spec", {}):
            body.setdefault("spec", {}).setdefault("clusterIP", cur["spec"]["clusterIP"])
        return self.replace(body)
