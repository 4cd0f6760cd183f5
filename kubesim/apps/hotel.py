"""hotel-reservation (DeathStarBench, Go + gRPC): the eight services of one image, selected by the
binary the manifest runs, with their config.json, start-up sequence (config, Mongo seeding with
admin:admin for geo and rate, Jaeger agent, Consul registration) and the log lines they print;
and the call graph the call-graph engine (kubesim/apps/callgraph.py) serves their requests by
(ports, Consul discovery, stores, memcached in front of MongoDB, the search→rate retry policy and
rate's token bucket and queue, the Jaeger Go client's spans, declared as graph features), and the
Go runtime (apps/goruntime.py: tune's `GC` over GOGC, GOMEMLIMIT, GOMAXPROCS) that sets each
binary's memory and the CPU its collector takes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from apps.topology import load_topology
from kubesim.apps import graph
from kubesim.apps.callgraph import CallGraphFlow, GraphHooks, OpEffect, TraceFormat
from kubesim.apps.goruntime import HOTEL_GO, go_gc_percent
from kubesim.apps.graph import (
    AppGraph,
    Cache,
    Peer,
    RateLimit,
    Retry,
    Service,
    declared_routes,
    declared_service,
    graph_app,
)
from kubesim.apps.model import (
    AppModel,
    Exited,
    StartContext,
    Started,
    app_model,
    normalize_image,
    register_image,
    zerolog,
)
from kubesim.apps.stores import authenticate, authorize

IMAGES = ("yinfangchen/hotelreservation", "deathstarbench/hotel-reservation", "ghcr.io/sregym/hotel-reservation",
          "igorrudyk1/hotelreservation")
BINARIES = ("frontend", "search", "geo", "profile", "rate", "recommendation", "reservation", "user")
for _img in IMAGES:
    register_image(_img, tags=("latest", "v1", "sha-d2c036bc"), size=412_000_000,
                   executables=BINARIES + ("bash", "sh", "go"))

WORKDIR = "/go/src/github.com/harlow/go-micro-services"
CONFIG = {"consulAddress": "consul:8500", "jaegerAddress": "jaeger:6831", "FrontendPort": "5000", "SearchPort": "8082",
          "GeoPort": "8083", "GeoMongoAddress": "mongodb-geo:27017", "ProfilePort": "8081",
          "ProfileMongoAddress": "mongodb-profile:27017", "ProfileMemcAddress": "memcached-profile:11211",
          "RatePort": "8084", "RateMongoAddress": "mongodb-rate:27017", "RateMemcAddress": "memcached-rate:11211",
          "RecommendPort": "8085", "RecommendMongoAddress": "mongodb-recommendation:27017", "ReservePort": "8087",
          "ReserveMongoAddress": "mongodb-reservation:27017", "ReserveMemcAddress": "memcached-reserve:11211",
          "UserPort": "8086", "UserMongoAddress": "mongodb-user:27017", "KnativeDomainName": ""}


@dataclass(frozen=True)
class Svc:
    binary: str
    port_key: str
    consul: str | None
    mongo_key: str | None = None
    memc_key: str | None = None
    db: str = ""
    auth: bool = False
    metrics_port: int | None = None


SERVICES = {
    "frontend": Svc("frontend", "FrontendPort", None),
    "search": Svc("search", "SearchPort", "srv-search", metrics_port=9092),
    "geo": Svc("geo", "GeoPort", "srv-geo", "GeoMongoAddress", db="geo-db", auth=True),
    "profile": Svc("profile", "ProfilePort", "srv-profile", "ProfileMongoAddress", "ProfileMemcAddress", db="profile-db"),
    "rate": Svc("rate", "RatePort", "srv-rate", "RateMongoAddress", "RateMemcAddress", db="rate-db", auth=True, metrics_port=9091),
    "recommendation": Svc("recommendation", "RecommendPort", "srv-recommendation", "RecommendMongoAddress", db="recommendation-db"),
    "reservation": Svc("reservation", "ReservePort", "srv-reservation", "ReserveMongoAddress", "ReserveMemcAddress", db="reservation-db"),
    "user": Svc("user", "UserPort", "srv-user", "UserMongoAddress", db="user-db"),
}

# What a binary's own code adds on top of the graph, read from its environment at start: search's
# retry policy on rate (newest SREGym search) and rate's token bucket and queue in front of its handler.
JOB = "hotel-reservation-application"
RATE_RETRY = Retry(3, 0.75, 0.05, 2.0, env=("RATE_RPC_MAX_ATTEMPTS", "RATE_RPC_TIMEOUT_MS", "RATE_RPC_INITIAL_BACKOFF_MS",
                                            "RATE_RPC_BACKOFF_MULTIPLIER"), metrics=(JOB, "search:9092", "search_rate"),
                   gave_up="rpc error: code = Unavailable desc = search dependency unavailable")
RATE_LIMIT = RateLimit(20.0, 256.0, error="rpc error: code = ResourceExhausted desc = rate request queue is full",
                       env=("RATE_BACKEND_QPS_LIMIT", "RATE_QUEUE_CAPACITY"), metrics=(JOB, "rate:9091", "rate"))
# Distinct keys each binary caches in its memcached; reservation's checks always meet some new ones.
CACHES = {"rate": Cache(80.0), "profile": Cache(80.0), "reservation": Cache(3000.0, floor=0.1)}


# The call graph (apps/hotel-reservation/topology.yaml): services call each other by their Consul names
# over gRPC, and their Consul and Jaeger agents and their stores at the config.json addresses (or
# -consuladdr/-jaegeraddr); every binary with a database seeds and reads it while starting
# (cmd/<svc>/db.go); mixed-workload_type_1.lua sends the routes' mix.
TOPOLOGY = load_topology("hotel-reservation")


def _service(name: str, cpu: float, latency: float, limit: RateLimit | None = None) -> Service:
    info = SERVICES[name]
    decl = TOPOLOGY.services[name]
    clients: dict[str, dict[str, Any]] = {}
    if any(p.name == "memcached" for p in decl.peers):
        clients["memcached"] = {"cache": CACHES[name]}
    if any(p.name == "mongodb" for p in decl.peers):
        # mgo dials (and, as admin for geo and rate, authenticates) once at start; requests reuse the session
        clients["mongodb"] = {"session": True}
    if name == "search":
        clients["rate"] = {"retry": RATE_RETRY}
    # No deadline on its calls (search's on rate is its own Retry) and a backlog bounded only by the
    # heap it fills; a handler returns at its first failed call, so later calls see only the rest.
    return declared_service(decl, "go-zerolog", clients, cpu=cpu, latency=latency, limit=limit, runtime=HOTEL_GO,
                            registry=graph.Registry("consul", info.consul or ""), timeout=None, backlog=100000.0,
                            sequential=True, rx_bytes=600.0, tx_bytes=1800.0,
                            http_metrics=JOB if name == "frontend" else "")


_REPOSITORIES = {normalize_image(i + ":x")[0] for i in IMAGES}  # IMAGES as normalize_image spells them


def _identify(container: dict[str, Any]) -> str | None:
    if normalize_image(str(container.get("image", "")))[0] not in _REPOSITORIES:
        return None
    argv = list(container.get("command") or []) + list(container.get("args") or [])
    binary = argv[0].rsplit("/", 1)[-1] if argv else None
    return binary if binary in SERVICES else None


class JaegerGo(TraceFormat):
    """The services' tracer, Jaeger's Go client (jaeger-client-go 2.30): `component` tags instead of
    OpenTelemetry's attributes, errors logged as (error, message), no spans for the stores, and
    JAEGER_SAMPLE_RATIO on the frontend switching sampling off."""

    error_event = ("error", "message")
    store_spans = False
    sample_env = "JAEGER_SAMPLE_RATIO"

    def server_tags(self, route: Any, protocol: str, ok: bool) -> list[dict[str, Any]]:
        tags: list[dict[str, Any]] = [{"key": "span.kind", "type": "string", "value": "server"}]
        if route is None:
            return tags + [{"key": "component", "type": "string", "value": "gRPC"}]
        return tags + [{"key": "component", "type": "string", "value": "net/http"},
                       {"key": "http.method", "type": "string", "value": route.method},
                       {"key": "http.url", "type": "string", "value": route.url_path},
                       {"key": "http.status_code", "type": "int64", "value": 200 if ok else 500},
                       {"key": "sampler.type", "type": "string", "value": "probabilistic"},
                       {"key": "sampler.param", "type": "float64", "value": 1}]

    def client_tags(self, peer: Peer) -> list[dict[str, Any]]:
        return [{"key": "span.kind", "type": "string", "value": "client"},
                {"key": "component", "type": "string", "value": "gRPC"}]

    def process_tags(self, rt: Any) -> list[dict[str, Any]]:
        return [{"key": "hostname", "type": "string", "value": rt.name},
                {"key": "ip", "type": "string", "value": rt.ip},
                {"key": "jaeger.version", "type": "string", "value": "Go-2.30.0"}]


# A latent bug of the frontend: with SEARCH_BACKEND_VERSION=true it asks a search-v2 backend that
# does not exist and answers /hotels with a 500.
LATENT_ENV = "SEARCH_BACKEND_VERSION"


def _latent(c: Any) -> bool:
    return bool(c.instance.get("env", {}).get(LATENT_ENV) == "true")


class HotelHooks(GraphHooks):
    def op_effect(self, flow: CallGraphFlow, ns: str, svc: Service, op: str, insts: list) -> OpEffect | None:
        if svc.name != "frontend" or op != "HTTP GET /hotels":
            return None
        bad = sum(1 for _, c in insts if _latent(c))
        return OpEffect(fail=bad / len(insts), error="internal server error") if bad else None

    def step(self, flow: CallGraphFlow, ns: str, groups: dict[str, list], lam: dict, now: float, dt: float) -> None:
        if lam.get(("frontend", "HTTP GET /hotels"), 0.0) <= 0:
            return
        for rt, c in groups.get("frontend") or []:
            if not _latent(c) or not flow.w._log_once(f"{rt.namespace}/{rt.name}/latent", 15.0, now):
                continue
            pod = flow.w._pod(rt.namespace, rt.name)
            if pod is not None:
                flow.cluster.logs.write(pod, c.name, zerolog(
                    now + flow.cluster.nodes.clock_offset(rt.node), "ERR", "services/frontend/server.go:187",
                    "search backend unavailable: upstream search-v2 returned no results; responding 500"), now)


HOTEL = graph_app(AppGraph("hotel-reservation", {s.name: s for s in (
    _service("frontend", 0.0012, 0.0015),
    _service("search", 0.0008, 0.0008),
    _service("geo", 0.0006, 0.0009),
    _service("rate", 0.0008, 0.0010, limit=RATE_LIMIT),
    _service("profile", 0.0009, 0.0012),
    _service("reservation", 0.0010, 0.0013),
    _service("recommendation", 0.0006, 0.0008),
    _service("user", 0.0004, 0.0006),
)}, declared_routes(TOPOLOGY), _identify, trace_host="jaeger", trace_peer="jaeger", tracer=JaegerGo(), hooks=HotelHooks(),
    own_model=True))

CALLER = {"frontend": "cmd/frontend/main.go", "search": "cmd/search/main.go", "geo": "cmd/geo/main.go",
          "profile": "cmd/profile/main.go", "rate": "cmd/rate/main.go", "recommendation": "cmd/recommendation/main.go",
          "reservation": "cmd/reservation/main.go", "user": "cmd/user/main.go"}


def split_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    try:
        return host or addr, int(port)
    except ValueError:
        return addr, 0


def _address(addr: str, user: str = "", db: str = "") -> dict[str, Any]:
    """A config.json address as the engine dials it; geo's and rate's mgo sessions are admin:admin
    against the admin database, reading their own."""
    host, port = split_addr(addr)
    raw = f"mongodb://{user}:{user}@{addr}/{db}?authSource=admin" if user else addr
    return graph.Address(host, port, user, user, db, raw).entry()


@app_model
class HotelService(AppModel):
    name = "hotel-reservation"
    images = IMAGES
    memory_base = 14 * 2**20

    def binary(self, argv: list[str]) -> str | None:
        if not argv:
            return None
        return argv[0].rsplit("/", 1)[-1]

    def missing_executable(self, spec: dict[str, Any], info: Any) -> str | None:
        argv = list(spec.get("command") or []) + ([] if spec.get("command") else list(spec.get("args") or []))
        b = self.binary(argv)
        if b is None or b in BINARIES or b in ("bash", "sh", "go"):
            return None
        if argv[0].startswith("./") or argv[0].startswith("/"):
            return f'exec: "{argv[0]}": stat {argv[0]}: no such file or directory'
        return f'exec: "{argv[0]}": executable file not found in $PATH'

    def start(self, ctx: StartContext) -> Started | Exited:
        argv = ctx.argv
        b = self.binary(argv)
        if b is None or b in ("bash", "sh"):
            return Exited(0, [], after=0.0)  # the image's default command is a shell with no tty
        svc = SERVICES[b]
        t = ctx.app_time()
        caller = CALLER[b]
        log = []

        def L(level: str, msg: str, dt: float = 0.0, where: str = caller) -> None:
            log.append(zerolog(t + dt, level, where, msg))

        level = ctx.env.get("LOG_LEVEL")
        node = ctx.cluster.nodes.get(ctx.node)
        go = HOTEL.services[b].runtime.settings(ctx.env, node.cpu if node is not None else 4)
        if isinstance(go, list):
            return Exited(2, [], after=0.0, stderr=go)
        if "TLS" in ctx.env and ctx.env["TLS"] not in ("", "0", "1", "false", "true") and \
                not ctx.env["TLS"].startswith("TLS_"):
            L("PNC", f"Invalid TLS setting: {ctx.env['TLS']}", where="tls/options.go:45")
            return Exited(2, log, after=0.1, stderr=[f"panic: Invalid TLS setting: {ctx.env['TLS']}", "",
                                                     "goroutine 1 [running]:"])
        if "GC" in ctx.env:
            L("INF", f"Tune: setGCPercent to {go_gc_percent(ctx.env)}", where="tune/setting.go:27")
        if level is not None and level == "":
            L("INF", "Set global log level: error", where="tune/setting.go:32")
        L("INF", "Reading config...")
        cfg = dict(CONFIG)
        text = ctx.files.get(f"{WORKDIR}/config.json")
        if text is not None:
            try:
                cfg.update({k: str(v) for k, v in json.loads(text).items()})
            except ValueError as exc:
                L("PNC", f"invalid character in config.json: {exc}")
                return Exited(2, log, after=0.1)
        for i, a in enumerate(argv):
            if a in ("-consuladdr", "--consuladdr") and i + 1 < len(argv):
                cfg["consulAddress"] = argv[i + 1]
            if a in ("-jaegeraddr", "--jaegeraddr") and i + 1 < len(argv):
                cfg["jaegerAddress"] = argv[i + 1]
        port = int(cfg.get(svc.port_key, "0") or 0)
        ports = [port] + ([svc.metrics_port] if svc.metrics_port else [])
        peers = {"consul": _address(cfg["consulAddress"]), "jaeger": _address(cfg["jaegerAddress"])}
        if svc.memc_key:
            peers["memcached"] = _address(cfg[svc.memc_key])
        if svc.mongo_key:
            peers["mongodb"] = _address(cfg[svc.mongo_key], "admin" if svc.auth else "", svc.db)
        # the call-graph engine's instance, as GraphService would make it from the declaration
        inst: dict[str, Any] = {"kind": "graph", "app": HOTEL.name, "svc": b, "peers": peers, "env": dict(ctx.env),
                                "started": ctx.now, "leak": 0.0, "go": go, "ports": ports, "discovered": {}}
        if svc.mongo_key:
            addr = cfg[svc.mongo_key]
            L("INF", f"Read database URL: {addr}", 0.001)
            L("INF", "Initializing DB connection...", 0.002)
            err = self.mongo_check(ctx, addr, svc, write=True)
            if err is not None:
                msg, after = err
                L("PNC", msg, after, where=f"cmd/{b}/db.go:{30 if svc.auth else 26}")
                return Exited(2, log, after=after, stderr=[f"panic: {msg}", "", "goroutine 1 [running]:",
                                                           f"main.initializeDatabase({{0xc0000a6000, 0x{len(addr):x}}})",
                                                           f"\t/go/src/github.com/harlow/go-micro-services/cmd/{b}/db.go:{30 if svc.auth else 26} +0x6a5"])
            L("INF", "New session successfull...", 0.01, where=f"cmd/{b}/db.go:33")
            L("INF", "Generating test data...", 0.011, where=f"cmd/{b}/db.go:35")
            L("INF", "Successfull", 0.05)
        if svc.memc_key:
            L("INF", f"Read {b} memcashed address: {cfg[svc.memc_key]}", 0.051)
            L("INF", "Initializing Memcashed client...", 0.052)
            L("INF", "Successfull", 0.053)
        L("INF", f"Read target port: {port}", 0.06)
        L("INF", f"Read consul address: {cfg['consulAddress']}", 0.061)
        L("INF", f"Read jaeger address: {cfg['jaegerAddress']}", 0.062)
        L("INF", f"Initializing jaeger agent [service name: {b} | host: {cfg['jaegerAddress']}]...", 0.063)
        jhost, _ = split_addr(cfg["jaegerAddress"])
        _, jerr = ctx.cluster.network.lookup(ctx.pod, jhost)
        if jerr:
            L("PNC", f"Got error while initializing jaeger agent: {jerr}", 0.07)
            return Exited(2, log, after=0.1, stderr=[f"panic: Got error while initializing jaeger agent: {jerr}"])
        L("INF", "Jaeger agent initialized", 0.071)
        L("INF", f"Initializing consul agent [host: {cfg['consulAddress']}]...", 0.072)
        L("INF", "Consul agent initialized", 0.073)
        L("INF", "Starting server...", 0.074)
        if svc.consul:
            chost, cport = split_addr(cfg["consulAddress"])
            conn = ctx.connect(chost, cport)
            if conn.ok_share == 0:
                refused = conn.first_error() or "connection refused"
                after = 0.2 if "refused" in refused or "no such host" in refused else 10.0
                L("FTL", f'failed register: Put "http://{cfg["consulAddress"]}/v1/agent/service/register": {refused}', after)
                return Exited(1, log, after=after)
            target = next(tg for tg in conn.targets if not tg.error)
            ctx.cluster.workload.consul_register(target.pod, svc.consul, ctx.pod, port)
            L("INF", "Successfully registered in consul", 0.08, where=f"services/{b}/server.go:92")
        else:
            L("INF", "Initializing gRPC clients...", 0.08, where="services/frontend/server.go:58")
            L("INF", "Successfull", 0.09, where="services/frontend/server.go:63")
            L("INF", f"Serving http at port: {port}", 0.1, where="services/frontend/server.go:101")
        declared = HOTEL.services[b].limit
        if declared is not None:
            limit = inst["limit"] = declared.read(ctx.env)
            L("INF", f"rate backend qps limit {limit['qps']:g}, queue capacity {limit['queue']:g}", 0.09,
              where="services/rate/server.go:71")
        retries = {p.name: p.retry.read(ctx.env) for p in HOTEL.services[b].peers if p.retry is not None}
        if retries:
            inst["retry"] = retries
        return Started(log, set(ports), inst, ready_after=0.0)

    def mongo_check(self, ctx: StartContext, addr: str, svc: Svc, write: bool) -> tuple[str, float] | None:
        """None if the service can seed and read its database at start; else (panic message, seconds)."""
        host, port = split_addr(addr)
        conn = ctx.connect(host, port)
        if conn.ok_share == 0:
            err = conn.first_error() or "connection refused"
            return (f"server selection error: server selection timeout, current topology: {{ Type: Unknown, Servers: "
                    f"[{{ Addr: {addr}, Type: Unknown, Last error: connection() error occurred during connection "
                    f"handshake: {err} }}, ] }}", 30.0)
        target = next(tg for tg in conn.targets if not tg.error)
        inst = ctx.cluster.workload.instance_of(target.pod, 27017)
        if inst is None or inst.get("kind") != "mongo":
            return ("server selection error: server selection timeout, current topology: { Type: Unknown, Servers: "
                    f"[{{ Addr: {addr}, Type: Unknown, Last error: connection() error occurred during connection handshake: "
                    "EOF }, ] }", 30.0)
        user = "admin" if svc.auth else None
        if user is not None:
            denied = authenticate(inst, "admin", "admin", "admin")
            if denied:
                return denied, 0.5
        denied = authorize(inst, user, "admin", svc.db, write, "insert")
        if denied:
            return denied, 0.5
        return None

    def memory(self, instance: Any, load_rps: float) -> float:
        rt = (instance or {}).get("go")
        if rt is None:
            return self.memory_base + 40_000 * load_rps
        return HOTEL_GO.rss(rt, load_rps, instance.get("queued", 0.0))


# -- known builds -----------------------------------------------------------------------------
# Published tags of the hotel image that are known to misbehave, and how (what an SRE finds
# when a rollout moves onto one). sha-8f3c2e1: geo's getNearbyPoints reads one point past its
# result slice when fewer than five hotels lie within the search radius; gRPC servers in these
# binaries have no recovery interceptor, so the panic kills the process.
BUGGY_BUILDS = {"sha-8f3c2e1": {"geo": 0.02}}  # tag → binary → share of its requests that crash it


def register_buggy_builds() -> None:
    """The buggy tags exist in the registry like any other (a rollout onto one pulls fine)."""
    from kubesim.apps.model import IMAGES as REGISTRY
    from kubesim.apps.model import normalize_image

    for img in IMAGES:
        info = REGISTRY.get(normalize_image(img + ":x")[0])
        if info is not None and info.tags:
            info.tags = tuple(dict.fromkeys((*info.tags, *BUGGY_BUILDS)))


def buggy_build_tick(cluster: Any, now: float, dt: float) -> None:
    """Once per fluid step: a binary of a buggy build crashes when one of the requests it served
    in the step took the bad path (a share of them), with Go's panic on stderr."""
    from kubesim.apps.model import normalize_image

    state = cluster.workload.state.setdefault("builds", {})
    counters = cluster.workload.state["counters"]
    for rt, c in list(cluster.kubelet.running()):
        inst = c.instance
        if not isinstance(inst, dict) or inst.get("kind") != "graph" or inst.get("app") != HOTEL.name:
            continue
        share = BUGGY_BUILDS.get(normalize_image(c.image)[1], {}).get(inst["svc"])
        if not share:
            continue
        served = sum(v for (metric, labels), v in counters.items() if metric == "traces_span_metrics_calls_total"
                     and ("service_name", inst["svc"]) in labels and ("namespace", rt.namespace) in labels)
        key = f"{rt.namespace}/{inst['svc']}"
        n = max(0.0, served - state.get(key, served))
        state[key] = served
        per_pod = n / max(1, sum(1 for r, k in cluster.kubelet.running()
                                 if isinstance(k.instance, dict) and k.instance.get("svc") == inst["svc"]
                                 and r.namespace == rt.namespace))
        if per_pod <= 0 or cluster.rng.random() >= 1 - (1 - share) ** per_pod:
            continue
        stderr = ["panic: runtime error: index out of range [5] with length 5", "",
                  f"goroutine {1800 + int(now) % 900} [running]:",
                  "github.com/harlow/go-micro-services/services/geo.(*Server).getNearbyPoints(0xc0001a6000, {0x0?, 0x0?}, "
                  "0x4043026a7ef9db23, 0xc05e86872b020c4a)",
                  "\t/go/src/github.com/harlow/go-micro-services/services/geo/server.go:145 +0x3c5",
                  "github.com/harlow/go-micro-services/services/geo.(*Server).Nearby(0xc0001a6000, {0xb4a8f8, 0xc0003b2f00}, "
                  "0xc0003d8280)",
                  "\t/go/src/github.com/harlow/go-micro-services/services/geo/server.go:122 +0x7d"]
        cluster.kubelet.terminate(rt.namespace, rt.name, c.name, 2, "Error", [], stderr)


def _install_builds() -> None:
    from kubesim.apps.model import fluid_ticks

    register_buggy_builds()
    if buggy_build_tick not in fluid_ticks:
        fluid_ticks.append(buggy_build_tick)


_install_builds()
