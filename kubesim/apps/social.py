"""social-network (DeathStarBench) as a call graph: the eleven C++ Thrift services of the
`deathstarbench/social-network-microservices` image (which one a container is: the binary its command
runs), each reading its own port and its peers' addresses from the mounted service-config.json at
start; nginx-thrift (OpenResty + Lua), which reaches the services as `<name>$fqdn_suffix:9090`;
media-frontend; the Thrift operations with their Jaeger span names and what each calls (ComposePost's
fan-out, the timelines' Redis sorted sets, post-storage's memcached read-through over MongoDB); the
wrk2 mixed workload and the farm's logged-in reader; and user-service's login tokens, which carry the
clock of the pod that signed them.
Facts: ../shared/reference/applications.md §2 and the DeathStarBench sources they cite."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from apps.topology import load_topology
from kubesim.apps.callgraph import CallGraphFlow, GraphHooks, OpEffect
from kubesim.apps.graph import AppGraph, Peer, Service, declared_routes, declared_service, graph_app
from kubesim.apps.logformats import LOGGERS, CppBoost, Nginx
from kubesim.apps.model import Exited, StartContext, normalize_image

MiB = 2**20
CONFIG = "/social-network-microservices/config/service-config.json"
LOGIC_IMAGES = {normalize_image(i + ":x")[0] for i in ("deathstarbench/social-network-microservices",
                                                       "ghcr.io/sregym/social-network")}
NGINX_IMAGES = {normalize_image(i + ":x")[0] for i in ("yg397/openresty-thrift", "ghcr.io/sregym/openresty-thrift")}
MEDIA_FRONTEND_IMAGES = {normalize_image(i + ":x")[0] for i in ("yg397/media-frontend", "ghcr.io/sregym/media-frontend",
                                                                "jacksonarthurclark/media-frontend")}
TOKEN_TTL = 3600.0  # UserHandler::Login signs {"timestamp": now, "ttl": "3600"}; the Lua API checks timestamp+ttl


# -- how the C++ services and OpenResty say things ------------------------------------------------
class DsbCpp(CppBoost):
    """The social-network services: Boost.Log lines `[2026-Dec-03 07:00:00.000000] <error>:
    (PostStorageHandler.h:312:ReadPosts) …`, nlohmann::json's exceptions for a bad config, the Thrift
    C++ transport's and the store clients' (mongoc, libmemcached, redis-plus-plus) error texts."""

    overloaded_error = "THRIFT_EAGAIN (timed out)"  # a TThreadedServer never refuses: its callers' reads time out

    def exit_missing_config(self, t: float, path: str, key: str) -> Exited:
        if key == "":  # load_config_file() cannot open it: main() exits with EXIT_FAILURE
            return Exited(1, [self.line(t, "error", "Cannot open service-config.json", where="utils.h:34:load_config_file")],
                          after=0.05)
        return self._json_error(t, "type_error.302", "type must be number, but is null")

    def exit_bad_address(self, t: float, peer: Peer, raw: str) -> Exited:
        return self._json_error(t, "type_error.302", "type must be number, but is null" if raw.endswith(":")
                                else "type must be string, but is null")

    @staticmethod
    def _json_error(t: float, code: str, what: str) -> Exited:
        # an uncaught nlohmann::json exception while main() reads the config: std::terminate, SIGABRT
        kind = code.split(".")[0]
        return Exited(134, [], after=0.05, stderr=[f"terminate called after throwing an instance of 'nlohmann::detail::{kind}'",
                                                   f"  what():  [json.exception.{code}] {what}"])

    def started(self, t: float, svc: Service) -> list[str]:
        cls = "".join(w.capitalize() for w in svc.name.split("-"))
        return [self.line(t, "info", f"Starting the {svc.name} server...", where=f"{cls}.cpp:{70 + len(svc.name)}:main")]

    def call_error(self, t: float, op: str, peer: Peer, callee_op: str, err: str) -> str:
        handler = _HANDLERS.get(self.service, "Handler")
        func = _FUNCS.get(op, op)
        if peer.protocol == "thrift":
            if err == f"Failed to connect to {peer.name}":
                return self.line(t, "warning", "ClientPool pop timeout", where="ClientPool.h:83:Pop")
            if err.startswith(("connect() failed", "Could not resolve host")):
                return self.line(t, "error", f"Failed to connect {peer.name.removesuffix('-service')}-client",
                                 where="ClientPool.h:96:Pop")
            return self.line(t, "error", _THRIFT_VERB.get(callee_op, f"Failed to call {callee_op} on {peer.name}"),
                             where=f"{handler}.h:{120 + len(callee_op) * 3}:{func}")
        if peer.protocol == "mongo":
            words = callee_op.split()
            what = f"Error: Failed to insert {words[-1].split('.')[0]} to MongoDB: " if words[0] == "insert" else ""
            return self.line(t, "error" if what else "warning", what + err, where=f"{handler}.h:{200 + len(op)}:{func}")
        if peer.protocol == "memcached":
            return self.line(t, "error", f"Cannot get {_MC_KEYS.get(self.service, 'keys')} of request "
                                         f"{_req_id(t)}: {err}", where=f"{handler}.h:{150 + len(op)}:{func}")
        return self.line(t, "error", err, where=f"{handler}.h:{90 + len(op)}:{func}")

    def client_error(self, protocol: str, err: str, host: str, port: int, callee_op: str) -> str:
        low = err.lower()
        refused = "refused" in low or "no route" in low
        nohost = "no such host" in low or "lookup" in low
        timeout = "timeout" in low or "timed out" in low or "deadline" in low
        if protocol == "thrift":  # apache::thrift::transport::TTransportException::what()
            if nohost:
                return "Could not resolve host for client socket."
            if refused:
                return "connect() failed: Connection refused"
            if timeout and "dial tcp" in low:  # SYNs unanswered: TSocket sets no connect timeout
                return "connect() failed: Connection timed out"
            if timeout:
                return "THRIFT_EAGAIN (timed out)"
            return "No more data to read." if "eof" in low else err
        if protocol == "mongo":  # mongoc: server selection gives up after 300 ms (utils_mongodb.h)
            why = ("Failed to resolve '" + host + "'" if nohost else f"connection refused calling hello on '{host}:{port}'"
                   if refused else f"socket timeout calling hello on '{host}:{port}'" if timeout
                   else f"connection closed calling hello on '{host}:{port}'" if "eof" in low or "closed" in low else "")
            return f"No suitable servers found (`serverSelectionTryOnce` set): [{why}]" if why else err
        if protocol == "memcached":  # memcached_strerror()
            if nohost:
                return "HOSTNAME LOOKUP FAILURE"
            if timeout:
                return "A TIMEOUT OCCURRED"
            return "CONNECTION FAILURE" if refused else "SERVER HAS FAILED AND IS DISABLED UNTIL TIMED RETRY"
        if protocol == "redis":  # sw::redis::IoError / TimeoutError
            if nohost:
                return f"Failed to connect to Redis ({host}:{port}): Name or service not known"
            if timeout:
                return f"Failed to connect to Redis ({host}:{port}): Connection timed out"
            return f"Failed to connect to Redis ({host}:{port}): Connection refused" if refused else err
        return err

    def deadline(self, protocol: str) -> str:
        return "THRIFT_EAGAIN (timed out)" if protocol == "thrift" else "A TIMEOUT OCCURRED" \
            if protocol == "memcached" else f"{protocol} timeout"

    def pool_exhausted(self, peer: Peer, timeout: float) -> str:
        # ClientPool::Pop() gave up waiting (timeout_ms) for one of its `connections`: the handler throws
        return f"Failed to connect to {peer.name}"

    def thread_exhausted(self, t: float) -> tuple[list[str], int]:
        # std::thread (TThreadedServer's per-connection threads, std::async fan-outs) cannot be created
        return ["terminate called after throwing an instance of 'std::system_error'",
                "  what():  Resource temporarily unavailable"], 134

    def accept_error(self, t: float, port: int) -> str:
        stamp = datetime.fromtimestamp(t, UTC).strftime("%a %b %d %H:%M:%S %Y")
        return f"Thrift: {stamp} TServerSocket::acceptImpl() ::accept() Too many open files"


class OpenRestyThrift(Nginx):
    """nginx-thrift's Lua scripts: `ngx.log(ngx.ERR, "Get home-timeline failure: " .. ret.message)`."""

    overloaded_error = "failed to connect: timeout"

    def call_error(self, t: float, op: str, peer: Peer, callee_op: str, err: str) -> str:
        method, _, path = op.partition(" ")
        script, line, func, prefix = _LUA.get(op, ("index.lua", 40, "run", "request failure: "))
        start = int(t) % 100
        query = f"?user_id={int(t) % 962}&start={start}&stop={start + 10}" if method == "GET" else ""
        return self.line(t, "error", f"*{int(t * 7) % 90000 + 100} [lua] {script}:{line}: {func}(): {prefix}{err}, "
                                     f"client: 10.244.0.1, server: localhost, request: \"{method} {path}{query} "
                                     f"HTTP/1.1\", host: \"nginx-thrift:8080\"")

    def client_error(self, protocol: str, err: str, host: str, port: int, callee_op: str) -> str:
        low = err.lower()
        if protocol == "thrift":  # lua-thrift over ngx.socket.tcp
            if "no such host" in low or "lookup" in low:
                return f"failed to connect: {host} could not be resolved (3: Host not found)"
            if "refused" in low or "no route" in low:
                return "failed to connect: connection refused"
            if "timeout" in low or "timed out" in low:
                return "failed to connect: timeout"
        if protocol == "mongo":
            return f"failed to connect to MongoDB: {'connection refused' if 'refused' in low else 'timeout'}"
        return err

    def deadline(self, protocol: str) -> str:
        return "timeout"


LOGGERS["dsb-cpp"] = DsbCpp
LOGGERS["openresty-thrift"] = OpenRestyThrift

# where each service's handler code lives, and its methods' C++ names (for the `(file:line:func)` prefix)
_HANDLERS = {"compose-post-service": "ComposePostHandler", "home-timeline-service": "HomeTimelineHandler",
             "user-timeline-service": "UserTimelineHandler", "post-storage-service": "PostStorageHandler",
             "social-graph-service": "SocialGraphHandler", "user-service": "UserHandler",
             "url-shorten-service": "UrlShortenHandler", "user-mention-service": "UserMentionHandler",
             "text-service": "TextHandler", "media-service": "MediaHandler", "unique-id-service": "UniqueIdHandler"}
_FUNCS = {"compose_post_server": "ComposePost", "compose_text_server": "ComposeText", "compose_urls_server": "ComposeUrls",
          "compose_user_mentions_server": "ComposeUserMentions", "store_post_server": "StorePost",
          "post_storage_read_posts_server": "ReadPosts", "read_home_timeline_server": "ReadHomeTimeline",
          "write_home_timeline_server": "WriteHomeTimeline", "read_user_timeline_server": "ReadUserTimeline",
          "write_user_timeline_server": "WriteUserTimeline", "get_followers_server": "GetFollowers",
          "login_server": "Login", "register_user_withid_server": "RegisterUserWithId", "get_user_id_server": "GetUserId",
          "insert_user_server": "InsertUser", "follow_with_username_server": "FollowWithUsername"}
_THRIFT_VERB = {"compose_text_server": "Failed to send compose-text to text-service",
                "compose_creator_server": "Failed to send compose-creator to user-service",
                "compose_media_server": "Failed to send compose-media to media-service",
                "compose_unique_id_server": "Failed to send compose-unique_id to unique-id-service",
                "store_post_server": "Failed to store post to post-storage-service",
                "write_user_timeline_server": "Failed to write user-timeline to user-timeline-service",
                "write_home_timeline_server": "Failed to write home timeline to home-timeline-service",
                "compose_urls_server": "Failed to send compose-urls to url-shorten-service",
                "compose_user_mentions_server": "Failed to send compose-user-mentions to user-mention-service",
                "post_storage_read_posts_server": "Failed to read posts from post-storage-service",
                "get_followers_server": "Failed to get followers from social-network-service",
                "insert_user_server": "Failed to insert user to social-graph-client",
                "get_user_id_server": "Failed to get user_id from user-service"}
_MC_KEYS = {"post-storage-service": "post_ids", "user-mention-service": "usernames", "user-service": "username",
            "url-shorten-service": "urls"}
# op → (Lua script, line, function, message prefix), as the wrk2-api/api scripts log a failed Thrift call
_LUA = {"GET /wrk2-api/home-timeline/read": ("read.lua", 83, "ReadHomeTimeline", "Get home-timeline failure: "),
        "GET /wrk2-api/user-timeline/read": ("read.lua", 83, "ReadUserTimeline", "Get user-timeline failure: "),
        "POST /wrk2-api/post/compose": ("compose.lua", 64, "ComposePost", "compost_post failure: "),
        "POST /wrk2-api/user/register": ("register.lua", 49, "RegisterUser", "User registration failure: "),
        "POST /wrk2-api/user/follow": ("follow.lua", 55, "Follow", "Follow Failed: "),
        "POST /api/user/login": ("login.lua", 61, "Login", "User login failure: "),
        "GET /api/home-timeline/read": ("read.lua", 95, "ReadHomeTimeline", "Get home-timeline failure: "),
        "GET /api/user-timeline/read": ("read.lua", 99, "ReadUserTimeline", "Get user-timeline failure: ")}


def _req_id(t: float) -> int:
    return int(t * 1e6) % 10**15


# -- the graph --------------------------------------------------------------------------------------
def _read_config(ctx: StartContext, inst: dict[str, Any]) -> Exited | None:
    """main(): the port the server listens on is the service's own entry; user-service also reads the
    JWT secret. A missing file or entry ends the process the way the real one ends."""
    log = DsbCpp(inst["svc"], ctx.pod_name)
    t = ctx.app_time()
    text = ctx.files.get(CONFIG)
    if text is None:
        return log.exit_missing_config(t, CONFIG, "")
    try:
        doc = json.loads(text)
    except ValueError:
        return DsbCpp._json_error(t, "parse_error.101", "parse error at line 1, column 1: syntax error while parsing "
                                                        "value - invalid literal")
    own = doc.get(inst["svc"]) if isinstance(doc, dict) else None
    port = own.get("port") if isinstance(own, dict) else None
    if not isinstance(port, int) or isinstance(port, bool):
        kind = "null" if port is None else "string" if isinstance(port, str) else type(port).__name__
        return DsbCpp._json_error(t, "type_error.302", f"type must be number, but is {kind}")
    inst["ports"] = [port]
    if inst["svc"] == "user-service":
        secret = doc.get("secret")
        if not isinstance(secret, str):
            return DsbCpp._json_error(t, "type_error.302", "type must be string, but is null")
    return None


def _svc(name: str, cpu: float = 0.0006, latency: float = 0.0015, memory: float = 12 * MiB) -> Service:
    # No RPC deadline and no retries anywhere in the C++ clients (ThriftClient/ClientPool, mongoc,
    # libmemcached, redis-plus-plus): `timeout_ms` in the config bounds the wait for a pooled connection.
    decl = TOPOLOGY.services[name]
    # a Thrift ClientPool built from the service-config.json entry keeps up to its `connections`: 512
    pools = {p.name: {"pool": 512} for p in decl.peers if p.protocol == "thrift" and p.config is not None}
    return declared_service(decl, "dsb-cpp", pools, cpu=cpu, latency=latency, memory=memory, memory_per_rps=25_000,
                            timeout=30.0, start_s=1.0, on_start=_read_config)


# Services, calls, peers (each C++ service reads its peers' addresses from service-config.json;
# nginx-thrift's Lua scripts dial `"<name>" .. os.getenv("fqdn_suffix")`), the wrk2 mixed workload and
# the farm's logged-in reader: apps/social-network/topology.yaml.
TOPOLOGY = load_topology("social-network")
SERVICES: dict[str, Service] = {s.name: s for s in (
    # GenericObjectPool.lua defines setMaxTotal three times; the last one sets the socket timeout,
    # so compose.lua's setMaxTotal(512) leaves every Thrift call of that worker a 512 ms timeout.
    declared_service(TOPOLOGY.services["nginx-thrift"], "openresty-thrift", cpu=0.0004, latency=0.0008, memory=28 * MiB,
                     memory_per_rps=40_000, timeout=0.512, start_s=0.5),
    declared_service(TOPOLOGY.services["media-frontend"], "openresty-thrift", cpu=0.001, latency=0.002, memory=24 * MiB,
                     start_s=0.5),
    _svc("compose-post-service", cpu=0.0012, latency=0.003),
    _svc("text-service", cpu=0.0008),
    _svc("url-shorten-service"),
    _svc("user-mention-service"),
    _svc("media-service", cpu=0.0002, latency=0.0004, memory=8 * MiB),
    _svc("unique-id-service", cpu=0.0002, latency=0.0004, memory=8 * MiB),
    _svc("user-service"),
    _svc("social-graph-service"),
    _svc("post-storage-service", cpu=0.0008, latency=0.002),
    _svc("user-timeline-service"),
    _svc("home-timeline-service"),
)}
ROUTES = declared_routes(TOPOLOGY)


def _binary(container: dict[str, Any]) -> str:
    argv = list(container.get("command") or []) + list(container.get("args") or [])
    return argv[0].rsplit("/", 1)[-1] if argv else ""


def _identify(container: dict[str, Any]) -> str | None:
    repo = normalize_image(container.get("image", ""))[0]
    if repo in LOGIC_IMAGES:
        # `ComposePostService` → compose-post-service: which Thrift server the container runs
        name = re.sub(r"(?<!^)(?=[A-Z])", "-", _binary(container)).lower()
        return name if name in SERVICES and name not in ("nginx-thrift", "media-frontend") else None
    if repo in NGINX_IMAGES:
        return "nginx-thrift"
    if repo in MEDIA_FRONTEND_IMAGES:
        return "media-frontend"
    return None


class SocialNetwork(GraphHooks):
    """What the graph alone does not say: login tokens carry the clock of the user-service pod that
    signed them, and the Lua API scripts compare `timestamp + ttl` with nginx's own clock."""

    @staticmethod
    def _skew(flow: CallGraphFlow, rt: Any, c: Any) -> float:
        pod = flow.w._pod(rt.namespace, rt.name)
        return flow.cluster.nodes.clock_offset(rt.node) + (flow.cluster.chaos.time_offset(pod, c.name) if pod else 0.0)

    def op_effect(self, flow: CallGraphFlow, ns: str, svc: Service, op: str, insts: list) -> OpEffect | None:
        if svc.name != "nginx-thrift" or not op.startswith("GET /api/"):
            return None
        signers = self._signers(flow, ns)
        if not signers or not insts:
            return None
        expired = 0.0
        for rt, c in insts:
            here = self._skew(flow, rt, c)
            # a token is rejected once its signer's clock + ttl is behind nginx's clock
            expired += sum(1.0 for s in signers if s + TOKEN_TTL < here) / len(signers)
        share = expired / len(insts)
        return OpEffect(fail=share, error="401 Unauthorized: login token expired") if share else None

    @staticmethod
    def _signers(flow: CallGraphFlow, ns: str) -> list[float]:
        out = []
        for rt, c in flow.cluster.kubelet.running():
            inst = c.instance
            if rt.namespace == ns and isinstance(inst, dict) and inst.get("kind") == "graph" \
                    and inst.get("svc") == "user-service":
                out.append(SocialNetwork._skew(flow, rt, c))
        return out


SOCIAL = graph_app(AppGraph("social-network", SERVICES, ROUTES, _identify, span_metrics=True, trace_host="jaeger",
                            hooks=SocialNetwork()))

__all__ = ["ROUTES", "SERVICES", "SOCIAL", "DsbCpp", "OpenRestyThrift"]
