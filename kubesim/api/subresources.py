"""Sub-resources with behaviour of their own: scale (autoscaling/v1 Scale), log, eviction,
binding, serviceaccount token, and SelfSubjectAccessReview."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from kubesim.api.authn import Authenticator, UserInfo
from kubesim.api.rbac import RBACAuthorizer
from kubesim.api.status import bad_request, success
from kubesim.api.tables import format_selector, parse_time
from kubesim.store import Obj, ResourceType, Store, StoreError, match_labels


# -- scale ---------------------------------------------------------------------------------
def scale_of(obj: Obj) -> Obj:
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    selector = spec.get("selector")
    return {
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in meta},
        "spec": {"replicas": spec.get("replicas", 1)},
        "status": {"replicas": status.get("replicas", 0),
                   "selector": format_selector(selector) if selector else ""},
    }


def apply_scale(store: Store, rt: ResourceType, current: Obj, scale: Obj,
                stamp_fields: Callable[[Obj], None] | None = None, dry_run: bool = False) -> Obj:
    """Write a Scale to its object; `stamp_fields(updated)` records who changed it (managedFields).
    `dry_run` (dryRun=All): validated and answered, not stored."""
    replicas = (scale.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or replicas < 0:
        raise StoreError(422, "Invalid", f'Scale.autoscaling "{current["metadata"]["name"]}" is invalid: '
                         f"spec.replicas: Invalid value: {replicas}: must be greater than or equal to 0",
                         {"name": current["metadata"]["name"], "group": "autoscaling", "kind": "Scale",
                          "causes": [{"reason": "FieldValueInvalid", "field": "spec.replicas",
                                      "message": f"Invalid value: {replicas}: must be greater than or equal to 0"}]})
    updated = dict(current)
    updated["spec"] = dict(current.get("spec") or {}, replicas=replicas)
    rv = (scale.get("metadata") or {}).get("resourceVersion")
    updated["metadata"] = dict(current["metadata"])
    if rv:
        updated["metadata"]["resourceVersion"] = rv
    if stamp_fields is not None:
        stamp_fields(updated)
    if dry_run:
        if rv and rv != current["metadata"]["resourceVersion"]:
            raise StoreError(409, "Conflict", f'Operation cannot be fulfilled on {rt.plural} "{current["metadata"]["name"]}": '
                             "the object has been modified; please apply your changes to the latest version and try again")
        return scale_of(updated)
    return scale_of(store.replace(rt.key, updated, check_rv=bool(rv)))


# -- log -----------------------------------------------------------------------------------
LogReader = Callable[..., str]


def _int(text: str | None, name: str) -> int | None:
    if text in (None, ""):
        return None
    try:
        return int(text)
    except ValueError:
        raise bad_request(f'invalid value "{text}" for {name}') from None


def _flag(text: str | None) -> bool:
    return (text or "").lower() in ("true", "1")


def pod_log(store: Store, read_log: LogReader, namespace: str, pod: str, arg: Callable[[str], str | None],
            tail: bool = True) -> str:
    """The text of GET pods/NAME/log from the kubelet model's container logs."""
    since_seconds: float | None = _int(arg("sinceSeconds"), "sinceSeconds")
    since_time = arg("sinceTime")
    if since_time:
        since_seconds = max(0.0, store.clock.now() - parse_time(since_time))
    text = read_log(namespace, pod, arg("container") or None, previous=_flag(arg("previous")),
                    timestamps=_flag(arg("timestamps")), tail=_int(arg("tailLines"), "tailLines") if tail else None,
                    since_seconds=since_seconds)
    limit = _int(arg("limitBytes"), "limitBytes")
    return text[:limit] if limit is not None else text


def follow_log(store: Store, read_log: LogReader, namespace: str, pod: str, first: str,
               arg: Callable[[str], str | None], alive: Callable[[], bool], max_seconds: float = 600.0,
               poll_seconds: float = 0.5) -> Iterator[bytes]:
    """`kubectl logs -f`: what exists, then lines written since, until the pod goes or the client leaves."""
    yield first.encode()
    sent = pod_log(store, read_log, namespace, pod, arg, tail=False).count("\n")
    deadline = time.monotonic() + max_seconds
    while time.monotonic() < deadline and alive():
        time.sleep(poll_seconds)
        try:
            with store.lock:
                text = pod_log(store, read_log, namespace, pod, arg, tail=False)
        except StoreError:
            return
        lines = text.splitlines(keepends=True)
        if len(lines) < sent:  # the log rotated (a restart): follow the new file from its start
            sent = 0
        if len(lines) > sent:
            yield "".join(lines[sent:]).encode()
            sent = len(lines)


# -- eviction, binding, token, access review -----------------------------------------------
def evict(store: Store, pod: Obj, delete: Callable[[], object]) -> Obj:
    labels = pod["metadata"].get("labels") or {}
    for pdb in store.iter_raw("poddisruptionbudgets.policy"):
        if pdb["metadata"].get("namespace") != pod["metadata"]["namespace"]:
            continue
        if not match_labels((pdb.get("spec") or {}).get("selector") or {"matchLabels": {"\0": "\0"}}, labels):
            continue
        status = pdb.get("status") or {}
        if "disruptionsAllowed" in status and int(status["disruptionsAllowed"]) <= 0:
            raise StoreError(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.",
                             {"causes": [{"reason": "DisruptionBudget",
                                          "message": f"The disruption budget {pdb['metadata']['name']} needs "
                                                     f"{status.get('desiredHealthy', 0)} healthy pods and has "
                                                     f"{status.get('currentHealthy', 0)} currently"}]})
    delete()
    return success("pods", pod["metadata"]["name"])


def bind(store: Store, pod: Obj, binding: Obj) -> Obj:
    target = (binding.get("target") or {}).get("name")
    if not target:
        raise bad_request("binding target name is required")
    if (pod.get("spec") or {}).get("nodeName"):
        raise StoreError(409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{pod["metadata"]["name"]}": '
                         f'pod {pod["metadata"]["name"]} is already assigned to node "{pod["spec"]["nodeName"]}"')
    store.mutate("pods", pod["metadata"]["namespace"], pod["metadata"]["name"],
                 lambda p: p["spec"].__setitem__("nodeName", target))
    return success("pods", pod["metadata"]["name"])


def token_request(store: Store, authn: Authenticator, sa: Obj, body: Obj) -> Obj:
    seconds = int((body.get("spec") or {}).get("expirationSeconds") or 3600)
    if seconds < 600:
        raise StoreError(422, "Invalid", f'TokenRequest.authentication.k8s.io "{sa["metadata"]["name"]}" is invalid: '
                         f"spec.expirationSeconds: Invalid value: {seconds}: may not specify a duration less than 10 minutes")
    token, exp = authn.bound_token(sa["metadata"]["namespace"], sa, seconds)
    return {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": sa["metadata"]["name"], "namespace": sa["metadata"]["namespace"],
                         "creationTimestamp": None},
            "spec": {"audiences": ["https://kubernetes.default.svc.cluster.local"], "expirationSeconds": seconds,
                     "boundObjectRef": None},
            "status": {"token": token, "expirationTimestamp": store.clock.rfc3339(exp)}}


def rules_review(authz: RBACAuthorizer, user: UserInfo, body: Obj) -> Obj:
    spec = body.get("spec") or {}
    resource, non_resource = authz.rules_for(user, spec.get("namespace") or "")
    return {"kind": "SelfSubjectRulesReview", "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None}, "spec": spec,
            "status": {"resourceRules": resource, "nonResourceRules": non_resource, "incomplete": False}}


def access_review(authz: RBACAuthorizer, user: UserInfo, body: Obj) -> Obj:
    spec = body.get("spec") or {}
    res: dict[str, Any] | None = spec.get("resourceAttributes")
    if res is not None:
        allowed = authz.allowed(user, res.get("verb", ""), res.get("group", ""), res.get("resource", ""),
                                res.get("subresource", ""), res.get("namespace", ""), res.get("name", ""))
    else:
        nra = spec.get("nonResourceAttributes") or {}
        allowed = authz.allowed_path(user, nra.get("verb", ""), nra.get("path", ""))
    status: dict[str, Any] = {"allowed": allowed}
    if allowed and not user.is_admin:
        status["reason"] = "RBAC: allowed by a role binding"
    return {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}


# -- node leases ---------------------------------------------------------------------------
NODE_LEASE_NAMESPACE = "kube-node-lease"


LEASE_RENEW_SECONDS = 10.0  # the kubelet renews its lease every leaseDurationSeconds / 4


def node_leases(store: Store, name: str | None) -> list[Obj]:
    """The kubelet's Lease per node, renewed every 10 s while its kubelet runs; a node whose
    kubelet stopped (a NodeFault stopping it) shows the renewTime of its last renewal before."""
    import zlib

    from kubesim.clock import rfc3339
    from kubesim.nodes import _rfc3339

    now = store.clock.now()
    out = []
    with store.lock:
        stopped_at: dict[str, float] = {}
        for fault in store.iter_raw("nodefaults.sim.farm.io") if "nodefaults.sim.farm.io" in store.types else ():
            spec = fault.get("spec") or {}
            if spec.get("kubeletStopped") or spec.get("nodeDown"):
                at = _rfc3339(fault["metadata"].get("creationTimestamp") or rfc3339(now))
                node = spec.get("nodeName", "")
                stopped_at[node] = min(at, stopped_at.get(node, at))
        for node in store.iter_raw("nodes"):
            meta = node["metadata"]
            if name and meta["name"] != name:
                continue
            created = _rfc3339(meta.get("creationTimestamp") or rfc3339(now))
            until = min(now, stopped_at.get(meta["name"], now))
            # The kubelet's renewal phase within the second, fixed per node (renewTime has microseconds).
            phase = zlib.crc32(meta["name"].encode()) % 1000000 / 1e6
            renew = created + phase + max(0.0, until - created - phase) // LEASE_RENEW_SECONDS * LEASE_RENEW_SECONDS
            stamp = rfc3339(renew).replace("Z", f".{round((renew % 1) * 1e6) % 1000000:06d}Z")
            out.append({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {
                "name": meta["name"], "namespace": NODE_LEASE_NAMESPACE, "uid": meta.get("uid", ""),
                "resourceVersion": meta.get("resourceVersion", ""), "creationTimestamp": meta.get("creationTimestamp"),
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": meta["name"], "uid": meta.get("uid", "")}]},
                "spec": {"holderIdentity": meta["name"], "leaseDurationSeconds": 40, "renewTime": stamp}})
    return sorted(out, key=lambda lease: lease["metadata"]["name"])


_EPHEMERAL_FORBIDDEN = ("ports", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle", "resources")


def check_ephemeral(pod: Obj, wanted: list[Any]) -> None:
    """422 for what the API server refuses in pods/ephemeralcontainers: removing or changing an
    existing ephemeral container, a name taken by another container, a missing image, the fields
    an ephemeral container cannot have, a target that is not one of the pod's containers."""
    name = pod["metadata"]["name"]
    existing = {c["name"]: c for c in (pod.get("spec") or {}).get("ephemeralContainers") or []}
    regular = {c["name"] for c in (pod["spec"].get("containers") or []) + (pod["spec"].get("initContainers") or [])}
    causes: list[dict[str, str]] = []
    seen: set[str] = set()
    for i, c in enumerate(wanted):
        path = f"spec.ephemeralContainers[{i}]"
        if not isinstance(c, dict) or not c.get("name"):
            causes.append({"reason": "FieldValueRequired", "message": "Required value", "field": f"{path}.name"})
            continue
        cname = c["name"]
        if cname in regular or cname in seen:
            causes.append({"reason": "FieldValueDuplicate", "message": f'Duplicate value: "{cname}"', "field": f"{path}.name"})
        seen.add(cname)
        if not c.get("image"):
            causes.append({"reason": "FieldValueRequired", "message": "Required value", "field": f"{path}.image"})
        for field in _EPHEMERAL_FORBIDDEN:
            if c.get(field):
                causes.append({"reason": "FieldValueForbidden", "message": "Forbidden: cannot be set for an Ephemeral Container",
                               "field": f"{path}.{field}"})
        target = c.get("targetContainerName")
        if target and target not in regular:
            causes.append({"reason": "FieldValueNotFound", "message": f'Not found: "{target}"',
                           "field": f"{path}.targetContainerName"})
        if cname in existing and existing[cname] != c:
            causes.append({"reason": "FieldValueForbidden", "field": "spec.ephemeralContainers",
                           "message": f'Forbidden: existing ephemeral containers "{cname}" may not be changed'})
    for gone in sorted(set(existing) - seen):
        causes.append({"reason": "FieldValueForbidden", "field": "spec.ephemeralContainers",
                       "message": f'Forbidden: existing ephemeral containers "{gone}" may not be removed'})
    if causes:
        detail = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
        raise StoreError(422, "Invalid", f'Pod "{name}" is invalid: {detail}',
                         {"name": name, "kind": "Pod", "causes": causes})
