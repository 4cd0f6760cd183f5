"""Request bodies in the Kubernetes protobuf encoding (`application/vnd.kubernetes.protobuf`),
decoded to the JSON form the rest of the server handles. kubectl >= 1.32's typed clients
(`kubectl create deployment|configmap|secret|service|job|cronjob|namespace|serviceaccount|quota|
pdb|priorityclass|role|rolebinding|clusterrole|clusterrolebinding`, `kubectl create token`) send them, and client-go falls back to JSON only for
CBOR, never for protobuf: a server must read them.

The envelope is `k8s\\x00` + runtime.Unknown {typeMeta{apiVersion=1, kind=2}=1, raw=2}; `raw` is
the object's message. Field numbers are those of k8s.io/api's and k8s.io/apimachinery's
generated.proto for the fields these kinds carry; a non-empty field outside them is refused by
name rather than dropped."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

from kubesim.store import StoreError

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"

# message -> field number -> (JSON name, type, repeated). A type is a message name, a scalar
# (string, bytes, int, bool; `int?`/`bool?` for the pointer fields whose zero value is sent
# and meant), map:<value type>, or `-` for a status, which a create ignores. Scalars without `?` are dropped when zero, as Go's JSON
# encoding of the same struct omits them.
_F = tuple[str, str, bool]
SCHEMA: dict[str, dict[int, _F]] = {
    "Unknown": {1: ("typeMeta", "TypeMeta", False), 2: ("raw", "bytes", False),
                3: ("contentEncoding", "string", False), 4: ("contentType", "string", False)},
    "TypeMeta": {1: ("apiVersion", "string", False), 2: ("kind", "string", False)},
    "ObjectMeta": {1: ("name", "string", False), 2: ("generateName", "string", False),
                   3: ("namespace", "string", False), 4: ("selfLink", "string", False), 5: ("uid", "string", False),
                   6: ("resourceVersion", "string", False), 7: ("generation", "int", False),
                   8: ("creationTimestamp", "Time", False), 9: ("deletionTimestamp", "Time", False),
                   10: ("deletionGracePeriodSeconds", "int?", False), 11: ("labels", "map:string", False),
                   12: ("annotations", "map:string", False), 13: ("ownerReferences", "OwnerReference", True),
                   14: ("finalizers", "string", True)},
    "OwnerReference": {1: ("kind", "string", False), 3: ("name", "string", False), 4: ("uid", "string", False),
                       5: ("apiVersion", "string", False), 6: ("controller", "bool?", False),
                       7: ("blockOwnerDeletion", "bool?", False)},
    "Time": {1: ("seconds", "int", False), 2: ("nanos", "int", False)},
    "LabelSelector": {1: ("matchLabels", "map:string", False), 2: ("matchExpressions", "LabelSelectorRequirement", True)},
    "LabelSelectorRequirement": {1: ("key", "string", False), 2: ("operator", "string", False),
                                 3: ("values", "string", True)},
    "IntOrString": {1: ("type", "int", False), 2: ("intVal", "int", False), 3: ("strVal", "string", False)},
    "Quantity": {1: ("string", "string", False)},
    # core/v1
    "ConfigMap": {1: ("metadata", "ObjectMeta", False), 2: ("data", "map:string", False),
                  3: ("binaryData", "map:bytes", False), 4: ("immutable", "bool?", False)},
    "Secret": {1: ("metadata", "ObjectMeta", False), 2: ("data", "map:bytes", False), 3: ("type", "string", False),
               4: ("stringData", "map:string", False), 5: ("immutable", "bool?", False)},
    "Namespace": {1: ("metadata", "ObjectMeta", False), 2: ("spec", "NamespaceSpec", False), 3: ("status", "-", False)},
    "NamespaceSpec": {1: ("finalizers", "string", True)},
    "ServiceAccount": {1: ("metadata", "ObjectMeta", False), 2: ("secrets", "ObjectReference", True),
                       3: ("imagePullSecrets", "LocalObjectReference", True),
                       4: ("automountServiceAccountToken", "bool?", False)},
    "ObjectReference": {1: ("kind", "string", False), 2: ("namespace", "string", False), 3: ("name", "string", False),
                        4: ("uid", "string", False), 5: ("apiVersion", "string", False),
                        6: ("resourceVersion", "string", False), 7: ("fieldPath", "string", False)},
    "LocalObjectReference": {1: ("name", "string", False)},
    "Service": {1: ("metadata", "ObjectMeta", False), 2: ("spec", "ServiceSpec", False), 3: ("status", "-", False)},
    "ServiceSpec": {1: ("ports", "ServicePort", True), 2: ("selector", "map:string", False),
                    3: ("clusterIP", "string", False), 4: ("type", "string", False),
                    5: ("externalIPs", "string", True), 7: ("sessionAffinity", "string", False),
                    8: ("loadBalancerIP", "string", False), 10: ("externalName", "string", False),
                    11: ("externalTrafficPolicy", "string", False), 13: ("publishNotReadyAddresses", "bool", False),
                    18: ("clusterIPs", "string", True), 19: ("ipFamilies", "string", True)},
    "ServicePort": {1: ("name", "string", False), 2: ("protocol", "string", False), 3: ("port", "int", False),
                    4: ("targetPort", "IntOrString", False), 5: ("nodePort", "int", False),
                    6: ("appProtocol", "string", False)},
    "PodTemplateSpec": {1: ("metadata", "ObjectMeta", False), 2: ("spec", "PodSpec", False)},
    "PodSpec": {2: ("containers", "Container", True), 3: ("restartPolicy", "string", False),
                4: ("terminationGracePeriodSeconds", "int?", False), 5: ("activeDeadlineSeconds", "int?", False),
                6: ("dnsPolicy", "string", False), 7: ("nodeSelector", "map:string", False),
                8: ("serviceAccountName", "string", False), 9: ("serviceAccount", "string", False),
                10: ("nodeName", "string", False), 11: ("hostNetwork", "bool", False),
                15: ("imagePullSecrets", "LocalObjectReference", True), 16: ("hostname", "string", False),
                17: ("subdomain", "string", False), 19: ("schedulerName", "string", False),
                20: ("initContainers", "Container", True), 24: ("priorityClassName", "string", False)},
    "Container": {1: ("name", "string", False), 2: ("image", "string", False), 3: ("command", "string", True),
                  4: ("args", "string", True), 5: ("workingDir", "string", False), 6: ("ports", "ContainerPort", True),
                  7: ("env", "EnvVar", True), 8: ("resources", "ResourceRequirements", False),
                  13: ("terminationMessagePath", "string", False), 14: ("imagePullPolicy", "string", False),
                  16: ("stdin", "bool", False), 17: ("stdinOnce", "bool", False), 18: ("tty", "bool", False),
                  20: ("terminationMessagePolicy", "string", False)},
    "ContainerPort": {1: ("name", "string", False), 2: ("hostPort", "int", False), 3: ("containerPort", "int", False),
                      4: ("protocol", "string", False), 5: ("hostIP", "string", False)},
    "EnvVar": {1: ("name", "string", False), 2: ("value", "string", False)},
    "ResourceRequirements": {1: ("limits", "map:Quantity", False), 2: ("requests", "map:Quantity", False)},
    "ResourceQuota": {1: ("metadata", "ObjectMeta", False), 2: ("spec", "ResourceQuotaSpec", False),
                      3: ("status", "-", False)},
    "ResourceQuotaSpec": {1: ("hard", "map:Quantity", False), 2: ("scopes", "string", True)},
    # policy/v1, scheduling.k8s.io/v1
    "PodDisruptionBudget": {1: ("metadata", "ObjectMeta", False), 2: ("spec", "PodDisruptionBudgetSpec", False),
                            3: ("status", "-", False)},
    "PodDisruptionBudgetSpec": {1: ("minAvailable", "IntOrString", False), 2: ("selector", "LabelSelector", False),
                                3: ("maxUnavailable", "IntOrString", False)},
    "PriorityClass": {1: ("metadata", "ObjectMeta", False), 2: ("value", "int", False),
                      3: ("globalDefault", "bool", False), 4: ("description", "string", False),
                      5: ("preemptionPolicy", "string", False)},
    # apps/v1
    "Deployment": {1: ("metadata", "ObjectMeta", False), 2: ("spec", "DeploymentSpec", False), 3: ("status", "-", False)},
    "DeploymentSpec": {1: ("replicas", "int?", False), 2: ("selector", "LabelSelector", False),
                       3: ("template", "PodTemplateSpec", False), 4: ("strategy", "DeploymentStrategy", False),
                       5: ("minReadySeconds", "int", False), 6: ("revisionHistoryLimit", "int?", False),
                       7: ("paused", "bool", False), 9: ("progressDeadlineSeconds", "int?", False)},
    "DeploymentStrategy": {1: ("type", "string", False), 2: ("rollingUpdate", "RollingUpdateDeployment", False)},
    "RollingUpdateDeployment": {1: ("maxUnavailable", "IntOrString", False), 2: ("maxSurge", "IntOrString", False)},
    # batch/v1
    "Job": {1: ("metadata", "ObjectMeta", False), 2: ("spec", "JobSpec", False), 3: ("status", "-", False)},
    "JobSpec": {1: ("parallelism", "int?", False), 2: ("completions", "int?", False),
                3: ("activeDeadlineSeconds", "int?", False), 4: ("selector", "LabelSelector", False),
                5: ("manualSelector", "bool?", False), 6: ("template", "PodTemplateSpec", False),
                7: ("backoffLimit", "int?", False), 8: ("ttlSecondsAfterFinished", "int?", False),
                9: ("completionMode", "string", False), 10: ("suspend", "bool?", False)},
    "CronJob": {1: ("metadata", "ObjectMeta", False), 2: ("spec", "CronJobSpec", False), 3: ("status", "-", False)},
    "CronJobSpec": {1: ("schedule", "string", False), 2: ("startingDeadlineSeconds", "int?", False),
                    3: ("concurrencyPolicy", "string", False), 4: ("suspend", "bool?", False),
                    5: ("jobTemplate", "JobTemplateSpec", False), 6: ("successfulJobsHistoryLimit", "int?", False),
                    7: ("failedJobsHistoryLimit", "int?", False), 8: ("timeZone", "string", False)},
    "JobTemplateSpec": {1: ("metadata", "ObjectMeta", False), 2: ("spec", "JobSpec", False)},
    # rbac.authorization.k8s.io/v1
    "Role": {1: ("metadata", "ObjectMeta", False), 2: ("rules", "PolicyRule", True)},
    "ClusterRole": {1: ("metadata", "ObjectMeta", False), 2: ("rules", "PolicyRule", True)},
    "PolicyRule": {1: ("verbs", "string", True), 2: ("apiGroups", "string", True), 3: ("resources", "string", True),
                   4: ("resourceNames", "string", True), 5: ("nonResourceURLs", "string", True)},
    "RoleBinding": {1: ("metadata", "ObjectMeta", False), 2: ("subjects", "Subject", True),
                    3: ("roleRef", "RoleRef", False)},
    "ClusterRoleBinding": {1: ("metadata", "ObjectMeta", False), 2: ("subjects", "Subject", True),
                           3: ("roleRef", "RoleRef", False)},
    "Subject": {1: ("kind", "string", False), 2: ("apiGroup", "string", False), 3: ("name", "string", False),
                4: ("namespace", "string", False)},
    "RoleRef": {1: ("apiGroup", "string", False), 2: ("kind", "string", False), 3: ("name", "string", False)},
    # meta/v1: helm 4 deletes its release Secrets with a protobuf DeleteOptions body
    "DeleteOptions": {1: ("gracePeriodSeconds", "int?", False), 2: ("preconditions", "Preconditions", False),
                      3: ("orphanDependents", "bool?", False), 4: ("propagationPolicy", "string", False),
                      5: ("dryRun", "string", True)},
    "Preconditions": {1: ("uid", "string", False), 2: ("resourceVersion", "string", False)},
    # authentication.k8s.io/v1 (`kubectl create token`)
    "TokenRequest": {1: ("metadata", "ObjectMeta", False), 2: ("spec", "TokenRequestSpec", False),
                     3: ("status", "-", False)},
    "TokenRequestSpec": {1: ("audiences", "string", True), 3: ("boundObjectRef", "BoundObjectReference", False),
                         4: ("expirationSeconds", "int?", False)},
    "BoundObjectReference": {1: ("kind", "string", False), 2: ("apiVersion", "string", False),
                             3: ("name", "string", False), 4: ("uid", "string", False)},
}
# (apiVersion, kind) a body may carry -> its message
KINDS = {("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "Namespace"), ("v1", "ServiceAccount"), ("v1", "Service"),
         ("v1", "ResourceQuota"), ("policy/v1", "PodDisruptionBudget"), ("scheduling.k8s.io/v1", "PriorityClass"),
         ("apps/v1", "Deployment"), ("batch/v1", "Job"), ("batch/v1", "CronJob"),
         ("rbac.authorization.k8s.io/v1", "Role"), ("rbac.authorization.k8s.io/v1", "ClusterRole"),
         ("rbac.authorization.k8s.io/v1", "RoleBinding"), ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
         ("authentication.k8s.io/v1", "TokenRequest")}


def _unsupported(message: str) -> StoreError:
    return StoreError(415, "UnsupportedMediaType", message)


def _fields(data: bytes, where: str) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) of a message: an int, or the bytes of a length-delimited field."""
    out: list[tuple[int, int, int | bytes]] = []
    i, n = 0, len(data)

    def varint() -> int:
        nonlocal i
        shift = result = 0
        while True:
            if i >= n:
                raise _unsupported(f"the protobuf body is truncated in {where}")
            b = data[i]
            i += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    while i < n:
        tag = varint()
        num, wire = tag >> 3, tag & 7
        if wire == 0:
            out.append((num, wire, varint()))
        elif wire == 2:
            size = varint()
            if i + size > n:
                raise _unsupported(f"the protobuf body is truncated in {where}")
            out.append((num, wire, data[i:i + size]))
            i += size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            out.append((num, wire, int.from_bytes(data[i:i + width], "little")))
            i += width
        else:
            raise _unsupported(f"the protobuf body has a field of wire type {wire} in {where}")
    return out


def _scalar(kind: str, wire: int, value: Any, where: str) -> Any:
    base = kind.rstrip("?")
    if base in ("string", "bytes"):
        if wire != 2:
            raise _unsupported(f"{where}: expected a length-delimited {base}")
        return value.decode("utf-8") if base == "string" else base64.b64encode(value).decode()
    if wire != 0:
        raise _unsupported(f"{where}: expected a varint {base}")
    if base == "bool":
        return bool(value)
    return value - (1 << 64) if value >= 1 << 63 else value


def _zero(value: Any) -> bool:
    return value in ("", 0, False) or value == {} or value == []


def decode_message(data: bytes, message: str, where: str = "") -> Any:
    """The JSON form of `data`, a `message` of SCHEMA."""
    where = where or message
    schema = SCHEMA[message]
    out: dict[str, Any] = {}
    for num, wire, value in _fields(data, where):
        spec = schema.get(num)
        if spec is None:
            if wire == 2 and not value or wire == 0 and not value:
                continue  # an empty field says nothing
            raise _unsupported(f"protobuf field {num} of {message} (in {where}) is not decoded by this server; "
                               "send the object as JSON (application/json)")
        name, kind, repeated = spec
        if kind == "-":
            continue  # status: the server ignores what a create sends there
        path = f"{where}.{name}"
        if kind.startswith("map:"):
            entry = {k: v for k, _, v in _fields(value, path)}
            key = entry.get(1, b"").decode("utf-8")
            val_kind = kind[4:]
            raw = entry.get(2, b"")
            out.setdefault(name, {})[key] = (_quantity(raw, path) if val_kind == "Quantity"
                                             else _scalar(val_kind, 2, raw, path))
            continue
        if kind in SCHEMA:
            if wire != 2:
                raise _unsupported(f"{path}: expected an embedded {kind}")
            item = _special(kind, value, path)
        else:
            item = _scalar(kind, wire, value, path)
            if not kind.endswith("?") and not repeated and _zero(item):
                continue
        if repeated:
            out.setdefault(name, []).append(item)
        elif kind in SCHEMA and _zero(item):
            continue
        else:
            out[name] = item
    return out


def _quantity(raw: bytes, where: str) -> str:
    return str(decode_message(raw, "Quantity", where).get("string", "0"))


def _special(kind: str, value: bytes, where: str) -> Any:
    """Types whose JSON form is not an object: Time (RFC 3339), IntOrString, Quantity."""
    msg = decode_message(value, kind, where)
    if kind == "Time":
        if not msg:
            return {}
        return datetime.fromtimestamp(msg.get("seconds", 0), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if kind == "IntOrString":
        return msg.get("strVal", "") if msg.get("type") == 1 else msg.get("intVal", 0)
    if kind == "Quantity":
        return msg.get("string", "0")
    return msg


def decode(body: bytes) -> dict[str, Any]:
    """A protobuf request body (the `k8s\\x00` envelope) as the object's JSON form."""
    if not body.startswith(MAGIC):
        raise StoreError(400, "BadRequest", "the protobuf body lacks the k8s\\x00 envelope")
    unknown = {num: value for num, _, value in _fields(body[len(MAGIC):], "Unknown")}
    type_meta = decode_message(unknown.get(1, b""), "TypeMeta")
    api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
    # DeleteOptions are sent in the group version of the resource deleted
    if (api_version, kind) not in KINDS and kind != "DeleteOptions":
        raise _unsupported(f"this server decodes protobuf bodies of {', '.join(sorted(k for _, k in KINDS))}, "
                           f"not {kind or 'an untyped object'} ({api_version}); send it as JSON (application/json)")
    obj = decode_message(unknown.get(2, b""), kind)
    return {"apiVersion": api_version, "kind": kind, **obj}
