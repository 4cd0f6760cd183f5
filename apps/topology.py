"""An application's structure, declared once in `apps/<app>/topology.yaml`: the programs it runs
(which manifest workloads run each), the ports they serve, the operations each serves and the calls
each operation makes to which peer, where each peer's address comes from, and the requests the load
generator sends (the first route's service is the entry point).

Both sides read it: the emulated cluster's behaviour models (kubesim/apps) add what is behaviour
(latencies, costs, error texts, retry and pool policies, hooks) to it, and the fault injectors and
noise read it as plain data, so nothing aimed at a kind or EKS cluster depends on the emulator."""

from __future__ import annotations

from functools import cache
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from apps.application import APPS_DIR
from core.errors import ConfigurationError

PROTOCOLS = frozenset({"grpc", "http", "thrift", "udp", "postgres", "mysql", "redis", "kafka", "mongo", "memcached"})
# libyaml's loader when PyYAML has it: every emulated cluster's process reads the four files at start,
# and the pure-Python one takes eight times as long
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Decl(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CallDecl(_Decl):
    """One downstream call an operation makes, on `share` of its requests."""

    peer: str  # the name of one of the service's peers
    op: str  # the callee's operation (its span name) or the store command
    share: float = 1.0
    on_error: Literal["fail", "ignore", "crash"] = "fail"  # fail: the operation fails; ignore: logged only; crash: the process dies
    write: bool = False
    on_miss: str = ""  # the cache peer whose misses this call serves: it runs only on a miss


class PeerDecl(_Decl):
    """Something a service dials, and where the program reads its address: `env` (host:port, a URL or
    a DSN; with `port_env`, Envoy-style host and port apart), else `config` (a mounted JSON file and
    the keys to its entry), else `default` (baked into the image; may hold `${NAME:fallback}`)."""

    name: str
    protocol: str
    service: str = ""  # the service of this application it is meant to reach (empty for data stores)
    env: str = ""
    port_env: str = ""
    config: tuple[str, tuple[str, ...]] | None = None
    default: str = ""
    required: bool = False  # the process refuses to start without the address
    at_start: bool = False  # dialled while starting: failure ends the process
    suffix_env: str = ""  # an env var whose value the program appends to the host (OpenResty's fqdn_suffix)
    discovery: bool = False  # resolved through the service's registry (Consul), not DNS


class ServiceDecl(_Decl):
    """One program of the application (what a container runs)."""

    name: str
    workloads: tuple[str, ...] = ()  # the manifests' workloads that run it, in file order
    ports: tuple[int, ...] = ()
    required_env: tuple[str, ...] = ()
    names: dict[str, str] = {}  # names it goes by elsewhere: consul, db, port
    peers: tuple[PeerDecl, ...] = ()
    ops: dict[str, tuple[CallDecl, ...]] = {}

    @model_validator(mode="after")
    def _calls_name_peers(self) -> ServiceDecl:
        known = {p.name for p in self.peers}
        for op, calls in self.ops.items():
            for call in calls:
                if call.peer not in known:
                    raise ValueError(f"{self.name} {op!r} calls {call.peer!r}, which is none of its peers "
                                     f"({', '.join(sorted(known)) or 'none'})")
        for peer in self.peers:
            if peer.protocol not in PROTOCOLS:
                raise ValueError(f"{self.name}'s peer {peer.name!r} has unknown protocol {peer.protocol!r} "
                                 f"(known: {', '.join(sorted(PROTOCOLS))})")
        return self


class RouteDecl(_Decl):
    """One kind of request the load generator sends: its name as the client reports it."""

    name: str
    method: str
    service: str  # the entry service
    op: str
    share: float
    script: str = ""  # the load generator script that sends it; empty: the default mix
    timeout: float | None = None  # the client's own timeout for this request, seconds
    target: str = ""  # host:port of an absolute URL the client calls instead of its own host
    path: str = ""  # the URL path, where the name the client reports is not it


class AppTopology(_Decl):
    app: str
    entry: str  # the service user requests enter by
    services: dict[str, ServiceDecl]
    routes: tuple[RouteDecl, ...] = ()

    @model_validator(mode="after")
    def _references_resolve(self) -> AppTopology:
        if self.entry not in self.services:
            raise ValueError(f"entry {self.entry!r} is none of the services")
        for svc in self.services.values():
            for peer in svc.peers:
                if peer.service and peer.service not in self.services:
                    raise ValueError(f"{svc.name}'s peer {peer.name!r} is meant to reach {peer.service!r}, "
                                     "which is none of the services")
        for route in self.routes:
            ops = self.services[route.service].ops if route.service in self.services else {}
            if route.op not in ops:
                raise ValueError(f"route {route.name!r} calls {route.service} {route.op!r}, which it does not serve")
        return self



def has_topology(app: str) -> bool:
    return (APPS_DIR / app / "topology.yaml").is_file()


@cache
def load_topology(app: str) -> AppTopology:
    """The declared structure of `app`; one ConfigurationError naming the file for a missing or bad one."""
    path = APPS_DIR / app / "topology.yaml"
    if not path.is_file():
        known = sorted(p.parent.name for p in APPS_DIR.glob("*/topology.yaml"))
        raise ConfigurationError(f"application '{app}' declares no topology ({path}; known: {', '.join(known)})")
    data = yaml.load(path.read_text(), Loader=_LOADER)
    if not isinstance(data, dict) or data.get("app") != app:
        raise ConfigurationError(f"{path}: expected a mapping with app: {app}")
    services = data.get("services")
    if isinstance(services, dict):  # the key names the service: no need to repeat it in the file
        data["services"] = {name: {"name": name, **(body or {})} for name, body in services.items()}
    try:
        return AppTopology.model_validate(data)
    except ValidationError as exc:
        raise ConfigurationError(f"{path}: {exc}") from exc


__all__ = ["AppTopology", "CallDecl", "PeerDecl", "RouteDecl", "ServiceDecl", "has_topology", "load_topology"]
