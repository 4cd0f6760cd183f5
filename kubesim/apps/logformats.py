"""How each runtime the applications are written in logs, fails to start, and words its errors:
the Go services' logrus JSON, .NET's console logger, pino JSON from Node, logback/Spring Boot,
Python logging, the C++ services' Boost log, Envoy's access log, Rust's tracing, PHP and Ruby.
Lines match what those programs print, so an agent reading logs sees what it would see on a real
cluster."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kubesim.apps.model import Exited, zerolog

if TYPE_CHECKING:
    from kubesim.apps.graph import Address, Peer, Service


def iso(t: float, ms: bool = True) -> str:
    d = datetime.fromtimestamp(t, UTC)
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond // 1000:03d}Z" if ms else d.strftime("%Y-%m-%dT%H:%M:%SZ")


class LogFormat:
    """Defaults shared by every runtime; subclasses override the wording."""

    exit_code = 1

    def __init__(self, service: str, pod: str) -> None:
        self.service, self.pod = service, pod

    def line(self, t: float, level: str, msg: str, **fields: Any) -> str:
        return f"{iso(t)} {level.upper()} {msg}"

    # -- start-up ---------------------------------------------------------------------------
    def started(self, t: float, svc: Service) -> list[str]:
        return [self.line(t, "info", f"{svc.name} service started on port {svc.ports[0] if svc.ports else '-'}")]

    def exit_missing_env(self, t: float, var: str) -> Exited:
        return Exited(self.exit_code, [self.line(t, "fatal", f"environment variable {var} not set")], after=0.3)

    def exit_missing_config(self, t: float, path: str, key: str) -> Exited:
        return Exited(self.exit_code, [self.line(t, "fatal", f"missing key {key} in {path}")], after=0.3)

    def exit_bad_address(self, t: float, peer: Peer, raw: str) -> Exited:
        return Exited(self.exit_code, [self.line(t, "fatal", f"invalid address for {peer.name}: {raw!r}")], after=0.3)

    def exit_dial_failed(self, t: float, peer: Peer, addr: Address, err: str, after: float) -> Exited:
        return Exited(self.exit_code, [self.line(t + after, "fatal", f"failed to connect to {peer.name} at "
                                                 f"{addr.host}:{addr.port}: {err}")], after=after)

    # -- at run time --------------------------------------------------------------------------
    def call_error(self, t: float, op: str, peer: Peer, callee_op: str, err: str) -> str:
        return self.line(t, "error", f"{op}: {callee_op} failed: {err}")

    def crash(self, t: float, op: str, peer: Peer, err: str) -> tuple[list[str], list[str], int]:
        return [self.line(t, "fatal", f"{op}: {err}")], [], self.exit_code

    def accept_error(self, t: float, port: int) -> str:
        return self.line(t, "error", f"accept tcp [::]:{port}: accept4: too many open files")

    def thread_exhausted(self, t: float) -> tuple[list[str], int]:
        return [self.line(t, "fatal", "unable to create new native thread: Resource temporarily unavailable")], 134

    def client_error(self, protocol: str, err: str, host: str, port: int, callee_op: str) -> str:
        """A failed call as this runtime's client library reports it."""
        if protocol == "grpc":
            return f'rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: {err}"'
        if protocol == "http":
            return f'Post "http://{host}:{port}{callee_op.split(" ", 1)[-1]}": {err}'
        return err

    def pool_exhausted(self, peer: Peer, timeout: float) -> str:
        """A call that waited its whole deadline for a free connection of the client's pool."""
        return f"connection pool to {peer.name} exhausted ({peer.pool} connections busy)"

    def watch_error(self, t: float, name: str, host: str, port: int, err: str) -> str:
        """A registry watch that failed: the Consul resolver of gRPC (mbobakov/grpc-consul-resolver)
        through grpclog's default logger, whatever the program's own log format."""
        when = datetime.fromtimestamp(t, UTC).strftime("%Y/%m/%d %H:%M:%S")
        return (f"ERROR: {when} [Consul resolver] Couldn't fetch endpoints. target={{service='{name}' healthy='true' "
                f"tag=''}}; error={{Get \"http://{host}:{port}/v1/health/service/{name}?passing=1\": {err}}}")

    def deadline(self, protocol: str) -> str:
        return "rpc error: code = DeadlineExceeded desc = context deadline exceeded" if protocol == "grpc" \
            else "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"


class GoLogrus(LogFormat):
    """The OpenTelemetry demo's Go services (checkout, product-catalog): logrus with the JSON formatter."""

    exit_code = 1

    def line(self, t: float, level: str, msg: str, **fields: Any) -> str:
        rec = {"level": {"warn": "warning"}.get(level, level), "msg": msg, "time": iso(t, ms=False), **fields}
        return json.dumps(rec, separators=(",", ":"))

    def started(self, t: float, svc: Service) -> list[str]:
        return [self.line(t, "info", f"{svc.name} gRPC server started on port: {svc.ports[0]}")]

    def exit_missing_env(self, t: float, var: str) -> Exited:
        # the demo's mustMapEnv
        return Exited(2, [], after=0.1, stderr=[f'panic: environment variable "{var}" not set', "",
                                                "goroutine 1 [running]:", "main.mustMapEnv(...)",
                                                f"\t/usr/src/app/main.go:{190 + len(var)}", "main.main()"])

    def exit_dial_failed(self, t: float, peer: Peer, addr: Address, err: str, after: float) -> Exited:
        what = "failed to connect to database" if peer.protocol in ("postgres", "mysql") else f"failed to connect to {peer.name}"
        return Exited(1, [self.line(t + after, "fatal", f"{what}: {err}")], after=after)

    def crash(self, t: float, op: str, peer: Peer, err: str) -> tuple[list[str], list[str], int]:
        return [self.line(t, "panic", err)], [f"panic: {err}", "", "goroutine 82 [running]:",
                                            f"main.(*{self.service.replace('-', '')}).{op.rsplit('/', 1)[-1]}(...)"], 2

    def accept_error(self, t: float, port: int) -> str:
        stamp = datetime.fromtimestamp(t, UTC).strftime("%Y/%m/%d %H:%M:%S")
        return (f"{stamp} grpc: Server.Serve failed to accept: accept tcp [::]:{port}: accept4: too many open files; "
                "retrying in 1s")

    def thread_exhausted(self, t: float) -> tuple[list[str], int]:
        return ["runtime: failed to create new OS thread (have 11 already; errno=11)",
                "runtime: may need to increase max user processes (ulimit -u)", "fatal error: newosproc"], 2


class GoZerolog(LogFormat):
    """DeathStarBench hotel-reservation's Go services: zerolog's console writer
    (`2026-01-05T09:00:00Z ERR services/search/server.go:171 > msg`), the handlers' log.Panic on a
    store error, and the accept loops of net/http (frontend) and grpc-go (the others)."""

    exit_code = 2
    LEVELS = {"debug": "DBG", "info": "INF", "warn": "WRN", "error": "ERR", "fatal": "FTL", "panic": "PNC"}
    # a store's error in the handler: (line of services/<svc>/server.go, the message log.Panic gets)
    STORE_PANICS = {"memcached": (133, "Tried to get hotelId [{id}], but got memmcached error = {err}"),
                    "mongo": (118, "Tried to find hotelId [{id}], but got error: {err}")}

    def line(self, t: float, level: str, msg: str, **fields: Any) -> str:
        return zerolog(t, self.LEVELS.get(level, "INF"), fields.get("where", f"cmd/{self.service}/main.go"), msg)

    def call_error(self, t: float, op: str, peer: Peer, callee_op: str, err: str) -> str:
        if self.service == "frontend":
            return self.line(t, "error", f"SearchHandler {op.split()[-1]}: {err}", where="services/frontend/server.go:233")
        method = callee_op.rsplit("/", 1)[-1]
        tried = " after retries" if peer.retry is not None else ""
        return self.line(t, "error", f"{peer.name} {method} failed{tried}: {err}", where=f"services/{self.service}/server.go:171")

    def crash(self, t: float, op: str, peer: Peer, err: str) -> tuple[list[str], list[str], int]:
        at, text = self.STORE_PANICS.get(peer.protocol, (118, "Tried to find hotelId [{id}], but got error: {err}"))
        msg = text.format(id=1 + int(t) % 80, err=err)
        return ([self.line(t, "panic", msg, where=f"services/{self.service}/server.go:{at}")],
                [f"panic: {msg}", "", "goroutine 1843 [running]:",
                 "github.com/rs/zerolog.(*Logger).Panic.func1({0xc0003c2000, 0x9a})",
                 "\t/go/pkg/mod/github.com/rs/zerolog@v1.26.1/log.go:359 +0x2d"], 2)

    def accept_error(self, t: float, port: int) -> str:
        stamp = datetime.fromtimestamp(t, UTC).strftime("%Y/%m/%d %H:%M:%S")
        if self.service == "frontend":
            return f"{stamp} http: Accept error: accept tcp [::]:{port}: accept4: too many open files; retrying in 1s"
        return (f"WARNING: {stamp} [core] [Server #1] grpc: Server.Serve failed to accept: accept tcp [::]:{port}: "
                "accept4: too many open files; retrying in 1s")

    def thread_exhausted(self, t: float) -> tuple[list[str], int]:
        return [f"runtime: failed to create new OS thread (have {9 + int(t) % 7} already; errno=11)",
                "runtime: may need to increase max user processes (ulimit -u)", "fatal error: newosproc", "",
                "runtime stack:", "runtime.throw({0x9a8f3e?, 0x0?})", "\t/usr/local/go/src/runtime/panic.go:1047 +0x5d"], 2


class DotNet(LogFormat):
    """ASP.NET Core console logger (cart, accounting)."""

    exit_code = 134

    def line(self, t: float, level: str, msg: str, **fields: Any) -> str:
        tag = {"info": "info", "warn": "warn", "error": "fail", "fatal": "crit"}.get(level, "info")
        category = fields.get("category", f"{self.service}.Program")
        return f"{tag}: {category}[0]\n      {msg}"

    def started(self, t: float, svc: Service) -> list[str]:
        return [self.line(t, "info", f"Now listening on: http://[::]:{svc.ports[0]}", category="Microsoft.Hosting.Lifetime")
                if svc.ports else self.line(t, "info", "Application started.", category="Microsoft.Hosting.Lifetime")]

    def exit_missing_env(self, t: float, var: str) -> Exited:
        return Exited(134, [], after=0.5, stderr=[f"Unhandled exception. System.ArgumentNullException: {var} environment "
                                                  "variable is required. (Parameter 'connectionString')"])

    def exit_dial_failed(self, t: float, peer: Peer, addr: Address, err: str, after: float) -> Exited:
        if peer.protocol == "redis":
            msg = (f"Unhandled exception. StackExchange.Redis.RedisConnectionException: It was not possible to connect to "
                   f"the redis server(s). UnableToConnect on {addr.host}:{addr.port}/Interactive, Initializing/NotStarted, "
                   f"last: NONE, origin: BeginConnectAsync, outstanding: 0, last-read: 0s ago, last-write: 0s ago, "
                   f"keep-alive: 60s, state: Connecting, mgr: 10 of 10 available, last-heartbeat: never, global: 0s ago, "
                   f"v: 2.6.122.38350")
        elif peer.protocol == "postgres":
            msg = f"Unhandled exception. Npgsql.NpgsqlException (0x80004005): Failed to connect to {addr.host}:{addr.port}"
            if "password" in err:
                msg = f"Unhandled exception. Npgsql.PostgresException (0x80004005): 28P01: {err}"
        else:
            msg = f"Unhandled exception. System.Net.Sockets.SocketException (111): Connection refused ({addr.host}:{addr.port})"
        return Exited(134, [], after=after, stderr=[msg])

    def call_error(self, t: float, op: str, peer: Peer, callee_op: str, err: str) -> str:
        if peer.protocol == "redis":
            return self.line(t, "error", f"Can't access cart storage. {err}", category="cart.cartstore.ValkeyCartStore")
        return self.line(t, "error", f"{op} failed: {err}", category=f"{self.service}.services")

    def client_error(self, protocol: str, err: str, host: str, port: int, callee_op: str) -> str:
        if protocol == "redis":
            return (f"StackExchange.Redis.RedisConnectionException: No connection is active/available to service this "
                    f"operation: {callee_op}; UnableToConnect on {host}:{port}/Interactive")
        return 'Grpc.Core.RpcException: Status(StatusCode="Unavailable", Detail="Error connecting to subchannel.")'


class NodePino(LogFormat):
    """pino JSON (payment) — level numbers: 30 info, 40 warn, 50 error, 60 fatal."""

    def line(self, t: float, level: str, msg: str, **fields: Any) -> str:
        lv = {"debug": 20, "info": 30, "warn": 40, "error": 50, "fatal": 60}.get(level, 30)
        rec = {"level": lv, "time": int(t * 1000), "pid": 1, "hostname": self.pod, "service.name": self.service,
               **fields, "msg": msg}
        return json.dumps(rec, separators=(",", ":"))

    def started(self, t: float, svc: Service) -> list[str]:
        return [self.line(t, "info", f"{svc.name.capitalize()} gRPC server started on port {svc.ports[0]}")]

    def client_error(self, protocol: str, err: str, host: str, port: int, callee_op: str) -> str:
        return "14 UNAVAILABLE: No connection established" if protocol == "grpc" else f"connect ECONNREFUSED {host}:{port}"


class NextJs(NodePino):
    """The frontend (Next.js server): plain console lines from its API routes."""

    def line(self, t: float, level: str, msg: str, **fields: Any) -> str:
        return msg if level in ("info", "debug") else f"{'Error' if level != 'warn' else 'Warning'}: {msg}"

    def started(self, t: float, svc: Service) -> list[str]:
        return ["  ▲ Next.js 14.2.5", f"  - Local:        http://{self.pod}:{svc.ports[0]}", "",
                " ✓ Starting...", " ✓ Ready in 312ms"]

    def call_error(self, t: float, op: str, peer: Peer, callee_op: str, err: str) -> str:
        return f"Error: {err}\n    at Object.callErrorFromStatus (/app/node_modules/@grpc/grpc-js/build/src/call.js:31:19)"


class JavaLog4j(LogFormat):
    """The ad service (Java, log4j2 pattern `%d{HH:mm:ss.SSS} - %logger{36} - %msg`) and fraud-detection (Kotlin)."""

    exit_code = 1

    def line(self, t: float, level: str, msg: str, **fields: Any) -> str:
        d = datetime.fromtimestamp(t, UTC)
        return f"{d.strftime('%Y-%m-%d %H:%M:%S')} - {fields.get('logger', 'oteldemo.' + self.service)} - {msg}"

    def started(self, t: float, svc: Service) -> list[str]:
        if not svc.ports:
            return [self.line(t, "info", "Consumer Started", logger="frauddetection")]
        return [self.line(t, "info", f"{svc.name.capitalize()} service started, listening on {svc.ports[0]}")]

    def client_error(self, protocol: str, err: str, host: str, port: int, callee_op: str) -> str:
        if protocol == "kafka":
            return f"org.apache.kafka.common.errors.TimeoutException: {err}"
        return "io.grpc.StatusRuntimeException: UNAVAILABLE: io exception"

    def thread_exhausted(self, t: float) -> tuple[list[str], int]:
        return ['Exception in thread "main" java.lang.OutOfMemoryError: unable to create native thread: possibly out of '
                "memory or process/resource limits reached"], 1


class SpringBoot(JavaLog4j):
    """train-ticket's Spring Boot services (logback default pattern)."""

    def line(self, t: float, level: str, msg: str, **fields: Any) -> str:
        d = datetime.fromtimestamp(t, UTC)
        lv = {"info": "INFO", "warn": "WARN", "error": "ERROR", "fatal": "ERROR"}.get(level, "INFO")
        logger = fields.get("logger", "o.a.c.c.C.[.[.[/].[dispatcherServlet]")
        return (f"{d.strftime('%Y-%m-%d %H:%M:%S')}.{d.microsecond // 1000:03d} {lv:>5} 1 --- "
                f"[{fields.get('thread', 'nio-8080-exec-1'):>15}] {logger:<40} : {msg}")

    def started(self, t: float, svc: Service) -> list[str]:
        cls = "".join(w.capitalize() for w in svc.name.removeprefix("ts-").split("-")) + "Application"
        return [self.line(t, "info", f"Tomcat started on port(s): {svc.ports[0]} (http) with context path ''",
                          logger="o.s.b.w.embedded.tomcat.TomcatWebServer", thread="main"),
                self.line(t + 0.01, "info", f"Started {cls} in 38.7 seconds (JVM running for 41.2)",
                          logger=f"{svc.name.replace('-', '.')}.{cls}", thread="main")]

    def exit_missing_env(self, t: float, var: str) -> Exited:
        return self._failed_to_start(t, f"Could not resolve placeholder '{var}' in value \"${{{var}}}\"", 0.5)

    def exit_dial_failed(self, t: float, peer: Peer, addr: Address, err: str, after: float) -> Exited:
        if peer.protocol == "mysql":
            why = ("com.mysql.cj.jdbc.exceptions.CommunicationsException: Communications link failure" if "refused" in err
                   or "timeout" in err or "no such host" in err else f"java.sql.SQLException: {err}")
        elif peer.protocol == "mongo":
            why = f"com.mongodb.MongoTimeoutException: Timed out after 30000 ms while waiting to connect. {err}"
        else:
            why = f"java.net.ConnectException: {err}"
        return self._failed_to_start(t + after, why, after)

    def _failed_to_start(self, t: float, why: str, after: float) -> Exited:
        lines = [self.line(t, "error", "", logger="o.s.b.d.LoggingFailureAnalysisReporter", thread="main"), "",
                 "***************************", "APPLICATION FAILED TO START", "***************************", "",
                 "Description:", "", why, ""]
        return Exited(1, lines, after=after)

    def pool_exhausted(self, peer: Peer, timeout: float) -> str:
        if peer.protocol in ("mysql", "postgres"):
            return ("org.springframework.jdbc.CannotGetJdbcConnectionException: Failed to obtain JDBC Connection; nested "
                    f"exception is java.sql.SQLTransientConnectionException: HikariPool-1 - Connection is not available, "
                    f"request timed out after {int(timeout * 1000)}ms.")
        if peer.protocol == "mongo":
            return ("com.mongodb.MongoTimeoutException: Timed out after 30000 ms while waiting for a connection to "
                    f"server {peer.name}:27017.")
        return super().pool_exhausted(peer, timeout)

    def call_error(self, t: float, op: str, peer: Peer, callee_op: str, err: str) -> str:
        return self.line(t, "error", f"Servlet.service() for servlet [dispatcherServlet] in context with path [] threw "
                                     f"exception [Request processing failed; nested exception is {err}] with root cause")

    def client_error(self, protocol: str, err: str, host: str, port: int, callee_op: str) -> str:
        if protocol == "mysql":
            return "org.springframework.jdbc.CannotGetJdbcConnectionException: Failed to obtain JDBC Connection; " \
                   "nested exception is com.mysql.cj.jdbc.exceptions.CommunicationsException: Communications link failure"
        if protocol == "mongo":
            return f"org.springframework.data.mongodb.UncategorizedMongoDbException: {err}"
        path = callee_op.split(" ", 1)[-1]
        if "refused" in err:
            detail = "Connection refused (Connection refused)"
        elif "timeout" in err or "timed out" in err:
            detail = "Read timed out"
        elif "no such host" in err:
            detail = host
            return (f'org.springframework.web.client.ResourceAccessException: I/O error on POST request for '
                    f'"http://{host}:{port}{path}": {host}; nested exception is java.net.UnknownHostException: {detail}')
        else:
            detail = err
        return (f'org.springframework.web.client.ResourceAccessException: I/O error on POST request for '
                f'"http://{host}:{port}{path}": {detail}; nested exception is java.net.ConnectException: {detail}')


class PythonLogging(LogFormat):
    """recommendation, product-reviews, llm (Python logging with the OTel handler's format)."""

    def line(self, t: float, level: str, msg: str, **fields: Any) -> str:
        d = datetime.fromtimestamp(t, UTC)
        return (f"{d.strftime('%Y-%m-%d %H:%M:%S')},{d.microsecond // 1000:03d} {level.upper()} "
                f"[{self.service.replace('-', '_')}_server] [{self.service}_server.py:70] - {msg}")

    def exit_missing_env(self, t: float, var: str) -> Exited:
        return Exited(1, [], after=0.4, stderr=["Traceback (most recent call last):",
                                                f'  File "/app/{self.service.replace("-", "_")}_server.py", line 147, in <module>',
                                                f"    port = os.environ.get('{var}')", f"KeyError: '{var}'"])

    def client_error(self, protocol: str, err: str, host: str, port: int, callee_op: str) -> str:
        if protocol == "postgres":
            return f'psycopg2.OperationalError: connection to server at "{host}" , port {port} failed: {err}'
        return ('<_InactiveRpcError of RPC that terminated with:\n\tstatus = StatusCode.UNAVAILABLE\n\tdetails = '
                f'"failed to connect to all addresses; last error: UNKNOWN: ipv4:{host}:{port}: {err}"\n>')


class CppBoost(LogFormat):
    """currency (C++, OTel logger) and the social-network services (Boost.Log:
    `[2026-Dec-03 07:00:00.000000] <error>: (ComposePostHandler.h:123:ComposePost) …`)."""

    exit_code = 1

    def line(self, t: float, level: str, msg: str, **fields: Any) -> str:
        d = datetime.fromtimestamp(t, UTC)
        where = fields.get("where", f"{self.service}.cpp:80:main")
        return f"[{d.strftime('%Y-%b-%d %H:%M:%S')}.{d.microsecond:06d}] <{level}>: ({where}) {msg}"

    def started(self, t: float, svc: Service) -> list[str]:
        cls = "".join(w.capitalize() for w in svc.name.split("-")).replace("Service", "Service")
        return [self.line(t, "info", f"Starting the {svc.name} server...", where=f"{cls}.cpp:62:main")]

    def exit_missing_config(self, t: float, path: str, key: str) -> Exited:
        return Exited(1, [self.line(t, "error", f"Cannot open the config file {path}" if key == "" else
                                    f"[json.exception.type_error.302] type must be string, but is null ({key})")], after=0.2)

    def crash(self, t: float, op: str, peer: Peer, err: str) -> tuple[list[str], list[str], int]:
        return ([self.line(t, "error", err, where=f"{op}Handler.h:120:{op}")],
                ["terminate called after throwing an instance of 'my_social_network::ServiceException'"], 134)

    def pool_exhausted(self, peer: Peer, timeout: float) -> str:
        return f"Failed to pop a client from the {peer.name} client pool: timeout after {int(timeout * 1000)} ms"

    def client_error(self, protocol: str, err: str, host: str, port: int, callee_op: str) -> str:
        if protocol == "thrift":
            return f"Failed to connect {host}-client" if "refused" in err or "no such host" in err else "Thrift TTransportException: timed out"
        if protocol == "mongo":
            return f"Failed to pop a client from MongoDB pool: {err}"
        if protocol == "memcached":
            return "Failed to get from Memcached: SERVER HAS FAILED AND IS DISABLED UNTIL TIMED RETRY"
        if protocol == "redis":
            return f"Failed to connect to Redis: {err}"
        return err


class Envoy(LogFormat):
    """frontend-proxy (Envoy): its start-up lines and the access log for failed upstream requests."""

    def line(self, t: float, level: str, msg: str, **fields: Any) -> str:
        d = datetime.fromtimestamp(t, UTC)
        return f"[{d.strftime('%Y-%m-%d %H:%M:%S')}.{d.microsecond // 1000:03d}][1][{level}][main] {msg}"

    def started(self, t: float, svc: Service) -> list[str]:
        return [self.line(t, "info", "[source/server/server.cc:932] starting main dispatch loop")]

    def call_error(self, t: float, op: str, peer: Peer, callee_op: str, err: str) -> str:
        d = datetime.fromtimestamp(t, UTC)
        flag = "UF" if "refused" in err or "no such host" in err or "no healthy" in err else "UT" if "timeout" in err else "UC"
        method, _, path = op.partition(" ")
        return (f'[{d.strftime("%Y-%m-%dT%H:%M:%S.")}{d.microsecond // 1000:03d}Z] "{method} {path or "/"} HTTP/1.1" 503 '
                f'{flag} 0 91 2 - "-" "python-requests/2.31.0" "-" "{peer.name}:8080" "-"')

    def accept_error(self, t: float, port: int) -> str:
        return self.line(t, "critical", "[source/common/network/tcp_listener_impl.cc:115] listener accept failure: "
                                        "Too many open files")


class RustTracing(LogFormat):
    """shipping (Rust, tracing-subscriber's default format)."""

    def line(self, t: float, level: str, msg: str, **fields: Any) -> str:
        return f"{iso(t)}  {level.upper():>5} shipping: {msg}"


class PhpLog(LogFormat):
    """quote (PHP, Slim with monolog)."""

    def line(self, t: float, level: str, msg: str, **fields: Any) -> str:
        return f"[{datetime.fromtimestamp(t, UTC).strftime('%Y-%m-%dT%H:%M:%S.%f+00:00')}] quote.{level.upper()}: {msg} [] []"


class RubyLog(LogFormat):
    """email (Ruby, Sinatra behind Puma)."""

    def line(self, t: float, level: str, msg: str, **fields: Any) -> str:
        return f"{level[0].upper()}, [{iso(t)} #1] {level.upper():>5} -- : {msg}"

    def started(self, t: float, svc: Service) -> list[str]:
        return ["Puma starting in single mode...", "* Puma version: 6.4.2 (ruby 3.3.4-p94) (\"The Eagle of Durango\")",
                f"* Listening on http://0.0.0.0:{svc.ports[0]}", "Use Ctrl-C to stop"]


class Nginx(LogFormat):
    """OpenResty / nginx front ends (social-network nginx-thrift, media-frontend, image-provider, ts-ui-dashboard)."""

    worker = "1#1"  # the error log's pid#tid

    def line(self, t: float, level: str, msg: str, **fields: Any) -> str:
        return f"{datetime.fromtimestamp(t, UTC).strftime('%Y/%m/%d %H:%M:%S')} [{level}] {self.worker}: {msg}"

    def started(self, t: float, svc: Service) -> list[str]:
        return []

    def call_error(self, t: float, op: str, peer: Peer, callee_op: str, err: str) -> str:
        method, _, path = op.partition(" ")
        return self.line(t, "error", f'*{int(t) % 9000 + 100} [lua] {path.strip("/").split("/")[-1] or "index"}.lua: '
                                     f'{callee_op} failure: {err}, client: 10.244.0.1, server: localhost, request: '
                                     f'"{method} {path} HTTP/1.1", host: "{peer.name}"')

    def accept_error(self, t: float, port: int) -> str:
        return self.line(t, "crit", "accept4() failed (24: Too many open files)")


LOGGERS: dict[str, type[LogFormat]] = {
    "go": GoLogrus, "dotnet": DotNet, "node": NodePino, "nextjs": NextJs, "java": JavaLog4j, "spring": SpringBoot,
    "python": PythonLogging, "cpp": CppBoost, "envoy": Envoy, "rust": RustTracing, "php": PhpLog, "ruby": RubyLog,
    "nginx": Nginx, "generic": LogFormat, "go-zerolog": GoZerolog,
}
