"""Cluster DNS (CoreDNS behind kube-dns 10.96.0.10, honouring dnsPolicy/dnsConfig) and kube-proxy
style connections: name → Service → port → ready endpoints → a process listening on the target
port, through NetworkPolicies, Chaos Mesh network faults and node NIC faults. Errors are the Go
net package's wording, because the Go services print them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kubesim.runtime import DOMAIN, KUBE_DNS, NODE_RESOLVER, Conn, Target
from kubesim.store import Obj, match_labels

if TYPE_CHECKING:
    from kubesim.view import ClusterView


def _in_zones(zones: list[str]) -> Callable[[str], bool]:
    """Whether a name falls under one of a server block's zones ("" is the root)."""
    def check(fqdn: str) -> bool:
        name = fqdn.lower()
        return any(not z or name == z or name.endswith("." + z) for z in zones)
    return check


class Network:
    def __init__(self, cluster: ClusterView) -> None:
        self.cluster = cluster
        self.state: dict[str, Any] = {}
        self._templates_cache: tuple[str, list[tuple[Callable[[str], bool], re.Pattern[str]]]] | None = None

    # -- DNS -----------------------------------------------------------------------------------
    def _resolver(self, pod: Obj | None) -> tuple[str, list[str]]:
        if pod is None:
            return KUBE_DNS, [f"default.svc.{DOMAIN}", f"svc.{DOMAIN}", DOMAIN]
        spec = pod.get("spec") or {}
        ns = pod["metadata"]["namespace"]
        policy = spec.get("dnsPolicy", "ClusterFirst")
        if spec.get("hostNetwork") and policy == "ClusterFirst":
            policy = "Default"
        cluster_search = [f"{ns}.svc.{DOMAIN}", f"svc.{DOMAIN}", DOMAIN]
        cfg = spec.get("dnsConfig") or {}
        if policy == "Default":
            server, search = NODE_RESOLVER, list[str]()
        elif policy == "None":
            servers = cfg.get("nameservers") or []
            server, search = (servers[0] if servers else "127.0.0.1"), []
        else:
            server, search = KUBE_DNS, cluster_search
            if cfg.get("nameservers"):
                server = cfg["nameservers"][0] if policy == "None" else server
        search = search + list(cfg.get("searches") or [])
        return server, search

    def _kube_dns_up(self) -> bool:
        ep = self.cluster.store.try_get("endpoints", "kube-system", "kube-dns")
        if not ep:
            return False
        return any(s.get("addresses") for s in ep.get("subsets") or [])

    def lookup(self, pod: Obj | None, host: str) -> tuple[Obj | None, str | None]:
        """host → (Service, None) or (None, Go error text)."""
        server, search = self._resolver(pod)
        client_ip = (pod or {}).get("status", {}).get("podIP", "10.244.1.2")
        if host.replace(".", "").isdigit():
            return None, None
        if server == KUBE_DNS and not self._kube_dns_up():
            return None, f"lookup {host} on {server}:53: read udp {client_ip}:41234->{server}:53: read: connection refused"
        if server not in (KUBE_DNS, NODE_RESOLVER):
            return None, f"lookup {host} on {server}:53: read udp {client_ip}:41234->{server}:53: i/o timeout"
        if server == NODE_RESOLVER:
            return None, f"lookup {host} on {server}:53: no such host"
        names = []
        if host.endswith("."):
            names = [host[:-1]]
        else:
            if host.count(".") >= 5:
                names.append(host)
            names += [f"{host}.{s}" for s in search]
            names.append(host)
        nxdomain = self._nxdomain_templates()
        for fqdn in names:
            if any(zone_ok(fqdn) and rx.search(fqdn + ".") for zone_ok, rx in nxdomain):
                # a CoreDNS template answers NXDOMAIN before the kubernetes plugin is asked;
                # `fallthrough` only passes names its regex does not match
                continue
            svc = self._service_for(fqdn)
            if svc is not None:
                if svc.get("spec", {}).get("type") == "ExternalName":
                    target = svc["spec"].get("externalName", "")
                    if target.endswith(f".svc.{DOMAIN}") or target.endswith(f".svc.{DOMAIN}."):
                        return self.lookup(pod, target.rstrip(".") + ".")
                    return None, f"lookup {host} on {server}:53: no such host"
                return svc, None
        return None, f"lookup {host} on {server}:53: no such host"

    def _nxdomain_templates(self) -> list[tuple[Callable[[str], bool], re.Pattern[str]]]:
        """CoreDNS `template CLASS TYPE ZONE { match REGEX  rcode NXDOMAIN }` blocks of the
        Corefile in kube-system/coredns (what its `reload` plugin serves), parsed once per text."""
        cm = self.cluster.store.raw("configmaps", "kube-system", "coredns")
        if cm is None:
            return []
        corefile = str((cm.get("data") or {}).get("Corefile") or "")
        cached = self._templates_cache  # keyed by the text: a restore may reuse a resourceVersion
        if cached is not None and cached[0] == corefile:
            return cached[1]
        out: list[tuple[Callable[[str], bool], re.Pattern[str]]] = []
        for m in re.finditer(r"template\s+\S+\s+\S+((?:\s+[^\s{]+)*)\s*\{([^}]*)\}", corefile):
            body = m.group(2)
            if not re.search(r"\brcode\s+NXDOMAIN\b", body):
                continue
            zones = [z.rstrip(".").lower() for z in m.group(1).split()] or [""]
            for rx_text in re.findall(r'match\s+"([^"]*)"', body) or [".*"]:
                try:
                    rx = re.compile(rx_text.replace("\\\\", "\\"))
                except re.error:
                    continue
                out.append((_in_zones(zones), rx))
        self._templates_cache = (corefile, out)
        return out

    def _service_for(self, fqdn: str) -> Obj | None:
        parts = fqdn.split(".")
        if len(parts) >= 5 and parts[-2:] == DOMAIN.split(".") and parts[-3] == "svc":
            name, ns = parts[-5], parts[-4]
            if len(parts) == 5:
                return self.cluster.store.try_get("services", ns, name)
        return None

    # -- connections ---------------------------------------------------------------------------
    def connect(self, pod: Obj | None, host: str, port: int) -> Conn:
        svc, err = self.lookup(pod, host)
        if err:
            return Conn(host, port, error=f"dial tcp: {err}")
        if svc is None:
            return Conn(host, port, error=f"dial tcp {host}:{port}: connect: no route to host")
        spec = svc.get("spec") or {}
        ip = spec.get("clusterIP", "")
        headless = ip == "None"
        sport = None
        for p in spec.get("ports") or []:
            if int(p.get("port", 0)) == int(port) and p.get("protocol", "TCP") == "TCP":
                sport = p
        if sport is None and not headless:
            return Conn(host, port, error=f"dial tcp {ip}:{port}: i/o timeout", service=svc)
        ep = self.cluster.store.try_get("endpoints", svc["metadata"]["namespace"], svc["metadata"]["name"])
        targets: list[Target] = []
        for subset in (ep or {}).get("subsets") or []:
            ports = subset.get("ports") or []
            tport = None
            for p in ports:
                if headless and int(p.get("port", 0)) == int(port):
                    tport = int(p["port"])
                elif sport is not None and (p.get("name", "") == sport.get("name", "") or len(ports) == 1):
                    tport = int(p["port"])
            if tport is None:
                continue
            for addr in subset.get("addresses") or []:
                ref = addr.get("targetRef") or {}
                target = self.cluster.store.try_get("pods", ref.get("namespace", ""), ref.get("name", ""))
                if target is not None:
                    targets.append(self._reach(pod, target, tport, ip if not headless else target["status"].get("podIP", "")))
        if not targets:
            dest = ip if not headless else host
            return Conn(host, port, error=f"dial tcp {dest}:{port}: connect: connection refused", service=svc)
        if pod is not None and not headless and spec.get("internalTrafficPolicy") == "Local":
            # kube-proxy programs only the endpoints on the caller's own node; with none there it
            # drops the packets (no reject rule): the caller's connect hangs until its timeout.
            node = (pod.get("spec") or {}).get("nodeName")
            targets = [t for t in targets if (t.pod.get("spec") or {}).get("nodeName") == node]
            if not targets:
                return Conn(host, port, error=f"dial tcp {ip}:{port}: i/o timeout", service=svc)
        return Conn(host, port, targets=targets, service=svc)

    def connect_pod(self, pod: Obj | None, target: Obj, port: int) -> Target:
        return self._reach(pod, target, port, target.get("status", {}).get("podIP", ""))

    def _reach(self, client: Obj | None, target: Obj, port: int, dial_ip: str) -> Target:
        cl = self.cluster
        t = Target(target, port)
        dest = f"{dial_ip}:{port}"
        if client is not None:
            node = client.get("spec", {}).get("nodeName")
            if cl.nodes.fd_exhausted(node):
                t.error = f"dial tcp {dest}: socket: too many open files"
                return t
        if cl.nodes.fd_exhausted(target.get("spec", {}).get("nodeName")):
            t.error = f"dial tcp {dest}: i/o timeout"  # queued in the backlog, never accepted
            return t
        if not self._policy_allows(client, target, port):
            t.error = f"dial tcp {dest}: i/o timeout"
            return t
        eff = cl.chaos.net_effect(client, target)
        if eff.get("partition"):
            t.error = f"dial tcp {dest}: i/o timeout"
            return t
        links = [cl.nodes.link((client or {}).get("spec", {}).get("nodeName")),
                 cl.nodes.link(target.get("spec", {}).get("nodeName"))]
        if any(lk["down"] for lk in links):
            t.error = f"dial tcp {dest}: i/o timeout"
            return t
        if port not in cl.kubelet.listening(target):
            t.error = f"dial tcp {dest}: connect: connection refused"
            return t
        keep = 1.0
        for lk in links:
            keep *= (1 - lk["loss"]) * (1 - lk["corrupt"])
        keep *= (1 - eff.get("loss", 0.0)) * (1 - eff.get("corrupt", 0.0))
        t.loss = 1 - keep
        t.delay_ms = sum(lk["delay_ms"] for lk in links) + eff.get("delay_ms", 0.0)
        if keep <= 0.001:
            t.error = f"dial tcp {dest}: i/o timeout"
        return t

    def _policy_allows(self, client: Obj | None, target: Obj, port: int) -> bool:
        store = self.cluster.store
        ns = target["metadata"]["namespace"]
        policies = [p for p in store.list("networkpolicies.networking.k8s.io", ns)
                    if match_labels((p.get("spec") or {}).get("podSelector") or {}, target["metadata"].get("labels"))
                    and "Ingress" in ((p.get("spec") or {}).get("policyTypes") or ["Ingress"])]
        if policies and not any(self._rule_allows(p, client, target, port) for p in policies):
            return False
        if client is not None:
            cns = client["metadata"]["namespace"]
            egress = [p for p in store.list("networkpolicies.networking.k8s.io", cns)
                      if match_labels((p.get("spec") or {}).get("podSelector") or {}, client["metadata"].get("labels"))
                      and "Egress" in ((p.get("spec") or {}).get("policyTypes") or [])]
            if egress and not any(self._egress_allows(p, target, port) for p in egress):
                return False
        return True

    def _peer_matches(self, peers: list[dict[str, Any]], pod: Obj | None, own_ns: str) -> bool:
        if not peers:
            return True
        if pod is None:
            return False
        for peer in peers:
            pod_sel, ns_sel = peer.get("podSelector"), peer.get("namespaceSelector")
            if ns_sel is not None:
                nsobj = self.cluster.store.try_get("namespaces", "", pod["metadata"]["namespace"]) or {}
                if not match_labels(ns_sel, (nsobj.get("metadata") or {}).get("labels")):
                    continue
            elif pod["metadata"]["namespace"] != own_ns:
                continue
            if pod_sel is not None and not match_labels(pod_sel, pod["metadata"].get("labels")):
                continue
            if pod_sel is None and ns_sel is None:
                continue
            return True
        return False

    @staticmethod
    def _port_matches(ports: list[dict[str, Any]], port: int) -> bool:
        return not ports or any(str(p.get("port", port)) == str(port) for p in ports)

    def _rule_allows(self, policy: Obj, client: Obj | None, target: Obj, port: int) -> bool:
        for rule in (policy.get("spec") or {}).get("ingress") or []:
            if self._peer_matches(rule.get("from") or [], client, policy["metadata"]["namespace"]) and \
                    self._port_matches(rule.get("ports") or [], port):
                return True
        return False

    def _egress_allows(self, policy: Obj, target: Obj, port: int) -> bool:
        for rule in (policy.get("spec") or {}).get("egress") or []:
            if self._peer_matches(rule.get("to") or [], target, policy["metadata"]["namespace"]) and \
                    self._port_matches(rule.get("ports") or [], port):
                return True
        return False
