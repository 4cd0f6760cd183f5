"""The Kubernetes REST API over the store: path routing, authentication and RBAC, the verbs
(get, list, watch, create, update, patch, delete, deletecollection) and their sub-resources,
Table responses, and Status errors. `KubeAPI` is the app the HTTP server calls."""

from __future__ import annotations

import base64
import copy
import json
import logging
import threading
import traceback
from collections.abc import Callable
from typing import Any

import yaml

from kubesim.api import (
    discovery,
    eventsv1,
    fieldmanager,
    openapi,
    openapi3,
    portforward,
    protobuf,
    remotecommand,
    subresources,
)
from kubesim.api.admission import install_admission, normalize_times, validate
from kubesim.api.aggregator import APIServiceRegistry
from kubesim.api.authn import Authenticator, UserInfo
from kubesim.api.http import Request, Response
from kubesim.api.metrics import ResourceMetrics
from kubesim.api.patch import APPLY_PATCH, STRATEGIC_MERGE_PATCH, apply_patch
from kubesim.api.podsecurity import PodSecurityAdmission
from kubesim.api.rbac import BOOTSTRAP_CLUSTER_ROLE_BINDINGS, BOOTSTRAP_CLUSTER_ROLES, RBACAuthorizer
from kubesim.api.status import (
    bad_request,
    forbidden,
    forbidden_path,
    method_not_allowed,
    not_found_path,
    success,
)
from kubesim.api.tables import table
from kubesim.api.watch import Filter, ListOptions, state_at, stream, wait_fresh
from kubesim.api.webhooks import WebhookAdmission
from kubesim.controllers.common import delete_pod, deletion_grace
from kubesim.controllers.gc import GarbageCollector
from kubesim.resources import (
    CUSTOM_GROUPS,
    EVENTS_V1,
    METRICS_TYPES,
    NODE_LEASES,
    REVIEW_TYPES,
    lookup,
    register_all,
)
from kubesim.store import (
    Obj,
    ResourceType,
    Store,
    StoreError,
    fields_match,
    labels_match_query,
    parse_field_selector,
    parse_label_selector,
)

log = logging.getLogger(__name__)

_RBAC = "rbac.authorization.k8s.io"
FARM_GROUPS = frozenset({"sim.farm.io"})
_NAMESPACE_SUBS = ("status", "finalize")
# Field selectors each resource supports (kube-apiserver's field label conversion funcs);
# every resource also takes metadata.name and metadata.namespace.
FIELD_LABELS: dict[str, frozenset[str]] = {
    "pods": frozenset({"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                       "spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs", "status.nominatedNodeName"}),
    "events": frozenset({"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                         "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
                         "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"}),
    "secrets": frozenset({"type"}),
    "namespaces": frozenset({"status.phase"}),
    "nodes": frozenset({"spec.unschedulable"}),
    "replicasets.apps": frozenset({"status.replicas"}),
    "replicationcontrollers": frozenset({"status.replicas"}),
    "jobs.batch": frozenset({"status.successful"}),
}
_TRUE = ("true", "1")


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def json_response(status: int, obj: Any) -> Response:
    """A JSON body ends with a newline, as Go's json.Encoder writes it (clients that echo a
    Status body verbatim, such as the Python client's create_from_yaml, show it)."""
    return Response(status, "application/json", _dumps(obj) + b"\n")


Takeover = Callable[[Any, Any, Any], None]

# Kinds whose registry store sets ReturnDeletedObject (kube-apiserver pkg/registry/*/storage): a
# DELETE answers with the object; other kinds answer a Status unless the object lingers
# (finalizers, graceful deletion).
RETURN_DELETED_OBJECT = frozenset({"pods", "namespaces", "services", "serviceaccounts", "persistentvolumes",
                                   "persistentvolumeclaims", "storageclasses.storage.k8s.io"})


def _spdy_switch(proto: str, takeover: Takeover) -> Response:
    """The 101 answer to a SPDY/3.1 upgrade that settled on `proto`; `takeover` runs the session."""
    return Response(101, "application/octet-stream", takeover=takeover, headers={
        "Connection": "Upgrade", "Upgrade": "SPDY/3.1", "X-Stream-Protocol-Version": proto})


def _websocket_switch(req: Request, what: str, protocols: tuple[str, ...], named: str,
                      session: Callable[[str], Takeover]) -> Response:
    """The 101 answer to a WebSocket upgrade for `what` (exec, port-forward), the session run in the
    subprotocol chosen from `protocols`; without a Sec-WebSocket-Key or a protocol in common it is
    refused, the refusal naming the protocol `named`."""
    proto = remotecommand.choose_protocol(req.headers.get("Sec-WebSocket-Protocol"), protocols)
    key = req.headers.get("Sec-WebSocket-Key")
    if proto is None or not key:
        raise bad_request(f"unable to upgrade connection: a WebSocket {what} needs Sec-WebSocket-Key and "
                          f"the {named} protocol")
    return Response(101, "application/octet-stream", takeover=session(proto), headers={
        "Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Protocol": proto,
        "Sec-WebSocket-Accept": remotecommand.websocket_accept(key)})


class Route:
    """A resource request: /api/v1/... or /apis/G/V/..., parsed."""

    def __init__(self, rt: ResourceType, namespace: str | None, name: str, sub: str) -> None:
        self.rt, self.namespace, self.name, self.sub = rt, namespace, name, sub


LogReader = subresources.LogReader
ExecFn = remotecommand.ExecFn
# (namespace, pod, container, stdin or None) -> what an interactive process did with stdin, or None
AttachFn = Callable[[str, str, str | None, str | None], tuple[int, str, str] | None]
# (namespace, pod, container, since) -> (output written after `since`, exit code once ended, new since)
FollowFn = Callable[[str, str, str | None, float], tuple[str, int | None, float]]


class KubeAPI:
    """The API server app: `KubeAPI(store, admin_token, read_log)(request) -> response`, where
    `read_log(namespace, pod, container, previous=, timestamps=, tail=, since_seconds=) -> str` is the
    kubelet model's container log reader (SimCluster.read_container_log) and
    `exec_command(namespace, pod, container, command) -> (code, stdout, stderr)` runs `pods/exec`
    (SimCluster.exec); `forward_port(namespace, pod, port, request) -> (answer, error)` serves
    `pods/portforward` (SimCluster.port_forward); `attach` and `follow_output` serve `pods/attach` (SimCluster.attach, .follow_output);
    `resource_metrics` serves metrics.k8s.io for `kubectl top`."""

    def __init__(self, store: Store, admin_token: str, read_log: LogReader | None = None,
                 exec_command: ExecFn | None = None, resource_metrics: ResourceMetrics | None = None,
                 forward_port: portforward.PodForwardFn | None = None, attach: AttachFn | None = None,
                 follow_output: FollowFn | None = None,
                 server_address: str = "127.0.0.1:0", max_watch_seconds: float = 1800.0) -> None:
        register_all(store)
        self.store = store
        self.metrics = resource_metrics
        self._in_flight = 0
        self._count_lock = threading.Lock()
        self.read_log = read_log
        self.exec_command = exec_command
        self.forward_port = forward_port
        self.attach = attach
        self.follow_output = follow_output
        self.server_address = server_address
        self.max_watch_seconds = max_watch_seconds
        self.authn = Authenticator(store, admin_token)
        self.authz = RBACAuthorizer(store)
        self.gc = GarbageCollector(store)
        self.gc.install()
        install_admission(store)
        store.admission.insert(0, fieldmanager.internal_create_stamper(store.clock.rfc3339))
        store.stamp_fields = fieldmanager.component_stamper(store.clock.rfc3339)
        store.admission.append(self.authn.fill_token_secret)
        WebhookAdmission(store).install()
        PodSecurityAdmission(store).install()
        store.hooks.append(self._default_service_account)
        store.hooks.append(self.authn.drop_tokens_of_deleted_accounts)
        self._bootstrap()
        APIServiceRegistry(store, lambda: [EVENTS_V1, NODE_LEASES, *REVIEW_TYPES], resource_metrics is not None,
                           FARM_GROUPS).install()

    # -- bootstrap -------------------------------------------------------------------------
    def _bootstrap(self) -> None:
        """What a fresh cluster holds that belongs to the API server: the bootstrap cluster roles,
        and a `default` ServiceAccount in every namespace."""
        with self.store.lock:
            for name, rules in BOOTSTRAP_CLUSTER_ROLES.items():
                if self.store.try_get(f"clusterroles.{_RBAC}", "", name) is None:
                    self.store.create(f"clusterroles.{_RBAC}", {
                        "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
                        "rules": rules})
            for name, (role, group) in BOOTSTRAP_CLUSTER_ROLE_BINDINGS.items():
                if self.store.try_get(f"clusterrolebindings.{_RBAC}", "", name) is None:
                    self.store.create(f"clusterrolebindings.{_RBAC}", {
                        "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
                        "roleRef": {"apiGroup": _RBAC, "kind": "ClusterRole", "name": role},
                        "subjects": [{"apiGroup": _RBAC, "kind": "Group", "name": group}]})
            for ns in self.store.list("namespaces"):
                self._default_service_account("create", "namespaces", None, ns)

    def _default_service_account(self, verb: str, key: str, old: Obj | None, new: Obj | None) -> None:
        if verb != "create" or key != "namespaces" or new is None:
            return
        ns = new["metadata"]["name"]
        if self.store.try_get("serviceaccounts", ns, "default") is None:
            self.store.create("serviceaccounts", {"metadata": {"name": "default", "namespace": ns}}, namespace=ns)

    # -- entry -----------------------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        """Requests being answered now (streams count until their first byte)."""
        return self._in_flight

    def __call__(self, req: Request) -> Response:
        with self._count_lock:
            self._in_flight += 1
        try:
            return self._answer(req)
        finally:
            with self._count_lock:
                self._in_flight -= 1

    def _answer(self, req: Request) -> Response:
        try:
            user: UserInfo | None
            if req.client_cert is not None:
                # x509 first, as kube-apiserver's authenticators run: CN the user, O its groups
                cn, orgs = req.client_cert
                user = UserInfo(cn, (*orgs, "system:authenticated"))
            else:
                user = self.authn.authenticate(req.headers.get("Authorization"))
            if user is None:
                return json_response(401, StoreError(401, "Unauthorized", "Unauthorized").status())
            req.user = user
            resp = self._route(req, user)
            warnings = getattr(req, "warnings", None)
            if warnings:
                # RFC 7234 warn-code 299 with agent "-", as kube-apiserver sends them (client-go prints "Warning: ...").
                resp.headers["Warning"] = ", ".join('299 - "{}"'.format(w.replace('"', '\\"')) for w in warnings)
            return resp
        except StoreError as err:
            return json_response(err.code, err.status())
        except Exception as exc:  # a bug here must reach the client as a 500 Status, not a dropped socket
            log.error("internal error on %s %s: %s", req.method, req.path, traceback.format_exc())
            return json_response(500, StoreError(500, "InternalError", f"Internal error occurred: {exc}").status())

    def _route(self, req: Request, user: UserInfo) -> Response:
        path = req.path.rstrip("/") or "/"
        parts = [p for p in path.split("/") if p]
        # The farm's own resource groups (fault machinery of the emulated cluster) exist for the
        # farm only: other users' discovery does not list them.
        types = [t for t in self.store.types.values() if user.is_admin or t.group not in FARM_GROUPS]
        if not parts or parts[0] not in ("api", "apis"):
            return self._non_resource(req, user, path)
        if parts[0] == "api":
            if len(parts) == 1:
                return self._discovery(req, user, path, discovery.api_versions(self.server_address))
            if parts[1] != "v1":
                raise not_found_path()
            if len(parts) == 2:
                return self._discovery(req, user, path, discovery.resource_list(types, "v1"))
            group, version, rest = "", "v1", parts[2:]
        else:
            metrics = self.metrics is not None
            if len(parts) == 1:
                return self._discovery(req, user, path, discovery.api_group_list(types, metrics))
            if len(parts) == 2:
                return self._discovery(req, user, path, discovery.api_group(types, parts[1], metrics))
            if len(parts) == 3:
                return self._discovery(req, user, path,
                                       discovery.resource_list(types, f"{parts[1]}/{parts[2]}", metrics))
            group, version, rest = parts[1], parts[2], parts[3:]
        route = self._parse(group, version, rest)
        return self._resource(req, user, route)

    def _discovery(self, req: Request, user: UserInfo, path: str, doc: Obj | None) -> Response:
        if not self.authz.allowed_path(user, "get", path):
            raise forbidden_path(user.name, "get", path)
        if doc is None:
            raise not_found_path()
        return json_response(200, doc)

    def _non_resource(self, req: Request, user: UserInfo, path: str) -> Response:
        if not self.authz.allowed_path(user, req.method.lower(), path):
            raise forbidden_path(user.name, req.method.lower(), path)
        if path == "/version":
            return json_response(200, discovery.SERVER_VERSION)
        if path in ("/healthz", "/livez", "/readyz"):
            return Response(200, "text/plain; charset=utf-8", b"ok")
        if path == "/openapi/v3" or path.startswith("/openapi/v3/"):
            doc = openapi3.openapi_v3(tuple(t for t in self.store.types.values() if t.group not in FARM_GROUPS),
                                      discovery.SERVER_VERSION["gitVersion"], path[len("/openapi/v3/"):])
            if doc is None:
                raise not_found_path()
            # a hashed URL names one document for good, as kube-apiserver's cache headers say
            headers = {"Cache-Control": "public, immutable"} if req.arg("hash") else {}
            return Response(200, "application/json", doc, headers=headers)
        if path == "/openapi/v2":
            doc_json, doc_pb = openapi.openapi_v2(
                (t for t in self.store.types.values() if t.group not in FARM_GROUPS), discovery.SERVER_VERSION["gitVersion"])
            if "protobuf" in (req.headers.get("Accept") or ""):
                return Response(200, "application/com.github.proto-openapi.spec.v2.v1.0+protobuf", doc_pb)
            return Response(200, "application/json", doc_json)
        raise not_found_path()

    def _parse(self, group: str, version: str, rest: list[str]) -> Route:
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3 and not (len(rest) == 3 and rest[2] in _NAMESPACE_SUBS):
            namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise not_found_path()
        plural, name, sub = rest[0], rest[1] if len(rest) > 1 else "", rest[2] if len(rest) > 2 else ""
        rt = lookup(self.store, group, version, plural)
        if rt is None:
            virtual = [EVENTS_V1, NODE_LEASES, *REVIEW_TYPES, *(METRICS_TYPES if self.metrics is not None else ())]
            rt = next((r for r in virtual if (r.group, r.version, r.plural) == (group, version, plural)), None)
        if rt is None or (namespace is not None and not rt.namespaced) or (sub and sub not in rt.subresources):
            raise not_found_path()
        if rt.namespaced and name and namespace is None:
            raise not_found_path()
        return Route(rt, namespace, name, sub)

    # -- resources -------------------------------------------------------------------------
    def _resource(self, req: Request, user: UserInfo, r: Route) -> Response:
        method = req.method
        if method == "GET":
            verb = "get" if r.name else ("watch" if (req.arg("watch") or "").lower() in _TRUE else "list")
        elif method == "POST":
            verb = "create"
            if r.name and not r.sub:
                raise method_not_allowed("POST", r.rt.plural)
        elif method in ("PUT", "PATCH", "DELETE"):
            verb = {"PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]
            if not r.name:
                if method != "DELETE":
                    raise method_not_allowed(method, r.rt.plural)
                verb = "deletecollection"
        else:
            raise method_not_allowed(method, r.rt.plural)
        if r.sub in ("exec", "portforward", "attach"):
            verb = "create"  # both the SPDY POST and the WebSocket GET, as RBAC evaluates exec
        # The namespace of a request for a Namespace is that namespace (as kube-apiserver's RequestInfo has it).
        authz_ns = r.namespace or (r.name if r.rt.key == "namespaces" else "")
        if not self.authz.allowed(user, verb, r.rt.group, r.rt.plural, r.sub, authz_ns, r.name):
            raise forbidden(user.name, verb, r.rt.plural, r.rt.group, authz_ns, r.name, r.sub)
        if r.rt in REVIEW_TYPES:
            if verb != "create":
                raise method_not_allowed(method, r.rt.plural)
            if r.rt.kind == "SelfSubjectReview":
                return json_response(201, {"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
                                           "metadata": {"creationTimestamp": self.store.clock.rfc3339()},
                                           "status": {"userInfo": {"username": user.name, "groups": list(user.groups)}}})
            if r.rt.kind == "TokenReview":
                return json_response(201, self._token_review(self._body(req)))
            if r.rt.kind == "SelfSubjectRulesReview":
                return json_response(201, subresources.rules_review(self.authz, user, self._body(req)))
            return json_response(201, subresources.access_review(self.authz, user, self._body(req)))
        if r.rt in METRICS_TYPES:
            return self._metrics(req, r, verb)
        if r.rt is EVENTS_V1:
            return self._events_v1(req, r, verb)
        if r.rt is NODE_LEASES:
            return self._leases(req, r, verb)
        if verb == "watch":
            return self._watch(req, r)
        if r.sub == "log":
            return self._log(req, r)
        if r.sub == "exec":
            return self._exec(req, r)
        if r.sub == "portforward":
            return self._portforward(req, r)
        if r.sub == "attach":
            return self._attach(req, r)
        if r.sub == "ephemeralcontainers":
            with self.store.lock:
                return self._ephemeral(req, r, verb)
        with self.store.lock:
            handler: Callable[[Request, Route], Response] = getattr(self, f"_{verb}")
            return handler(req, r)

    def _body(self, req: Request) -> Any:
        ctype = (req.headers.get("Content-Type") or "application/json").split(";")[0].strip()
        if ctype == protobuf.CONTENT_TYPE:
            return protobuf.decode(req.body or b"")
        if "protobuf" in ctype or "cbor" in ctype:
            raise StoreError(415, "UnsupportedMediaType", f'the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/apply-patch+yaml, {protobuf.CONTENT_TYPE} (got "{ctype}")')
        try:
            if "yaml" in ctype:
                return yaml.safe_load(req.body or b"{}")
            return json.loads(req.body or b"{}")
        except (ValueError, yaml.YAMLError) as exc:
            raise bad_request(f"the body of the request could not be decoded: {exc}") from None

    def _object_body(self, req: Request, r: Route) -> Obj:
        body = self._body(req)
        if not isinstance(body, dict):
            raise bad_request("the body of the request must be a JSON object")
        meta = body.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if r.rt.namespaced and r.namespace is not None:
            if meta.get("namespace") and meta["namespace"] != r.namespace:
                raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        return body

    def _wants_table(self, req: Request) -> str | None:
        accept = req.headers.get("Accept") or ""
        if "as=Table" not in accept:
            return None
        for part in accept.split(","):
            if "as=Table" in part:
                return "v1beta1" if "v=v1beta1" in part else "v1"
        return "v1"

    def _render(self, req: Request, r: Route, objects: list[Obj], single: Obj | None = None,
                at: int | None = None) -> Response:
        version = self._wants_table(req)
        rv = str(at or self.store.resource_version)
        if version is not None and not r.sub:
            return json_response(200, table(r.rt.key, objects if single is None else [single], self.store.clock.now(),
                                            rv, version, req.arg("includeObject", "PartialObjectMetadata") or ""))
        if single is not None:
            return json_response(200, single)
        return json_response(200, {"kind": f"{r.rt.kind}List", "apiVersion": r.rt.api_version,
                                   "metadata": {"resourceVersion": rv}, "items": objects})

    def _field_selector(self, req: Request, r: Route) -> list[tuple[str, bool, str]]:
        freq = parse_field_selector(req.arg("fieldSelector"))
        allowed = FIELD_LABELS.get(r.rt.key, frozenset()) | {"metadata.name", "metadata.namespace"}
        for path, _, _ in freq:
            if path not in allowed:
                raise bad_request(f"field label not supported: {path}")
        return freq

    def _selected(self, req: Request, r: Route, at: int | None = None) -> list[Obj]:
        """Objects of the collection matching the request's selectors (read under the lock, not
        copied), as they are or as they were at resourceVersion `at`."""
        lreq = parse_label_selector(req.arg("labelSelector"))
        freq = self._field_selector(req, r)
        out = []
        for obj in (self.store.iter_raw(r.rt.key) if at is None else state_at(self.store, r.rt.key, at)):
            meta = obj["metadata"]
            if r.namespace and meta.get("namespace") != r.namespace:
                continue
            if lreq and not labels_match_query(lreq, meta.get("labels")):
                continue
            if freq and not fields_match(freq, obj):
                continue
            out.append(obj)
        out.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        return out

    def _event_filter(self, req: Request, r: Route) -> Callable[[Obj], bool] | None:
        """Farm policy beyond RBAC: a user sees an Event only if it may read the object the Event
        is about, so the agent's credentials do not learn of fault-injection objects (Chaos Mesh
        resources) from their events. None when everything is visible."""
        user: UserInfo | None = req.user
        if r.rt.plural != "events" or user is None or user.is_admin:
            return None
        seen: dict[tuple[str, str, str, str], bool] = {}

        def visible(ev: Obj) -> bool:
            inv = ev.get("involvedObject") or {}
            api_version, kind = inv.get("apiVersion") or "v1", inv.get("kind") or ""
            key = (api_version, kind, inv.get("namespace") or "", inv.get("name") or "")
            if key not in seen:
                try:
                    target = self.store.type_by_kind(api_version, kind)
                except StoreError:
                    seen[key] = True  # a kind this server does not serve hides nothing
                else:
                    seen[key] = self.authz.allowed(user, "get", target.group, target.plural, "",
                                                   key[2] if target.namespaced else "", key[3])
            return seen[key]

        return visible

    def _ns(self, r: Route) -> str:
        return (r.namespace or "") if r.rt.namespaced else ""

    # -- verbs -----------------------------------------------------------------------------
    def _get(self, req: Request, r: Route) -> Response:
        obj = self.store.get(r.rt.key, self._ns(r), r.name)
        if r.sub == "scale":
            return json_response(200, subresources.scale_of(obj))
        visible = self._event_filter(req, r)
        if visible is not None and not visible(obj):
            raise StoreError(404, "NotFound", f'events "{r.name}" not found', {"name": r.name, "kind": "events"})
        return self._render(req, r, [], single=obj)

    def _list(self, req: Request, r: Route) -> Response:
        """resourceVersion unset: the current state; "0" or N (NotOlderThan): one at least as fresh,
        which is the current one once the store has reached N; Exact: the state at N. A continued
        list is the snapshot its first page was taken from, as etcd serves it."""
        opts = ListOptions(req.arg, watch=False)
        requested = opts.version()
        at = self._continued_at(opts.continue_token)
        if requested is not None and at is None:
            wait_fresh(self.store, requested)
            if opts.match == "Exact" and requested < self.store.resource_version:
                at = requested
        if at is not None and at >= self.store.resource_version:
            at = None
        items = self._selected(req, r, at)
        visible = self._event_filter(req, r)
        if visible is not None:
            items = [o for o in items if visible(o)]
        items, more = self._page(req, items, at or self.store.resource_version)
        resp = self._render(req, r, items, at=at)
        if more is not None:
            doc = json.loads(resp.body)
            doc["metadata"].update(more)
            resp.body = _dumps(doc) + b"\n"
        return resp

    @staticmethod
    def _continue_key(token: str) -> dict[str, Any]:
        try:
            after = json.loads(base64.urlsafe_b64decode(token.encode()))
            if not isinstance(after["ns"], str) or not isinstance(after["name"], str):
                raise TypeError(after)
            return dict(after)
        except (ValueError, KeyError, TypeError):
            raise StoreError(410, "Expired", "The provided continue parameter is too old to display a "
                             "consistent list result. You can start a new list without the continue parameter.") from None

    def _continued_at(self, token: str) -> int | None:
        """The resourceVersion of the snapshot a continue token pages through."""
        if not token:
            return None
        rv = self._continue_key(token).get("rv")
        return rv if isinstance(rv, int) and rv > 0 else None

    def _page(self, req: Request, items: list[Obj], snapshot: int) -> tuple[list[Obj], dict[str, Any] | None]:
        """`limit` and `continue`: a page of the (namespace, name)-ordered items and the token of
        the next one. A token is the last key served and the snapshot's resourceVersion; an
        unknown one is 410 Expired."""
        token = req.arg("continue")
        if token:
            after = self._continue_key(token)
            start_key = (after["ns"], after["name"])
            items = [o for o in items if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > start_key]
        try:
            limit = int(req.arg("limit") or 0)
        except ValueError:
            raise bad_request(f'invalid value "{req.arg("limit")}" for limit') from None
        if limit <= 0 or len(items) <= limit:
            return items, None
        page, last = items[:limit], items[limit - 1]["metadata"]
        next_token = base64.urlsafe_b64encode(json.dumps(
            {"ns": last.get("namespace", ""), "name": last["name"], "rv": snapshot}).encode()).decode()
        return page, {"continue": next_token, "remainingItemCount": len(items) - limit}

    def _watch(self, req: Request, r: Route) -> Response:
        timeout = min(float(req.arg("timeoutSeconds") or self.max_watch_seconds), self.max_watch_seconds)
        table_version = self._wants_table(req)
        include = req.arg("includeObject", "PartialObjectMetadata") or ""
        key = r.rt.key

        def encode(type_: str, obj: Obj) -> Any:
            if table_version is None:
                return obj
            return table(key, [obj], self.store.clock.now(), obj["metadata"].get("resourceVersion", ""),
                         table_version, include)

        self._field_selector(req, r)
        flt = Filter(r.namespace if r.rt.namespaced else None, req.arg("labelSelector"), req.arg("fieldSelector"),
                     self._event_filter(req, r))
        opts = ListOptions(req.arg, watch=True)
        requested = opts.version()
        if opts.send_initial_events and requested is not None:
            with self.store.lock:  # the initial state is at least as fresh as asked, or 504 before the stream
                wait_fresh(self.store, requested)
        body = stream(self.store, key, flt, opts, timeout, encode, req.alive, r.rt.api_version, r.rt.kind)
        return Response(200, "application/json", stream=body)

    def _log(self, req: Request, r: Route) -> Response:
        if req.method != "GET":
            raise method_not_allowed(req.method, "pods/log")
        if self.read_log is None:
            raise StoreError(503, "ServiceUnavailable", "this cluster has no kubelet model to read container logs from")
        ns = self._ns(r)
        with self.store.lock:
            text = subresources.pod_log(self.store, self.read_log, ns, r.name, req.arg)
        if (req.arg("follow") or "").lower() in _TRUE:
            return Response(200, "text/plain", stream=subresources.follow_log(
                self.store, self.read_log, ns, r.name, text, req.arg, req.alive))
        return Response(200, "text/plain", text.encode())

    def _leases(self, req: Request, r: Route, verb: str) -> Response:
        if verb not in ("get", "list"):
            raise method_not_allowed(req.method, "leases.coordination.k8s.io")
        leases = [] if r.namespace not in (None, subresources.NODE_LEASE_NAMESPACE) else \
            subresources.node_leases(self.store, r.name or None)
        if r.name:
            if not leases:
                raise StoreError(404, "NotFound", f'leases.coordination.k8s.io "{r.name}" not found',
                                 {"name": r.name, "group": "coordination.k8s.io", "kind": "leases"})
            return json_response(200, leases[0])
        return json_response(200, {"kind": "LeaseList", "apiVersion": "coordination.k8s.io/v1",
                                   "metadata": {"resourceVersion": str(self.store.resource_version)}, "items": leases})

    def _events_v1(self, req: Request, r: Route, verb: str) -> Response:
        core = Route(self.store.type_for("events"), r.namespace, r.name, r.sub)
        if verb == "watch":
            inner = self._watch(req, core)
            assert inner.stream is not None

            def converted() -> Any:
                for line in inner.stream:  # type: ignore[union-attr]
                    event = json.loads(line)
                    if event.get("type") != "ERROR" and event["object"].get("kind") == "Event":
                        event["object"] = eventsv1.to_v1(event["object"])
                    yield _dumps(event) + b"\n"

            return Response(200, "application/json", stream=converted())
        with self.store.lock:
            if verb == "get":
                obj = self.store.get("events", self._ns(r), r.name)
                visible = self._event_filter(req, r)
                if visible is not None and not visible(obj):
                    raise StoreError(404, "NotFound", f'events.events.k8s.io "{r.name}" not found')
                return json_response(200, eventsv1.to_v1(obj))
            if verb == "list":
                items = self._selected(req, core)
                visible = self._event_filter(req, r)
                return json_response(200, {"kind": "EventList", "apiVersion": "events.k8s.io/v1",
                                           "metadata": {"resourceVersion": str(self.store.resource_version)},
                                           "items": [eventsv1.to_v1(o) for o in items if visible is None or visible(o)]})
            if verb == "create":
                body = eventsv1.to_core(self._object_body(req, r))
                body["metadata"]["namespace"] = self._ns(r)
                normalize_times(body)
                return json_response(201, eventsv1.to_v1(self.store.create("events", body, namespace=self._ns(r))))
            if verb == "delete":
                return json_response(200, eventsv1.to_v1(self.store.delete("events", self._ns(r), r.name)))
        raise method_not_allowed(req.method, "events.events.k8s.io")

    def _metrics(self, req: Request, r: Route, verb: str) -> Response:
        assert self.metrics is not None
        if verb not in ("get", "list"):
            raise method_not_allowed(req.method, f"{r.rt.plural}.{r.rt.group}")
        lreq = parse_label_selector(req.arg("labelSelector"))

        def labelled(obj: Obj) -> bool:
            return not lreq or labels_match_query(lreq, obj["metadata"].get("labels"))

        if r.rt.kind == "PodMetrics":
            items = self.metrics.pods(r.namespace, r.name or None, labelled)
        else:
            items = self.metrics.nodes(r.name or None, labelled)
        for item in items:
            item["kind"], item["apiVersion"] = r.rt.kind, r.rt.api_version
        if r.name:
            if not items:
                raise StoreError(404, "NotFound", f'{r.rt.plural}.{r.rt.group} "{r.name}" not found',
                                 {"name": r.name, "group": r.rt.group, "kind": r.rt.plural})
            return json_response(200, items[0])
        return json_response(200, {"kind": f"{r.rt.kind}List", "apiVersion": r.rt.api_version,
                                   "metadata": {}, "items": items})

    def _token_review(self, body: Any) -> Obj:
        """A TokenReview as kube-apiserver answers it: the token's user if it authenticates,
        else authenticated false (a 201 either way; the reviewer's own access was checked)."""
        spec = (body or {}).get("spec") or {}
        token = spec.get("token")
        if not isinstance(token, str) or not token:
            raise StoreError(422, "Invalid", 'TokenReview.authentication.k8s.io "" is invalid: spec.token: Required value',
                             {"kind": "TokenReview", "group": "authentication.k8s.io",
                              "causes": [{"reason": "FieldValueRequired", "message": "Required value",
                                          "field": "spec.token"}]})
        user = self.authn.authenticate(f"Bearer {token}")
        status: dict[str, Any] = {"user": {}}
        if user is not None:
            status = {"authenticated": True, "user": {"username": user.name, "groups": list(user.groups)},
                      "audiences": spec.get("audiences") or ["https://kubernetes.default.svc.cluster.local"]}
        return {"kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}

    def _exec(self, req: Request, r: Route) -> Response:
        if self.exec_command is None:
            raise StoreError(503, "ServiceUnavailable", "this cluster has no kubelet model to run commands in")
        command = req.query.get("command") or []
        if not command:
            raise bad_request("you must specify at least 1 command")
        flags = {k: (req.arg(k) or "").lower() in _TRUE for k in ("stdin", "stdout", "stderr", "tty")}
        ns = self._ns(r)
        exec_command, lock, container = self.exec_command, self.store.lock, req.arg("container") or None
        with self.store.lock:
            pod = self.store.get("pods", ns, r.name)
            phase = (pod.get("status") or {}).get("phase")
            if phase in ("Succeeded", "Failed"):
                raise bad_request(f"cannot exec into a container in a completed pod; current phase is {phase}")
            result: remotecommand.Result
            if flags["stdin"]:
                # the command runs once the client has sent its stdin (and closed it)
                def result(stdin: str) -> tuple[int, str, str]:
                    with lock:
                        return exec_command(ns, r.name, container, list(command), stdin)
            else:
                result = self.exec_command(ns, r.name, container, list(command))
        return self._stream_upgrade(req, result, list(command), flags)

    def _ephemeral(self, req: Request, r: Route, verb: str) -> Response:
        """pods/ephemeralcontainers (the 1.22+ API: a Pod in, a Pod out): only
        spec.ephemeralContainers changes, and only by additions."""
        ns = self._ns(r)
        current = self.store.get("pods", ns, r.name)
        if verb == "get":
            return self._render(req, r, [], single=current)
        if verb == "update":
            body = self._body(req)
            if isinstance(body, dict) and body.get("kind") == "EphemeralContainers":
                # the pre-1.22 API kubectl <= 1.21 speaks; this server is newer
                raise bad_request('EphemeralContainers in version "v1" cannot be handled as a Pod: no kind '
                                  '"EphemeralContainers" is registered for version "v1" in scheme '
                                  '"pkg/api/legacyscheme/scheme.go:30"')
            new = self._object_body(req, r)
        elif verb == "patch":
            ctype = (req.headers.get("Content-Type") or "").split(";")[0].strip()
            new = apply_patch(ctype, current, self._body(req), "Pod")
        else:
            raise method_not_allowed(req.method, "pods/ephemeralcontainers")
        wanted = list((new.get("spec") or {}).get("ephemeralContainers") or [])
        subresources.check_ephemeral(current, wanted)
        if self._dry_run(req):
            return json_response(200, dict(current, spec=dict(current["spec"], ephemeralContainers=wanted)))
        return json_response(200, self.store.mutate("pods", ns, r.name,
                                                    lambda o: o["spec"].update(ephemeralContainers=wanted)))

    def _attach(self, req: Request, r: Route) -> Response:
        if self.attach is None:
            raise StoreError(503, "ServiceUnavailable", "this cluster has no kubelet model to attach to")
        flags = {k: (req.arg(k) or "").lower() in _TRUE for k in ("stdin", "stdout", "stderr", "tty")}
        ns, container = self._ns(r), req.arg("container") or None
        attach, lock, name = self.attach, self.store.lock, r.name
        with lock:
            attach(ns, name, container, None)  # the container must be running (400 otherwise)

        def result(stdin: str) -> tuple[int, str, str]:
            with lock:
                outcome = attach(ns, name, container, stdin)
            return outcome if outcome is not None else (0, "", "")
        if flags["stdin"]:
            return self._stream_upgrade(req, result, ["attach"], flags)
        follow = self.follow_output
        if follow is None:
            return self._stream_upgrade(req, (0, "", ""), ["attach"], flags)
        since = [self.store.clock.now()]

        def poll() -> tuple[str, int | None]:
            with lock:
                text, code, since[0] = follow(ns, name, container, since[0])
            return text, code
        return self._stream_upgrade(req, remotecommand.Follow(poll), ["attach"], flags)

    def _stream_upgrade(self, req: Request, result: remotecommand.Result, command: list[str],
                        flags: dict[str, bool]) -> Response:
        """The 101 answer of exec and attach: SPDY/3.1 or WebSocket, and the session after it."""
        upgrade = (req.headers.get("Upgrade") or "").lower()
        if upgrade == "spdy/3.1":
            offered = ",".join(req.headers.get_all("X-Stream-Protocol-Version") or [])
            proto = remotecommand.choose_protocol(offered, (remotecommand.PROTOCOL,))
            if proto is None:
                raise bad_request(f"unable to upgrade connection: no supported stream protocol in [{offered}]; "
                                  f"this server speaks {remotecommand.PROTOCOL}")
            streams = remotecommand.spdy_streams(flags["stdin"], flags["stdout"], flags["stderr"], flags["tty"])
            return _spdy_switch(proto, lambda rf, wf, sock: remotecommand.spdy_session(
                rf, wf, sock, streams=streams, result=result, command=command))
        if upgrade == "websocket":
            return _websocket_switch(
                req, "exec", remotecommand.WEBSOCKET_PROTOCOLS, remotecommand.PROTOCOL,
                lambda proto: lambda rf, wf, sock: remotecommand.websocket_session(rf, wf, sock, result=result,
                                                                                   command=command, protocol=proto,
                                                                                   tty=flags["tty"]))
        raise bad_request("Upgrade request required")

    def _portforward(self, req: Request, r: Route) -> Response:
        if self.forward_port is None:
            raise StoreError(503, "ServiceUnavailable", "this cluster has no kubelet model to forward ports to")
        ns, name = self._ns(r), r.name
        with self.store.lock:
            pod = self.store.get("pods", ns, name)
            if (pod.get("status") or {}).get("phase") != "Running":
                raise bad_request(f"pod {name} is not running and cannot be port-forwarded")
        lock, forward_port = self.store.lock, self.forward_port

        def forward(port: int, data: bytes) -> tuple[bytes, str | None]:
            with lock:
                return forward_port(ns, name, port, data)
        upgrade = (req.headers.get("Upgrade") or "").lower()
        if upgrade == "spdy/3.1":
            offered = ",".join(req.headers.get_all("X-Stream-Protocol-Version") or [])
            if portforward.PROTOCOL not in remotecommand._offered(offered):
                raise bad_request(f"unable to upgrade connection: no supported stream protocol in [{offered}]")
            return _spdy_switch(portforward.PROTOCOL, lambda rf, wf, sock: portforward.spdy_session(rf, wf, sock, forward))
        if upgrade == "websocket":
            # kubectl tunnels SPDY (and falls back to plain SPDY when refused); other clients speak
            # the kubelet's channel protocol, naming the ports in the query
            tunnelled = remotecommand.choose_protocol(req.headers.get("Sec-WebSocket-Protocol"),
                                                      (portforward.TUNNEL_PROTOCOL,))
            offered_ws = remotecommand._offered(req.headers.get("Sec-WebSocket-Protocol"))
            # the kubelet serves the binary channel protocol to a client that names no subprotocol
            if tunnelled is None and (not offered_ws or portforward.CHANNEL_PROTOCOL in offered_ws) \
                    and req.headers.get("Sec-WebSocket-Key"):
                try:
                    ports = portforward.websocket_ports(req.query)
                except ValueError as e:
                    raise bad_request(str(e)) from None
                chosen = {"Sec-WebSocket-Protocol": portforward.CHANNEL_PROTOCOL} if offered_ws else {}
                return Response(101, "application/octet-stream", headers={
                    "Connection": "Upgrade", "Upgrade": "websocket", **chosen,
                    "Sec-WebSocket-Accept": remotecommand.websocket_accept(req.headers.get("Sec-WebSocket-Key"))},
                    takeover=lambda rf, wf, sock: portforward.channel_session(rf, wf, sock, forward, ports))
            return _websocket_switch(
                req, "port-forward", (portforward.TUNNEL_PROTOCOL,), portforward.TUNNEL_PROTOCOL,
                lambda proto: lambda rf, wf, sock: portforward.spdy_session(rf, wf, sock, forward, websocket=True))
        raise bad_request("Upgrade request required")

    def _create(self, req: Request, r: Route) -> Response:
        body = self._object_body(req, r)
        ns = self._ns(r)
        if r.sub:
            return self._create_sub(req, r, body)
        kind, api_version = body.get("kind"), body.get("apiVersion")
        if (kind and kind != r.rt.kind) or (api_version and api_version != r.rt.api_version):
            raise bad_request(f"the API version in the data ({api_version}) does not match the expected API version "
                              f"({r.rt.api_version})" if api_version != r.rt.api_version else
                              f"the kind in the data ({kind}) does not match the expected kind ({r.rt.kind})")
        if r.rt.namespaced:
            body["metadata"]["namespace"] = ns
        for k in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "generation"):
            body["metadata"].pop(k, None)
        normalize_times(body)
        self._check_fields(req, r, body)
        validate(r.rt, body, None)
        self.authz.check_escalation(req.user, r.rt.key, ns, body, None)
        body["apiVersion"], body["kind"] = r.rt.api_version, r.rt.kind
        body["metadata"]["managedFields"] = fieldmanager.updated(None, body, self._manager(req), self.store.clock.rfc3339())
        if self._dry_run(req):
            return json_response(201, self._dry_run_created(body, r))
        return json_response(201, self.store.create(r.rt.key, body, namespace=ns or None))

    def _manager(self, req: Request) -> str:
        """The field manager of a write: fieldManager, else the client's User-Agent up to its first
        `/` (kube-apiserver's default)."""
        manager = req.arg("fieldManager") or (req.headers.get("User-Agent") or "unknown").split("/", 1)[0]
        if len(manager) > 128:
            raise bad_request(f"fieldManager: Too long: may not be more than 128 bytes (got {len(manager)})")
        return manager

    def _scale_fields(self, req: Request, current: Obj) -> Callable[[Obj], None]:
        def stamp(new: Obj) -> None:
            new["metadata"]["managedFields"] = fieldmanager.updated(current, new, self._manager(req),
                                                                    self.store.clock.rfc3339(), "scale")
        return stamp

    def _dry_run_created(self, body: Obj, r: Route) -> Obj:
        """What creating `body` would store (admission run on a copy), as dryRun=All answers."""
        probe = copy.deepcopy(body)
        for hook in self.store.admission:
            hook("create", r.rt.key, probe, None)
        probe["apiVersion"], probe["kind"] = r.rt.api_version, r.rt.kind
        probe["metadata"]["creationTimestamp"] = self.store.clock.rfc3339()
        return probe

    def _create_sub(self, req: Request, r: Route, body: Obj) -> Response:
        ns = self._ns(r)
        parent = self.store.get(r.rt.key, ns, r.name)
        if r.sub == "eviction":
            # the Eviction's deleteOptions, as a DELETE's: the pod terminates gracefully
            options = (body or {}).get("deleteOptions") or {}
            requested = options.get("gracePeriodSeconds")
            if self._dry_run(req, options):  # the disruption budget is checked, nothing deleted
                return json_response(201, subresources.evict(self.store, parent, lambda: None))
            return json_response(201, subresources.evict(self.store, parent, lambda: delete_pod(
                self.store, parent, None if requested is None else int(requested))))
        if r.sub == "binding":
            return json_response(201, subresources.bind(self.store, parent, body))
        if r.sub == "token":
            return json_response(201, subresources.token_request(self.store, self.authn, parent, body))
        raise method_not_allowed("POST", f"{r.rt.plural}/{r.sub}")

    def _check_fields(self, req: Request, r: Route, obj: Obj) -> None:
        """fieldValidation as kube-apiserver does it for built-in kinds: Strict refuses a field
        the kind does not declare, Warn (the default) and Ignore drop it, Warn with a warning."""
        mode = req.arg("fieldValidation") or "Warn"
        if mode not in ("Ignore", "Warn", "Strict"):
            raise bad_request(f'fieldValidation parameter unsupported: {mode}; valid values are "Ignore", "Warn" or "Strict"')
        unknown = openapi.unknown_fields(obj, r.rt, prune=mode != "Strict")
        if not unknown:
            return
        if mode == "Strict":
            fields = ", ".join(f'unknown field "{f}"' for f in unknown)
            raise bad_request(f'{r.rt.kind} in version "{r.rt.version}" cannot be handled as a {r.rt.kind}: '
                              f"strict decoding error: {fields}")
        if mode == "Warn":
            req.warnings = [*req.warnings, *(f'unknown field "{f}"' for f in unknown)]

    def _dry_run(self, req: Request, options: dict[str, Any] | None = None) -> bool:
        """dryRun=All in the query, or for a delete in its DeleteOptions body, where kubectl
        sends it (`kubectl delete --dry-run=server`)."""
        in_body = (options or {}).get("dryRun") or []
        return "All" in req.query.get("dryRun", []) or (isinstance(in_body, list) and "All" in in_body)

    def _commit(self, req: Request, r: Route, current: Obj, new: Obj, *, check_rv: bool, applied: bool = False) -> Response:
        """Write an update (from PUT or PATCH) of the object or its status; `applied`: its
        managedFields come from server-side apply."""
        normalize_times(new)
        if r.sub == "status":
            new = dict(current, status=new.get("status", {}), metadata=dict(current["metadata"],
                       resourceVersion=new.get("metadata", {}).get("resourceVersion", current["metadata"]["resourceVersion"])))
        else:
            if "status" in r.rt.subresources:
                if "status" in current:
                    new["status"] = current["status"]
                else:
                    new.pop("status", None)
            self._check_fields(req, r, new)
            validate(r.rt, new, current)
            self.authz.check_escalation(req.user, r.rt.key, self._ns(r), new, current)
        if not applied:
            new["metadata"]["managedFields"] = fieldmanager.updated(current, new, self._manager(req), self.store.clock.rfc3339(),
                                                                    r.sub if r.sub == "status" else "")
        if self._dry_run(req):
            return json_response(200, new)
        return json_response(200, self.store.replace(r.rt.key, new, check_rv=check_rv,
                                                     subresource="status" if r.sub == "status" else None))

    def _update(self, req: Request, r: Route) -> Response:
        body = self._object_body(req, r)
        ns = self._ns(r)
        if body["metadata"].get("name") and body["metadata"]["name"] != r.name:
            raise bad_request(f"the name of the object ({body['metadata']['name']}) does not match the name on the URL ({r.name})")
        body["metadata"]["name"] = r.name
        if r.rt.namespaced:
            body["metadata"]["namespace"] = ns
        current = self.store.get(r.rt.key, ns, r.name)
        if r.sub == "scale":
            return json_response(200, subresources.apply_scale(self.store, r.rt, current, body, self._scale_fields(req, current),
                                                               dry_run=self._dry_run(req)))
        if r.sub == "finalize":
            new = dict(current, spec=dict(current.get("spec") or {}, finalizers=(body.get("spec") or {}).get("finalizers", [])))
            return json_response(200, self.store.replace(r.rt.key, new, check_rv=False))
        return self._commit(req, r, current, body, check_rv=True)

    def _patch(self, req: Request, r: Route) -> Response:
        ctype = (req.headers.get("Content-Type") or "").split(";")[0].strip()
        ns = self._ns(r)
        patch = self._body(req)
        if ctype == APPLY_PATCH:
            return self._apply(req, r, patch)
        if ctype == STRATEGIC_MERGE_PATCH and r.rt.group in CUSTOM_GROUPS and r.sub != "scale":
            raise StoreError(415, "UnsupportedMediaType",
                             "the body of the request was in an unknown format - accepted media types include: "
                             "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")
        current = self.store.get(r.rt.key, ns, r.name)
        if r.sub == "scale":
            scale = apply_patch(ctype, subresources.scale_of(current), patch, "Scale")
            return json_response(200, subresources.apply_scale(self.store, r.rt, current, scale, self._scale_fields(req, current),
                                                               dry_run=self._dry_run(req)))
        new = apply_patch(ctype, current, patch, r.rt.kind)
        if not isinstance(new.get("metadata"), dict):
            raise bad_request("the patch removed metadata")
        new["metadata"]["name"], new["apiVersion"], new["kind"] = r.name, r.rt.api_version, r.rt.kind
        if r.rt.namespaced:
            new["metadata"]["namespace"] = ns
        new["metadata"].setdefault("resourceVersion", current["metadata"]["resourceVersion"])
        return self._commit(req, r, current, new, check_rv=True)

    def _apply(self, req: Request, r: Route, body: Any) -> Response:
        """Server-side apply: create if absent, else merge the applied configuration, with field
        ownership and conflicts (fieldmanager)."""
        if not isinstance(body, dict):
            raise bad_request("an apply patch must be an object")
        if not req.arg("fieldManager"):
            raise bad_request("PATCH, application/apply-patch+yaml: fieldManager is required for apply requests")
        force = (req.arg("force") or "").lower() in _TRUE
        ns = self._ns(r)
        current = self.store.try_get(r.rt.key, ns, r.name)
        meta = body.setdefault("metadata", {})
        if not isinstance(meta, dict) or meta.get("name", r.name) != r.name:
            raise bad_request(f"the name of the object ({meta.get('name') if isinstance(meta, dict) else ''}) does not "
                              f"match the name on the URL ({r.name})")
        meta["name"] = r.name
        if r.rt.namespaced:
            meta["namespace"] = ns
        if body.setdefault("apiVersion", r.rt.api_version) != r.rt.api_version or body.setdefault("kind", r.rt.kind) != r.rt.kind:
            raise bad_request(f"the API version in the data ({body['apiVersion']}) or kind ({body['kind']}) does not "
                              f"match the expected {r.rt.api_version} {r.rt.kind}")
        sub = "status" if r.sub == "status" else ""
        self._check_fields(req, r, body)
        new = fieldmanager.apply(current, body, req.arg("fieldManager") or "", force, self.store.clock.rfc3339(), sub)
        if current is None:
            validate(r.rt, new, None)
            self.authz.check_escalation(req.user, r.rt.key, ns, new, None)
            if self._dry_run(req):
                return json_response(201, self._dry_run_created(new, r))
            return json_response(201, self.store.create(r.rt.key, new, namespace=ns or None))
        return self._commit(req, r, current, new, check_rv=False, applied=True)

    def _delete_options(self, req: Request) -> dict[str, Any]:
        opts: dict[str, Any] = {}
        if req.body:
            body = self._body(req)
            if isinstance(body, dict):
                opts = body
        if req.arg("propagationPolicy"):
            opts["propagationPolicy"] = req.arg("propagationPolicy")
        if req.arg("orphanDependents") is not None:
            opts["orphanDependents"] = (req.arg("orphanDependents") or "").lower() in _TRUE
        if req.arg("gracePeriodSeconds") is not None:
            try:
                opts["gracePeriodSeconds"] = int(req.arg("gracePeriodSeconds") or "")
            except ValueError:
                raise bad_request(f'invalid value "{req.arg("gracePeriodSeconds")}" for gracePeriodSeconds') from None
        return opts

    def _delete_one(self, r: Route, name: str, opts: dict[str, Any], dry_run: bool) -> Obj:
        ns = self._ns(r)
        current = self.store.get(r.rt.key, ns, name)
        pre = opts.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != current["metadata"]["uid"]:
            raise StoreError(409, "Conflict", f'Operation cannot be fulfilled on {r.rt.plural} "{name}": '
                             f'Precondition failed: UID in precondition: {pre["uid"]}, UID in object meta: {current["metadata"]["uid"]}')
        if pre.get("resourceVersion") and pre["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise StoreError(409, "Conflict", f'Operation cannot be fulfilled on {r.rt.plural} "{name}": '
                             "the object has been modified; please apply your changes to the latest version and try again")
        grace = deletion_grace(current, opts.get("gracePeriodSeconds")) if r.rt.key == "pods" else 0
        if dry_run:
            if grace:
                current["metadata"].setdefault("deletionTimestamp", self.store.clock.rfc3339(self.store.clock.now() + grace))
                current["metadata"].setdefault("deletionGracePeriodSeconds", grace)
            return current
        if opts.get("propagationPolicy") == "Orphan" or opts.get("orphanDependents") is True:
            self.gc.orphan(current)
        return self.store.delete(r.rt.key, ns, name, grace=grace)

    def _delete(self, req: Request, r: Route) -> Response:
        if r.sub:
            raise method_not_allowed("DELETE", f"{r.rt.plural}/{r.sub}")
        opts = self._delete_options(req)
        deleted = self._delete_one(r, r.name, opts, self._dry_run(req, opts))
        still_there = self.store.try_get(r.rt.key, self._ns(r), r.name) is not None
        if r.rt.key in RETURN_DELETED_OBJECT or still_there:
            return json_response(200, deleted)
        return json_response(200, success(r.rt.plural, r.name, r.rt.group, deleted["metadata"].get("uid", "")))

    def _deletecollection(self, req: Request, r: Route) -> Response:
        opts = self._delete_options(req)
        dry_run = self._dry_run(req, opts)
        names = [o["metadata"]["name"] for o in self._selected(req, r)]
        items = []
        for name in names:
            try:
                items.append(self._delete_one(r, name, opts, dry_run))
            except StoreError as err:
                if err.code != 404:
                    raise
        return json_response(200, {"kind": f"{r.rt.kind}List", "apiVersion": r.rt.api_version,
                                   "metadata": {"resourceVersion": str(self.store.resource_version)}, "items": items})
