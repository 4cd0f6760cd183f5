"""Network configuration faults inside the application: network policies and DNS settings."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from clusters.kube import Kube, Obj
from injectors.base import faults
from injectors.fault import MISSING, Creation, Mutation, Params, WorkloadParams
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
