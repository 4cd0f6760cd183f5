"""tidb-operator v1.6's controller-manager on the emulated cluster. It acts only while a pod of its
image runs `tidb-controller-manager` (a broken operator Deployment leaves every TidbCluster
unreconciled) and, as an API client, writes what it renders through the API server's validation:

- the discovery service (`<tc>-discovery` Deployment, Service, its Role), then per component, in
  the order PD → TiKV (once PD has a quorum) → TiDB (once a store is Up): Services
  (`<tc>-pd`, `<tc>-pd-peer`, `<tc>-tikv-peer`, `<tc>-tidb`, `<tc>-tidb-peer`), a config map with
  the config and start script, and the StatefulSet with the real labels, volumeClaimTemplates,
  affinity, tolerations, podSecurityContext and update strategy;
- scaling one member per sync (PD members and TiKV stores leave PD first), rolling upgrades by
  lowering the StatefulSet's partition one Pod at a time (TiKV waits for PD, TiDB for both), and,
  with the VolumeReplacing feature gate, replacing a component's volumes when its storage
  class changes (the StatefulSet is recreated, then each Pod's disk);
- the TidbCluster's status (members, stores, phases, the Ready condition) and Events; its own
  log in klog format.

Where the emulation differs from v1.6 (so that a namespace-scoped SRE sees what the operator
saw): a StatefulSet update the API server refuses is also recorded as a `FailedUpdate` Warning
Event on the TidbCluster (v1.6 only logs it). `spec.statefulSetUpdateStrategy` is mapped as v1.6
maps it: OnDelete stays OnDelete, anything else becomes RollingUpdate (with the operator's own
partition), so a nonsense value is harmless there too.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubesim.apps.model import normalize_image
from kubesim.apps.tidb import PdView, klog
from kubesim.controllers.common import delete_pod, is_ready, owner_ref, template_hash
from kubesim.store import Obj, StoreError
from kubesim.view import ControlPlane

if TYPE_CHECKING:
    from kubesim.view import ContainerLogsView, KubeletView

OPERATOR_REPO = normalize_image("pingcap/tidb-operator:x")[0]
TC_KEY = "tidbclusters.pingcap.com"
LAST_APPLIED = "pingcap.com/last-applied-configuration"
REPLACE_DISK = "tidb.pingcap.com/replace-disk"
RESYNC_S = 30.0  # the operator's --resync-duration
COMPONENT = "tidb-controller-manager"


class Requeue(Exception):
    """Not an error: the sync waits for the cluster (a member to come up, a store to leave);
    `after` seconds when what it waits for shows in nothing the operator watches."""

    def __init__(self, message: str, after: float = 0.0) -> None:
        super().__init__(message)
        self.after = after


class SyncError(Exception):
    """The sync failed; the operator logs it and retries."""


@dataclass(frozen=True)
class Member:
    name: str  # pd | tikv | tidb
    title: str  # PD | TiKV | TiDB
    ports: tuple[tuple[str, int], ...]
    metrics_port: int
    data_path: str  # "" = no data volume
    config_file: str


MEMBERS = {
    "pd": Member("pd", "PD", (("server", 2380), ("client", 2379)), 2379, "/var/lib/pd", "pd.toml"),
    "tikv": Member("tikv", "TiKV", (("server", 20160),), 20180, "/var/lib/tikv", "tikv.toml"),
    "tidb": Member("tidb", "TiDB", (("server", 4000), ("status", 10080)), 10080, "", "tidb.toml"),
}


def labels(tc: Obj, component: str) -> dict[str, str]:
    return {"app.kubernetes.io/component": component, "app.kubernetes.io/instance": tc["metadata"]["name"],
            "app.kubernetes.io/managed-by": "tidb-operator", "app.kubernetes.io/name": "tidb-cluster"}


def member_spec(tc: Obj, comp: str) -> dict[str, Any]:
    return (tc.get("spec") or {}).get(comp) or {}


def image_of(tc: Obj, comp: str) -> str:
    """`spec.<comp>.image`, else `baseImage:version` (the component's version overriding the cluster's)."""
    spec, ms = tc.get("spec") or {}, member_spec(tc, comp)
    if ms.get("image"):
        return str(ms["image"])
    version = ms.get("version") or spec.get("version") or "latest"
    return f"{ms.get('baseImage') or f'pingcap/{comp}'}:{version}"


def _resources(ms: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in ("requests", "limits"):
        values = {k: v for k, v in (ms.get(kind) or {}).items() if k != "storage"}
        if values:
            out[kind] = values
    return out


def _toml(config: Any, prefix: str = "") -> str:
    """The component's `config` as the TOML file the operator writes."""
    if not isinstance(config, dict):
        return str(config or "")
    plain = [f"{k} = {json.dumps(v)}" for k, v in config.items() if not isinstance(v, dict)]
    tables = [f"\n[{prefix}{k}]\n" + _toml(v, f"{prefix}{k}.") for k, v in config.items() if isinstance(v, dict)]
    return "\n".join(plain) + "".join(tables) + ("\n" if plain else "")


def start_script(tc: Obj, comp: str) -> str:
    """The start script the operator puts in the component's config map (v1.6's, abridged)."""
    ns, name = tc["metadata"]["namespace"], tc["metadata"]["name"]
    head = "#!/bin/sh\n\nset -uo pipefail\n\nANNOTATIONS=\"/etc/podinfo/annotations\"\n" \
           "if [[ ! -f \"${ANNOTATIONS}\" ]]\nthen\n    echo \"${ANNOTATIONS} does't exist, exiting.\"\n    exit 1\nfi\n" \
           "source ${ANNOTATIONS} 2>/dev/null\nrunmode=${runmode:-normal}\nif [[ X${runmode} == Xdebug ]]\nthen\n" \
           "    echo \"entering debug mode.\"\n    tail -f /dev/null\nfi\n\n"
    discovery = f'discovery_url="{name}-discovery.{ns}:10261"\n'
    if comp == "pd":
        return head + (
            "PD_POD_NAME=${POD_NAME:-$HOSTNAME}\n"
            f"PD_DOMAIN=${{PD_POD_NAME}}.{name}-pd-peer.{ns}.svc\n\n"
            "ARGS=\"--data-dir=/var/lib/pd \\\n--name=${PD_POD_NAME} \\\n--peer-urls=http://0.0.0.0:2380 \\\n"
            "--advertise-peer-urls=http://${PD_DOMAIN}:2380 \\\n--client-urls=http://0.0.0.0:2379 \\\n"
            "--advertise-client-urls=http://${PD_DOMAIN}:2379 \\\n--config=/etc/pd/pd.toml\"\n\n"
            "if [[ -f /var/lib/pd/join ]]\nthen\n    join=`cat /var/lib/pd/join | tr \"\\n\" \",\" | sed -e 's/,$//g'`\n"
            "    ARGS=\"${ARGS} --join=${join}\"\nelif [[ ! -d /var/lib/pd/member/wal ]]\nthen\n"
            "    encoded_domain_url=`echo ${PD_DOMAIN}:2380 | base64 | tr \"\\n\" \" \" | sed \"s/ //g\"`\n"
            f"    {discovery}"
            "    until result=$(wget -qO- -T 3 http://${discovery_url}/new/${encoded_domain_url} 2>/dev/null); do\n"
            "        echo \"waiting for discovery service to return start args ...\"\n"
            "        sleep $((RANDOM % 5))\n    done\n    ARGS=\"${ARGS}${result}\"\nfi\n\n"
            "echo \"starting pd-server ...\"\nsleep $((RANDOM % 10))\necho \"/pd-server ${ARGS}\"\nexec /pd-server ${ARGS}\n")
    pd_url = f'pd_url="{name}-pd:2379"\n'
    verify = ("encoded_domain_url=$(echo $pd_url | base64 | tr \"\\n\" \" \" | sed \"s/ //g\")\n" + discovery +
              "until result=$(wget -qO- -T 3 http://${discovery_url}/verify/${encoded_domain_url} 2>/dev/null "
              "| sed 's/http:\\/\\///g'); do\n"
              "    echo \"waiting for the verification of PD endpoints ...\"\n    sleep $((RANDOM % 5))\ndone\n\n")
    if comp == "tikv":
        return head + "TIKV_POD_NAME=${POD_NAME:-$HOSTNAME}\n" + pd_url + verify + (
            "ARGS=\"--pd=${result} \\\n"
            f"--advertise-addr=${{TIKV_POD_NAME}}.{name}-tikv-peer.{ns}.svc:20160 \\\n--addr=0.0.0.0:20160 \\\n"
            f"--status-addr=0.0.0.0:20180 \\\n--advertise-status-addr=${{TIKV_POD_NAME}}.{name}-tikv-peer.{ns}.svc:20180 \\\n"
            "--data-dir=/var/lib/tikv \\\n--capacity=${CAPACITY} \\\n--config=/etc/tikv/tikv.toml\"\n\n"
            "echo \"starting tikv-server ...\"\necho \"/tikv-server ${ARGS}\"\nexec /tikv-server ${ARGS}\n")
    return head + "TIDB_POD_NAME=${POD_NAME:-$HOSTNAME}\n" + pd_url + verify + (
        "ARGS=\"--store=tikv \\\n"
        f"--advertise-address=${{TIDB_POD_NAME}}.{name}-tidb-peer.{ns}.svc \\\n"
        "--host=0.0.0.0 \\\n--path=${result} \\\n--log-slow-query=/var/log/tidb/slowlog \\\n"
        "--config=/etc/tidb/tidb.toml\"\n\n"
        "echo \"starting tidb-server ...\"\necho \"/tidb-server ${ARGS}\"\nexec /tidb-server ${ARGS}\n")


def render_configmap(tc: Obj, comp: str) -> Obj:
    ms, spec = member_spec(tc, comp), tc.get("spec") or {}
    data = {"config-file": _toml(ms.get("config") or {}), "startup-script": start_script(tc, comp)}
    name = f"{tc['metadata']['name']}-{comp}"
    if (ms.get("configUpdateStrategy") or spec.get("configUpdateStrategy")) == "RollingUpdate":
        digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
        name += "-" + str(int(digest[:8], 16) % 10**8)[:8]
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": tc["metadata"]["namespace"], "labels": labels(tc, comp),
                         "ownerReferences": [owner_ref(tc)]}, "data": data}


def render_services(tc: Obj, comp: str) -> list[Obj]:
    ns, name = tc["metadata"]["namespace"], tc["metadata"]["name"]

    def svc(svc_name: str, ports: list[tuple[str, int]], used_by: str, headless: bool, kind: str = "ClusterIP") -> Obj:
        spec: dict[str, Any] = {"ports": [{"name": n, "port": p, "protocol": "TCP", "targetPort": p} for n, p in ports],
                                "selector": labels(tc, comp)}
        if headless:
            spec.update(clusterIP="None", publishNotReadyAddresses=True)
        else:
            spec["type"] = kind
        return {"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": svc_name, "namespace": ns,
                             "labels": {**labels(tc, comp), "app.kubernetes.io/used-by": used_by},
                             "ownerReferences": [owner_ref(tc)]}, "spec": spec}

    if comp == "pd":
        return [svc(f"{name}-pd", [("client", 2379)], "end-user", False),
                svc(f"{name}-pd-peer", [("tcp-peer-2380", 2380), ("tcp-peer-2379", 2379)], "peer", True)]
    if comp == "tikv":
        return [svc(f"{name}-tikv-peer", [("peer", 20160)], "peer", True)]
    kind = ((member_spec(tc, "tidb").get("service") or {}).get("type")) or "ClusterIP"
    return [svc(f"{name}-tidb", [("mysql-client", 4000), ("status", 10080)], "end-user", False, kind),
            svc(f"{name}-tidb-peer", [("status", 10080)], "peer", True)]


def _base(tc: Obj, comp: str, key: str) -> Any:
    """A member's own setting, else the cluster-wide one (tidb-operator's BaseComponentSpec)."""
    ms, spec = member_spec(tc, comp), tc.get("spec") or {}
    return ms[key] if ms.get(key) is not None else spec.get(key)


def render_statefulset(tc: Obj, comp: str, configmap: str) -> Obj:
    """The StatefulSet tidb-operator renders for one member type."""
    m = MEMBERS[comp]
    ms, spec = member_spec(tc, comp), tc.get("spec") or {}
    ns, name = tc["metadata"]["namespace"], tc["metadata"]["name"]
    set_name = f"{name}-{comp}"
    lbl = labels(tc, comp)
    replicas = int(ms.get("replicas", 1))
    mounts = [{"name": "annotations", "mountPath": "/etc/podinfo", "readOnly": True},
              {"name": "config", "mountPath": f"/etc/{comp}", "readOnly": True},
              {"name": "startup-script", "mountPath": "/usr/local/bin", "readOnly": True}]
    if m.data_path:
        mounts.insert(1, {"name": comp, "mountPath": m.data_path})
    env = [{"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
           {"name": "CLUSTER_NAME", "value": name}, {"name": "TZ", "value": spec.get("timezone") or "UTC"},
           {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    if comp == "pd":
        env += [{"name": "PEER_SERVICE_NAME", "value": f"{name}-pd-peer"}, {"name": "SERVICE_NAME", "value": f"{name}-pd"},
                {"name": "SET_NAME", "value": set_name}]
    elif comp == "tikv":
        env += [{"name": "CAPACITY", "value": "0"}, {"name": "HEADLESS_SERVICE_NAME", "value": f"{name}-tikv-peer"}]
    else:
        env += [{"name": "BINLOG_ENABLED", "value": "false"}, {"name": "SLOW_LOG_FILE", "value": ""},
                {"name": "HEADLESS_SERVICE_NAME", "value": f"{name}-tidb-peer"}]
    env += list(ms.get("env") or [])
    container: dict[str, Any] = {
        "name": comp, "image": image_of(tc, comp),
        "imagePullPolicy": _base(tc, comp, "imagePullPolicy") or "IfNotPresent",
        "command": ["/bin/sh", f"/usr/local/bin/{comp}_start_script.sh"],
        "ports": [{"name": n, "containerPort": p, "protocol": "TCP"} for n, p in m.ports],
        "env": env, "volumeMounts": mounts, "resources": _resources(ms)}
    if comp == "tidb":
        container["readinessProbe"] = {"tcpSocket": {"port": 4000}, "initialDelaySeconds": 10}
    items = {"config-file": f"{comp}.toml", "startup-script": f"{comp}_start_script.sh"}
    volumes = [{"name": "annotations", "downwardAPI": {"items": [{"path": "annotations",
                                                                  "fieldRef": {"fieldPath": "metadata.annotations"}}]}},
               {"name": "config", "configMap": {"name": configmap, "items": [{"key": "config-file", "path": items["config-file"]}]}},
               {"name": "startup-script", "configMap": {"name": configmap,
                                                       "items": [{"key": "startup-script", "path": items["startup-script"]}]}}]
    pod_spec: dict[str, Any] = {"containers": [container], "volumes": volumes,
                                "schedulerName": spec.get("schedulerName") or "default-scheduler"}
    for field, key in (("affinity", "affinity"), ("tolerations", "tolerations"), ("nodeSelector", "nodeSelector"),
                       ("securityContext", "podSecurityContext"), ("priorityClassName", "priorityClassName")):
        value = _base(tc, comp, key)
        if value:
            pod_spec[field] = copy.deepcopy(value)
    annotations = {"prometheus.io/path": "/metrics", "prometheus.io/port": str(m.metrics_port),
                   "prometheus.io/scrape": "true", **(ms.get("annotations") or {})}
    strategy_type = "OnDelete" if spec.get("statefulSetUpdateStrategy") == "OnDelete" else "RollingUpdate"
    strategy: dict[str, Any] = {"type": strategy_type}
    if strategy_type == "RollingUpdate":
        strategy["rollingUpdate"] = {"partition": replicas}
    sts: Obj = {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": set_name, "namespace": ns, "labels": dict(lbl), "ownerReferences": [owner_ref(tc)]},
        "spec": {"replicas": replicas, "selector": {"matchLabels": dict(lbl)}, "serviceName": f"{set_name}-peer",
                 "podManagementPolicy": "Parallel", "updateStrategy": strategy,
                 "template": {"metadata": {"labels": {**lbl, **(ms.get("labels") or {})}, "annotations": annotations},
                              "spec": pod_spec}}}
    if m.data_path:
        claim: dict[str, Any] = {"accessModes": ["ReadWriteOnce"],
                                 "resources": {"requests": {"storage": str((ms.get("requests") or {}).get("storage", "1Gi"))}}}
        if ms.get("storageClassName"):
            claim["storageClassName"] = ms["storageClassName"]
        sts["spec"]["volumeClaimTemplates"] = [{"metadata": {"name": comp}, "spec": claim}]
    return sts


def claim_class(claim_spec: dict[str, Any], default_class: str | None) -> str:
    return str(claim_spec.get("storageClassName") or default_class or "")


def revision(sts: Obj) -> str:
    """The update revision the statefulset controller gives the set's current template."""
    return f"{sts['metadata']['name']}-{template_hash((sts.get('spec') or {}).get('template') or {})}"


def _applied_template(sts: Obj) -> Any:
    try:
        return json.loads((sts["metadata"].get("annotations") or {}).get(LAST_APPLIED, "{}")).get("template")
    except ValueError:
        return None


# -- the controller -------------------------------------------------------------------------------
class TidbOperator:
    def __init__(self, cp: ControlPlane, kubelet: KubeletView, logs: ContainerLogsView,
                 pd: Callable[[str], PdView]) -> None:
        """`kubelet`: whether its operator pod runs; `logs`: that pod's log; `pd(namespace/name)`:
        the PD API of one TidbCluster."""
        self.store, self.clock, self.events, self.wake_at = cp.store, cp.clock, cp.events, cp.wake_at
        self.kubelet, self.logs, self.pd = kubelet, logs, pd
        self._seen: dict[str, Any] = {}
        self._logged: dict[str, float] = {}
        self._wake = 0.0
        self._retry: dict[str, float] = {}

    def running(self) -> tuple[Obj, dict[str, Any]] | None:
        """The operator pod that holds the leader lease (the first running one) and its flags."""
        for rt, c in sorted(self.kubelet.running(), key=lambda x: (x[0].namespace, x[0].name)):
            inst = c.instance
            if isinstance(inst, dict) and inst.get("kind") == "tidb-operator" \
                    and normalize_image(c.image)[0] == OPERATOR_REPO:
                pod = self.store.raw("pods", rt.namespace, rt.name)
                if pod is not None and not pod["metadata"].get("deletionTimestamp"):
                    return pod, inst.get("flags") or {}
        return None

    def __call__(self, now: float) -> None:
        found = self.running()
        if found is None:
            return
        pod, flags = found
        for tc in self.store.scan(TC_KEY):
            if tc["metadata"].get("deletionTimestamp"):
                continue
            uid = tc["metadata"]["uid"]
            due = now + 1e-9 >= self._retry.get(uid, float("inf"))
            if not due and self._seen.get(uid) == self._fingerprint(tc, now, pod):
                continue  # nothing it watches changed and no resync is due
            self._retry.pop(uid, None)
            retry = _Sync(self, tc, pod, flags, now).run()
            if retry:
                self._retry[uid] = now + retry
                self.wake_at(now + retry)
            fresh = self.store.raw(TC_KEY, tc["metadata"]["namespace"], tc["metadata"]["name"])
            if fresh is not None:
                self._seen[uid] = self._fingerprint(fresh, now, pod)
        resync = (now // RESYNC_S + 1) * RESYNC_S
        if resync != self._wake:
            self._wake = resync
            self.wake_at(resync)

    def _fingerprint(self, tc: Obj, now: float, pod: Obj) -> Any:
        ns, name = tc["metadata"]["namespace"], tc["metadata"]["name"]
        watched = []
        for key in ("statefulsets.apps", "pods", "persistentvolumeclaims", "deployments.apps", "services"):
            for obj in self.store.scan(key, ns):
                if (obj["metadata"].get("labels") or {}).get("app.kubernetes.io/instance") == name:
                    watched.append((key, obj["metadata"]["name"], obj["metadata"].get("resourceVersion")))
        view = self.pd(f"{ns}/{name}")
        rec = view.rec
        pd = (tuple(sorted(rec["members"])), tuple(sorted((k, s["state"]) for k, s in rec["stores"].items())),
              tuple(sorted(view.serving())))
        return (tc["metadata"].get("resourceVersion"), tuple(sorted(watched)), pd, int(now // RESYNC_S),
                pod["metadata"]["uid"])

    def log(self, pod: Obj, level: str, caller: str, msg: str, every: float = 0.0, key: str = "") -> None:
        now = self.clock.now()
        if every:
            k = key or msg
            if now - self._logged.get(k, -1e18) < every:
                return
            self._logged[k] = now
        self.logs.write(pod, "tidb-operator", klog(now, level, caller, msg), now)


class _Sync:
    """One pass of the TidbCluster control loop (UpdateTidbCluster)."""

    def __init__(self, op: TidbOperator, tc: Obj, pod: Obj, flags: dict[str, Any], now: float) -> None:
        self.op, self.tc, self.pod, self.flags, self.now = op, tc, pod, flags, now
        self.store, self.clock = op.store, op.clock
        self.ns, self.name = tc["metadata"]["namespace"], tc["metadata"]["name"]
        self.key = f"{self.ns}/{self.name}"
        self.pd_view = op.pd(self.key)
        self.phase: dict[str, str] = {}
        features = str(flags.get("features", ""))
        self.volume_replacing = "VolumeReplacing=true" in features

    # -- API access, validated like any client's request ------------------------------------
    def _validated(self, key: str, obj: Obj, old: Obj | None) -> None:
        # the operator writes the store directly, so it runs the API server's own validation, a
        # floor above: deferred to call time (tests/architecture/test_kubesim_floors)
        from kubesim.api.admission import validate

        validate(self.store.type_for(key), obj, old)

    def create(self, key: str, obj: Obj, what: str) -> Obj | None:
        try:
            self._validated(key, obj, None)
            made = self.store.create(key, obj, namespace=self.ns)
        except StoreError as exc:
            if exc.code == 409:
                return self.store.try_get(key, self.ns, obj["metadata"]["name"])
            self.event("Warning", "FailedCreate", f"create {what} {obj['metadata']['name']} in TidbCluster {self.name} "
                                                  f"failed error: {exc.message}")
            raise SyncError(exc.message) from None
        if what in ("StatefulSet", "Service"):
            self.event("Normal", "SuccessfulCreate",
                       f"create {what} {obj['metadata']['name']} in TidbCluster {self.name} successful")
        return made

    def event(self, type_: str, reason: str, message: str) -> None:
        self.op.events.record(self.tc, type_, reason, message, COMPONENT)

    def log(self, level: str, caller: str, msg: str, every: float = 0.0, key: str = "") -> None:
        self.op.log(self.pod, level, caller, msg, every, key)

    # -- the loop ----------------------------------------------------------------------------
    def run(self) -> float:
        """One sync; the seconds after which to look again regardless (0: on the next change)."""
        try:
            self.discovery()
            self.member("pd")
            if not self.pd_view.quorum():
                raise Requeue(f"TidbCluster: [{self.key}], waiting for PD cluster running")
            self.member("tikv")
            if not any(s["state"] == "Up" for s in self.pd_view.stores().values()):
                raise Requeue(f"TidbCluster: [{self.key}], waiting for TiKV cluster running")
            self.member("tidb")
        except Requeue as exc:
            self.log("I", "tidb_cluster_controller.go:134", f"TidbCluster: {self.key}, still need sync: {exc}, requeuing",
                     every=RESYNC_S)
            return exc.after
        except SyncError as exc:
            self.log("E", "tidb_cluster_controller.go:141", f"TidbCluster: {self.key}, sync failed {exc}, requeuing",
                     every=RESYNC_S)
        finally:
            self.status()
        return 0.0

    def discovery(self) -> None:
        ns, name = self.ns, f"{self.name}-discovery"
        lbl = labels(self.tc, "discovery")
        meta = {"name": name, "namespace": ns, "labels": dict(lbl), "ownerReferences": [owner_ref(self.tc)]}
        if self.store.try_get("serviceaccounts", ns, name) is None:
            self.create("serviceaccounts", {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": copy.deepcopy(meta)},
                        "ServiceAccount")
        if self.store.try_get("roles.rbac.authorization.k8s.io", ns, name) is None:
            self.create("roles.rbac.authorization.k8s.io", {
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": copy.deepcopy(meta),
                "rules": [{"apiGroups": ["pingcap.com"], "resources": ["tidbclusters"], "resourceNames": [self.name],
                           "verbs": ["get"]},
                          {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]}]}, "Role")
            self.create("rolebindings.rbac.authorization.k8s.io", {
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": copy.deepcopy(meta),
                "subjects": [{"kind": "ServiceAccount", "name": name}],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}}, "RoleBinding")
        image = str(self.flags.get("tidb-discovery-image") or "pingcap/tidb-operator:latest")
        resources = _resources((self.tc.get("spec") or {}).get("discovery") or {})
        deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": copy.deepcopy(meta),
                  "spec": {"replicas": 1, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": dict(lbl)},
                           "template": {"metadata": {"labels": dict(lbl)}, "spec": {
                               "serviceAccountName": name,
                               "containers": [{"name": "discovery", "image": image, "imagePullPolicy": "IfNotPresent",
                                               "command": ["/usr/local/bin/tidb-discovery"], "resources": resources,
                                               "env": [{"name": "MY_POD_NAMESPACE",
                                                        "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                                                       {"name": "TC_NAME", "value": self.name},
                                                       {"name": "TZ", "value": (self.tc.get("spec") or {}).get("timezone") or "UTC"}],
                                               "ports": [{"name": "discovery", "containerPort": 10261, "protocol": "TCP"},
                                                         {"name": "proxy", "containerPort": 10262, "protocol": "TCP"}]}]}}}}
        if self.store.try_get("deployments.apps", ns, name) is None:
            self.create("deployments.apps", deploy, "Deployment")
        if self.store.try_get("services", ns, name) is None:
            self.create("services", {"apiVersion": "v1", "kind": "Service", "metadata": copy.deepcopy(meta),
                                     "spec": {"type": "ClusterIP", "selector": dict(lbl),
                                              "ports": [{"name": "discovery", "port": 10261, "targetPort": 10261, "protocol": "TCP"},
                                                        {"name": "proxy", "port": 10262, "targetPort": 10262, "protocol": "TCP"}]}},
                        "Service")

    def _default_class(self) -> str | None:
        for sc in self.store.scan("storageclasses.storage.k8s.io"):
            if (sc["metadata"].get("annotations") or {}).get("storageclass.kubernetes.io/is-default-class") == "true":
                return str(sc["metadata"]["name"])
        return None

    def _pods(self, comp: str) -> dict[str, Obj]:
        return {p["metadata"]["name"]: p for p in self.store.scan("pods", self.ns)
                if (p["metadata"].get("labels") or {}).get("app.kubernetes.io/instance") == self.name
                and (p["metadata"].get("labels") or {}).get("app.kubernetes.io/component") == comp}

    def member(self, comp: str) -> None:
        """syncXXXStatefulSetForTidbCluster: services, config, then create / replace volumes /
        scale / upgrade / update the StatefulSet."""
        for svc in render_services(self.tc, comp):
            if self.store.try_get("services", self.ns, svc["metadata"]["name"]) is None:
                self.create("services", svc, "Service")
        cm = render_configmap(self.tc, comp)
        if self.store.try_get("configmaps", self.ns, cm["metadata"]["name"]) is None:
            self.create("configmaps", cm, "ConfigMap")
        default_class = self._default_class()
        new = render_statefulset(self.tc, comp, cm["metadata"]["name"])
        old = self.store.try_get("statefulsets.apps", self.ns, new["metadata"]["name"])
        if old is None:
            new["metadata"].setdefault("annotations", {})[LAST_APPLIED] = json.dumps(new["spec"], sort_keys=True)
            self.create("statefulsets.apps", new, "StatefulSet")
            self.phase[comp] = "Normal"
            return
        pods = self._pods(comp)
        if self.volume_replacing and MEMBERS[comp].data_path:
            self.replace_volumes(comp, old, new, pods, default_class)
        self.scale(comp, old, new, pods)
        self.upgrade(comp, old, new, pods)
        self.update(comp, old, new)

    # -- volumes (VolumeReplacing) ---------------------------------------------------------------
    def replace_volumes(self, comp: str, old: Obj, new: Obj, pods: dict[str, Obj], default_class: str | None) -> None:
        want = claim_class(new["spec"]["volumeClaimTemplates"][0]["spec"], default_class)
        have = claim_class(((old["spec"].get("volumeClaimTemplates") or [{}])[0]).get("spec") or {}, default_class)
        set_name = old["metadata"]["name"]
        if want != have:
            # claimsSame(oldSet, newSet) is called with its arguments swapped in v1.6: "new" is the old class
            old_cls = ((old["spec"].get("volumeClaimTemplates") or [{}])[0].get("spec") or {}).get("storageClassName") or ""
            new_cls = new["spec"]["volumeClaimTemplates"][0]["spec"].get("storageClassName") or ""
            self.event("Warning", f"FailedUpdate{MEMBERS[comp].title}STS",
                       f"volume claim {comp} has new storageclass ({old_cls}) vs old ({new_cls})")
            if any(self._stale(p, old) for p in pods.values()):
                raise SyncError(f"component sts {set_name}/{self.ns} is upgrading")
            self.log("I", "pvc_replacer.go:77", f"Statefulset not synced for volumes! {self.ns}/{set_name} for component "
                     f"{self.key}:{comp}")
            self._orphan_delete(old)
            raise Requeue(f"waiting on recreate statefulset {self.ns}/{set_name} for component {self.key}:{comp}")
        out_of_sync = []
        for pod_name in sorted(pods, key=lambda n: -int(n.rsplit("-", 1)[-1])):
            claim = self.store.try_get("persistentvolumeclaims", self.ns, f"{comp}-{pod_name}")
            if claim is not None and claim_class(claim.get("spec") or {}, default_class) != want:
                out_of_sync.append((pod_name, claim))
        replacing = {name for name, _ in out_of_sync}
        if any((not is_ready(p) or p["metadata"].get("deletionTimestamp")) and n not in replacing
               for n, p in pods.items()):
            return  # one disk at a time: the member whose disk was replaced has to come back first
        if not out_of_sync:
            return
        # a member that cannot come up on its old disk goes first
        pod_name, claim = next(((n, c) for n, c in out_of_sync if not is_ready(pods[n])), out_of_sync[0])
        self.log("I", "pvc_replacer.go:159", f"added replace disk annotation to pod {self.ns}/{pod_name}")
        self._leave_cluster(comp, pod_name)
        try:
            self.store.delete("persistentvolumeclaims", self.ns, claim["metadata"]["name"])
            delete_pod(self.store, pods[pod_name])
        except StoreError:
            pass
        raise Requeue(f"started disk replace for pod {pod_name}, waiting")

    def _orphan_delete(self, sts: Obj) -> None:
        uid = sts["metadata"]["uid"]
        for pod in self.store.scan("pods", self.ns):
            refs = pod["metadata"].get("ownerReferences") or []
            if any(r.get("uid") == uid for r in refs):
                def drop(o: Obj, uid: str = uid) -> None:
                    kept = [r for r in o["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
                    if kept:
                        o["metadata"]["ownerReferences"] = kept
                    else:
                        o["metadata"].pop("ownerReferences", None)
                self.store.mutate("pods", self.ns, pod["metadata"]["name"], drop)
        self.store.delete("statefulsets.apps", self.ns, sts["metadata"]["name"])

    def _leave_cluster(self, comp: str, pod_name: str) -> None:
        """A PD member or TiKV store leaves PD before its Pod goes for good."""
        if comp == "pd" and self.pd_view.delete_member(pod_name):
            self.log("I", "pd_scaler.go:161", f"pd scale in: delete member {pod_name} successfully")
        if comp == "tikv":
            for sid, s in self.pd_view.stores().items():
                if s["pod"] == pod_name and s["state"] not in ("Offline", "Tombstone"):
                    self.pd_view.delete_store(sid, self.now)
                    self.log("I", "tikv_scaler.go:189", f"tikv scale in: delete store {sid} for tikv {self.ns}/{pod_name} "
                             "successfully")

    # -- scaling -----------------------------------------------------------------------------
    def scale(self, comp: str, old: Obj, new: Obj, pods: dict[str, Obj]) -> None:
        """scaleOne: one replica per sync towards spec.<comp>.replicas."""
        desired, current = int(new["spec"]["replicas"]), int(old["spec"].get("replicas", 1))
        set_name = old["metadata"]["name"]
        if desired > current:
            new["spec"]["replicas"] = current + 1
            self.phase[comp] = "Scale"
            self.log("I", "scaler.go:108", f"scaling out {comp} statefulset {self.ns}/{set_name}, ordinal: {current} "
                     f"(replicas: {current + 1}, delete slots: [])")
        elif desired < current:
            ordinal = current - 1
            pod_name = f"{set_name}-{ordinal}"
            pod = pods.get(pod_name)
            self.phase[comp] = "Scale"
            if comp == "tikv":
                store = next((s for s in self.pd_view.stores().values() if s["pod"] == pod_name
                              and s["state"] != "Tombstone"), None)
                if store is not None:
                    if store["state"] != "Offline":
                        self.pd_view.delete_store(store["id"], self.now)
                        self.log("I", "tikv_scaler.go:189", f"tikv scale in: delete store {store['id']} for tikv "
                                 f"{self.ns}/{pod_name} successfully")
                    new["spec"]["replicas"] = current
                    raise Requeue(f"TiKV {self.ns}/{pod_name} store {store['id']} is still in cluster, state: Offline")
            elif comp == "pd":
                if pod is not None and is_ready(pod) and self.pd_view.delete_member(pod_name):
                    self.log("I", "pd_scaler.go:161", f"pd scale in: delete member {pod_name} successfully")
            new["spec"]["replicas"] = current - 1
            self.log("I", "scaler.go:133", f"scaling in {comp} statefulset {self.ns}/{set_name}, ordinal: {ordinal} "
                     f"(replicas: {current - 1}, delete slots: [])")
        else:
            new["spec"]["replicas"] = current
            self._clean_claims(comp, set_name, current, pods)

    def _clean_claims(self, comp: str, set_name: str, replicas: int, pods: dict[str, Obj]) -> None:
        """The PVC cleaner: data volumes of scaled-in ordinals go once their Pod is gone."""
        if not MEMBERS[comp].data_path:
            return
        for claim in self.store.scan("persistentvolumeclaims", self.ns):
            cname = claim["metadata"]["name"]
            prefix = f"{comp}-{set_name}-"
            if not cname.startswith(prefix) or not cname[len(prefix):].isdigit():
                continue
            ordinal = int(cname[len(prefix):])
            if ordinal >= replicas and f"{set_name}-{ordinal}" not in pods:
                try:
                    self.store.delete("persistentvolumeclaims", self.ns, cname)
                except StoreError:
                    pass

    # -- upgrading ---------------------------------------------------------------------------
    def _stale(self, pod: Obj, sts: Obj) -> bool:
        return (pod["metadata"].get("labels") or {}).get("controller-revision-hash") != revision(sts)

    def upgrade(self, comp: str, old: Obj, new: Obj, pods: dict[str, Obj]) -> None:
        """The member upgrader: PD first, then TiKV, then TiDB; one Pod at a time from the highest
        ordinal, by lowering the partition once the last upgraded Pod is ready."""
        applied = _applied_template(old)
        changed = applied is not None and applied != new["spec"]["template"]
        replicas = int(new["spec"]["replicas"])
        strategy = new["spec"]["updateStrategy"]
        upstream = {"pd": (), "tikv": ("pd",), "tidb": ("pd", "tikv")}[comp]
        if changed and any(self.phase.get(u) == "Upgrade" for u in upstream):
            new["spec"]["template"] = copy.deepcopy(applied)  # wait for the components before this one
            strategy["rollingUpdate"] = copy.deepcopy((old["spec"].get("updateStrategy") or {}).get("rollingUpdate"))
            if strategy["rollingUpdate"] is None:
                strategy.pop("rollingUpdate")
            return
        if strategy.get("type") != "RollingUpdate":
            if changed or any(self._stale(p, old) for p in pods.values()):
                self.phase[comp] = "Upgrade"
            return
        if changed:
            self.phase[comp] = "Upgrade"
            strategy["rollingUpdate"] = {"partition": replicas}
            return
        stale = [p for p in pods.values() if self._stale(p, old)]
        if not stale:
            self.phase.setdefault(comp, "Normal")
            return
        self.phase[comp] = "Upgrade"
        set_name = old["metadata"]["name"]
        for i in reversed(range(min(replicas, int(old["spec"].get("replicas", replicas))))):
            pod = pods.get(f"{set_name}-{i}")
            if pod is None:
                raise Requeue(f"tidbcluster: [{self.key}]'s {comp} upgraded pod: [{set_name}-{i}] is being created")
            if not self._stale(pod, old):
                if not is_ready(pod):
                    strategy["rollingUpdate"] = {"partition": i}
                    raise Requeue(f"tidbcluster: [{self.key}]'s upgraded {comp} pod: [{set_name}-{i}] is not ready")
                continue
            if comp == "tikv":
                self._evict_leaders(pod["metadata"]["name"], strategy, old)
            strategy["rollingUpdate"] = {"partition": i}
            if (old["spec"].get("updateStrategy") or {}).get("rollingUpdate", {}).get("partition") != i:
                self.log("I", "upgrader.go:73", f"set {self.ns}/{set_name} partition to {i}")
            return

    def _evict_leaders(self, pod_name: str, strategy: dict[str, Any], old: Obj) -> None:
        """The TiKV upgrader moves a store's region leaders away before its Pod restarts."""
        store = next((s for s in self.pd_view.stores().values() if s["pod"] == pod_name and s["state"] == "Up"), None)
        if store is None or self.pd_view.evict_leaders(store["id"], self.now):
            return
        strategy["rollingUpdate"] = copy.deepcopy((old["spec"].get("updateStrategy") or {}).get("rollingUpdate"))
        self.log("I", "tikv_upgrader.go:298", f"tikv upgrader: begin evict leader of store {store['id']} for pod "
                 f"{self.ns}/{pod_name}", every=RESYNC_S, key=f"evict/{pod_name}")
        raise Requeue(f"tikv upgrader: evicting leader of store {store['id']} for tikv pod {self.ns}/{pod_name}",
                      after=5.0)

    def update(self, comp: str, old: Obj, new: Obj) -> None:
        """UpdateStatefulSet: only replicas, template, update strategy, labels and annotations
        change (the rest of a StatefulSet's spec is immutable)."""
        applied = json.dumps(new["spec"], sort_keys=True)
        if (old["metadata"].get("annotations") or {}).get(LAST_APPLIED) == applied \
                and old["spec"].get("replicas") == new["spec"]["replicas"]:
            return
        target = copy.deepcopy(old)
        target["spec"]["replicas"] = new["spec"]["replicas"]
        target["spec"]["template"] = copy.deepcopy(new["spec"]["template"])
        target["spec"]["updateStrategy"] = copy.deepcopy(new["spec"]["updateStrategy"])
        target["metadata"]["labels"] = copy.deepcopy(new["metadata"]["labels"])
        target["metadata"].setdefault("annotations", {})[LAST_APPLIED] = applied
        target.pop("status", None)
        try:
            self._validated("statefulsets.apps", target, old)
            self.store.replace("statefulsets.apps", target, check_rv=False)
        except StoreError as exc:
            set_name = old["metadata"]["name"]
            self.log("E", "stateful_set_control.go:84", f"failed to update TidbCluster: [{self.key}]'s StatefulSet: "
                     f"[{self.ns}/{set_name}], error: {exc.message}", every=RESYNC_S, key=f"update/{set_name}")
            self.event("Warning", "FailedUpdate", f"update StatefulSet {set_name} in TidbCluster {self.name} failed "
                                                  f"error: {exc.message}")
            raise SyncError(exc.message) from None
        self.log("I", "stateful_set_control.go:79", f"TidbCluster: [{self.key}]'s StatefulSet: [{self.ns}/"
                 f"{old['metadata']['name']}] updated successfully")

    # -- status ------------------------------------------------------------------------------
    def status(self) -> None:
        tc = self.store.try_get(TC_KEY, self.ns, self.name)
        if tc is None:
            return
        old = tc.get("status") or {}
        stamp = self.clock.rfc3339(self.now)
        rec = self.pd_view.rec
        status: dict[str, Any] = {"clusterID": str(rec["cluster_id"]), "conditions": copy.deepcopy(old.get("conditions") or [])}
        health = self.pd_view.health()
        leader = self.pd_view.leader()
        synced = self.pd_view.quorum()
        for comp in ("pd", "tikv", "tidb"):
            sts = self.store.try_get("statefulsets.apps", self.ns, f"{self.name}-{comp}")
            pods = self._pods(comp)
            phase = self.phase.get(comp) or (old.get(comp) or {}).get("phase") or "Normal"
            if sts is not None and comp not in self.phase:
                phase = "Upgrade" if any(self._stale(p, sts) for p in pods.values()) else "Normal"
            entry: dict[str, Any] = {"phase": phase, "image": image_of(self.tc, comp)}
            if sts is not None:
                entry["statefulSet"] = {k: v for k, v in (sts.get("status") or {}).items()}
            if comp == "pd":
                prev = (old.get("pd") or {}).get("members") or {}
                members = {}
                for name, ok in health.items():
                    m = rec["members"][name]
                    was = prev.get(name) or {}
                    members[name] = {"name": name, "id": str(m["id"]), "clientURL": m["client"], "health": ok,
                                     "lastTransitionTime": was.get("lastTransitionTime") if was.get("health") == ok else stamp}
                entry.update(synced=synced, members=members)
                if leader:
                    entry["leader"] = members[leader]
            elif comp == "tikv":
                prev = (old.get("tikv") or {}).get("stores") or {}
                stores: dict[str, Any] = {}
                tombstones: dict[str, Any] = {}
                for sid, s in rec["stores"].items():
                    was = prev.get(sid) or {}
                    pod = pods.get(s["pod"]) or {}
                    item = {"id": sid, "podName": s["pod"], "ip": s["address"].rsplit(":", 1)[0],
                            "state": s["state"], "leaderCount": 0,
                            "lastHeartbeatTime": self.clock.rfc3339(s.get("heartbeat", self.now)),
                            "lastTransitionTime": was.get("lastTransitionTime") if was.get("state") == s["state"] else stamp}
                    (tombstones if s["state"] == "Tombstone" else stores)[sid] = item
                up = [sid for sid, s in stores.items() if s["state"] == "Up"]
                for sid in up:
                    stores[sid]["leaderCount"] = 20 // max(1, len(up)) + (1 if sid == up[0] else 0)
                entry.update(synced=synced, stores=stores, bootStrapped=bool(rec["stores"]))
                if tombstones:
                    entry["tombstoneStores"] = tombstones
            else:
                prev = (old.get("tidb") or {}).get("members") or {}
                members = {}
                for name, pod in sorted(pods.items()):
                    ok = is_ready(pod)
                    was = prev.get(name) or {}
                    members[name] = {"name": name, "health": ok, "node": (pod.get("spec") or {}).get("nodeName", ""),
                                     "lastTransitionTime": was.get("lastTransitionTime") if was.get("health") == ok else stamp}
                entry["members"] = members
            status[comp] = entry
        self._ready_condition(status, stamp)
        if self._same(old, status):
            return

        def put(o: Obj) -> None:
            o["status"] = status
        try:
            self.store.mutate(TC_KEY, self.ns, self.name, put, subresource="status", manager="tidb-controller-manager")
        except StoreError:
            pass

    @staticmethod
    def _same(old: dict[str, Any], new: dict[str, Any]) -> bool:
        """Equal but for heartbeats (written on a resync, not on every pass)."""
        def strip(st: dict[str, Any]) -> Any:
            st = copy.deepcopy(st)
            for s in ((st.get("tikv") or {}).get("stores") or {}).values():
                s.pop("lastHeartbeatTime", None)
            for c in st.get("conditions") or []:
                c.pop("lastUpdateTime", None)
            return st
        return strip(old) == strip(new)

    def _ready_condition(self, status: dict[str, Any], stamp: str) -> None:
        def up_to_date(comp: str) -> bool:
            entry = status.get(comp) or {}
            st = entry.get("statefulSet") or {}
            return entry.get("phase") == "Normal" and st.get("replicas", 0) == st.get("readyReplicas", -1) \
                and st.get("replicas") is not None
        if not all(up_to_date(c) for c in ("pd", "tikv", "tidb")):
            reason, message, ok = "StatfulSetNotUpToDate", "Statefulset(s) are in progress", "False"
        elif not all(m.get("health") for m in (status["pd"].get("members") or {}).values()):
            reason, message, ok = "PDUnhealthy", "PD(s) are not healthy", "False"
        elif not all(s.get("state") == "Up" for s in (status["tikv"].get("stores") or {}).values()):
            reason, message, ok = "TiKVStoreNotUp", "TiKV store(s) are not up", "False"
        elif not all(m.get("health") for m in (status["tidb"].get("members") or {}).values()):
            reason, message, ok = "TiDBUnhealthy", "TiDB(s) are not healthy", "False"
        else:
            reason, message, ok = "Ready", "TiDB cluster is fully up and running", "True"
        conds = status["conditions"]
        cur = next((c for c in conds if c["type"] == "Ready"), None)
        if cur is None:
            conds.append({"type": "Ready", "status": ok, "reason": reason, "message": message,
                          "lastTransitionTime": stamp, "lastUpdateTime": stamp})
        elif (cur.get("status"), cur.get("reason")) != (ok, reason):
            if cur.get("status") != ok:
                cur["lastTransitionTime"] = stamp
            cur.update(status=ok, reason=reason, message=message, lastUpdateTime=stamp)
