"""Structured facts about an application's workloads, for rewriting a problem aimed at another
one: who calls a workload and with which operation, what it calls (services and data stores by
protocol), what it serves, the chain of callers up to the entry point, the user routes that pass
through it, and the names derived from it (container, Consul name, database, claim, config map).

The facts come from the application's declared topology (apps/<app>/topology.yaml: its programs,
their calls and peers, which workloads run them) and from its manifests, which say where its
addresses point; the same declarations the emulated cluster's models are built from, read here
without the emulator."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import yaml

from apps.application import APPS_DIR
from apps.topology import PeerDecl, has_topology, load_topology
from core.addresses import parse_address

STORE_PROTOCOLS = ("mongo", "memcached", "postgres", "mysql", "redis", "kafka")


@dataclass
class Workload:
    """A Deployment/StatefulSet/DaemonSet of the manifests, as far as the facts need it."""

    name: str
    kind: str
    container: str
    spec: dict[str, Any]  # the first container
    claims: list[str] = field(default_factory=list)
    configmaps: list[str] = field(default_factory=list)


@dataclass
class Role:
    """One workload's place in the application."""

    name: str
    kind: str  # entry | service | store | other
    protocol: str = ""  # a store's protocol (mongo, memcached, postgres, redis, kafka, mysql)
    container: str = ""
    ops: list[str] = field(default_factory=list)  # operations it serves
    callers: list[tuple[str, str, str]] = field(default_factory=list)  # (caller, caller's op, op it calls here)
    callees: list[tuple[str, str, str]] = field(default_factory=list)  # (callee, op called, protocol)
    upstream: list[str] = field(default_factory=list)  # every transitive caller, nearest first
    routes: list[str] = field(default_factory=list)  # the user routes whose requests reach it
    derived: dict[str, str] = field(default_factory=dict)  # consul, db, port, claim, configmap → name

    @property
    def caller_names(self) -> list[str]:
        return list(dict.fromkeys(c for c, _, _ in self.callers))

    def callee_names(self, protocol: str | None = None) -> list[str]:
        return list(dict.fromkeys(c for c, _, p in self.callees if protocol is None or p == protocol))


def short_op(op: str) -> str:
    """The name an operation goes by in prose: `/geo.Geo/Nearby` → Nearby, `HTTP GET /hotels` → /hotels,
    `oteldemo.CartService/GetCart` → GetCart, `POST /get-quote` → /get-quote."""
    words = op.split()
    last = words[-1] if words else op
    if last.startswith("/") and len(words) > 1:
        return last
    return last.rsplit("/", 1)[-1] or last


def manifest_workloads(app: str) -> dict[str, Workload]:
    out: dict[str, Workload] = {}
    for path in sorted((APPS_DIR / app / "manifests").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not isinstance(doc, dict) or doc.get("kind") not in ("Deployment", "StatefulSet", "DaemonSet"):
                continue
            pod = doc.get("spec", {}).get("template", {}).get("spec", {})
            containers = pod.get("containers") or []
            if not containers:
                continue
            volumes = pod.get("volumes") or []
            out[doc["metadata"]["name"]] = Workload(
                doc["metadata"]["name"], doc["kind"], containers[0].get("name", ""), containers[0],
                [v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v],
                [v["configMap"]["name"] for v in volumes if "configMap" in v])
    return out


class Topology:
    """The roles of every workload of one application."""

    def __init__(self, app: str) -> None:
        self.app = app
        self.workloads = manifest_workloads(app)
        # (caller, caller op) → [(callee workload, callee op, protocol)]
        self.calls: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
        self.ops: dict[str, list[str]] = {}
        self.entry = ""
        self.routes: dict[str, tuple[str, str]] = {}  # route name → (entry workload, op)
        self.protocols: dict[str, str] = {}  # store workload → protocol
        self.derived: dict[str, dict[str, str]] = {}
        self._graph()
        for w in self.workloads.values():
            d = self.derived.setdefault(w.name, {})
            if w.claims:
                d.setdefault("claim", w.claims[0])
            if w.configmaps:
                d.setdefault("configmap", w.configmaps[0])

    # -- sources ----------------------------------------------------------------------------
    def _graph(self) -> None:
        if not has_topology(self.app):
            return
        top = load_topology(self.app)
        workload_of: dict[str, str] = {}
        env_of: dict[str, dict[str, str]] = {}
        for svc in top.services.values():
            for name in svc.workloads:
                w = self.workloads.get(name)
                if w is None:
                    continue
                workload_of.setdefault(svc.name, name)
                env_of[name] = {e["name"]: str(e.get("value", "")) for e in w.spec.get("env") or [] if "name" in e}

        def store_workload(peer: PeerDecl, env: dict[str, str]) -> str:
            raw = env.get(peer.env, "") if peer.env else ""
            if raw and peer.port_env:
                raw = f"{raw}:{env.get(peer.port_env, '')}"
            addr = parse_address(raw or peer.default, peer.protocol) if (raw or peer.default) else None
            host = addr.host.split(".")[0] if addr is not None else peer.name
            return host if host in self.workloads else peer.name

        for svc in top.services.values():
            caller = workload_of.get(svc.name, svc.name)
            env = env_of.get(caller, {})
            peers = {p.name: p for p in reversed(svc.peers)}  # the first of a name, as the program finds it
            for op, calls in svc.ops.items():
                self.ops.setdefault(caller, []).append(op)
                out = self.calls.setdefault((caller, op), [])
                for call in calls:
                    peer = peers[call.peer]
                    if peer.service:
                        out.append((workload_of.get(peer.service, peer.service), call.op, peer.protocol))
                        continue
                    target = store_workload(peer, env)
                    out.append((target, call.op, peer.protocol))
                    self.protocols[target] = peer.protocol
        # Stores a service reads only while starting (hotel's geo, recommendation and user load their
        # data then): a dependency all the same, reached through the service's start-up.
        for svc in top.services.values():
            caller = workload_of.get(svc.name, svc.name)
            env = env_of.get(caller, {})
            dialled = {t for (c, _), calls in self.calls.items() if c == caller for t, _, _ in calls}
            for peer in svc.peers:
                if peer.service or not peer.at_start or peer.protocol not in STORE_PROTOCOLS:
                    continue
                target = store_workload(peer, env)
                if target not in dialled:
                    self.calls.setdefault((caller, "start"), []).append((target, f"{peer.protocol}_{svc.name}",
                                                                         peer.protocol))
                    self.protocols[target] = peer.protocol
            if svc.names:
                self.derived.setdefault(caller, {}).update(svc.names)
        self.entry = workload_of.get(top.entry, top.entry)
        # Routes by the entry operation they call (a shop's ten product URLs are one route).
        self.routes = {r.op: (workload_of.get(r.service, r.service), r.op) for r in top.routes}

    # -- facts ------------------------------------------------------------------------------
    def role(self, name: str) -> Role:
        callers = [(c, op, top) for (c, op), calls in self.calls.items() for t, top, _ in calls if t == name]
        callees = [t for (c, _), calls in self.calls.items() if c == name for t in calls]
        protocol = self.protocols.get(name, "")
        kind = "entry" if name == self.entry else "store" if protocol in STORE_PROTOCOLS else \
            "service" if name in self.ops else "other"
        w = self.workloads.get(name)
        return Role(name=name, kind=kind, protocol=protocol, container=w.container if w else "",
                    ops=list(dict.fromkeys(self.ops.get(name, []) or [top for _, op, top in callers])),
                    callers=callers, callees=list(dict.fromkeys(callees)), upstream=self.upstream(name),
                    routes=self.routes_through(name), derived=dict(self.derived.get(name, {})))

    def upstream(self, name: str) -> list[str]:
        """Every workload whose requests reach `name`, nearest first (breadth first)."""
        callers_of: dict[str, list[str]] = {}
        for (c, _), calls in self.calls.items():
            for t, _, _ in calls:
                callers_of.setdefault(t, [])
                if c not in callers_of[t]:
                    callers_of[t].append(c)
        out: list[str] = []
        queue = deque(callers_of.get(name, []))
        while queue:
            c = queue.popleft()
            if c in out or c == name:
                continue
            out.append(c)
            queue.extend(callers_of.get(c, []))
        return out

    def routes_through(self, name: str) -> list[str]:
        """Routes whose call tree reaches `name`; for a dependency of a start-up only, its callers' routes."""
        out = self._routes(name)
        if not out:
            for caller in dict.fromkeys(c for (c, _), calls in self.calls.items() for t, _, _ in calls if t == name):
                out += [r for r in self._routes(caller) if r not in out]
        return out

    def _routes(self, name: str) -> list[str]:
        out = []
        for route, (entry, op) in self.routes.items():
            seen: set[tuple[str, str]] = set()
            stack = [(entry, op)]
            while stack:
                node = stack.pop()
                if node in seen:
                    continue
                seen.add(node)
                if node[0] == name:
                    out.append(route)
                    break
                stack.extend((t, top) for t, top, _ in self.calls.get(node, []))
        return out


@cache
def topology(app: str) -> Topology:
    return Topology(app)
