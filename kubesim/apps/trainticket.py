"""train-ticket (FudanSELab 0.x with Jaeger, as SREGym deploys it) as a call graph: the 23-service
subset behind the ts-ui-dashboard nginx, each service at the Kubernetes name and port its code
bakes in (`http://ts-order-service:12031/...` in the 0.x RestTemplate calls, `ts-order-mongo` in its
application.yml), the three services SREGym rebuilt from the 1.0 code (contacts on MySQL through
JPA, cancel, both registering in nacos; voucher, a Tornado process on pymysql), the SREGym Locust
task mix, and the flagd switches those rebuilt services read (tt-feat-17, tt-feat-22).
Facts: ../shared/reference/applications.md §4."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from apps.topology import load_topology
from kubesim.apps.callgraph import LOG_EVERY, CallGraphFlow, GraphHooks, OpEffect
from kubesim.apps.flagd import flag_value
from kubesim.apps.graph import (
    Address,
    AppGraph,
    Call,
    Peer,
    Service,
    declared_routes,
    declared_service,
    graph_app,
)
from kubesim.apps.logformats import LOGGERS, LogFormat, Nginx, SpringBoot
from kubesim.apps.model import Exited, normalize_image

MiB = 2**20
APP = "train-ticket"


# -- how the runtimes that are not Spring log ---------------------------------------------------
class NginxProxy(Nginx):
    """ts-ui-dashboard: OpenResty with plain `proxy_pass http://ts-…:port;` locations; its error
    log and access log are the image's stderr and stdout."""

    worker = "7#7"

    def call_error(self, t: float, op: str, peer: Peer, callee_op: str, err: str) -> str:
        method, _, path = op.partition(" ")
        path = path.replace("[", "").replace("]", "")
        if err.startswith(("connect() failed", "upstream timed out")):
            return self.line(t, "error", f"*{int(t) % 90000 + 100} {err}, client: 10.244.0.1, server: , request: "
                                         f'"{method} {path} HTTP/1.1", upstream: "http://{peer.default}{path}", '
                                         'host: "ts-ui-dashboard:8080"')
        # the upstream answered with an error: only the access log shows it
        stamp = datetime.fromtimestamp(t, UTC).strftime("%d/%b/%Y:%H:%M:%S +0000")
        return f'10.244.0.1 - - [{stamp}] "{method} {path} HTTP/1.1" 500 73 "-" "python-requests/2.28.2"'

    def client_error(self, protocol: str, err: str, host: str, port: int, callee_op: str) -> str:
        if "refused" in err:
            return "connect() failed (111: Connection refused) while connecting to upstream"
        # nginx resolved the upstream when it started: a vanished Service leaves it dialling a dead address
        return "upstream timed out (110: Connection timed out) while connecting to upstream"

    def deadline(self, protocol: str) -> str:
        return "upstream timed out (110: Connection timed out) while reading response header from upstream"


class Tornado(LogFormat):
    """ts-voucher-service: a Tornado app without logging configured, so Python's last-resort
    handler prints bare WARNING+ messages (uncaught handler exceptions, 5xx access lines) to stderr."""

    def line(self, t: float, level: str, msg: str, **fields: Any) -> str:
        return msg

    def started(self, t: float, svc: Service) -> list[str]:
        return []  # its only print (the MySQL settings) sits in the block-buffered stdout

    @staticmethod
    def mysql_error(err: str, host: str) -> str:
        if err.startswith("pymysql."):
            return err
        if "Access denied" in err or "Unknown database" in err:
            code = 1045 if "Access denied" in err else 1049
            msg = err.split(": ", 1)[-1] if err.startswith(("ERROR", "java")) else err
            return f'pymysql.err.OperationalError: ({code}, "{msg}")'
        if "no such host" in err:
            why = "[Errno -2] Name or service not known"
        elif "refused" in err:
            why = "[Errno 111] Connection refused"
        else:
            why = "timed out"
        return f"pymysql.err.OperationalError: (2003, \"Can't connect to MySQL server on '{host}' ({why})\")"

    def exit_dial_failed(self, t: float, peer: Peer, addr: Address, err: str, after: float) -> Exited:
        config = (f"{{'host': '{addr.host}', 'port': {addr.port}, 'user': '{addr.user}', 'password': "
                  f"'{addr.password}', 'db': '{addr.database}'}}")
        return Exited(1, [config], after=after, stderr=[
            "Traceback (most recent call last):", '  File "server.py", line 171, in <module>', "    initDatabase()",
            '  File "server.py", line 117, in initDatabase', "    connect = pymysql.connect(**mysql_config)",
            self.mysql_error(err, addr.host)])

    def call_error(self, t: float, op: str, peer: Peer, callee_op: str, err: str) -> str:
        method, _, path = op.partition(" ")
        if peer.protocol == "mysql":
            where = ['  File "server.py", line 93, in fetchVoucherByOrderId',
                     "    conn = pymysql.connect(**mysql_config)"]
            final = self.mysql_error(err, peer.name)
        else:
            where = ['  File "server.py", line 70, in queryOrderByIdAndType', "    response = urllib.request.urlopen(req)"]
            final = err if err.startswith(("urllib", "http.client")) else "urllib.error.HTTPError: HTTP Error 500: "
        return "\n".join([f"Uncaught exception {method} {path} (10.244.0.1)",
                          f"HTTPServerRequest(protocol='http', host='ts-voucher-service:16101', method='{method}', "
                          f"uri='{path}', version='HTTP/1.1', remote_ip='10.244.0.1')",
                          "Traceback (most recent call last):",
                          '  File "/usr/local/lib/python3.8/site-packages/tornado/web.py", line 1704, in _execute',
                          "    result = method(*self.path_args, **self.path_kwargs)",
                          '  File "server.py", line 33, in post', "    queryVoucher = self.fetchVoucherByOrderId(orderId)",
                          *where, final, f"500 {method} {path} (10.244.0.1) {3.0 + (t % 1):.2f}ms"])

    def client_error(self, protocol: str, err: str, host: str, port: int, callee_op: str) -> str:
        if protocol == "mysql":
            return self.mysql_error(err, host)
        if "refused" in err:
            return "urllib.error.URLError: <urlopen error [Errno 111] Connection refused>"
        if "no such host" in err:
            return "urllib.error.URLError: <urlopen error [Errno -2] Name or service not known>"
        return f"urllib.error.URLError: <urlopen error {err}>"

    def thread_exhausted(self, t: float) -> tuple[list[str], int]:
        return ["Traceback (most recent call last):", "RuntimeError: can't start new thread"], 1


class TrainTicketSpring(SpringBoot):
    """The Spring services' own words for what the 0.x code does: RestTemplate calls by URL, Spring
    Data MongoDB (a down mongod blocks each query 30 s in server selection) and, for the 1.0
    services, JPA on MySQL. Tomcat's lines come when the boot finishes (see `TrainTicketFlags.boot`)."""

    def started(self, t: float, svc: Service) -> list[str]:
        cls = "".join(w.capitalize() for w in svc.name.removeprefix("ts-").split("-")) + "Application"
        return [self.line(t, "info", f"Starting {cls} on {self.pod} with PID 1 (/app.jar started by root in /)",
                          logger=f"{svc.name.replace('-', '.')}.{cls}", thread="main")]

    def booted(self, t: float, svc: Service) -> list[str]:
        return super().started(t, svc)

    def line(self, t: float, level: str, msg: str, **fields: Any) -> str:
        fields.setdefault("thread", f"nio-{PORTS.get(self.service, 8080)}-exec-{int(t) % 10 + 1}")
        return super().line(t, level, msg, **fields)

    def call_error(self, t: float, op: str, peer: Peer, callee_op: str, err: str) -> str:
        if peer.protocol == "http" and not err.startswith(("org.springframework.web.client", "java.")):
            # the callee answered 500: RestTemplate's default error handler throws with its JSON body
            path = re.sub(r"\[(\w+)\]", r"\1", callee_op.split(" ", 1)[-1])
            message = err.replace('"', "'")[:180]
            err = ('org.springframework.web.client.HttpServerErrorException$InternalServerError: 500 : '
                   f'[{{"timestamp":"{datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.000+00:00")}",'
                   f'"status":500,"error":"Internal Server Error","message":"{message}","path":"{path}"}}]')
        return super().call_error(t, op, peer, callee_op, err)

    def client_error(self, protocol: str, err: str, host: str, port: int, callee_op: str) -> str:
        if protocol == "mongo" and ("refused" in err or "no such host" in err or "timeout" in err):
            cause = ("java.net.UnknownHostException: " + host if "no such host" in err
                     else "java.net.ConnectException: Connection refused (Connection refused)")
            return (f"org.springframework.dao.DataAccessResourceFailureException: Timed out after 30000 ms while "
                    f"waiting for a server that matches ReadPreferenceServerSelector{{readPreference=primary}}. Client "
                    f"view of cluster state is {{type=UNKNOWN, servers=[{{address={host}:{port}, type=UNKNOWN, "
                    f"state=CONNECTING, exception={{com.mongodb.MongoSocketOpenException: Exception opening socket}}, "
                    f"caused by {{{cause}}}}}]")
        if protocol == "http":
            method = callee_op.split(" ", 1)[0] if " " in callee_op else "POST"
            path = re.sub(r"\[(\w+)\]", r"\1", callee_op.split(" ", 1)[-1])
            url = f"http://{host}:{port}{path}"
            if "refused" in err:
                return (f'org.springframework.web.client.ResourceAccessException: I/O error on {method} request for '
                        f'"{url}": Connection refused (Connection refused); nested exception is '
                        "java.net.ConnectException: Connection refused (Connection refused)")
            if "no such host" in err:
                return (f'org.springframework.web.client.ResourceAccessException: I/O error on {method} request for '
                        f'"{url}": {host}; nested exception is java.net.UnknownHostException: {host}')
            if "timed out" in err or "timeout" in err:
                return (f'org.springframework.web.client.ResourceAccessException: I/O error on {method} request for '
                        f'"{url}": Read timed out; nested exception is java.net.SocketTimeoutException: Read timed out')
        return super().client_error(protocol, err, host, port, callee_op)

    def deadline(self, protocol: str) -> str:
        return "java.net.SocketTimeoutException: Read timed out"


LOGGERS.setdefault("nginx-proxy", NginxProxy)
LOGGERS.setdefault("tornado", Tornado)
LOGGERS.setdefault("spring-tt", TrainTicketSpring)


# -- the services -----------------------------------------------------------------------------------
# Their calls and peers (apps/train-ticket/topology.yaml): the 0.x code dials its callees by hard-coded
# `http://<service>:<port>` URLs and its MongoDB at application.yml's `spring.data.mongodb.host` (no
# placeholder, database `ts`: Spring Data creates the repositories' indexes and InitData inserts its rows
# while booting); the 1.0 services read theirs from placeholders with defaults.
TOPOLOGY = load_topology(APP)
# The connections a Spring service's client keeps per pod: the Mongo driver's maxPoolSize, Hikari's maximumPoolSize.
SPRING_POOLS = {"mongo": 100, "mysql": 10}
PORTS = {name: svc.ports[0] for name, svc in TOPOLOGY.services.items() if svc.ports}  # each one's server.port

# What a Spring service must reach before its boot ends (it dials them `BOOT_DIAL_S` into the boot and
# keeps trying for `BOOT_PATIENCE_S`: the Mongo driver's server selection, Hikari's connection timeout).
# The 1.0 services' nacos discovery (`spring.cloud.nacos.discovery.server-addr: ${NACOS_ADDRS:127.0.0.1:8848}`)
# registers the instance at the end of the boot, and fail-fast stops the application when it cannot.
BOOT_PEERS = ("mongo", "mysql", "nacos")
BOOT_DIAL_S, BOOT_PATIENCE_S = 25.0, 30.0
# The 1.0 services' OpenFeature flagd provider (their `flagd` peer): unreachable, every flag evaluates to
# its code default (off).


def _spring(name: str, cpu: float = 0.003, latency: float = 0.006, memory: float = 420 * MiB) -> Service:
    # RestTemplate without timeouts (0.x `new RestTemplate()`): a slow callee holds the caller until
    # nginx gives up on the request (proxy_read_timeout 60 s). Spring Boot 2 + Jaeger client ~40 s to start.
    decl = TOPOLOGY.services[name]
    pools = {p.name: {"pool": SPRING_POOLS[p.protocol]} for p in decl.peers if p.protocol in SPRING_POOLS}
    return declared_service(decl, "spring-tt", pools, cpu=cpu, latency=latency, memory=memory, memory_per_rps=200_000,
                            timeout=60.0, start_s=BOOT_DIAL_S + 15.0)


ORDER = "ts-order-service"
# the operations the hooks below act on (the rest: apps/train-ticket/topology.yaml)
VOUCHER = "POST /getVoucher"
CONTACT_CREATE = "POST /api/v1/contactservice/contacts"

SERVICES: dict[str, Service] = {s.name: s for s in (
    # ts-ui-dashboard's nginx.conf: one `location /api/v1/<svc>…` prefix per service, proxied unchanged
    declared_service(TOPOLOGY.services["ts-ui-dashboard"], "nginx-proxy", cpu=0.0002, latency=0.0005, memory=12 * MiB,
                     memory_per_rps=20_000, timeout=60.0, start_s=1.0),
    _spring("ts-auth-service"),
    _spring("ts-verification-code-service", cpu=0.004, memory=300 * MiB),
    _spring("ts-user-service"),
    _spring("ts-contacts-service"),  # 1.0 code: JPA on MySQL, `spring.datasource` from placeholders
    _spring("ts-station-service", cpu=0.002),
    _spring("ts-train-service", cpu=0.002),
    _spring("ts-route-service", cpu=0.003),
    _spring("ts-config-service", cpu=0.002),
    _spring("ts-price-service", cpu=0.002),
    _spring("ts-basic-service"),
    _spring("ts-ticketinfo-service", cpu=0.002),
    _spring("ts-seat-service", cpu=0.004),
    _spring("ts-travel-service", cpu=0.004),
    _spring(ORDER),
    _spring("ts-security-service", cpu=0.002),
    _spring("ts-assurance-service", cpu=0.002),
    _spring("ts-preserve-service"),
    _spring("ts-payment-service", cpu=0.002),
    _spring("ts-inside-payment-service"),
    _spring("ts-notification-service", cpu=0.002, memory=350 * MiB),
    # 1.0 code: its `http://ts-order-service/...` URLs go through the nacos-discovery load balancer; the
    # refund (AsyncTask, where tt-feat-01 sleeps) is never called.
    _spring("ts-cancel-service"),
    # 1.0 code (ghcr.io/sregym/ts-voucher-service): Tornado on one thread; every handler opens its own
    # pymysql connection (settings from VOUCHER_MYSQL_* with defaults); initDatabase() creates the table
    # at start. A voucher already issued is read back; a new one reads the order first. No tracer in
    # server.py, whatever JAEGER_AGENT_HOST says.
    declared_service(TOPOLOGY.services["ts-voucher-service"], "tornado", cpu=0.002, latency=0.004, memory=38 * MiB,
                     memory_per_rps=20_000, timeout=600.0, start_s=1.0, traced=False),
)}


# SREGym's TrainTicketUser (weights: request_voucher 1, create_contact 1, get_routes 2, get_stations 2): a voucher
# task refreshes the orders then asks ts-voucher-service directly (timeout 5 s); a contact task creates then deletes;
# each user logs in again every 30 minutes (5 users at ~0.9 requests/s: one login per ~8000 requests).
ROUTES_MIX = declared_routes(TOPOLOGY)
LOCUST_NAMES = {r.name for r in ROUTES_MIX}

IMAGES = {"docker.io/codewisdom/": "-with-jaeger", "ghcr.io/sregym/": ""}


def _identify(container: dict[str, Any]) -> str | None:
    repo = normalize_image(container.get("image", ""))[0]
    for prefix, suffix in IMAGES.items():
        if repo.startswith(prefix) and repo.endswith(suffix):
            name = repo[len(prefix):len(repo) - len(suffix)]
            return name if name in SERVICES else None
    return None


class _DialContext:
    """What `GraphService._dial_at_start` needs of a start context, for a dial made later in the boot."""

    def __init__(self, cluster: Any, pod: dict[str, Any]) -> None:
        self.cluster, self.pod = cluster, pod
        self.pod_ip = pod.get("status", {}).get("podIP", "")

    def connect(self, host: str, port: int) -> Any:
        return self.cluster.network.connect(self.pod, host, port)


# -- the flags the rebuilt services read -----------------------------------------------------------
class TrainTicketFlags(GraphHooks):
    """SREGym's tt-feat-NN switches as the code that reads them behaves (the rest have no reader)."""

    def flag(self, flow: CallGraphFlow, ns: str, name: str) -> Any:
        return flag_value(flow.cluster, ns, name)

    def call_share(self, flow: CallGraphFlow, ns: str, svc: Service, op: str, call: Call) -> float:
        if svc.name == "ts-voucher-service" and call.op == "SELECT SLEEP(10)":
            # F-17: _simulate_nested_select_delay() runs `SELECT SLEEP(10)` before the lookup
            return 1.0 if self.flag(flow, ns, "tt-feat-17") else 0.0
        if svc.name == "ts-contacts-service" and op == CONTACT_CREATE and call.write and self.flag(flow, ns, "tt-feat-22"):
            return 0.0  # the duplicate check threw: nothing is saved
        return 1.0

    def op_effect(self, flow: CallGraphFlow, ns: str, svc: Service, op: str, insts: list) -> OpEffect | None:
        if svc.name == "ts-voucher-service" and op == VOUCHER and self.flag(flow, ns, "tt-feat-17"):
            # The sleep holds Tornado's only thread: each request waits 10 s plus every request queued ahead.
            backlog = flow.state.get(ns, {}).get("tt", {}).get("voucher_backlog", 0.0)
            return OpEffect(latency=10.0 * (1.0 + backlog / max(1, len(insts))))
        if svc.name == "ts-contacts-service" and op == CONTACT_CREATE and self.flag(flow, ns, "tt-feat-22"):
            # The native query names `accountId` (the column is account_id): HTTP 201 with status 0.
            return OpEffect(fail=1.0, error="Contact creation failed: Contact check failed")
        return None

    def boot(self, flow: CallGraphFlow, groups: dict[str, list], now: float) -> None:
        """Spring services still booting dial their databases and nacos; past the drivers' patience
        the context fails to refresh and the JVM exits."""
        from kubesim.apps.graph import GraphService
        for name, insts in groups.items():
            svc = SERVICES.get(name)
            if svc is None or svc.language != "spring-tt":
                continue
            for rt, c in insts:
                inst = c.instance
                age = now - inst.get("started", now)
                if inst.get("booted") or age < BOOT_DIAL_S:
                    continue
                pod = flow.w._pod(rt.namespace, rt.name)
                if pod is None:
                    continue
                shim = _DialContext(flow.cluster, pod)
                failed = None
                for p in svc.peers:
                    addr = inst["peers"].get(p.name)
                    if p.name not in BOOT_PEERS or addr is None:
                        continue
                    address = Address(addr["host"], addr["port"], addr["user"], addr["password"], addr["database"],
                                      addr["raw"])
                    refused = GraphService._dial_at_start(GraphService(), shim, p, address)  # type: ignore[arg-type]
                    if refused is not None:
                        failed = (p, address, refused[0])
                        break
                log = flow.logger(svc, rt.name)
                t = now + flow.cluster.nodes.clock_offset(rt.node)
                if failed is None:
                    inst["booted"] = True
                    flow.cluster.logs.write(pod, c.name, log.booted(t, svc), now)  # type: ignore[attr-defined]
                elif age >= BOOT_DIAL_S + BOOT_PATIENCE_S or "password" in failed[2] or "denied" in failed[2]:
                    ex = log.exit_dial_failed(t, failed[0], failed[1], failed[2], 0.0)
                    flow.cluster.kubelet.terminate(rt.namespace, rt.name, c.name, ex.code, "Error", ex.lines, ex.stderr)

    def step(self, flow: CallGraphFlow, ns: str, groups: dict[str, list], lam: dict, now: float, dt: float) -> None:
        self.boot(flow, groups, now)
        st = flow.state.setdefault(ns, {}).setdefault("tt", {})
        vouchers = groups.get("ts-voucher-service") or []
        if vouchers and self.flag(flow, ns, "tt-feat-17"):
            # one thread serves 0.1 request/s; the clients give up after 5 s but the server still sleeps for each
            arrivals = lam.get(("ts-voucher-service", VOUCHER), 0.0) * dt
            backlog = st.get("voucher_backlog", 0.0) + arrivals - len(vouchers) * dt / 10.0
            st["voucher_backlog"] = min(max(0.0, backlog), 128.0 * len(vouchers))  # Tornado's listen backlog
        else:
            st["voucher_backlog"] = max(0.0, st.get("voucher_backlog", 0.0) - len(vouchers) * dt / 0.01)
        contacts = groups.get("ts-contacts-service") or []
        creates = lam.get(("ts-contacts-service", CONTACT_CREATE), 0.0)
        if contacts and creates > 0 and self.flag(flow, ns, "tt-feat-22"):
            for rt, c in contacts:
                if not flow.w._log_once(f"tt22/{rt.namespace}/{rt.name}", LOG_EVERY, now):
                    continue
                pod = flow.w._pod(rt.namespace, rt.name)
                if pod is None:
                    continue
                log = flow.logger(svc=SERVICES["ts-contacts-service"], pod=rt.name)
                t = now + flow.cluster.nodes.clock_offset(rt.node)
                thread = f"nio-12347-exec-{int(now) % 10 + 1}"
                flow.cluster.logs.write(pod, c.name, [
                    log.line(t, "warn", "SQL Error: 1054, SQLState: 42S22", logger="o.h.engine.jdbc.spi.SqlExceptionHelper",
                             thread=thread),
                    log.line(t, "error", "Unknown column 'accountId' in 'where clause'",
                             logger="o.h.engine.jdbc.spi.SqlExceptionHelper", thread=thread),
                    log.line(t, "error", "[create][Contact check failed]: could not extract ResultSet; SQL [n/a]; nested "
                                         "exception is org.hibernate.exception.SQLGrammarException: could not extract "
                                         "ResultSet", logger="contacts.service.ContactsServiceImpl", thread=thread)], now)


# The services report to `jaeger` (JAEGER_AGENT_HOST), which the manifests alias to the stack's Jaeger agent;
# the farm's stack turns no train-ticket spans into metrics.
TRAIN_TICKET = graph_app(AppGraph(APP, SERVICES, ROUTES_MIX, _identify, span_metrics=False, hooks=TrainTicketFlags()))
