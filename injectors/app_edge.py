"""Faults at the application's edge proxy: a request-filter (WAF) rule that backtracks."""

from __future__ import annotations

import copy
from typing import Any

from pydantic import Field

from clusters.handle import ClusterHandle
from clusters.kube import Kube, Obj
from core.errors import InjectionError
from injectors.fault import WorkloadParams, get_path
from injectors.injector import Injection, faults
from injectors.jobs import POLL_SECONDS, exec_in
from injectors.workload import ContainerMutation, env_list, env_value

SATURATION_CONFIRM_S = 180.0
PROBE_TIMEOUT_S = 3  # SREGym's EdgeRequestFilterMitigationOracle: each request answered within 3 s


class EdgeFilterParams(WorkloadParams):
    service: str = "frontend-proxy"
    rule: str = "^([a-zA-Z]+)*$"  # SREGym's bad_regex: a nested quantifier
    payload_length: int = Field(5000, ge=64)  # 'a' * n + '!': a near-match, so the engine backtracks
    cpu_limit: str = "100m"
    memory_limit: str = "65Mi"
    port: int = 8080
    # The crafted traffic's source, out of the agent's view (as the pg lock holder): the fix is the
    # rule, not silencing one client.
    replay: str = "edge-traffic-replay"
    replay_namespace: str = "chaos-testing"
    image: str = "busybox:1.36"
    every_seconds: float = Field(1.0, gt=0)


@faults.register("edge-request-filter-backtracking")
class EdgeRequestFilterBacktracking(ContainerMutation):
    """A request-filter rule update on the edge proxy (WAF_RULE_REGEX, enabled) whose regex has a
    nested quantifier, with a tight CPU limit, and a client that keeps sending a long near-matching
    `waf` value: each evaluation never returns and holds a proxy worker at a full core, so the proxy
    spins at its limit and every user's request times out while its pods stay Running. Fixed when
    the rule is off or linear and the crafted request and a normal one are both answered within 3 s
    (SREGym's EdgeRequestFilterMitigationOracle replays the trigger the same way)."""

    Params = EdgeFilterParams
    field = "env"

    def mutate(self, before: Any, obj: Obj) -> Any:
        env = [e for e in copy.deepcopy(env_list(before)) if e.get("name") not in ("WAF_RULE_REGEX", "WAF_RULE_ENABLED")]
        return [*env, {"name": "WAF_RULE_REGEX", "value": self.p.rule}, {"name": "WAF_RULE_ENABLED", "value": "true"}]

    def extra(self, obj: Obj) -> list[tuple[list[Any], Any]]:
        # what the rule's change came with: its ticket on the template, and the edge tier's tight limits
        meta = obj["spec"]["template"].get("metadata") or {}
        annotations = {**(meta.get("annotations") or {}), "edge.platform/change-ticket": "EDGE-1847",
                       "edge.platform/filter-profile": "managed-rules-v2"}
        resources_path = [*self.container_path(obj), "resources"]
        before = get_path(obj, resources_path)
        resources = before if isinstance(before, dict) else {}
        resources["limits"] = {**(resources.get("limits") or {}), "cpu": self.p.cpu_limit,
                               "memory": self.p.memory_limit}
        # requests above the new limits would be refused by the API server
        requests = {k: v for k, v in (resources.get("requests") or {}).items() if k not in ("cpu", "memory")}
        resources.pop("requests", None)
        if requests:
            resources["requests"] = requests
        return [(["spec", "template", "metadata", "annotations"], annotations), (resources_path, resources)]

    def still_in_place(self, current: Any, injection: Any) -> bool:
        return self._bad_rule_active(current)

    def _bad_rule_active(self, env: Any) -> bool:
        enabled = env_value(env, "WAF_RULE_ENABLED")
        if isinstance(enabled, str) and enabled.strip().lower() == "false":
            return False
        return env_value(env, "WAF_RULE_REGEX") == self.p.rule

    def _url(self, namespace: str, crafted: bool) -> str:
        base = f"http://{self.p.service}.{namespace}.svc.cluster.local:{self.p.port}/"
        return base + ("?waf=" + "a" * self.p.payload_length + "!" if crafted else "")

    def _replay(self, namespace: str) -> Obj:
        labels = {"app": self.p.replay}
        loop = (f"while true; do wget -q -T 10 -O /dev/null '{self._url(namespace, True)}'; "
                f"sleep {self.p.every_seconds:g}; done")
        return {
            "metadata": {"name": self.p.replay, "labels": dict(labels)},
            "spec": {"replicas": 1, "selector": {"matchLabels": dict(labels)},
                     "template": {"metadata": {"labels": dict(labels)},
                                  "spec": {"terminationGracePeriodSeconds": 0, "automountServiceAccountToken": False,
                                           "containers": [{"name": "replay", "image": self.p.image,
                                                           "command": ["sh", "-c", loop]}]}}},
        }

    def probe(self, cluster: ClusterHandle, namespace: str) -> bool:
        """The crafted request, then a normal one, each answered within 3 s (from the replay's pod,
        busybox wget as SREGym's probe pod runs it)."""
        for crafted in (True, False):
            try:
                code, out = exec_in(cluster, self.p.replay_namespace, self.p.replay,
                                    ["wget", "-q", "-T", str(PROBE_TIMEOUT_S), "-O", "-", self._url(namespace, crafted)])
            except InjectionError:
                return False
            if code != 0 or not out.strip():
                return False
        return True

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        """Returns once the crafted request goes unanswered (SREGym waits for the patched proxy
        and starts its replay loop)."""
        injection = super().inject(cluster, namespace)
        kube = Kube.of(cluster)
        made = kube.ensure_namespace(self.p.replay_namespace)
        kube.create("Deployment", self.p.replay_namespace, self._replay(namespace))
        injection.saved["replay_namespace_made"] = bool(made)
        injection.touched.append(f"Deployment/{self.p.replay_namespace}/{self.p.replay}")
        waited = 0.0
        while not self._saturated(cluster, namespace):
            if waited >= SATURATION_CONFIRM_S:
                raise InjectionError(f"{self.name}: the crafted request was still answered after "
                                     f"{SATURATION_CONFIRM_S:.0f}s (Deployment {self.p.service})")
            cluster.advance(POLL_SECONDS * 5)
            waited += POLL_SECONDS * 5
        return injection

    def _saturated(self, cluster: ClusterHandle, namespace: str) -> bool:
        try:
            code, _ = exec_in(cluster, self.p.replay_namespace, self.p.replay,
                              ["wget", "-q", "-T", str(PROBE_TIMEOUT_S), "-O", "-", self._url(namespace, False)])
        except InjectionError:
            return False  # the replay's pod is not running yet
        return code != 0

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        kube = Kube.of(cluster)
        kube.delete("Deployment", self.p.replay_namespace, self.p.replay)
        if injection.saved.get("replay_namespace_made"):
            kube.delete("Namespace", "", self.p.replay_namespace)
        super().recover(cluster, injection)

    def restart_targets(self, injection: Injection) -> list[str]:
        return [t for t in injection.touched if t.startswith("Deployment/") and
                not t.startswith(f"Deployment/{self.p.replay_namespace}/")]

    def affects(self, cluster: ClusterHandle, injection: Injection) -> bool:
        """As SREGym's EdgeRequestFilterMitigationOracle: the proxy scaled to zero, its rollout not
        complete, the injected rule still active in its container, or the crafted or a normal
        request not answered within 3 s, is still broken."""
        obj = Kube.of(cluster).find("Deployment", injection.namespace, self.p.service)
        if obj is None:
            return True
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        replicas = int(spec["replicas"]) if spec.get("replicas") is not None else 1
        if replicas < 1:
            return True
        if int(status.get("observedGeneration") or 0) < int((obj.get("metadata") or {}).get("generation") or 0):
            return True
        for key in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas"):
            if int(status.get(key) or 0) != replicas:
                return True
        containers = (spec.get("template") or {}).get("spec", {}).get("containers") or []
        if any(self._bad_rule_active(c.get("env")) for c in containers):
            return True
        return not self.probe(cluster, injection.namespace)

