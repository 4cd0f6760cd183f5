"""Applications declared as call graphs: each service says how the farm's manifests run it, which
peers it dials (and where their addresses come from), which operations it serves and what each
calls. `GraphService` is the container model for all of them (start-up checks, ports, memory)
but an application whose start-up it cannot describe (hotel's config.json, flags and seeding:
`AppGraph.own_model`), whose own model hands the engine the same instance; `kubesim/apps/callgraph.py`
is the fluid request model that walks the graphs.

A graph describes the code, never the deployment: addresses are read from the container's
environment or mounted config at start, exactly where the real program reads them, so a wrong
env var, port or selector breaks the call it would break."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from apps.topology import AppTopology, ServiceDecl
from core.addresses import Address, parse_address
from kubesim.apps.logformats import LOGGERS, LogFormat
from kubesim.apps.model import (
    AppModel,
    Exited,
    StartContext,
    Started,
    app_model,
    model_named,
    normalize_image,
)

if TYPE_CHECKING:
    from kubesim.runtime import Ctr, PodRt

STORE_PROTOCOLS = frozenset({"postgres", "mysql", "redis", "kafka", "mongo", "memcached"})

@dataclass(frozen=True)
class Cache:
    """A cache the service reads before its store (memcached in front of MongoDB). The service
    caches `keys` distinct keys; a read misses in the share of them not cached yet (never less
    than `floor`, the keys that are always new), and each miss warms the cache by half a key."""

    keys: float
    floor: float = 0.0


@dataclass(frozen=True)
class Retry:
    """A client's deadline and retry policy on one peer: `attempts` tries, each cut at `timeout`
    seconds, waiting `backoff` × `multiplier`^k between them. `env` names the variables that
    override them (attempts, timeout ms, backoff ms, multiplier); `metrics` = (job, instance,
    prefix) exports the client's own counters: {prefix}_attempts_total and the like."""

    attempts: int = 1
    timeout: float | None = None
    backoff: float = 0.0
    multiplier: float = 2.0
    env: tuple[str, str, str, str] | None = None
    metrics: tuple[str, str, str] | None = None
    # what the client reports when most calls ran out of attempts on their deadline (hotel's search
    # answers "search dependency unavailable" instead of the last attempt's DeadlineExceeded)
    gave_up: str = ""

    def read(self, env: dict[str, str]) -> dict[str, float]:
        """The policy the program runs with, its knobs read from its environment at start."""
        out = {"attempts": float(self.attempts), "timeout": self.timeout or 0.0, "backoff": self.backoff,
               "multiplier": self.multiplier}
        if self.env is not None:
            names = dict(zip(("attempts", "timeout", "backoff", "multiplier"), self.env, strict=True))
            scale = {"timeout": 1000.0, "backoff": 1000.0}
            for key, var in names.items():
                try:
                    out[key] = float(env[var]) / scale.get(key, 1.0)
                except (KeyError, ValueError):
                    pass
        out["attempts"] = float(max(1, int(out["attempts"])))
        return out


@dataclass(frozen=True)
class RateLimit:
    """A token bucket in front of a service's handler with a bounded queue: each pod serves at most
    `qps` requests/s and parks up to `queue` more; past that a request is rejected with `error`.
    `env` names the variables that override them (qps, queue); `metrics` = (job, instance, prefix)
    exports {prefix}_queue_depth, {prefix}_requests_received_total and the like."""

    qps: float
    queue: float
    error: str = ""
    env: tuple[str, str] | None = None
    metrics: tuple[str, str, str] | None = None

    def read(self, env: dict[str, str]) -> dict[str, float]:
        out = {"qps": self.qps, "queue": self.queue}
        for key, var in zip(("qps", "queue"), self.env or (), strict=False):
            try:
                out[key] = float(env[var])
            except (KeyError, ValueError):
                pass
        return {"qps": max(0.1, out["qps"]), "queue": max(0.0, out["queue"])}


@dataclass(frozen=True)
class Registry:
    """Service discovery through a registry agent (Consul): at start the service registers under
    `name` (its port, unless `port` is set) with the agent its peer `agent` addresses, and a caller
    resolves a peer declared with `discovery` by the callee's `names["consul"]`. Each caller pod
    keeps the last answer it got: while its agent is unreachable it dials what it last knew."""

    agent: str  # the peer (protocol http) that is the registry agent
    name: str = ""  # what the service registers as; empty: it registers nothing
    port: int = 0


@dataclass(frozen=True)
class Peer:
    """Something a service dials. Its address comes from `env` (host:port, a URL or a DSN), else
    from `config` (a key path in a mounted JSON file), else `default` (baked into the image)."""

    name: str  # how the service's calls refer to it
    protocol: str  # grpc | http | thrift | postgres | mysql | redis | kafka | mongo | memcached
    service: str = ""  # the graph service it is meant to reach (empty for data stores)
    env: str = ""
    port_env: str = ""  # Envoy-style pairs: `env` holds the host, `port_env` the port
    config: tuple[str, tuple[str, ...]] | None = None  # (file path, keys to the {"addr","port"} entry)
    default: str = ""  # may hold Spring placeholders, `${NAME:fallback}`, resolved against the environment
    required: bool = False  # the process refuses to start when `env` is unset
    at_start: bool = False  # dialled (and for a store, authenticated) while starting: failure exits
    suffix_env: str = ""  # an env var whose value the program appends to the host (OpenResty's fqdn_suffix)
    pool: int = 0  # connections its client keeps per pod (Hikari's 10, a Thrift pool's 512); 0 = unbounded
    cache: Cache | None = None  # this store is a cache in front of another (see Call.on_miss)
    retry: Retry | None = None  # this client's own deadline and retries, instead of the service's
    discovery: bool = False  # resolved through the service's registry (Service.registry), not DNS
    session: bool = False  # authenticates once, at start (mgo's session): later calls are only authorized


@dataclass(frozen=True)
class Call:
    """One downstream call an operation makes, on `share` of its requests."""

    peer: str
    op: str  # the callee's operation (span name) or the store command
    share: float = 1.0
    on_error: str = "fail"  # fail: the operation fails; ignore: logged only; crash: the process dies
    write: bool = False
    on_miss: str = ""  # the cache peer whose misses this call serves: it runs only on a miss


@dataclass
class Service:
    """One program of the application (what a container runs)."""

    name: str
    language: str  # picks the log format and the wording of its errors (kubesim/apps/logformats.py)
    ports: tuple[int, ...]
    ops: dict[str, tuple[Call, ...]]
    peers: tuple[Peer, ...] = ()
    required_env: tuple[str, ...] = ()
    cpu: float = 0.0008  # CPU seconds per request
    latency: float = 0.002  # service time per request, seconds
    memory: float = 40 * 2**20  # resident set at idle, bytes
    memory_per_rps: float = 30_000.0
    timeout: float | None = 10.0  # the client deadline of its outgoing calls, seconds (None: it sets none)
    backlog: float = 0.0  # requests each pod parks before refusing more; 0: what its callers' deadline leaves
    sequential: bool = False  # a failed call ends the request: later calls see only what earlier ones let through
    rx_bytes: float = 800.0  # bytes received and sent per request
    tx_bytes: float = 2400.0
    http_metrics: str = ""  # the job of the http_server_request_duration_seconds its HTTP server exports
    attempts: int = 1  # tries per outgoing call (1 = no retry)
    start_s: float = 1.0  # time to become ready
    background: bool = False  # its ops run as a loop of its own (a Kafka consumer), not on requests
    traced: bool = True  # False: the program has no tracer, so its requests leave no spans
    names: dict[str, str] = field(default_factory=dict)  # names it goes by elsewhere: consul, db, port
    limit: RateLimit | None = None  # a token bucket and queue in front of its handler
    runtime: Any = None  # a language runtime with a cost model of its own (goruntime.GO); its backlog lives in its pods
    registry: Registry | None = None  # service discovery (Consul) for its `discovery` peers
    on_start: Callable[[StartContext, dict[str, Any]], Exited | None] | None = None  # reads its own config

    def peer(self, name: str) -> Peer:
        found = self._peers_by_name.get(name)
        if found is None:
            raise KeyError(f"{self.name} has no peer {name}")
        return found

    @cached_property
    def _peers_by_name(self) -> dict[str, Peer]:
        # the engine asks for a call's peer per call, pod and step; a declaration never changes
        index: dict[str, Peer] = {}
        for p in self.peers:
            index.setdefault(p.name, p)  # the first of a name, as a scan would find it
        return index


@dataclass(frozen=True)
class Route:
    """One kind of request the load generator sends: its name as the client reports it."""

    name: str
    method: str
    service: str  # the entry service
    op: str
    share: float
    script: str = ""  # the load generator script that sends it (file name); empty: the default mix
    timeout: float | None = None  # the client's own timeout for this request (Locust's `timeout=`), seconds
    target: str = ""  # host:port of an absolute URL the client calls instead of its own host
    path: str = ""  # the URL path, where the name the client reports is not it (hotel's `HTTP GET /hotels`)

    @property
    def url_path(self) -> str:
        return self.path or self.name


def client_routes(graph: AppGraph, instance: dict[str, Any]) -> tuple[Route, ...]:
    """What one load generator sends: the routes of its script (`-s`), else the graph's default mix."""
    script = str(instance.get("script") or "").rsplit("/", 1)[-1]
    own = tuple(r for r in graph.routes if r.script and r.script == script)
    return own or tuple(r for r in graph.routes if not r.script)


@dataclass
class AppGraph:
    name: str  # the application, e.g. astronomy-shop
    services: dict[str, Service]
    routes: tuple[Route, ...]
    identify: Callable[[dict[str, Any]], str | None]  # a container spec → the service it runs, or None
    span_metrics: bool = True  # the OTel collector's spanmetrics connector turns spans into metrics
    trace_host: str = ""  # where the services send spans; default otel-collector (span_metrics) or jaeger
    hooks: Any = None  # app-specific behaviour (feature flags, ...): see callgraph.GraphHooks
    tracer: Any = None  # how its spans are tagged (callgraph.TraceFormat); default OpenTelemetry's
    trace_peer: str = ""  # the peer whose address (config, flags) is its trace exporter, instead of trace_host
    # True: a container model of its own starts its programs (hotel's HotelService: its config.json,
    # flags and start-up lines) and hands the engine the same instance GraphService would
    own_model: bool = False
    order: list[str] = field(default_factory=list)  # callers before callees, computed

    def __post_init__(self) -> None:
        self.order = _topological(self)

    @cached_property
    def callee_protocol(self) -> dict[str, str]:
        """Each called service's protocol, as the first of its callers (in declaration order) dials it."""
        found: dict[str, str] = {}
        for s in self.services.values():
            for p in s.peers:
                if p.service:
                    found.setdefault(p.service, p.protocol)
        return found


GRAPHS: dict[str, AppGraph] = {}


def graph_app(graph: AppGraph) -> AppGraph:
    """Register a graph; every container it identifies runs as a `GraphService`."""
    GRAPHS[graph.name] = graph
    return graph


def identify(container: dict[str, Any]) -> tuple[AppGraph, Service] | None:
    """The graph service a container runs, for the graphs whose programs GraphService starts."""
    for graph in GRAPHS.values():
        if graph.own_model:
            continue
        name = graph.identify(container)
        if name is not None and name in graph.services:
            return graph, graph.services[name]
    return None


def _topological(graph: AppGraph) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in seen or name in path or name not in graph.services:
            return
        svc = graph.services[name]
        for calls in svc.ops.values():
            for call in calls:
                peer = next((p for p in svc.peers if p.name == call.peer), None)
                if peer is not None and peer.service:
                    visit(peer.service, path + (name,))
        seen.add(name)
        out.append(name)

    for name in graph.services:
        visit(name, ())
    return list(reversed(out))


# -- from the application's declared topology (apps/<app>/topology.yaml) -----------------------
def declared_peers(decl: ServiceDecl, clients: dict[str, dict[str, Any]] | None = None) -> tuple[Peer, ...]:
    """The service's peers as its topology declares them, each with its client's behaviour (`clients`:
    peer name → pool, cache, retry, session) added."""
    clients = clients or {}
    unknown = sorted(set(clients) - {p.name for p in decl.peers})
    if unknown:
        raise KeyError(f"{decl.name} declares no peer {', '.join(unknown)}")
    return tuple(Peer(**p.model_dump(), **clients.get(p.name, {})) for p in decl.peers)


def declared_service(decl: ServiceDecl, language: str, clients: dict[str, dict[str, Any]] | None = None,
                     **behaviour: Any) -> Service:
    """A program of the application: its ports, operations, calls and peers as its topology declares
    them; its language, costs and client policies (`behaviour`, `clients`) as the emulator models them."""
    ops = {op: tuple(Call(**c.model_dump()) for c in calls) for op, calls in decl.ops.items()}
    return Service(decl.name, language, decl.ports, ops, peers=declared_peers(decl, clients),
                   required_env=decl.required_env, names=dict(decl.names), **behaviour)


def declared_routes(topology: AppTopology) -> tuple[Route, ...]:
    return tuple(Route(**r.model_dump()) for r in topology.routes)


# -- addresses --------------------------------------------------------------------------------
PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_.-]+)(?::([^}]*))?\}")


def resolve_placeholders(text: str, env: dict[str, str]) -> tuple[str, str | None]:
    """Spring's `${NAME:fallback}` placeholders (an application.yml default) resolved against the
    container's environment: (the text, the first NAME unset without a fallback, else None)."""
    unset: list[str] = []

    def value(m: re.Match[str]) -> str:
        if m.group(1) in env:
            return env[m.group(1)]
        if m.group(2) is None:
            unset.append(m.group(1))
        return m.group(2) or ""

    return PLACEHOLDER.sub(value, text), (unset[0] if unset else None)


def config_entry(files: dict[str, str], path: str, keys: tuple[str, ...]) -> str | None:
    """`addr:port` of a service-config.json style entry ({"addr": …, "port": …}), if present."""
    text = files.get(path)
    if text is None:
        return None
    try:
        node: Any = json.loads(text)
    except ValueError:
        return None
    for k in keys:
        if not isinstance(node, dict) or k not in node:
            return None
        node = node[k]
    if isinstance(node, dict) and "addr" in node:
        return f"{node['addr']}:{node.get('port', '')}"
    return str(node) if isinstance(node, str | int) else None


# -- data stores --------------------------------------------------------------------------------
@dataclass
class StoreReply:
    """What a store did with `rate` requests/s of one command from one client for one step."""

    ok: float = 1.0  # fraction served
    latency: float = 0.0005  # seconds per request, server side
    error: str | None = None  # the server's error as the client library reports it


class DataStore(AppModel):
    """A data store graph services dial (Postgres, MySQL, Redis/Valkey, Kafka, MongoDB, memcached).
    The call graph asks it to authenticate a client and to serve a command load; network
    reachability, delay and loss are already accounted for by then."""

    protocol = ""

    def authenticate(self, instance: Any, address: Address) -> str | None:
        """None if a client with these credentials may connect; else the server's refusal."""
        return None

    def serve(self, cluster: Any, rt: PodRt, c: Ctr, command: str, write: bool, rate: float, dt: float,
              address: Address) -> StoreReply:
        return StoreReply()

    def tick(self, cluster: Any, rt: PodRt, c: Ctr, now: float, dt: float) -> None:
        """Background work once per fluid step (checkpoints, consumer lag, disk I/O faults)."""


def store_model(c: Ctr) -> DataStore | None:
    m = model_named(c.model)
    return m if isinstance(m, DataStore) else None


# -- the container model ------------------------------------------------------------------------
@app_model
class GraphService(AppModel):
    """Every program of a graph application: checks what it needs to start the way the real one
    does, then serves its ports; its load, failures and output come from the call graph."""

    name = "graph-service"

    def matches(self, container: dict[str, Any]) -> bool:
        return identify(container) is not None

    def start(self, ctx: StartContext) -> Started | Exited:
        found = identify(ctx.container)
        assert found is not None
        graph, svc = found
        log: LogFormat = LOGGERS[svc.language](svc.name, ctx.pod_name)
        t = ctx.app_time()
        for var in svc.required_env:
            if not ctx.env.get(var):
                return log.exit_missing_env(t, var)
        peers: dict[str, dict[str, Any]] = {}
        for p in svc.peers:
            raw = None
            if p.env and ctx.env.get(p.env) is not None:
                raw = ctx.env[p.env]
                if p.port_env:
                    raw = f"{raw}:{ctx.env.get(p.port_env, '')}"
            elif p.env and p.required:
                return log.exit_missing_env(t, p.env)
            elif p.config is not None:
                raw = config_entry(ctx.files, *p.config)
                if raw is None and p.required:  # no file (key "") or no entry in it
                    return log.exit_missing_config(t, p.config[0], ".".join(p.config[1]) if p.config[0] in ctx.files
                                                   else "")
            if raw is None:
                raw, unset = resolve_placeholders(p.default, ctx.env)
                if unset:
                    return log.exit_missing_env(t, unset)
            addr = parse_address(raw, p.protocol)
            if addr is None:
                if p.required or p.at_start:
                    return log.exit_bad_address(t, p, raw)
                continue
            if p.suffix_env:
                addr = replace(addr, host=addr.host + ctx.env.get(p.suffix_env, ""))
            peers[p.name] = addr.entry()
            if p.at_start:
                refused = self._dial_at_start(ctx, p, addr)
                if refused is not None:
                    return log.exit_dial_failed(t, p, addr, *refused)
        inst: dict[str, Any] = {"kind": "graph", "app": graph.name, "svc": svc.name, "peers": peers, "env": dict(ctx.env),
                "started": ctx.now, "leak": 0.0}
        if svc.runtime is not None:
            node = ctx.cluster.nodes.get(ctx.node)
            settings = svc.runtime.settings(ctx.env, node.cpu if node is not None else 4)
            if isinstance(settings, list):  # the runtime refuses its settings before main() runs
                return Exited(2, [], after=0.0, stderr=settings)
            inst["go"] = settings
        if svc.limit is not None:
            inst["limit"] = svc.limit.read(ctx.env)
        retries = {p.name: p.retry.read(ctx.env) for p in svc.peers if p.retry is not None}
        if retries:
            inst["retry"] = retries
        if svc.registry is not None:
            inst["discovered"] = {}  # the pod's own cache of the registry's answers
            unregistered = self._register(ctx, svc, peers.get(svc.registry.agent))
            if unregistered is not None:
                return log.exit_dial_failed(t, svc.peer(svc.registry.agent), *unregistered)
        if svc.on_start is not None:
            exited = svc.on_start(ctx, inst)
            if exited is not None:
                return exited
        # a program that reads its listen port from its config says so in inst["ports"] (on_start)
        return Started(log.started(t, svc), set(inst.get("ports") or svc.ports), inst, ready_after=svc.start_s)

    @staticmethod
    def _register(ctx: StartContext, svc: Service, agent: dict[str, Any] | None) -> tuple[Address, str, float] | None:
        """Registers the service with its registry agent; (agent address, error, seconds until the
        program gives up) when the agent cannot be reached."""
        assert svc.registry is not None
        if agent is None:
            return Address("", 0), "missing address", 0.2
        addr = Address(agent["host"], agent["port"], raw=agent["raw"])
        if not svc.registry.name:
            return None
        conn = ctx.connect(addr.host, addr.port)
        if conn.ok_share == 0:
            err = conn.first_error() or "connection refused"
            return addr, err, (0.2 if "refused" in err or "no such host" in err else 10.0)
        target = next(tg for tg in conn.targets if not tg.error)
        ctx.cluster.workload.consul_register(target.pod, svc.registry.name, ctx.pod, svc.registry.port or svc.ports[0])
        return None

    def _dial_at_start(self, ctx: StartContext, p: Peer, addr: Address) -> tuple[str, float] | None:
        """None if the peer answers (and accepts the credentials); else (error, seconds until it gives up)."""
        if addr.host in ("localhost", "127.0.0.1", "::1"):
            if any(int(p.get("containerPort", 0)) == addr.port for c in ctx.pod["spec"].get("containers", [])
                   for p in c.get("ports") or []):
                return None
            return f"dial tcp 127.0.0.1:{addr.port}: connect: connection refused", 0.2
        conn = ctx.connect(addr.host, addr.port)
        if conn.ok_share == 0:
            err = conn.first_error() or "connection refused"
            return err, (0.3 if "refused" in err or "no such host" in err else 10.0)
        if p.protocol in STORE_PROTOCOLS:
            target = next(tg for tg in conn.targets if not tg.error)
            rt = ctx.cluster.kubelet.runtime(target.pod)
            for c in (rt.containers.values() if rt else []):
                if c.state == "running" and addr.port in c.ports:
                    model = store_model(c)
                    if model is None:
                        if isinstance(c.instance, dict) and c.instance.get("kind") == "graph":
                            return "EOF", 0.5  # an application server, not the store: the handshake fails
                        return None  # a server the emulated cluster does not model in detail
                    refusal = model.authenticate(c.instance, replace(addr, client=ctx.pod_ip))
                    if refusal:
                        return refusal, 0.3
        return None

    def memory(self, instance: Any, load_rps: float) -> float:
        if not isinstance(instance, dict):
            return float(40 * 2**20)
        found = GRAPHS.get(instance.get("app", ""))
        svc = found.services.get(instance.get("svc", "")) if found else None
        if svc is None:
            return float(40 * 2**20)
        if svc.runtime is not None and "go" in instance:
            return float(svc.runtime.rss(instance["go"], load_rps, instance.get("queued", 0.0))) + instance.get("leak", 0.0)
        return svc.memory + svc.memory_per_rps * load_rps + instance.get("leak", 0.0)


def image_suffix(container: dict[str, Any], repository: str) -> str | None:
    """The part of the tag after the version (`2.2.0-checkout` → `checkout`) for images of `repository`."""
    repo, tag, _ = normalize_image(container.get("image", ""))
    if repo != normalize_image(repository + ":x")[0]:
        return None
    m = re.match(r"^\d+\.\d+\.\d+-(.+)$", tag)
    return m.group(1) if m else None


__all__ = ["AppGraph", "Address", "Cache", "Call", "DataStore", "GRAPHS", "GraphService", "Peer", "RateLimit", "Registry", "Retry",
           "Route", "Service", "StoreReply", "client_routes", "declared_peers", "declared_routes", "declared_service", "graph_app", "identify", "image_suffix", "parse_address", "resolve_placeholders", "store_model"]
