"""Network configuration faults inside the application: network policies, DNS settings and the
pods' ephemeral port range."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from clusters.handle import ClusterHandle
from clusters.kube import Kube, Obj
from core.errors import InjectionError
from injectors.fault import (
    MISSING,
    Creation,
    Fault,
    Mutation,
    NamedObjectMutation,
    Params,
    WorkloadParams,
    get_path,
    require,
    set_path,
)
from injectors.injector import Injection, faults
from injectors.jobs import POLL_SECONDS
from injectors.objects import Ref
from injectors.workload import TEMPLATE


class NetworkPolicyParams(Params):
    dependency: str  # the workload whose ingress is closed
    allow_from: list[str] = []  # workloads that may still reach it (empty: nobody)
    port: int | None = Field(None, ge=1, le=65535)
    policy_name: str | None = None  # default: "<dependency>-ingress"


@faults.register("network-policy-block")
class NetworkPolicyBlock(Creation):
    """A NetworkPolicy selecting the dependency's pods with an ingress allow-list that leaves
    its callers out: their connections time out."""

    Params = NetworkPolicyParams

    def objects(self, kube: Kube, namespace: str) -> list[tuple[str, str, Obj]]:
        _, dep = kube.workload(namespace, self.p.dependency)
        ingress: list[Obj] = []
        if self.p.allow_from:
            peers = []
            for name in self.p.allow_from:
                _, src = kube.workload(namespace, name)
                peers.append({"podSelector": {"matchLabels": dict(src["spec"]["selector"]["matchLabels"])}})
            rule: Obj = {"from": peers}
            if self.p.port:
                rule["ports"] = [{"protocol": "TCP", "port": self.p.port}]
            ingress.append(rule)
        body = {
            "metadata": {"name": self.p.policy_name or f"{self.p.dependency}-ingress"},
            "spec": {
                "podSelector": {"matchLabels": dict(dep["spec"]["selector"]["matchLabels"])},
                "policyTypes": ["Ingress"],
                "ingress": ingress,
            },
        }
        return [("NetworkPolicy", namespace, body)]


class DnsPolicyParams(WorkloadParams):
    policy: str = Field("Default", pattern="^(Default|ClusterFirst|ClusterFirstWithHostNet|None)$")


@faults.register("dns-policy-wrong")
class DnsPolicyWrong(Mutation):
    """dnsPolicy Default: the pod uses the node's resolver, which knows no cluster service names."""

    Params = DnsPolicyParams

    def path(self, obj: Obj) -> list[Any]:
        return [*TEMPLATE, "dnsPolicy"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        return self.p.policy


class DnsConfigParams(WorkloadParams):
    nameserver: str = "10.96.0.99"  # the address of a DNS server that no longer exists
    searches: list[str] = ["svc.cluster.local", "cluster.local"]


@faults.register("dns-config-stale")
class DnsConfigStale(Mutation):
    """A hand-written dnsConfig pointing at a retired DNS server: every lookup times out."""

    Params = DnsConfigParams

    def path(self, obj: Obj) -> list[Any]:
        return [*TEMPLATE, "dnsConfig"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        return {
            "nameservers": [self.p.nameserver],
            "searches": list(self.p.searches),
            "options": [{"name": "ndots", "value": "5"}],
        }

    def extra(self, obj: Obj) -> list[tuple[list[Any], Any]]:
        return [([*TEMPLATE, "dnsPolicy"], "None")]

    def still_in_place(self, current: Any, injection: Any) -> bool:
        return current != MISSING and self.p.nameserver in (current or {}).get("nameservers", [])


class ServiceFieldMutation(NamedObjectMutation):
    object_kind = "Service"
    name_param = "service"


class TrafficPolicyParams(Params):
    service: str  # the Service whose policy turns Local
    workload: str | None = None  # the Deployment behind it (default: the Service's name)
    caller: str  # a Deployment that calls the Service, pinned to a node without a backend


@faults.register("internal-traffic-policy-local")
class InternalTrafficPolicyLocal(ServiceFieldMutation):
    """`internalTrafficPolicy: Local` on a ClusterIP Service (SREGym's
    internal_traffic_policy_local): kube-proxy sends a caller only to endpoints on the caller's own
    node and drops the packets when there is none, so callers on other nodes time out while every
    pod is Running and Ready and the endpoints are populated. As in SREGym, the backend and the
    caller are first pinned to two different workers (the scheduler might otherwise put them
    together and hide the fault). In place while the policy is Local and a worker node has no
    ready endpoint of the Service (SREGym's oracle's own test)."""

    Params = TrafficPolicyParams

    def path(self, obj: Obj) -> list[Any]:
        return ["spec", "internalTrafficPolicy"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        return "Local"

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        kube = Kube.of(cluster)
        workers = sorted(n["metadata"]["name"] for n in kube.list("Node")
                         if "node-role.kubernetes.io/control-plane" not in (n["metadata"].get("labels") or {}))
        require(len(workers) >= 2, "needs two worker nodes")
        pins = []
        for name, node in ((self.p.workload or self.p.service, workers[0]), (self.p.caller, workers[1])):
            _, obj = kube.workload(namespace, name, "Deployment")
            before = obj["spec"]["template"]["spec"].get("nodeSelector")
            kube.patch("Deployment", namespace, name,
                       {"spec": {"template": {"spec": {"nodeSelector": {"kubernetes.io/hostname": node}}}}})
            pins.append({"deployment": name, "before": before})
        injection = super().inject(cluster, namespace)
        injection.saved["pins"] = pins
        return injection

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        super().recover(cluster, injection)
        kube = Kube.of(cluster)
        for pin in injection.saved.get("pins", []):
            obj = kube.find("Deployment", injection.namespace, pin["deployment"])
            if obj is None:
                continue
            obj["spec"]["template"]["spec"]["nodeSelector"] = pin["before"]
            if pin["before"] is None:
                obj["spec"]["template"]["spec"].pop("nodeSelector")
            obj.pop("status", None)
            kube.replace("Deployment", injection.namespace, obj)

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        kube = Kube.of(cluster)
        svc = kube.find("Service", injection.namespace, self.p.service)
        if svc is None or (svc.get("spec") or {}).get("internalTrafficPolicy") != "Local":
            return False
        workers = {n["metadata"]["name"] for n in kube.list("Node")
                   if "node-role.kubernetes.io/control-plane" not in (n["metadata"].get("labels") or {})}
        ep = kube.find("Endpoints", injection.namespace, self.p.service) or {}
        covered = {addr.get("nodeName") for subset in ep.get("subsets") or [] for addr in subset.get("addresses") or []}
        return bool(workers - covered)
PORT_RANGE_SYSCTL = "net.ipv4.ip_local_port_range"
SYSCTLS = [*TEMPLATE, "securityContext", "sysctls"]


class PortRangeParams(Params):
    value: str = Field("32000 32003", pattern=r"^\d+ \d+$")  # "low high"
    # Deployments left alone: SREGym's spares Consul and Jaeger; the farm's load generator is its own client.
    exclude: list[str] = ["consul", "jaeger"]
    min_ports: int = Field(1024, ge=2)  # a range this wide or wider is no longer the fault


def port_range_size(sysctls: Any) -> int | None:
    """How many ports the pod's ip_local_port_range sysctl gives, None when it sets none."""
    found = None
    for item in sysctls if isinstance(sysctls, list) else []:
        if isinstance(item, dict) and item.get("name") == PORT_RANGE_SYSCTL:
            parts = str(item.get("value", "")).split()
            found = int(parts[1]) - int(parts[0]) + 1 if len(parts) == 2 and all(p.isdigit() for p in parts) else 0
    return found


@faults.register("ephemeral-port-range-narrowed")
class EphemeralPortRangeNarrowed(Fault):
    """Every Deployment of the namespace (but `exclude`) gets a pod sysctl narrowing
    net.ipv4.ip_local_port_range to a handful of ports: a client holding more connections than
    that to one destination (a Consul resolver's watches on its agent) gets EADDRNOTAVAIL, and a
    backend it never resolved stays unreachable while every pod is Running."""

    Params = PortRangeParams

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        kube = Kube.of(cluster)
        before: dict[str, Any] = {}
        for obj in kube.list("Deployment", namespace):
            name = obj["metadata"]["name"]
            if name in self.p.exclude:
                continue
            was = get_path(obj, SYSCTLS)
            kept = [s for s in (was if isinstance(was, list) else []) if s.get("name") != PORT_RANGE_SYSCTL]
            set_path(obj, SYSCTLS, [*kept, {"name": PORT_RANGE_SYSCTL, "value": self.p.value}])
            obj.pop("status", None)
            kube.replace("Deployment", namespace, obj)
            before[name] = was
        if not before:
            raise InjectionError(f"{self.name}: no Deployment in {namespace} to set {PORT_RANGE_SYSCTL} on")
        return self.record(cluster, namespace, touched=[Ref("Deployment", namespace, n) for n in before], before=before)

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        kube = Kube.of(cluster)
        for name, was in injection.saved["before"].items():
            obj = kube.find("Deployment", injection.namespace, name)
            if obj is None or get_path(obj, SYSCTLS) == was:
                continue
            set_path(obj, SYSCTLS, was)
            obj.pop("status", None)
            kube.replace("Deployment", injection.namespace, obj)

    def _narrowed(self, cluster: ClusterHandle, injection: Injection, below: int) -> bool:
        kube = Kube.of(cluster)
        for name in injection.saved["before"]:
            obj = kube.find("Deployment", injection.namespace, name)
            size = port_range_size(get_path(obj, SYSCTLS)) if obj is not None else None
            if size is not None and size < below:
                return True
        return False

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        """Some faulted Deployment's pods still get a range no wider than the injected one."""
        lo, hi = (int(x) for x in self.p.value.split())
        return self._narrowed(cluster, injection, hi - lo + 2)

    def affects(self, cluster: ClusterHandle, injection: Injection) -> bool:
        """Some faulted Deployment still narrows the range below `min_ports`: widening it to just
        enough for today's connections is not a fix."""
        return self._narrowed(cluster, injection, self.p.min_ports)


class BroadenedSelectorParams(Params):
    service: str = "frontend"  # the Service whose selector is broadened (and its Deployment)
    wrong: str = "search"  # a Deployment whose pods the broadened selector takes in too
    key: str = "service-route"  # the shared label both templates gain
    identity_key: str = "io.kompose.service"  # the label that tells the Service's own pods apart
    ready_timeout_s: float = Field(180.0, gt=0)


@faults.register("service-selector-broadened")
class ServiceSelectorBroadened(Fault):
    """SREGym's service_wrong_pod_selection: the Service's own pods and another Deployment's pods
    both gain a routing label (service-route=<service>), and the Service's selector is replaced by
    that label alone; the Service keeps endpoints, but they are polluted with the other
    workload's pods, which do not listen on the target port, so part of its traffic is refused.
    Fixed when every ready endpoint pod of the Service is one of its own (SREGym's oracle reads
    the endpoint identities) and there is at least one."""

    Params = BroadenedSelectorParams

    def _wait(self, cluster: ClusterHandle, kube: Kube, namespace: str, name: str) -> None:
        waited = 0.0
        while True:
            obj = kube.get("Deployment", namespace, name)
            spec, status = obj.get("spec") or {}, obj.get("status") or {}
            want = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
            if int(status.get("observedGeneration") or 0) >= int(obj["metadata"].get("generation") or 0) \
                    and int(status.get("updatedReplicas") or 0) == want and int(status.get("readyReplicas") or 0) == want \
                    and int(status.get("replicas") or 0) == want:
                return
            if waited >= self.p.ready_timeout_s:
                raise InjectionError(f"{self.name}: Deployment {name} not rolled out after {waited:.0f}s")
            cluster.advance(POLL_SECONDS)
            waited += POLL_SECONDS

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        kube = Kube.of(cluster)
        svc = kube.find("Service", namespace, self.p.service)
        if svc is None:
            raise InjectionError(f"{self.name}: Service {self.p.service} does not exist in {namespace}")
        before = dict((svc.get("spec") or {}).get("selector") or {})
        label = {self.p.key: self.p.service}
        for name in (self.p.service, self.p.wrong):
            kube.patch("Deployment", namespace, name, {"spec": {"template": {"metadata": {"labels": label}}}})
        for name in (self.p.service, self.p.wrong):
            self._wait(cluster, kube, namespace, name)
        kube.patch("Service", namespace, self.p.service, [{"op": "replace", "path": "/spec/selector", "value": label}],
                   merge=False)
        return self.record(cluster, namespace, selector=before,
                           touched=[Ref("Service", namespace, self.p.service),
                                    Ref("Deployment", namespace, self.p.service), Ref("Deployment", namespace, self.p.wrong)])

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        kube = Kube.of(cluster)
        ns = injection.namespace
        kube.patch("Service", ns, self.p.service,
                   [{"op": "replace", "path": "/spec/selector", "value": injection.saved["selector"]}], merge=False)
        for name in (self.p.service, self.p.wrong):
            labels = ((kube.get("Deployment", ns, name)["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {}
            if self.p.key in labels:
                path = "/spec/template/metadata/labels/" + self.p.key.replace("~", "~0").replace("/", "~1")
                kube.patch("Deployment", ns, name, [{"op": "remove", "path": path}], merge=False)

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        svc = Kube.of(cluster).find("Service", injection.namespace, self.p.service)
        return svc is not None and ((svc.get("spec") or {}).get("selector") or {}) != injection.saved["selector"]

    def affects(self, cluster: ClusterHandle, injection: Injection) -> bool:
        kube = Kube.of(cluster)
        ns = injection.namespace
        ep = kube.find("Endpoints", ns, self.p.service)
        pods = [a.get("targetRef") or {} for s in (ep or {}).get("subsets") or [] for a in s.get("addresses") or []]
        names = [r.get("name", "") for r in pods if r.get("kind") == "Pod"]
        if not names:
            return True
        for name in names:
            pod = kube.find("Pod", ns, name)
            if pod is None or (pod["metadata"].get("labels") or {}).get(self.p.identity_key) != self.p.service:
                return True
        return False

    def restart_targets(self, injection: Injection) -> list[str]:
        return [f"Deployment/{injection.namespace}/{self.p.service}"]


class CorednsTemplateParams(Params):
    service: str | None = None  # one Service's name answers NXDOMAIN; None: every *.svc.cluster.local name
    configmap: str = "coredns"
    deployment: str = "coredns"


@faults.register("coredns-nxdomain-template")
class CorednsNxdomainTemplate(Fault):
    """A CoreDNS `template` block, inserted before the kubernetes plugin in kube-system/coredns,
    that answers NXDOMAIN for one Service's name (SREGym's service_dns_resolution_failure) or for
    every service name (stale_coredns_config), then CoreDNS restarted: lookups of those names fail
    with "no such host" while the Services and their endpoints are all there. kube-system is out
    of the agent's reach: a diagnosis problem."""

    Params = CorednsTemplateParams

    def _block(self, namespace: str) -> tuple[str, str]:
        """(the template block, the line that identifies it)."""
        if self.p.service:
            fqdn = f"{self.p.service}.{namespace}.svc.cluster.local"
            head = f"template ANY ANY {fqdn} {{"
            regex = "^" + fqdn.replace(".", "\\.") + "\\.$"
        else:
            head = "template ANY ANY svc.cluster.local {"
            regex = ".*\\.svc\\.cluster\\.local\\.?$"
        return (f"    {head}\n        match \"{regex}\"\n        rcode NXDOMAIN\n        fallthrough\n    }}\n", head)

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        kube = Kube.of(cluster)
        cm = kube.get("ConfigMap", "kube-system", self.p.configmap)
        corefile = (cm.get("data") or {}).get("Corefile") or ""
        block, head = self._block(namespace)
        if head in corefile:
            raise InjectionError(f"{self.name}: the Corefile already has {head}")
        at = corefile.find("    kubernetes ")
        if at < 0:
            raise InjectionError(f"{self.name}: no kubernetes plugin line in the Corefile")
        kube.patch("ConfigMap", "kube-system", self.p.configmap, {"data": {"Corefile": corefile[:at] + block + corefile[at:]}})
        self._restart(cluster, kube)
        return self.record(cluster, namespace, corefile=corefile,
                           touched=[Ref("ConfigMap", "kube-system", self.p.configmap)])

    def _restart(self, cluster: ClusterHandle, kube: Kube) -> None:
        # `kubectl -n kube-system rollout restart deployment coredns`
        kube.patch("Deployment", "kube-system", self.p.deployment, {"spec": {"template": {"metadata": {"annotations": {
            "kubectl.kubernetes.io/restartedAt": str(int(cluster.now()))}}}}})
        cluster.advance(POLL_SECONDS * 5)

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        kube = Kube.of(cluster)
        kube.patch("ConfigMap", "kube-system", self.p.configmap, {"data": {"Corefile": injection.saved["corefile"]}})
        self._restart(cluster, kube)

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        cm = Kube.of(cluster).find("ConfigMap", "kube-system", self.p.configmap)
        return cm is not None and self._block(injection.namespace)[1] in ((cm.get("data") or {}).get("Corefile") or "")
