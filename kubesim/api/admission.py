"""What kube-apiserver does to an object before it is stored. One admission chain for every
writer, controllers included (`install_admission`, a store admission hook): defaulting, then
the cluster's admission plugins (Service ClusterIP allocation, pod defaults, LimitRange
defaulting and limits, ResourceQuota with the real `pods "x" is forbidden: exceeded quota: ...`
messages). And validation of user requests (422 Invalid with field causes, the real messages),
including the fields that are immutable."""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

from kubesim.api.status import invalid
from kubesim.controllers.common import is_terminal
from kubesim.controllers.quota import COMPUTE, pod_usage
from kubesim.quantity import format_resource, parse_quantity
from kubesim.store import Obj, ResourceType, Store, StoreError

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                  "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                  "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
              "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
              "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
_LABEL_NAMED = {"namespaces", "services"}
_TEMPLATED = {"deployments.apps", "replicasets.apps", "statefulsets.apps", "daemonsets.apps", "jobs.batch",
              "replicationcontrollers"}


# -- defaulting ----------------------------------------------------------------------------
def _default_container(c: Obj) -> None:
    image = c.get("image", "")
    tagless = ":" not in image.rsplit("/", 1)[-1] and "@" not in image
    c.setdefault("imagePullPolicy", "Always" if tagless or image.endswith(":latest") else "IfNotPresent")
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    c.setdefault("resources", {})
    for p in c.get("ports") or []:
        p.setdefault("protocol", "TCP")
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        pr = c.get(probe)
        if isinstance(pr, dict):
            for k, v in (("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1), ("failureThreshold", 3)):
                pr.setdefault(k, v)


def default_pod_spec(spec: Obj) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    if spec.get("serviceAccountName") or spec.get("serviceAccount"):
        name = spec.get("serviceAccountName") or spec.get("serviceAccount")
        spec["serviceAccountName"] = spec["serviceAccount"] = name
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        _default_container(c)


def _qos(spec: Obj) -> str:
    cs = spec.get("containers") or []
    reqs = [((c.get("resources") or {}).get("requests") or {}, (c.get("resources") or {}).get("limits") or {}) for c in cs]
    if all(not r and not lim for r, lim in reqs):
        return "BestEffort"
    if all(lim.get("cpu") and lim.get("memory") and r.get("cpu", lim["cpu"]) == lim["cpu"]
           and r.get("memory", lim["memory"]) == lim["memory"] for r, lim in reqs):
        return "Guaranteed"
    return "Burstable"


def _allocate_node_port(store: Store, obj: Obj, port: int) -> int:
    taken = {p.get("nodePort") for s in store.iter_raw("services") for p in (s.get("spec", {}).get("ports") or [])}
    meta = obj["metadata"]
    seed = int(hashlib.sha256(f"{meta.get('namespace')}/{meta.get('name')}/{port}".encode()).hexdigest(), 16)
    for probe in range(2768):
        candidate = 30000 + (seed + probe) % 2768
        if candidate not in taken:
            return candidate
    return 30000


class Admission:
    """The store admission hook: defaults, then the admission plugins, for every writer."""

    def __init__(self, store: Store, defaulting: bool) -> None:
        self.store = store
        self.defaulting = defaulting
        self.next_ip = 10  # the ClusterIP allocator's cursor

    def __call__(self, verb: str, key: str, obj: Obj, old: Obj | None) -> None:
        if verb not in ("create", "update"):
            return
        if self.defaulting:
            self._default(verb, key, obj, old)
        if verb != "create":
            return
        if key == "services":
            self._allocate_cluster_ip(obj)
        elif key == "pods":
            default_pod(obj)
            apply_limit_ranges(self.store, obj)
            check_quota(self.store, obj)

    def _default(self, verb: str, key: str, obj: Obj, old: Obj | None) -> None:
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else None
        if key == "pods" and spec is not None:
            # The QoS class is read before the pod's own defaults and its LimitRanges fill resources.
            if verb == "create":
                obj.setdefault("status", {}).setdefault("qosClass", _qos(spec))
        elif key in _TEMPLATED and spec is not None:
            tspec = (spec.get("template") or {}).get("spec")
            if isinstance(tspec, dict):
                default_pod_spec(tspec)
            if key == "deployments.apps":
                spec.setdefault("replicas", 1)
                spec.setdefault("revisionHistoryLimit", 10)
                spec.setdefault("progressDeadlineSeconds", 600)
                strategy = spec.setdefault("strategy", {"type": "RollingUpdate"})
                if strategy.get("type", "RollingUpdate") == "RollingUpdate":
                    strategy["type"] = "RollingUpdate"
                    ru = strategy.setdefault("rollingUpdate", {})
                    ru.setdefault("maxSurge", "25%")
                    ru.setdefault("maxUnavailable", "25%")
            elif key == "statefulsets.apps":
                spec.setdefault("replicas", 1)
                spec.setdefault("podManagementPolicy", "OrderedReady")
                spec.setdefault("revisionHistoryLimit", 10)
                spec.setdefault("updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
            elif key == "daemonsets.apps":
                spec.setdefault("revisionHistoryLimit", 10)
                spec.setdefault("updateStrategy", {"type": "RollingUpdate",
                                                   "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
            elif key == "replicasets.apps" or key == "replicationcontrollers":
                spec.setdefault("replicas", 1)
            elif key == "jobs.batch":
                spec.setdefault("backoffLimit", 6)
                spec.setdefault("completions", 1)
                spec.setdefault("parallelism", 1)
                spec.setdefault("completionMode", "NonIndexed")
                spec.setdefault("suspend", False)
                name = obj["metadata"].get("name", "")
                if not spec.get("selector") and not spec.get("manualSelector") and name:
                    spec["selector"] = {"matchLabels": {"batch.kubernetes.io/job-name": name}}
                    labels = spec.setdefault("template", {}).setdefault("metadata", {}).setdefault("labels", {})
                    labels.setdefault("batch.kubernetes.io/job-name", name)
                    labels.setdefault("job-name", name)
        elif key == "services" and spec is not None:
            spec.setdefault("type", "ClusterIP")
            spec.setdefault("sessionAffinity", "None")
            if spec["type"] != "ExternalName":
                spec.setdefault("internalTrafficPolicy", "Cluster")
                # A new Service's ClusterIP comes from the cluster's allocator; an update keeps it.
                if old is not None and not spec.get("clusterIP"):
                    spec["clusterIP"] = (old.get("spec") or {}).get("clusterIP")
                    spec["clusterIPs"] = (old.get("spec") or {}).get("clusterIPs") or [spec["clusterIP"]]
                spec.setdefault("ipFamilies", ["IPv4"])
                spec.setdefault("ipFamilyPolicy", "SingleStack")
            old_ports = {p.get("port"): p.get("nodePort") for p in ((old or {}).get("spec") or {}).get("ports") or []}
            for p in spec.get("ports") or []:
                p.setdefault("protocol", "TCP")
                if "port" in p:
                    p.setdefault("targetPort", p["port"])
                if spec["type"] in ("NodePort", "LoadBalancer") and not p.get("nodePort"):
                    p["nodePort"] = old_ports.get(p.get("port")) or _allocate_node_port(self.store, obj, p.get("port", 0))
            obj.setdefault("status", {}).setdefault("loadBalancer", {})
        elif key == "namespaces":
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj.setdefault("status", {}).setdefault("phase", "Active")
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"].get("name", "")
        elif key == "secrets":
            obj.setdefault("type", "Opaque")
            string_data = obj.pop("stringData", None)
            if string_data:
                data = obj.setdefault("data", {})
                for k, v in string_data.items():
                    data[k] = base64.b64encode(str(v).encode()).decode()
        elif key == "persistentvolumeclaims" and spec is not None:
            spec.setdefault("volumeMode", "Filesystem")
            obj.setdefault("status", {}).setdefault("phase", "Pending")
        elif key == "persistentvolumes" and spec is not None:
            spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
            spec.setdefault("volumeMode", "Filesystem")
        elif key == "events":
            obj.setdefault("count", 1)
            obj.setdefault("type", "Normal")

    def _allocate_cluster_ip(self, svc: Obj) -> None:
        spec = svc.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        for p in spec.get("ports") or []:
            p.setdefault("protocol", "TCP")
            p.setdefault("targetPort", p.get("port"))
        if spec["type"] == "ExternalName" or spec.get("clusterIP") == "None":
            return
        if not spec.get("clusterIP"):
            with self.store.lock:
                used = {s.get("spec", {}).get("clusterIP") for s in self.store.iter_raw("services")}
            while True:
                n = self.next_ip
                self.next_ip += 1
                ip = f"10.96.{n // 250}.{n % 250 + 1}"
                if ip not in used and ip != "10.96.0.10" and ip != "10.96.0.1":
                    break
            spec["clusterIP"] = ip
        spec["clusterIPs"] = [spec["clusterIP"]]
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")


def install_admission(store: Store, defaulting: bool = True) -> Admission:
    """The chain's head, installed once per store: the cluster installs it when it is built, its
    API server asks again and switches defaulting on. A cluster without an API server stores
    what its controllers write without the API's defaults (its tests and seeds were tuned so:
    defaulting a template changes its pod-template-hash, so the pods' names and placement)."""
    for hook in store.admission:
        if isinstance(hook, Admission):
            hook.defaulting = hook.defaulting or defaulting
            return hook
    chain = Admission(store, defaulting)
    store.admission.insert(0, chain)
    return chain


# -- pods: defaults, LimitRanges, ResourceQuota ----------------------------------------------
_POD_TOLERATIONS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def default_pod(pod: Obj) -> None:
    """A pod's own defaults beyond its template's: service account, priority, tolerations."""
    spec = pod.setdefault("spec", {})
    default_pod_spec(spec)
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("tolerations", [])
    tol_keys = {t.get("key") for t in spec["tolerations"]}
    for key in _POD_TOLERATIONS:
        if key not in tol_keys:
            spec["tolerations"].append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
    pod.setdefault("status", {}).setdefault("phase", "Pending")


def apply_limit_ranges(store: Store, pod: Obj) -> None:
    ns = pod["metadata"]["namespace"]
    name = pod["metadata"]["name"]
    for lr in store.list("limitranges", ns):
        for item in (lr.get("spec") or {}).get("limits") or []:
            if item.get("type", "Container") != "Container":
                continue
            for c in pod["spec"].get("containers") or []:
                res = c.setdefault("resources", {})
                lim, req = res.setdefault("limits", {}), res.setdefault("requests", {})
                for r, v in (item.get("default") or {}).items():
                    lim.setdefault(r, v)
                for r, v in (item.get("defaultRequest") or {}).items():
                    req.setdefault(r, v)
                for r in list(lim):
                    req.setdefault(r, lim[r])
                if not lim:
                    res.pop("limits")
                if not req:
                    res.pop("requests")
                for r, v in (item.get("max") or {}).items():
                    have = (res.get("limits") or {}).get(r)
                    if have is None:
                        raise StoreError(403, "Forbidden", f'pods "{name}" is forbidden: maximum {r} usage per '
                                         f"Container is {v}.  No limit is specified")
                    if parse_quantity(have) > parse_quantity(v):
                        raise StoreError(403, "Forbidden", f'pods "{name}" is forbidden: maximum {r} usage per '
                                         f"Container is {v}, but limit is {have}")
                for r, v in (item.get("min") or {}).items():
                    have = (res.get("requests") or {}).get(r)
                    if have is not None and parse_quantity(have) < parse_quantity(v):
                        raise StoreError(403, "Forbidden", f'pods "{name}" is forbidden: minimum {r} usage per '
                                         f"Container is {v}, but request is {have}")


def _containers_missing(pod: Obj, resource: str) -> list[str]:
    kind, _, r = resource.partition(".")
    if kind not in ("requests", "limits"):
        kind, r = "requests", resource
    return [c["name"] for c in pod["spec"].get("containers") or [] if r not in ((c.get("resources") or {}).get(kind) or {})]


def check_quota(store: Store, pod: Obj) -> None:
    ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    quotas = store.list("resourcequotas", ns)
    if not quotas:
        return
    usage = pod_usage(pod)
    pods_in_ns = [p for p in store.list("pods", ns) if not is_terminal(p)]
    for q in sorted(quotas, key=lambda o: o["metadata"]["name"]):
        hard = (q.get("spec") or {}).get("hard") or {}
        missing = [f"{r} for: {','.join(_containers_missing(pod, r))}" for r in sorted(hard)
                   if r in COMPUTE and r not in usage]
        if missing:
            raise StoreError(403, "Forbidden", f'pods "{name}" is forbidden: failed quota: {q["metadata"]["name"]}: '
                             f"must specify {'; '.join(missing)}")
        exceeded = []
        for r in sorted(hard):
            if r not in usage and r not in ("pods", "count/pods"):
                continue
            used = sum(pod_usage(p).get(r, 0.0) for p in pods_in_ns)
            limit = parse_quantity(hard[r])
            if used + usage.get(r, 0.0) > limit + 1e-9:
                exceeded.append((r, usage.get(r, 0.0), used, hard[r]))
        if exceeded:
            req = ",".join(f"{r}={format_resource(r, v)}" for r, v, _, _ in exceeded)
            used_s = ",".join(f"{r}={format_resource(r, u)}" for r, _, u, _ in exceeded)
            lim_s = ",".join(f"{r}={h}" for r, _, _, h in exceeded)
            raise StoreError(403, "Forbidden", f'pods "{name}" is forbidden: exceeded quota: {q["metadata"]["name"]}, '
                             f"requested: {req}, used: {used_s}, limited: {lim_s}")


# -- time normalisation (user requests only) -----------------------------------------------
_TIME_KEY = re.compile(r"(Timestamp|Time|At)$")
_ISO = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(\.\d+)?(Z|[+-]\d{2}:?\d{2})?$")


def _normal_time(text: str, micro: bool) -> str:
    m = _ISO.match(text)
    if not m:
        return text
    from datetime import UTC, datetime

    frac = (m.group(3) or ".0")[:7].ljust(7, "0")
    zone = m.group(4) or "Z"
    stamp = datetime.fromisoformat(f"{m.group(1)}T{m.group(2)}{frac}{'+00:00' if zone == 'Z' else zone}").astimezone(UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def normalize_times(value: Any) -> None:
    """Timestamps in the form kube-apiserver serialises them (metav1.Time: seconds, `Z`;
    MicroTime: microseconds), whatever offset notation the client sent (the Python client
    sends `+00:00`), so that stored timestamps compare as strings."""
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, str) and _TIME_KEY.search(k):
                value[k] = _normal_time(v, micro=k in ("eventTime", "renewTime", "acquireTime", "lastObservedTime"))
            else:
                normalize_times(v)
    elif isinstance(value, list):
        for v in value:
            normalize_times(v)


# -- validation (user requests only) -------------------------------------------------------
Cause = tuple[str, str, str]


def _required(field: str) -> Cause:
    return ("FieldValueRequired", field, "Required value")


def _invalid_value(field: str, value: Any, why: str) -> Cause:
    shown = f'"{value}"' if isinstance(value, str) else _go_repr(value)
    return ("FieldValueInvalid", field, f"Invalid value: {shown}: {why}")


def _go_repr(value: Any) -> str:
    if isinstance(value, dict):
        return "map[string]string{" + ", ".join(f'"{k}":"{v}"' for k, v in value.items()) + "}"
    return str(value)


_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
_QUANTITY_MSG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_ENV_NAME_MSG = ("a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', "
                 "and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex "
                 "used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')")


def _quantity(text: Any) -> float | None:

    if not _QUANTITY.match(str(text)):
        return None
    try:
        return parse_quantity(text)
    except ValueError:
        return None


def _validate_resources(resources: Any, field: str) -> list[Cause]:
    causes: list[Cause] = []
    if not isinstance(resources, dict):
        return causes
    parsed: dict[str, dict[str, float]] = {}
    for kind in ("limits", "requests"):
        for name, value in (resources.get(kind) or {}).items():
            q = _quantity(value)
            if q is None:
                causes.append(_invalid_value(f"{field}.{kind}[{name}]", str(value), _QUANTITY_MSG))
            else:
                parsed.setdefault(kind, {})[name] = q
    for name, req in (parsed.get("requests") or {}).items():
        lim = (parsed.get("limits") or {}).get(name)
        if lim is not None and req > lim:
            causes.append(_invalid_value(f"{field}.requests", str(resources["requests"][name]),
                                         f"must be less than or equal to {name} limit of {resources['limits'][name]}"))
    return causes


def _validate_containers(containers: Any, field: str, need_image: bool, init: bool = False) -> list[Cause]:
    causes: list[Cause] = []
    if not containers:
        return [_required(field)]
    seen = set()
    for i, c in enumerate(containers):
        f = f"{field}[{i}]"
        name = c.get("name") if isinstance(c, dict) else None
        if not name:
            causes.append(_required(f"{f}.name"))
        elif not _LABEL.match(name):
            causes.append(_invalid_value(f"{f}.name", name, _LABEL_MSG))
        elif name in seen:
            causes.append(("FieldValueDuplicate", f"{f}.name", f'Duplicate value: "{name}"'))
        seen.add(name)
        if need_image and isinstance(c, dict) and not c.get("image"):
            causes.append(_required(f"{f}.image"))
        if isinstance(c, dict):
            causes += _validate_resources(c.get("resources"), f"{f}.resources")
            # a container's own restartPolicy makes a native sidecar: init containers only, Always only
            policy = c.get("restartPolicy")
            if policy is not None and not init:
                causes.append(("FieldValueForbidden", f"{f}.restartPolicy", "Forbidden: may not be set for non-init containers"))
            elif policy is not None and policy != "Always":
                causes.append(("FieldValueNotSupported", f"{f}.restartPolicy",
                               f'Unsupported value: "{policy}": supported values: "Always"'))
            for j, env in enumerate(c.get("env") or []):
                if not isinstance(env, dict) or not env.get("name"):
                    causes.append(_required(f"{f}.env[{j}].name"))
                elif not _ENV_NAME.match(env["name"]):
                    causes.append(_invalid_value(f"{f}.env[{j}].name", env["name"], _ENV_NAME_MSG))
        for j, p in enumerate((c.get("ports") if isinstance(c, dict) else None) or []):
            port = p.get("containerPort")
            if not isinstance(port, int) or not 0 < port < 65536:
                causes.append(_invalid_value(f"{f}.ports[{j}].containerPort", port, "must be between 1 and 65535, inclusive"))
    return causes


def _validate_pod_spec(spec: Any, field: str) -> list[Cause]:
    if not isinstance(spec, dict):
        return [_required(field)]
    causes = _validate_containers(spec.get("containers"), f"{field}.containers", True)
    if spec.get("initContainers"):
        causes += _validate_containers(spec["initContainers"], f"{field}.initContainers", True, init=True)
    policy = spec.get("restartPolicy")
    if policy and policy not in ("Always", "OnFailure", "Never"):
        causes.append(("FieldValueNotSupported", f"{field}.restartPolicy",
                       f'Unsupported value: "{policy}": supported values: "Always", "OnFailure", "Never"'))
    causes += _validate_tolerations(spec.get("tolerations"), f"{field}.tolerations")
    return causes


_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _validate_tolerations(tolerations: Any, field: str) -> list[Cause]:
    """validateTolerations: a known operator, no value with Exists, a known taint effect."""
    causes: list[Cause] = []
    for i, t in enumerate(tolerations or []):
        if not isinstance(t, dict):
            continue
        f = f"{field}[{i}]"
        op = t.get("operator") or "Equal"
        if op not in ("Equal", "Exists"):
            causes.append(("FieldValueNotSupported", f"{f}.operator",
                           f'Unsupported value: "{op}": supported values: "Equal", "Exists"'))
        elif op == "Exists" and t.get("value"):
            causes.append(_invalid_value(f"{f}.operator", t["value"], "value must be empty when `operator` is 'Exists'"))
        effect = t.get("effect")
        if effect and effect not in _TAINT_EFFECTS:
            supported = ", ".join(f'"{e}"' for e in _TAINT_EFFECTS)
            causes.append(("FieldValueNotSupported", f"{f}.effect",
                           f'Unsupported value: "{effect}": supported values: {supported}'))
    return causes


def _validate_statefulset(spec: dict[str, Any], old: Obj | None) -> list[Cause]:
    """The update strategy a StatefulSet may name, and the spec fields an update may not touch."""
    causes: list[Cause] = []
    strategy = spec.get("updateStrategy") or {}
    kind = strategy.get("type")
    if kind not in (None, "RollingUpdate", "OnDelete"):
        ru = strategy.get("rollingUpdate")
        shown = ("nil" if ru is None else f"&apps.RollingUpdateStatefulSetStrategy{{Partition:{ru.get('partition', 0)}}}")
        causes.append(("FieldValueInvalid", "spec.updateStrategy",
                       f'Invalid value: apps.StatefulSetUpdateStrategy{{Type:"{kind}", RollingUpdate:{shown}}}: '
                       "must be 'RollingUpdate' or 'OnDelete'"))
    if old is not None:
        before = old.get("spec") or {}
        if any(key in spec and spec.get(key) != before.get(key)
               for key in ("volumeClaimTemplates", "serviceName", "podManagementPolicy")):
            causes.append(("FieldValueForbidden", "spec",
                           "Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', "
                           "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and "
                           "'minReadySeconds' are forbidden"))
    return causes


def _pod_update_allowed(old: Obj, new: Obj) -> bool:
    """Pods are immutable but for images, activeDeadlineSeconds, added tolerations and a few more."""
    a, b = dict(old.get("spec") or {}), dict(new.get("spec") or {})
    for spec in (a, b):
        for field in ("containers", "initContainers"):
            spec[field] = [{k: v for k, v in c.items() if k != "image"} for c in spec.get(field) or []]
        spec.pop("activeDeadlineSeconds", None)
        spec.pop("tolerations", None)
        spec.pop("terminationGracePeriodSeconds", None)
    return a == b


def validate(rt: ResourceType, obj: Obj, old: Obj | None) -> None:
    """Raise 422 Invalid for what kube-apiserver would refuse from a client."""
    meta = obj.get("metadata") or {}
    name = meta.get("name") or meta.get("generateName") or ""
    causes: list[Cause] = []
    if meta.get("name"):
        if rt.key in _LABEL_NAMED and not _LABEL.match(meta["name"]):
            causes.append(_invalid_value("metadata.name", meta["name"], _LABEL_MSG))
        elif not _SUBDOMAIN.match(meta["name"]) and rt.group not in ("rbac.authorization.k8s.io",):
            causes.append(_invalid_value("metadata.name", meta["name"], _SUBDOMAIN_MSG))
    for field in ("labels", "annotations"):
        if meta.get(field) is not None and not isinstance(meta[field], dict):
            causes.append(_invalid_value(f"metadata.{field}", meta[field], "must be a map"))
    for v in (meta.get("labels") or {}).values():
        if not isinstance(v, str) or len(v) > 63:
            causes.append(_invalid_value("metadata.labels", v, "must be no more than 63 characters"))
    spec = obj.get("spec")
    if rt.key == "pods":
        causes += _validate_pod_spec(spec, "spec")
        if old is not None and not causes and not _pod_update_allowed(old, obj):
            causes.append(("FieldValueForbidden", "spec",
                           "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
                           "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` "
                           "(only additions to existing tolerations) or `spec.terminationGracePeriodSeconds` "
                           "(allow it to be set to 1 if it was previously negative)"))
    elif rt.key in _TEMPLATED:
        spec = spec if isinstance(spec, dict) else {}
        replicas = spec.get("replicas")
        if replicas is not None and (not isinstance(replicas, int) or replicas < 0):
            causes.append(_invalid_value("spec.replicas", replicas, "must be greater than or equal to 0"))
        template = spec.get("template") or {}
        causes += _validate_pod_spec(template.get("spec"), "spec.template.spec")
        selector = spec.get("selector")
        if rt.key != "jobs.batch" and rt.key != "replicationcontrollers":
            labels = (template.get("metadata") or {}).get("labels") or {}
            if not selector:
                causes.append(_required("spec.selector"))
            elif not _selector_matches(selector, labels):
                causes.append(_invalid_value("spec.template.metadata.labels", labels, "`selector` does not match template `labels`"))
            if old is not None and selector and (old.get("spec") or {}).get("selector") != selector:
                causes.append(_invalid_value("spec.selector", selector, "field is immutable"))
        if rt.key == "statefulsets.apps":
            causes += _validate_statefulset(spec, old)
        strategy = spec.get("strategy") or {}
        if rt.key == "deployments.apps" and strategy.get("type") == "Recreate" and strategy.get("rollingUpdate"):
            causes.append(("FieldValueForbidden", "spec.strategy.rollingUpdate",
                           "Forbidden: may not be specified when strategy `type` is 'Recreate'"))
        if rt.key in ("deployments.apps", "replicasets.apps", "daemonsets.apps") and \
                (template.get("spec") or {}).get("restartPolicy", "Always") != "Always":
            causes.append(("FieldValueNotSupported", "spec.template.spec.restartPolicy",
                           f'Unsupported value: "{template["spec"]["restartPolicy"]}": supported values: "Always"'))
    elif rt.key == "services":
        spec = spec if isinstance(spec, dict) else {}
        if spec.get("type", "ClusterIP") != "ExternalName" and not spec.get("ports") and spec.get("clusterIP") != "None":
            causes.append(_required("spec.ports"))
        for i, p in enumerate(spec.get("ports") or []):
            port = p.get("port")
            if not isinstance(port, int) or not 0 < port < 65536:
                causes.append(_invalid_value(f"spec.ports[{i}].port", port, "must be between 1 and 65535, inclusive"))
            if len(spec.get("ports") or []) > 1 and not p.get("name"):
                causes.append(_required(f"spec.ports[{i}].name"))
        if old is not None and spec.get("clusterIP") and spec.get("clusterIP") != (old.get("spec") or {}).get("clusterIP"):
            causes.append(_invalid_value("spec.clusterIPs[0]", spec["clusterIP"],
                                         "may not change once set"))
    elif rt.key == "configmaps":
        for k in (obj.get("data") or {}):
            if not re.match(r"^[-._a-zA-Z0-9]+$", k):
                causes.append(_invalid_value("data", k, "a valid config key must consist of alphanumeric characters, '-', '_' or '.'"))
    if causes:
        raise invalid(rt.kind, rt.group, name, causes)


def _selector_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    from kubesim.store import match_labels

    if not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return False
    return match_labels(selector, labels)
