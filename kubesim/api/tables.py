"""Server-side printing: meta.k8s.io Table responses for `kubectl get`, with the columns and cell
logic of kube-apiserver's printers (pod STATUS as printPod computes it) and AGE computed on the
cluster's virtual clock, since kubectl would otherwise subtract from its own wall clock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubesim.clock import parse_time
from kubesim.store import Obj

Column = tuple[str, str, int]  # name, type, priority (1 = only with -o wide)
RowFn = Callable[[Obj, float], list[Any]]

NONE = "<none>"


# HumanDuration's ladder: each unit is shown with the next smaller one while it counts fewer than
# `mixed_below`, alone while fewer than `alone_below` (None: no limit); a unit's smaller one counts
# `per` to it.
_DURATION_UNITS = (  # unit, seconds, smaller unit, per, mixed_below, alone_below
    ("m", 60, "s", 60, 10, 180),
    ("h", 3600, "m", 60, 8, 48),
    ("d", 86400, "h", 24, 8, 365 * 2),
    ("y", 86400 * 365, "d", 365, 8, None),
)


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    for unit, size, smaller, per, mixed_below, alone_below in _DURATION_UNITS:
        n = s // size
        if n < mixed_below:
            rest = s // (size // per) % per
            return f"{n}{unit}{rest}{smaller}" if rest else f"{n}{unit}"
        if alone_below is None or n < alone_below:
            return f"{n}{unit}"
    raise AssertionError("the last unit has no upper limit")


def since(timestamp: str | None, now: float) -> str:
    if not timestamp:
        return "<unknown>"
    return human_duration(now - parse_time(timestamp))


def age(obj: Obj, now: float) -> str:
    return since(obj.get("metadata", {}).get("creationTimestamp"), now)


def _g(obj: Any, *path: str, default: Any = None) -> Any:
    for p in path:
        if not isinstance(obj, dict):
            return default
        obj = obj.get(p)
    return default if obj is None else obj


def format_selector(selector: dict[str, Any] | None) -> str:
    if not selector:
        return NONE
    if "matchLabels" not in selector and "matchExpressions" not in selector:
        return ",".join(f"{k}={v}" for k, v in selector.items())
    parts = [f"{k}={v}" for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        op, key, values = expr.get("operator"), expr.get("key"), ",".join(expr.get("values") or [])
        parts.append({"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})",
                      "Exists": key, "DoesNotExist": f"!{key}"}.get(op, key))
    return ",".join(parts) or NONE


def _containers(spec: Obj | None) -> tuple[str, str]:
    cs = _g(spec, "containers", default=[])
    return ",".join(c.get("name", "") for c in cs), ",".join(c.get("image", "") for c in cs)


# -- pods ----------------------------------------------------------------------------------
def pod_status(pod: Obj) -> tuple[str, int, int, int, float | None]:
    """(STATUS, ready containers, total containers, restarts, last restart time) as printPod computes them."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    total = len(spec.get("containers") or [])
    ready = 0
    restarts = 0
    last_restart: float | None = None
    reason = status.get("reason") or status.get("phase") or "Pending"
    initializing = False
    init_statuses = status.get("initContainerStatuses") or []
    for i, cs in enumerate(init_statuses):
        restarts += int(cs.get("restartCount") or 0)
        state = cs.get("state") or {}
        term, wait = state.get("terminated"), state.get("waiting")
        if term is not None and int(term.get("exitCode") or 0) == 0:
            continue
        if term is not None:
            if not term.get("reason"):
                reason = f"Init:Signal:{term['signal']}" if term.get("signal") else f"Init:ExitCode:{term.get('exitCode', 0)}"
            else:
                reason = "Init:" + term["reason"]
        elif wait is not None and wait.get("reason") and wait.get("reason") != "PodInitializing":
            reason = "Init:" + wait["reason"]
        else:
            reason = f"Init:{i}/{len(spec.get('initContainers') or [])}"
        initializing = True
        break
    if not initializing:
        restarts = 0
        has_running = False
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += int(cs.get("restartCount") or 0)
            finished = _g(cs, "lastState", "terminated", "finishedAt")
            if finished:
                t = parse_time(finished)
                last_restart = t if last_restart is None else max(last_restart, t)
            state = cs.get("state") or {}
            term, wait = state.get("terminated"), state.get("waiting")
            if wait is not None and wait.get("reason"):
                reason = wait["reason"]
            elif term is not None and term.get("reason"):
                reason = term["reason"]
            elif term is not None:
                reason = f"Signal:{term['signal']}" if term.get("signal") else f"ExitCode:{term.get('exitCode', 0)}"
            elif cs.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            pod_ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                            for c in status.get("conditions") or [])
            reason = "Running" if pod_ready else "NotReady"
    if _g(pod, "metadata", "deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
    return reason, ready, total, restarts, last_restart


def _pod_row(pod: Obj, now: float) -> list[Any]:
    reason, ready, total, restarts, last = pod_status(pod)
    restarts_text = f"{restarts} ({human_duration(now - last)} ago)" if restarts and last is not None else str(restarts)
    gates = _g(pod, "spec", "readinessGates", default=[])
    gates_text = NONE
    if gates:
        conds = {c.get("type"): c.get("status") for c in _g(pod, "status", "conditions", default=[])}
        gates_text = f"{sum(1 for g in gates if conds.get(g.get('conditionType')) == 'True')}/{len(gates)}"
    return [pod["metadata"]["name"], f"{ready}/{total}", reason, restarts_text, age(pod, now),
            _g(pod, "status", "podIP", default=NONE), _g(pod, "spec", "nodeName", default=NONE),
            _g(pod, "status", "nominatedNodeName", default=NONE), gates_text]


# -- workloads -----------------------------------------------------------------------------
def _deployment_row(d: Obj, now: float) -> list[Any]:
    spec, st = d.get("spec") or {}, d.get("status") or {}
    names, images = _containers(_g(spec, "template", "spec"))
    return [d["metadata"]["name"], f"{st.get('readyReplicas', 0)}/{spec.get('replicas', 1)}",
            st.get("updatedReplicas", 0), st.get("availableReplicas", 0), age(d, now), names, images,
            format_selector(spec.get("selector"))]


def _replicaset_row(rs: Obj, now: float) -> list[Any]:
    spec, st = rs.get("spec") or {}, rs.get("status") or {}
    names, images = _containers(_g(spec, "template", "spec"))
    return [rs["metadata"]["name"], spec.get("replicas", 1), st.get("replicas", 0), st.get("readyReplicas", 0),
            age(rs, now), names, images, format_selector(spec.get("selector"))]


def _statefulset_row(s: Obj, now: float) -> list[Any]:
    spec, st = s.get("spec") or {}, s.get("status") or {}
    names, images = _containers(_g(spec, "template", "spec"))
    return [s["metadata"]["name"], f"{st.get('readyReplicas', 0)}/{spec.get('replicas', 1)}", age(s, now), names, images]


def _daemonset_row(d: Obj, now: float) -> list[Any]:
    spec, st = d.get("spec") or {}, d.get("status") or {}
    names, images = _containers(_g(spec, "template", "spec"))
    node_sel = _g(spec, "template", "spec", "nodeSelector")
    return [d["metadata"]["name"], st.get("desiredNumberScheduled", 0), st.get("currentNumberScheduled", 0),
            st.get("numberReady", 0), st.get("updatedNumberScheduled", 0), st.get("numberAvailable", 0),
            format_selector(node_sel) if node_sel else NONE, age(d, now), names, images,
            format_selector(spec.get("selector"))]


def _job_row(j: Obj, now: float) -> list[Any]:
    spec, st = j.get("spec") or {}, j.get("status") or {}
    names, images = _containers(_g(spec, "template", "spec"))
    completions = spec.get("completions")
    parallelism = spec.get("parallelism", 1)
    if completions is not None:
        comp = f"{st.get('succeeded', 0)}/{completions}"
    else:
        comp = f"{st.get('succeeded', 0)}/1 of {parallelism}" if parallelism > 1 else f"{st.get('succeeded', 0)}/1"
    start, end = st.get("startTime"), st.get("completionTime")
    duration = ""
    if start:
        duration = human_duration((parse_time(end) if end else now) - parse_time(start))
    return [j["metadata"]["name"], comp, duration, age(j, now), names, images, format_selector(spec.get("selector"))]


def _cronjob_row(c: Obj, now: float) -> list[Any]:
    spec, st = c.get("spec") or {}, c.get("status") or {}
    last = st.get("lastScheduleTime")
    names, images = _containers(_g(spec, "jobTemplate", "spec", "template", "spec"))
    return [c["metadata"]["name"], spec.get("schedule", ""), str(bool(spec.get("suspend", False))),
            len(st.get("active") or []), since(last, now) if last else NONE, age(c, now), names, images]


# -- networking ----------------------------------------------------------------------------
def _service_row(s: Obj, now: float) -> list[Any]:
    spec = s.get("spec") or {}
    svc_type = spec.get("type", "ClusterIP")
    external = ",".join(spec.get("externalIPs") or [])
    if svc_type == "LoadBalancer":
        ingress = [i.get("ip") or i.get("hostname", "") for i in _g(s, "status", "loadBalancer", "ingress", default=[])]
        external = ",".join(filter(None, [*ingress, external])) or "<pending>"
    elif svc_type == "ExternalName":
        external = spec.get("externalName", "")
    ports = []
    for p in spec.get("ports") or []:
        text = f"{p.get('port')}"
        if p.get("nodePort"):
            text += f":{p['nodePort']}"
        ports.append(f"{text}/{p.get('protocol', 'TCP')}")
    return [s["metadata"]["name"], svc_type, spec.get("clusterIP") or NONE, external or NONE,
            ",".join(ports) or NONE, age(s, now), format_selector(spec.get("selector"))]


def _endpoints_row(e: Obj, now: float) -> list[Any]:
    addrs = []
    for subset in e.get("subsets") or []:
        ports = subset.get("ports") or [{}]
        for a in subset.get("addresses") or []:
            for p in ports:
                addrs.append(f"{a.get('ip')}:{p['port']}" if p.get("port") else a.get("ip", ""))
    text = ",".join(addrs[:3]) + (f" + {len(addrs) - 3} more..." if len(addrs) > 3 else "")
    return [e["metadata"]["name"], text or NONE, age(e, now)]


def _endpointslice_row(e: Obj, now: float) -> list[Any]:
    ports = ",".join(str(p["port"]) for p in e.get("ports") or [] if p.get("port")) or "<unset>"
    addrs = [a for ep in e.get("endpoints") or [] for a in ep.get("addresses") or []]
    text = ",".join(addrs[:3]) + (f" + {len(addrs) - 3} more..." if len(addrs) > 3 else "")
    return [e["metadata"]["name"], e.get("addressType", ""), ports, text or "<unset>", age(e, now)]


def _netpol_row(n: Obj, now: float) -> list[Any]:
    sel = _g(n, "spec", "podSelector")
    return [n["metadata"]["name"], format_selector(sel) if sel else NONE, age(n, now)]


# -- config and storage --------------------------------------------------------------------
def _configmap_row(c: Obj, now: float) -> list[Any]:
    return [c["metadata"]["name"], len(c.get("data") or {}) + len(c.get("binaryData") or {}), age(c, now)]


def _secret_row(s: Obj, now: float) -> list[Any]:
    return [s["metadata"]["name"], s.get("type", "Opaque"), len(s.get("data") or {}), age(s, now)]


_ACCESS = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOncePod": "RWOP"}


def _modes(modes: list[str] | None) -> str:
    return ",".join(_ACCESS.get(m, m) for m in modes or [])


def _pvc_row(p: Obj, now: float) -> list[Any]:
    spec, st = p.get("spec") or {}, p.get("status") or {}
    return [p["metadata"]["name"], st.get("phase", "Pending"), spec.get("volumeName", ""),
            _g(st, "capacity", "storage", default=""), _modes(st.get("accessModes")),
            spec.get("storageClassName", ""), age(p, now), spec.get("volumeMode", "Filesystem")]


def _pv_row(p: Obj, now: float) -> list[Any]:
    spec, st = p.get("spec") or {}, p.get("status") or {}
    claim = spec.get("claimRef")
    return [p["metadata"]["name"], _g(spec, "capacity", "storage", default=""), _modes(spec.get("accessModes")),
            spec.get("persistentVolumeReclaimPolicy", "Retain"), st.get("phase", "Pending"),
            f"{claim.get('namespace')}/{claim.get('name')}" if claim else "", spec.get("storageClassName", ""),
            st.get("reason", ""), age(p, now), spec.get("volumeMode", "Filesystem")]


def _storageclass_row(s: Obj, now: float) -> list[Any]:
    default = _g(s, "metadata", "annotations", "storageclass.kubernetes.io/is-default-class") == "true"
    return [s["metadata"]["name"] + (" (default)" if default else ""), s.get("provisioner", ""),
            s.get("reclaimPolicy", "Delete"), s.get("volumeBindingMode", "Immediate"),
            str(bool(s.get("allowVolumeExpansion", False))).lower(), age(s, now)]


def _quota_row(q: Obj, now: float) -> list[Any]:
    hard, used = _g(q, "status", "hard", default=None) or _g(q, "spec", "hard", default={}), _g(q, "status", "used", default={})
    requests: list[str] = []
    limits: list[str] = []
    for name in sorted(hard):
        text = f"{name}: {used.get(name, '0')}/{hard[name]}"
        (limits if name.startswith("limits.") else requests).append(text)
    return [q["metadata"]["name"], age(q, now), ", ".join(requests), ", ".join(limits)]


# -- cluster -------------------------------------------------------------------------------
def _node_row(n: Obj, now: float) -> list[Any]:
    st = n.get("status") or {}
    ready = next((c for c in st.get("conditions") or [] if c.get("type") == "Ready"), None)
    status = "Unknown"
    if ready is not None:
        status = {"True": "Ready", "False": "NotReady"}.get(ready.get("status"), "Unknown")
    if _g(n, "spec", "unschedulable"):
        status += ",SchedulingDisabled"
    labels = _g(n, "metadata", "labels", default={})
    roles = sorted({k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/")} |
                   ({labels["kubernetes.io/role"]} if "kubernetes.io/role" in labels else set()))
    addresses = {a.get("type"): a.get("address") for a in st.get("addresses") or []}
    info = st.get("nodeInfo") or {}
    return [n["metadata"]["name"], status, ",".join(roles) or NONE, age(n, now), info.get("kubeletVersion", ""),
            addresses.get("InternalIP", NONE), addresses.get("ExternalIP", NONE), info.get("osImage", ""),
            info.get("kernelVersion", ""), info.get("containerRuntimeVersion", "")]


def _namespace_row(n: Obj, now: float) -> list[Any]:
    return [n["metadata"]["name"], _g(n, "status", "phase", default="Active"), age(n, now)]


def _event_row(e: Obj, now: float) -> list[Any]:
    last = e.get("lastTimestamp") or e.get("eventTime") or _g(e, "series", "lastObservedTime")
    first = e.get("firstTimestamp") or e.get("eventTime")
    inv = e.get("involvedObject") or {}
    source = _g(e, "source", "component", default="") or e.get("reportingComponent", "")
    host = _g(e, "source", "host")
    return [since(last, now) if last else age(e, now), e.get("type", ""), e.get("reason", ""),
            f"{str(inv.get('kind', '')).lower()}/{inv.get('name', '')}", inv.get("fieldPath", ""),
            f"{source}, {host}" if host else source, e.get("message", ""),
            since(first, now) if first else "", e.get("count", 1), e["metadata"]["name"]]


def _serviceaccount_row(s: Obj, now: float) -> list[Any]:
    return [s["metadata"]["name"], len(s.get("secrets") or []), age(s, now)]


def _binding_row(b: Obj, now: float) -> list[Any]:
    ref = b.get("roleRef") or {}
    subjects = b.get("subjects") or []

    def names(kind: str) -> str:
        return ",".join((f"{s.get('namespace')}/{s.get('name')}" if kind == "ServiceAccount" else s.get("name", ""))
                        for s in subjects if s.get("kind") == kind)

    return [b["metadata"]["name"], f"{ref.get('kind')}/{ref.get('name')}", age(b, now),
            names("User"), names("Group"), names("ServiceAccount")]


def _created_at_row(o: Obj, now: float) -> list[Any]:
    return [o["metadata"]["name"], o["metadata"].get("creationTimestamp", "")]


def _priorityclass_row(p: Obj, now: float) -> list[Any]:
    return [p["metadata"]["name"], p.get("value", 0), str(bool(p.get("globalDefault", False))).lower(), age(p, now)]


def _hpa_row(h: Obj, now: float) -> list[Any]:
    spec, st = h.get("spec") or {}, h.get("status") or {}
    ref = spec.get("scaleTargetRef") or {}
    target = spec.get("targetCPUUtilizationPercentage")
    current = st.get("currentCPUUtilizationPercentage")
    targets = f"{current if current is not None else '<unknown>'}%/{target}%" if target is not None else NONE
    return [h["metadata"]["name"], f"{ref.get('kind')}/{ref.get('name')}", targets, spec.get("minReplicas", 1),
            spec.get("maxReplicas", 0), st.get("currentReplicas", 0), age(h, now)]


def _tidbcluster_row(tc: Obj, now: float) -> list[Any]:
    """The TidbCluster CRD's additionalPrinterColumns (tidb-operator v1.6)."""
    ready: dict[str, Any] = next((c for c in _g(tc, "status", "conditions", default=[]) or [] if c.get("type") == "Ready"), {})
    row: list[Any] = [tc["metadata"]["name"], ready.get("status", "")]
    for comp, storage in (("pd", True), ("tikv", True), ("tidb", False)):
        row.append(_g(tc, "status", comp, "image", default=""))
        if storage:
            row.append(_g(tc, "spec", comp, "requests", "storage", default=""))
        row += [_g(tc, "status", comp, "statefulSet", "readyReplicas", default=None),
                _g(tc, "spec", comp, "replicas", default=None)]
    return row + [ready.get("message", ""), age(tc, now)]


def _apiservice_row(o: Obj, now: float) -> list[Any]:
    """kube-aggregator's printer: Local or namespace/name, and the Available condition with its
    reason when it is not True."""
    svc = _g(o, "spec", "service", default=None)
    service = f"{svc.get('namespace', '')}/{svc.get('name', '')}" if svc else "Local"
    cond: dict[str, Any] = next((c for c in _g(o, "status", "conditions", default=[]) or []
                                 if c.get("type") == "Available"), {})
    status = cond.get("status", "Unknown")
    available = status if status == "True" else f"{status} ({cond.get('reason', '')})"
    return [o["metadata"]["name"], service, available, age(o, now)]


def _generic_row(o: Obj, now: float) -> list[Any]:
    return [o["metadata"]["name"], age(o, now)]


_C = "string"
TABLES: dict[str, tuple[list[Column], RowFn]] = {
    "pods": ([("Name", _C, 0), ("Ready", _C, 0), ("Status", _C, 0), ("Restarts", _C, 0), ("Age", _C, 0),
              ("IP", _C, 1), ("Node", _C, 1), ("Nominated Node", _C, 1), ("Readiness Gates", _C, 1)], _pod_row),
    "deployments.apps": ([("Name", _C, 0), ("Ready", _C, 0), ("Up-to-date", "integer", 0), ("Available", "integer", 0),
                          ("Age", _C, 0), ("Containers", _C, 1), ("Images", _C, 1), ("Selector", _C, 1)], _deployment_row),
    "replicasets.apps": ([("Name", _C, 0), ("Desired", "integer", 0), ("Current", "integer", 0), ("Ready", "integer", 0),
                          ("Age", _C, 0), ("Containers", _C, 1), ("Images", _C, 1), ("Selector", _C, 1)], _replicaset_row),
    "statefulsets.apps": ([("Name", _C, 0), ("Ready", _C, 0), ("Age", _C, 0), ("Containers", _C, 1),
                           ("Images", _C, 1)], _statefulset_row),
    "daemonsets.apps": ([("Name", _C, 0), ("Desired", "integer", 0), ("Current", "integer", 0), ("Ready", "integer", 0),
                         ("Up-to-date", "integer", 0), ("Available", "integer", 0), ("Node Selector", _C, 0),
                         ("Age", _C, 0), ("Containers", _C, 1), ("Images", _C, 1), ("Selector", _C, 1)], _daemonset_row),
    "jobs.batch": ([("Name", _C, 0), ("Completions", _C, 0), ("Duration", _C, 0), ("Age", _C, 0),
                    ("Containers", _C, 1), ("Images", _C, 1), ("Selector", _C, 1)], _job_row),
    "cronjobs.batch": ([("Name", _C, 0), ("Schedule", _C, 0), ("Suspend", _C, 0), ("Active", "integer", 0),
                        ("Last Schedule", _C, 0), ("Age", _C, 0), ("Containers", _C, 1), ("Images", _C, 1)], _cronjob_row),
    "services": ([("Name", _C, 0), ("Type", _C, 0), ("Cluster-IP", _C, 0), ("External-IP", _C, 0),
                  ("Port(s)", _C, 0), ("Age", _C, 0), ("Selector", _C, 1)], _service_row),
    "endpoints": ([("Name", _C, 0), ("Endpoints", _C, 0), ("Age", _C, 0)], _endpoints_row),
    "endpointslices.discovery.k8s.io": ([("Name", _C, 0), ("AddressType", _C, 0), ("Ports", _C, 0), ("Endpoints", _C, 0),
                                         ("Age", _C, 0)], _endpointslice_row),
    "networkpolicies.networking.k8s.io": ([("Name", _C, 0), ("Pod-Selector", _C, 0), ("Age", _C, 0)], _netpol_row),
    "configmaps": ([("Name", _C, 0), ("Data", "integer", 0), ("Age", _C, 0)], _configmap_row),
    "secrets": ([("Name", _C, 0), ("Type", _C, 0), ("Data", "integer", 0), ("Age", _C, 0)], _secret_row),
    "persistentvolumeclaims": ([("Name", _C, 0), ("Status", _C, 0), ("Volume", _C, 0), ("Capacity", _C, 0),
                                ("Access Modes", _C, 0), ("StorageClass", _C, 0), ("Age", _C, 0),
                                ("VolumeMode", _C, 1)], _pvc_row),
    "persistentvolumes": ([("Name", _C, 0), ("Capacity", _C, 0), ("Access Modes", _C, 0), ("Reclaim Policy", _C, 0),
                           ("Status", _C, 0), ("Claim", _C, 0), ("StorageClass", _C, 0), ("Reason", _C, 0),
                           ("Age", _C, 0), ("VolumeMode", _C, 1)], _pv_row),
    "storageclasses.storage.k8s.io": ([("Name", _C, 0), ("Provisioner", _C, 0), ("ReclaimPolicy", _C, 0),
                                       ("VolumeBindingMode", _C, 0), ("AllowVolumeExpansion", _C, 0),
                                       ("Age", _C, 0)], _storageclass_row),
    "resourcequotas": ([("Name", _C, 0), ("Age", _C, 0), ("Request", _C, 0), ("Limit", _C, 0)], _quota_row),
    "nodes": ([("Name", _C, 0), ("Status", _C, 0), ("Roles", _C, 0), ("Age", _C, 0), ("Version", _C, 0),
               ("Internal-IP", _C, 1), ("External-IP", _C, 1), ("OS-Image", _C, 1), ("Kernel-Version", _C, 1),
               ("Container-Runtime", _C, 1)], _node_row),
    "namespaces": ([("Name", _C, 0), ("Status", _C, 0), ("Age", _C, 0)], _namespace_row),
    "events": ([("Last Seen", _C, 0), ("Type", _C, 0), ("Reason", _C, 0), ("Object", _C, 0), ("Subobject", _C, 1),
                ("Source", _C, 1), ("Message", _C, 0), ("First Seen", _C, 1), ("Count", "integer", 1),
                ("Name", _C, 1)], _event_row),
    "serviceaccounts": ([("Name", _C, 0), ("Secrets", "integer", 0), ("Age", _C, 0)], _serviceaccount_row),
    "rolebindings.rbac.authorization.k8s.io": ([("Name", _C, 0), ("Role", _C, 0), ("Age", _C, 0), ("Users", _C, 1),
                                                ("Groups", _C, 1), ("ServiceAccounts", _C, 1)], _binding_row),
    "clusterrolebindings.rbac.authorization.k8s.io": ([("Name", _C, 0), ("Role", _C, 0), ("Age", _C, 0),
                                                       ("Users", _C, 1), ("Groups", _C, 1),
                                                       ("ServiceAccounts", _C, 1)], _binding_row),
    "roles.rbac.authorization.k8s.io": ([("Name", _C, 0), ("Created At", "date", 0)], _created_at_row),
    "clusterroles.rbac.authorization.k8s.io": ([("Name", _C, 0), ("Created At", "date", 0)], _created_at_row),
    "limitranges": ([("Name", _C, 0), ("Created At", "date", 0)], _created_at_row),
    "priorityclasses.scheduling.k8s.io": ([("Name", _C, 0), ("Value", "integer", 0), ("Global-Default", _C, 0),
                                           ("Age", _C, 0)], _priorityclass_row),
    "horizontalpodautoscalers.autoscaling": ([("Name", _C, 0), ("Reference", _C, 0), ("Targets", _C, 0),
                                              ("MinPods", "integer", 0), ("MaxPods", "integer", 0),
                                              ("Replicas", "integer", 0), ("Age", _C, 0)], _hpa_row),
    "apiservices.apiregistration.k8s.io": ([("Name", _C, 0), ("Service", _C, 0), ("Available", _C, 0),
                                            ("Age", _C, 0)], _apiservice_row),
    "tidbclusters.pingcap.com": ([("Name", _C, 0), ("Ready", _C, 0), ("PD", _C, 0), ("Storage", _C, 0),
                                  ("Ready", "integer", 0), ("Desire", "integer", 0), ("TiKV", _C, 0), ("Storage", _C, 0),
                                  ("Ready", "integer", 0), ("Desire", "integer", 0), ("TiDB", _C, 0),
                                  ("Ready", "integer", 0), ("Desire", "integer", 0), ("Status", _C, 1),
                                  ("Age", _C, 0)], _tidbcluster_row),
}
_GENERIC: tuple[list[Column], RowFn] = ([("Name", _C, 0), ("Age", _C, 0)], _generic_row)


def _column_defs(columns: list[Column]) -> list[dict[str, Any]]:
    return [{"name": name, "type": type_, "format": "name" if name == "Name" else "", "description": name,
             "priority": priority} for name, type_, priority in columns]


def _row_object(obj: Obj, include: str) -> Obj | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata", {})}


def table(key: str, objects: list[Obj], now: float, resource_version: str, table_version: str = "v1",
          include_object: str = "PartialObjectMetadata", with_headers: bool = True) -> Obj:
    columns, row_fn = TABLES.get(key, _GENERIC)
    rows = []
    for obj in objects:
        row: Obj = {"cells": row_fn(obj, now)}
        inner = _row_object(obj, include_object)
        if inner is not None:
            row["object"] = inner
        rows.append(row)
    out: Obj = {"kind": "Table", "apiVersion": f"meta.k8s.io/{table_version}",
                "metadata": {"resourceVersion": resource_version}, "rows": rows}
    out["columnDefinitions"] = _column_defs(columns) if with_headers else []
    return out
