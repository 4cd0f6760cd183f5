"""The fluid request model of every application the emulated cluster serves, each declared as a
call graph (kubesim/apps/graph.py; hotel-reservation's in apps/hotel.py, with its cache,
token bucket, retries, Go runtime, Consul discovery and Jaeger tracer as declared features).
Every 5 s step, per namespace:

1. the load generators (Locust, wrk2) offer their request mix at the entry service;
2. offered rates flow down the graph, callers before callees, each edge multiplied by the
   retries it made in the previous step (so retry storms can sustain themselves);
3. from the callees up, each service's capacity (replicas × CPU / CPU per request) serves its
   queue; every call is dialled from each caller pod to the address that pod really has (its env
   or config), over the emulated network (DNS, endpoints, policies, chaos), and answered by what
   really listens there: the intended service, the wrong one, or a data store that may refuse the
   credentials or fail its disk. Timeouts, retries and errors give each operation a success
   fraction and a latency;
4. side effects: span metrics, the clients' own counters, CPU and memory per container (OOM
   kills), the error lines each runtime prints, crashes where the real code crashes, and sampled
   Jaeger traces.

Nothing is scripted: a symptom appears only when its cause is in the cluster."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.namespaces import STACK_NAMESPACE
from kubesim.apps.graph import (
    GRAPHS,
    STORE_PROTOCOLS,
    Address,
    AppGraph,
    Cache,
    Call,
    Peer,
    Service,
    client_routes,
    store_model,
)
from kubesim.apps.logformats import LOGGERS, LogFormat
from kubesim.apps.model import env_float
from kubesim.runtime import Conn, ephemeral_ports

if TYPE_CHECKING:
    from kubesim.runtime import Ctr, PodRt
    from kubesim.view import WorkloadView

HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
SPAN_BUCKETS_MS = (2, 4, 6, 8, 10, 50, 100, 200, 400, 800, 1000, 1400, 2000, 5000, 10000, 15000)
LOCUST_TIMEOUT = 60.0  # requests' default: Locust waits as long as the server does
LOG_EVERY = 15.0


@dataclass
class OpEffect:
    """What app-specific behaviour (a feature flag, a latent bug) does to one operation."""

    fail: float = 0.0  # extra fraction of requests that fail
    error: str = ""
    latency: float = 0.0  # extra seconds per request
    cpu: float = 1.0  # CPU per request multiplier


class GraphHooks:
    """App-specific behaviour on top of the graph (e.g. astronomy-shop's feature flags)."""

    def call_share(self, flow: CallGraphFlow, ns: str, svc: Service, op: str, call: Call) -> float:
        return 1.0

    def op_effect(self, flow: CallGraphFlow, ns: str, svc: Service, op: str, insts: list) -> OpEffect | None:
        return None

    def entry_share(self, flow: CallGraphFlow, ns: str, route_name: str) -> float:
        return 1.0

    def step(self, flow: CallGraphFlow, ns: str, groups: dict[str, list], lam: dict, now: float, dt: float) -> None:
        """Per-step side effects (memory leaks, busy threads) after the request flow is known."""


@dataclass
class Edge:
    ok: float
    latency: float
    error: str | None
    attempt_fail: float | None = None  # a peer with its own Retry: the share of single attempts that failed
    timed_out: float = 0.0  # ... and of attempts cut at its deadline


class CallGraphFlow:
    def __init__(self, workload: WorkloadView) -> None:
        self.w = workload
        self.cluster = workload.cluster

    @property
    def state(self) -> dict[str, Any]:
        return self.w.state.setdefault("graphs", {})

    # -- entry ---------------------------------------------------------------------------------
    def step(self, now: float, dt: float, groups: dict[str, dict[str, list]], clients: dict[str, list]) -> None:
        for ns in set(groups) | set(clients):
            ns_groups = groups.get(ns, {})
            app = self._app_of(ns_groups, clients.get(ns, []))
            if app is None:
                continue
            self._namespace(ns, app, ns_groups, clients.get(ns, []), now, dt)
        for ns_groups in groups.values():
            for insts in ns_groups.values():
                for rt, c in insts:
                    self._os_limits(rt, c, now)

    def _app_of(self, groups: dict[str, list], clients: list) -> AppGraph | None:
        for insts in groups.values():
            for _, c in insts:
                return GRAPHS.get(c.instance.get("app", ""))
        for _, _, _, app in clients:
            return app
        return None

    def client_target(self, conn: Any, home: str = "") -> tuple[str, AppGraph] | None:
        """The namespace and graph a load generator's connection reaches, if it reaches one; else the
        graph of the namespace its Service is in, or of `home` (where the client runs) when its
        host resolves to nothing: the requests it keeps sending fail there."""
        for tg in conn.targets:
            if tg.error:
                continue
            inst = self.w.instance_of(tg.pod, tg.port)
            if isinstance(inst, dict) and inst.get("kind") == "graph" and inst.get("app") in GRAPHS:
                return tg.pod["metadata"]["namespace"], GRAPHS[inst["app"]]
        svc = conn.service if getattr(conn, "service", None) is not None else None
        ns = svc["metadata"]["namespace"] if svc is not None else home
        graph = GRAPHS.get(ns) if ns else None  # an application's graph is named as its namespace
        return (ns, graph) if graph is not None else None

    # -- one namespace ---------------------------------------------------------------------------
    def _namespace(self, ns: str, app: AppGraph, groups: dict[str, list], clients: list, now: float, dt: float) -> None:
        st = self.state.setdefault(ns, {"edges": {}, "queues": {}, "prev": {}})
        hooks: GraphHooks = app.hooks or GraphHooks()
        lam: dict[tuple[str, str], float] = {}
        for rt, c, conn, _ in clients:
            for route in client_routes(app, c.instance):
                reach = self._route_conn(rt, conn, route).ok_share
                r = c.instance["rate"] * route.share * reach * hooks.entry_share(self, ns, route.name)
                lam[(route.service, route.op)] = lam.get((route.service, route.op), 0.0) + r
        consumers = self._consumers(ns, app, groups, dt)
        for (svc_name, op), rate in consumers.items():
            lam[(svc_name, op)] = lam.get((svc_name, op), 0.0) + rate
        # 1. offered rates, top-down, with last step's retry amplification
        store_load: dict[tuple[str, str, str, bool], float] = {}
        edges = st["edges"]
        misses = {(name, p.name): self._miss(app, app.services[name], p, groups.get(name) or [])
                  for name in app.order for p in app.services[name].peers if p.cache is not None}
        for svc_name in app.order:
            svc = app.services[svc_name]
            for op, calls in svc.ops.items():
                rate_in = lam.get((svc_name, op), 0.0)
                if rate_in <= 0:
                    continue
                through = 1.0  # a sequential handler's requests still going after its earlier calls
                for call in calls:
                    peer = svc.peer(call.peer)
                    f_prev = edges.get(self._edge_key(svc_name, op, call), 0.0)
                    tries = self._attempts(svc, peer, groups.get(svc_name) or [])
                    amp = 1.0 if tries == 1 else sum(f_prev ** k for k in range(tries))
                    r = rate_in * through * call.share * hooks.call_share(self, ns, svc, op, call) * amp
                    if call.on_miss:
                        r *= misses.get((svc_name, call.on_miss), 1.0)
                    if peer.service:
                        lam[(peer.service, call.op)] = lam.get((peer.service, call.op), 0.0) + r
                        if svc.sequential and call.on_error != "ignore":
                            through *= st["prev"].get((peer.service, call.op), 1.0)
                    else:
                        key = (svc_name, call.peer, call.op, call.write)
                        store_load[key] = store_load.get(key, 0.0) + r
        # 2. evaluate, callees first
        succ: dict[tuple[str, str], float] = {}
        lat: dict[tuple[str, str], float] = {}
        err: dict[tuple[str, str], str] = {}
        failing_calls: list[tuple[str, str, Call, str, float]] = []
        for svc_name in reversed(app.order):
            svc = app.services[svc_name]
            insts = groups.get(svc_name, [])
            offered = sum(lam.get((svc_name, op), 0.0) for op in svc.ops)
            effects = {op: hooks.op_effect(self, ns, svc, op, insts) for op in svc.ops} if insts else {}
            cpu_factor = max((e.cpu for e in effects.values() if e), default=1.0)
            accepted, wait, served = self._serve(ns, svc, insts, offered, dt, cpu_factor)
            if svc.limit is not None and accepted <= 0.999 and svc.limit.error:
                overloaded: str | None = svc.limit.error
            else:
                overloaded = None if accepted > 0.999 else self._overloaded(svc)
            slow = st["queues"].get(svc_name, {}).get("slow", 1.0)
            for op, calls in svc.ops.items():
                rate_in = lam.get((svc_name, op), 0.0)
                ok, latency = accepted, svc.latency * slow + wait
                why = overloaded
                for call in calls:
                    share = min(1.0, call.share * hooks.call_share(self, ns, svc, op, call))
                    miss = misses.get((svc_name, call.on_miss), 1.0) if call.on_miss else 1.0
                    e = self._edge(ns, app, svc, op, call, insts, succ, lat, err, store_load, dt, rate_in * share * miss)
                    if call.on_miss:  # only the misses reach the store behind the cache
                        e = Edge(1.0 - miss * (1.0 - e.ok), e.latency * miss, e.error if miss > 0 else None)
                    failed = share * (1.0 - e.ok)
                    if call.on_error != "ignore":
                        ok *= 1.0 - failed
                    latency += share * e.latency
                    if e.error and failed > 1e-4:
                        if why is None and call.on_error != "ignore":
                            why = e.error
                        failing_calls.append((svc_name, op, call, e.error, rate_in * failed * dt))
                eff = effects.get(op)
                if eff is not None:
                    ok *= 1.0 - eff.fail
                    latency += eff.latency
                    if eff.fail > 1e-4 and eff.error and why is None:
                        why = eff.error
                if not insts:
                    ok = 0.0
                succ[(svc_name, op)], lat[(svc_name, op)] = ok, latency
                if why and ok < 0.999:
                    err[(svc_name, op)] = why
                if app.span_metrics:
                    self._span_metrics(ns, svc, op, rate_in * dt, ok, latency)
            if insts:
                self._cpu(insts, served, svc, dt, cpu_factor)
        st["prev"] = succ
        st["errors"] = err  # what a failing request is answered with (an HTTP client in a pod reads it)
        self._account_topics(ns, app, consumers, store_load, succ, dt)
        # 3. what the clients see, and the consequences
        for rt, c, conn, _ in clients:
            self._client(ns, app, rt, c, conn, succ, lat, err, dt, now)
        hooks.step(self, ns, groups, lam, now, dt)
        self._error_logs(ns, app, groups, failing_calls, now)
        self._crashes(ns, app, groups, failing_calls, now)
        self._traces(ns, app, groups, lam, succ, lat, err, now)

    @staticmethod
    def _edge_key(svc: str, op: str, call: Call) -> str:
        return f"{svc}|{op}|{call.peer}|{call.op}"

    @staticmethod
    def _overloaded(svc: Service) -> str:
        own = getattr(LOGGERS.get(svc.language), "overloaded_error", "")
        if own:  # what callers of this runtime's server meet when it sheds load
            return str(own)
        if svc.language in ("spring", "envoy", "nginx", "nextjs"):
            return "503 Service Unavailable"
        return "rpc error: code = ResourceExhausted desc = grpc: the server has reached its concurrency limit"

    # -- consumer loops (Kafka consumer groups) ---------------------------------------------------
    @staticmethod
    def _consumed_topic(svc: Service, op: str) -> tuple[str, str] | None:
        for call in svc.ops[op]:
            parts = call.op.split()
            if len(parts) == 3 and parts[0] == "consume":
                return parts[1], parts[2]
        return None

    def _consumers(self, ns: str, app: AppGraph, groups: dict[str, list], dt: float) -> dict[tuple[str, str], float]:
        """A consumer group reads what was produced plus its backlog, as fast as its pods can process
        records (a `poll_rate` an app hook sets, else its CPU)."""
        st = self.state[ns]
        out: dict[tuple[str, str], float] = {}
        for svc_name in app.order:
            svc = app.services[svc_name]
            insts = groups.get(svc_name) or []
            if not svc.background or not insts:
                continue
            cap = sum(c.instance.get("poll_rate") or self.w._cores(rt, c) / max(svc.cpu, 1e-6) for rt, c in insts)
            for op in svc.ops:
                tg = self._consumed_topic(svc, op)
                if tg is None:
                    continue
                available = st.get("produced", {}).get(tg[0], 0.0) + st.get("backlog", {}).get("/".join(tg), 0.0) / dt
                out[(svc_name, op)] = min(cap, available)
        return out

    def _account_topics(self, ns: str, app: AppGraph, consumers: dict, store_load: dict, succ: dict, dt: float) -> None:
        st = self.state[ns]
        produced: dict[str, float] = {}
        for (_, _, command, _), rate in store_load.items():
            parts = command.split()
            if len(parts) == 2 and parts[0] == "produce":
                produced[parts[1]] = produced.get(parts[1], 0.0) + rate
        backlog = st.setdefault("backlog", {})
        for svc_name in app.order:
            svc = app.services[svc_name]
            for op in svc.ops:
                tg = self._consumed_topic(svc, op) if svc.background else None
                if tg is None:
                    continue
                key = "/".join(tg)
                consumed = consumers.get((svc_name, op), 0.0) * succ.get((svc_name, op), 0.0)
                backlog[key] = max(0.0, backlog.get(key, 0.0) + (produced.get(tg[0], 0.0) - consumed) * dt)
        st["produced"] = produced

    # -- capacity ----------------------------------------------------------------------------------
    def _serve(self, ns: str, svc: Service, insts: list, offered: float, dt: float,
               cpu_factor: float) -> tuple[float, float, float]:
        q = self.state[ns]["queues"].setdefault(svc.name, {"q": 0.0})
        if not insts:
            q["q"] = 0.0
            return 1.0, 0.0, 0.0
        # A runtime that holds its backlog as live heap, or a limiter's queue, keeps the backlog in the
        # processes: a new pod starts with none, a killed one takes its share along.
        in_pods = svc.runtime is not None or svc.limit is not None
        if in_pods:
            q["q"] = sum(c.instance.get("queued", 0.0) for _, c in insts)
        mu, queue_cap = 0.0, 0.0
        for rt, c in insts:
            cores = self.w._cores(rt, c)
            work = svc.cpu * cpu_factor
            if svc.runtime is not None and "go" in c.instance:
                # the collector's share follows the heap the pod held at the start of the step
                c.instance["gc_cost"] = svc.runtime.gc_cpu(c.instance["go"], c.instance.get("rps", 0.0),
                                                           c.instance.get("queued", 0.0), svc.cpu, cores)
                work += c.instance["gc_cost"]
            cap = cores / work
            limit = c.instance.get("limit")
            if limit is not None:
                cap = min(cap, limit["qps"])
                queue_cap += limit["queue"]
            mu += cap
        mu = max(mu, 1e-6)
        q["slow"] = max(self.w._slowdown(rt, c) for rt, c in insts)
        arrivals = offered * dt
        total = q["q"] + arrivals
        served = min(total, mu * dt)
        rest = total - served
        if svc.limit is None and svc.backlog:
            queue_cap = svc.backlog * len(insts)
        elif svc.limit is None:
            queue_cap = mu * (svc.timeout or 0.0)  # past its callers' deadline a queued request is abandoned
        q["q"] = min(rest, queue_cap)
        q["served"] = served
        rejected = rest - q["q"]
        if in_pods:
            for _, c in insts:
                c.instance["queued"] = q["q"] / len(insts)
        if svc.limit is not None and svc.limit.metrics is not None:
            job, instance, prefix = svc.limit.metrics
            labels = (("namespace", ns), ("job", job), ("instance", instance))
            self.w.gauge(f"{prefix}_queue_depth", labels, q["q"])
            self.w.gauge(f"{prefix}_in_flight", labels, min(q["q"], mu * 0.01) + min(served / dt, mu) * svc.latency)
            self.w.gauge(f"{prefix}_backend_qps_limit", labels, sum(c.instance["limit"]["qps"] for _, c in insts
                                                                    if "limit" in c.instance))
            self.w.gauge(f"{prefix}_queue_capacity", labels, queue_cap)
            self.w.inc(f"{prefix}_requests_received_total", labels, arrivals)
            self.w.inc(f"{prefix}_requests_rejected_total", labels, rejected)
        accepted = 1.0 - (rejected / arrivals if arrivals > 0 else 0.0)
        return max(0.0, accepted), q["q"] / mu, served

    def _cpu(self, insts: list, served: float, svc: Service, dt: float, cpu_factor: float) -> None:
        per = served / len(insts)
        nodes = self.cluster.nodes
        for rt, c in insts:
            used = per * svc.cpu * cpu_factor
            if svc.runtime is not None and "go" in c.instance:
                c.instance["rps"] = per / dt
                svc.runtime.served(c.instance["go"], per)
                used += per * c.instance.get("gc_cost", 0.0)
            self.w.charge(rt, c, per, used / nodes.cpu_factor(rt.node), dt, svc.rx_bytes, svc.tx_bytes)

    # -- calls -------------------------------------------------------------------------------------
    def _edge(self, ns: str, app: AppGraph, svc: Service, op: str, call: Call, insts: list,
              succ: dict, lat: dict, err: dict, store_load: dict, dt: float, call_rate: float) -> Edge:
        peer = svc.peer(call.peer)
        key = self._edge_key(svc.name, op, call)
        if not insts:
            self.state[ns]["edges"][key] = 0.0
            return Edge(1.0, 0.0, None)
        ok_sum, lat_sum, why = 0.0, 0.0, None
        attempt_fail, timed_out = 0.0, 0.0
        store_rate = store_load.get((svc.name, call.peer, call.op, call.write), 0.0) / len(insts)
        for rt, c in insts:
            e = self._call_from(ns, app, svc, rt, c, peer, call, succ, lat, err, store_rate, dt)
            if peer.pool and e.latency > 0:
                e = self._pooled(svc, rt, peer, call, e, call_rate / len(insts))
            ok_sum += e.ok
            lat_sum += e.latency
            attempt_fail += 1.0 - e.ok if e.attempt_fail is None else e.attempt_fail
            timed_out += e.timed_out
            why = why or e.error
        ok, latency = ok_sum / len(insts), lat_sum / len(insts)
        if peer.retry is not None and peer.retry.gave_up and ok < 0.5 and why and "DeadlineExceeded" in why:
            why = peer.retry.gave_up
        # what the next step's offered load is amplified by: the share of single attempts that failed
        self.state[ns]["edges"][key] = attempt_fail / len(insts) if peer.retry is not None else 1.0 - ok
        if peer.retry is not None and peer.retry.metrics is not None:
            self._retry_metrics(ns, app, svc, peer, call_rate * dt, ok, attempt_fail / len(insts), timed_out / len(insts),
                                self._attempts(svc, peer, insts))
        return Edge(ok, latency, why if ok < 0.999 else None)

    def _retry_metrics(self, ns: str, app: AppGraph, svc: Service, peer: Peer, n: float, ok: float, f: float,
                       timed_out: float, tries: int) -> None:
        """The client's own counters of a retrying call, and the deadline's toll on the callee's queue."""
        assert peer.retry is not None and peer.retry.metrics is not None
        job, instance, prefix = peer.retry.metrics
        labels = (("namespace", ns), ("job", job), ("instance", instance))
        attempts = n * sum(f ** k for k in range(tries))  # the policy the program runs with
        self.w.inc(f"{svc.name}_requests_total", labels, n)
        self.w.inc(f"{prefix}_attempts_total", labels, attempts)
        self.w.inc(f"{prefix}_timeouts_total", labels, attempts * timed_out)
        self.w.inc(f"{prefix}_successes_total", labels, n * ok)
        self.w.inc(f"{prefix}_failures_total", labels, n * (1.0 - ok))
        callee = app.services.get(peer.service)
        if callee is not None and callee.limit is not None and callee.limit.metrics is not None:
            cjob, cinstance, cprefix = callee.limit.metrics
            served = self.state[ns]["queues"].get(callee.name, {}).get("served", 0.0)
            clabels = (("namespace", ns), ("job", cjob), ("instance", cinstance))
            self.w.inc(f"{cprefix}_requests_completed_total", clabels, served * (1.0 - timed_out))
            self.w.inc(f"{cprefix}_requests_expired_total", clabels, served * timed_out)

    @staticmethod
    def _attempts(svc: Service, peer: Peer, insts: list) -> int:
        """Tries per call to `peer`: its own policy as the program read it, else the service's."""
        if peer.retry is not None:
            for _, c in insts:
                policy = (c.instance.get("retry") or {}).get(peer.name)
                if policy is not None:
                    return int(policy["attempts"])
            return max(1, peer.retry.attempts)
        return max(1, svc.attempts)

    def _pooled(self, svc: Service, rt: PodRt, peer: Peer, call: Call, e: Edge, rate: float) -> Edge:
        """A client pool of `peer.pool` connections per pod: each call holds one for its latency
        (Little's law), so a slow peer exhausts the pool and callers wait for a connection, then give
        up after their deadline with the pool's own error."""
        busy = rate * e.latency / peer.pool
        if busy < 0.7:
            return e
        if busy < 1.0:
            return Edge(e.ok, e.latency * (1.0 + busy ** peer.pool / (1.0 - busy)), e.error)
        served = 1.0 / busy
        timeout = svc.timeout or 0.0
        return Edge(e.ok * served, e.latency * served + timeout * (1.0 - served),
                    self.logger(svc, rt.name).pool_exhausted(peer, timeout))

    def _call_from(self, ns: str, app: AppGraph, svc: Service, rt: PodRt, c: Ctr, peer: Peer, call: Call,
                   succ: dict, lat: dict, err: dict, store_rate: float, dt: float) -> Edge:
        pod = self.w._pod(rt.namespace, rt.name) if peer.discovery else None
        if peer.discovery:
            if pod is None:
                return Edge(1.0, 0.0, None)
            conn = self._discover(app, svc, rt, c, pod, peer)
            addr: dict[str, Any] = Address(conn.host, conn.port).entry()
            if conn.error:
                return Edge(0.0, 0.0, conn.error)
        else:
            addr = c.instance["peers"].get(peer.name)
            if addr is None:
                e = self.logger(svc, rt.name).client_error(peer.protocol, "missing address", peer.name, 0, call.op)
                return Edge(0.0, 0.0, e)
            pod = self.w._pod(rt.namespace, rt.name)
            if pod is None:
                return Edge(1.0, 0.0, None)
            if addr["host"] in ("localhost", "127.0.0.1", "::1"):  # nothing of its own listens there
                e = f"dial tcp 127.0.0.1:{addr['port']}: connect: connection refused"
                return Edge(0.0, 0.0, self.logger(svc, rt.name).client_error(peer.protocol, e, addr["host"], addr["port"],
                                                                             call.op))
            conn = self.w._connect(pod, addr["host"], addr["port"])
        policy = (c.instance.get("retry") or {}).get(peer.name) if peer.retry is not None else None
        timeout = (policy["timeout"] or None) if policy is not None else svc.timeout
        if conn.error or not conn.targets:
            e = conn.error or f"dial tcp {addr['host']}:{addr['port']}: connect: connection refused"
            return Edge(0.0, 0.0, self.logger(svc, rt.name).client_error(peer.protocol, e, addr["host"], addr["port"],
                                                                         call.op))
        n = len(conn.targets)
        ok, latency, why, timed_out = 0.0, 0.0, None, 0.0
        for tg in conn.targets:
            if tg.error:
                why = why or self.logger(svc, rt.name).client_error(peer.protocol, tg.error, addr["host"], addr["port"],
                                                                    call.op)
                continue
            t_ok, t_lat, t_err = self._target(app, svc, peer, call, tg, addr, succ, lat, err, store_rate / n, dt, rt.ip)
            net = 2 * tg.delay_ms / 1000.0 + tg.loss * 0.6  # retransmits cost ~200 ms RTO each
            t_lat += net
            lost = min(1.0, tg.loss ** 2 * 3)
            t_ok *= 1.0 - lost
            if lost > 0.3 and t_err is None:
                t_err = self.logger(svc, rt.name).deadline(peer.protocol)
            pto = _p_timeout(t_lat, timeout)
            if pto > 0.01 and timeout:
                t_ok *= 1.0 - pto
                t_lat = min(t_lat, timeout)
                timed_out += pto
                if pto > 0.5:
                    t_err = self.logger(svc, rt.name).deadline(peer.protocol)
            ok += t_ok
            latency += t_lat
            why = why or t_err
        ok /= n
        latency /= n
        if policy is not None:
            return self._retried(ok, latency, why, timed_out / n, policy)
        attempts = max(1, svc.attempts)
        if attempts > 1 and ok < 1.0:
            f = 1.0 - ok
            latency = sum(f ** k * latency for k in range(attempts))
            ok = 1.0 - f ** attempts
        return Edge(ok, latency, why)

    @staticmethod
    def _retried(ok: float, latency: float, why: str | None, timed_out: float, policy: dict[str, float]) -> Edge:
        """A call under the peer's own Retry: each further attempt comes after a backoff that grows
        by `multiplier`, and only when the ones before it failed."""
        attempts = int(policy["attempts"])
        f = 1.0 - ok
        total = sum(f ** k * latency for k in range(attempts))
        total += sum(f ** k * policy["backoff"] * policy["multiplier"] ** (k - 1) for k in range(1, attempts))
        return Edge(1.0 - f ** attempts, total, why, attempt_fail=f, timed_out=timed_out)

    def _discover(self, app: AppGraph, svc: Service, rt: PodRt, c: Ctr, pod: dict, peer: Peer) -> Conn:
        """The peer's pods as the caller's registry agent lists them; while the agent is unreachable,
        what this pod last heard from it (a new pod has heard nothing)."""
        callee = app.services.get(peer.service)
        name = callee.registry.name if callee is not None and callee.registry is not None else peer.service
        cache: dict[str, list] = c.instance.setdefault("discovered", {})
        agent = c.instance["peers"].get(svc.registry.agent) if svc.registry is not None else None
        if agent is not None:
            agent_conn = self.w._connect(pod, agent["host"], agent["port"])
            agent_conn = self._watch_socket(svc, rt, c, pod, peer, name, agent_conn)
            for tg in agent_conn.targets:
                if not tg.error:
                    regs = self.w.state["consul"].get(f"{tg.pod['metadata']['namespace']}/{tg.pod['metadata']['name']}", {})
                    cache[name] = [list(r) for r in regs.get(name, [])]
                    break
        targets = [self.w._connect_pod(pod, target, port) for tns, tname, port in cache.get(name, [])
                   if (target := self.w._pod(tns, tname)) is not None]
        if not targets:
            return Conn(name, 0, error="rpc error: code = Unavailable desc = there is no address available")
        return Conn(name, targets[0].port, targets=targets)

    def _watch_socket(self, svc: Service, rt: PodRt, c: Ctr, pod: dict, peer: Peer, name: str, agent: Conn) -> Conn:
        """Each peer the service resolves is a blocking query of its own, holding one connection to
        the registry agent (the consul resolver's watch, started in the order the program dials its
        clients); past the pod's ephemeral port range connect() fails with EADDRNOTAVAIL and that
        peer is never resolved (what the pod heard before stays)."""
        watches = [p.service for p in svc.peers if p.discovery]
        if agent.error or not agent.targets or peer.service not in watches or \
                watches.index(peer.service) < ephemeral_ports(pod):
            return agent
        ip = ((agent.service or {}).get("spec") or {}).get("clusterIP") or agent.host
        error = f"dial tcp {ip}:{agent.port}: connect: cannot assign requested address"
        now = self.cluster.clock.now()
        if self.w._log_once(f"watch/{rt.namespace}/{rt.name}/{name}", LOG_EVERY, now):
            t = now + self.cluster.nodes.clock_offset(rt.node)
            self.cluster.logs.write(pod, c.name, self.logger(svc, rt.name).watch_error(t, name, agent.host, agent.port, error), now,
                                    stream="stderr")
        return Conn(agent.host, agent.port, error=error, service=agent.service)

    def _target(self, app: AppGraph, svc: Service, peer: Peer, call: Call, tg: Any, addr: dict, succ: dict,
                lat: dict, err: dict, rate: float, dt: float, caller_ip: str) -> tuple[float, float, str | None]:
        trt = self.cluster.kubelet.runtime(tg.pod)
        target_ctr = None
        for tc in (trt.containers.values() if trt else []):
            if tc.state == "running" and tc.stage == "run" and tg.port in tc.ports:
                target_ctr = tc
                break
        if trt is None or target_ctr is None:  # (a running target container has a runtime)
            dial = f"dial tcp {tg.pod.get('status', {}).get('podIP', '')}:{tg.port}: connect: connection refused"
            return 0.0, 0.0, self.logger(svc, "").client_error(peer.protocol, dial, addr["host"], addr["port"], call.op)
        inst = target_ctr.instance
        if peer.protocol in STORE_PROTOCOLS:
            model = store_model(target_ctr)
            if model is None:
                if isinstance(inst, dict) and inst.get("kind") == "graph":
                    return 0.0, 0.0, self.logger(svc, "").client_error(peer.protocol, "EOF", addr["host"], addr["port"],
                                                                       call.op)
                return 1.0, 0.001, None  # a server the emulated cluster does not model in detail
            address = Address(**addr, client=caller_ip)
            refused = None if peer.session else model.authenticate(inst, address)
            if refused:
                return 0.0, 0.0, refused
            reply = model.serve(self.cluster, trt, target_ctr, call.op, call.write, rate, dt, address)
            if peer.cache is not None and isinstance(inst, dict):
                self._warm(inst, svc.name, peer.cache, rate, dt)
            return reply.ok, reply.latency, reply.error
        if isinstance(inst, dict) and inst.get("kind") == "graph":
            if inst.get("svc") != peer.service:
                return 0.0, 0.002, self._wrong_service(peer, inst.get("svc", ""))
            key = (peer.service, call.op)
            return succ.get(key, 1.0), lat.get(key, 0.001), err.get(key)
        return 1.0, 0.001, None  # something that answers but is not modelled (an nginx, a sidecar)

    # -- caches in front of stores ---------------------------------------------------------------
    @staticmethod
    def _warm(inst: dict, owner: str, cache: Cache, rate: float, dt: float) -> None:
        """Each miss fetches from the store and sets the key: half of the missed reads add a new one."""
        keys = inst.setdefault("keys", {})
        miss = 1.0 - min(1.0, keys.get(owner, 0.0) / cache.keys)
        keys[owner] = min(cache.keys, keys.get(owner, 0.0) + rate * dt * miss * 0.5)
        inst["items"] = sum(keys.values())

    def _miss(self, app: AppGraph, svc: Service, peer: Peer, insts: list) -> float:
        """The share of the service's reads its cache misses: the keys it has not cached yet, as the
        cache its first pod reaches holds them (an unreachable or restarted cache misses everything)."""
        assert peer.cache is not None
        for rt, c in insts[:1]:
            addr = c.instance["peers"].get(peer.name)
            pod = self.w._pod(rt.namespace, rt.name)
            if addr is None or pod is None:
                return 1.0
            for tg in self.w._connect(pod, addr["host"], addr["port"]).targets:
                held = self.w.instance_of(tg.pod, tg.port) if not tg.error else None
                if isinstance(held, dict) and held.get("kind") == peer.protocol:
                    cached = held.setdefault("keys", {}).get(svc.name, 0.0)
                    return min(1.0, max(peer.cache.floor, 1.0 - cached / peer.cache.keys))
            return 1.0
        return 0.0

    @staticmethod
    def _wrong_service(peer: Peer, actual: str) -> str:
        if peer.protocol == "grpc":
            return f"rpc error: code = Unimplemented desc = unknown service (reached {actual} instead of {peer.service})"
        if peer.protocol == "thrift":
            return "Thrift TApplicationException: Invalid method name"
        return "404 Not Found"

    # -- what the clients report ---------------------------------------------------------------
    def _route_conn(self, rt: PodRt, conn: Any, route: Any) -> Any:
        """The connection a request goes over: the client's own host's, or the one its absolute URL names."""
        pod = self.w._pod(rt.namespace, rt.name) if route.target else None
        if pod is None:
            return conn
        host, _, port = route.target.rpartition(":")
        return self.w._connect(pod, host, int(port))

    def _client(self, ns: str, app: AppGraph, rt: PodRt, c: Ctr, conn: Any, succ: dict, lat: dict, err: dict,
                dt: float, now: float) -> None:
        inst = c.instance
        reach = conn.ok_share
        kind = inst.get("kind")
        pod = self.w._pod(rt.namespace, rt.name)
        pod_rt = self.cluster.kubelet.runtime(pod) if pod is not None else None
        sidecar = any(o.name != c.name and o.state == "running" for o in pod_rt.containers.values()) if pod_rt is not None else False
        total_n = total_fail = total_lat = 0.0
        for route in client_routes(app, inst):
            rconn = self._route_conn(rt, conn, route)
            reach = rconn.ok_share
            n = inst["rate"] * route.share * dt
            s = succ.get((route.service, route.op), 0.0)
            latency = lat.get((route.service, route.op), 0.002) + rconn.delay_ms / 500.0
            timeout = route.timeout or (inst.get("timeout", LOCUST_TIMEOUT) if kind == "wrk2" else LOCUST_TIMEOUT)
            pto = _p_timeout(latency, timeout)
            good = n * reach * (1 - pto) * s
            bad = n - good
            total_n += n
            total_fail += bad
            total_lat += n * min(latency, timeout)
            entry = app.services.get(route.service)
            if entry is not None and entry.http_metrics and reach > 0:
                self._http_server(ns, entry, route, good, n * reach * (1 - pto) * (1 - s), latency)
            if kind == "wrk2":
                self._wrk2(ns, rt, inst, route.url_path, n, reach, pto, s, latency, timeout)
            elif sidecar:
                labels = (("namespace", rt.namespace), ("job", f"locust-{rt.namespace}"), ("pod", rt.name), ("method", route.method),
                          ("name", route.name))
                self.w.inc("locust_requests_num_requests", labels, n)
                self.w.inc("locust_requests_num_failures", labels, bad)
                self.w.gauge("locust_requests_avg_response_time", labels, latency * 1000.0)
                self.w.gauge("locust_requests_current_rps", labels, n / dt)
                self.w.gauge("locust_requests_current_fail_per_sec", labels, bad / dt)
                if bad > 1e-6:
                    why = "ConnectionError" if reach < 1 else err.get((route.service, route.op), "HTTPError('500 Server Error')")
                    self.w.gauge("locust_errors", labels + (("error", _locust_error(why, reach)),), bad)
        if kind == "locust" and sidecar and total_n > 0:
            labels = (("namespace", rt.namespace), ("job", f"locust-{rt.namespace}"), ("pod", rt.name), ("method", ""), ("name", "Aggregated"))
            self.w.inc("locust_requests_num_requests", labels, total_n)
            self.w.inc("locust_requests_num_failures", labels, total_fail)
            self.w.gauge("locust_requests_avg_response_time", labels, total_lat / total_n * 1000.0)
            self.w.gauge("locust_users", (("namespace", rt.namespace), ("job", f"locust-{rt.namespace}"), ("pod", rt.name)), inst.get("users", 0))
            self.w.gauge("locust_fail_ratio", (("namespace", rt.namespace), ("job", f"locust-{rt.namespace}"), ("pod", rt.name)),
                         total_fail / total_n)
        if kind == "locust" and pod is not None and total_fail > total_n * 0.05 and \
                self.w._log_once(f"locust/{rt.namespace}/{rt.name}", 30.0, now):
            worst = max(app.routes, key=lambda r: 1 - succ.get((r.service, r.op), 0.0))
            reach = self._route_conn(rt, conn, worst).ok_share
            why = err.get((worst.service, worst.op)) or ("ConnectionRefusedError(111, 'Connection refused')" if reach < 1
                                                         else "500 Server Error")
            self.cluster.logs.write(pod, c.name, f"[{rt.name}/ERROR/locust.user.users] {worst.method} {worst.name}: "
                                                 f"{_locust_error(why, reach)}", now, stream="stderr")

    def _wrk2(self, ns: str, rt: PodRt, inst: dict, endpoint: str, n: float, reach: float, pto: float, s: float,
              latency: float, timeout: float) -> None:
        base = (("namespace", rt.namespace), ("job", "wrk2"), ("pod", rt.name))
        connect = n * (1 - reach)
        timeouts = n * reach * pto
        good = n * reach * (1 - pto) * s
        bad = n * reach * (1 - pto) * (1 - s)
        labels = base + (("endpoint", endpoint),)
        self.w.inc("wrk2_requests_total", labels + (("code", "200"),), good)
        self.w.inc("wrk2_requests_total", labels + (("code", "500"),), bad)
        self.w.inc("wrk2_requests_total", labels + (("code", "timeout"),), timeouts)
        self.w.inc("wrk2_requests_total", labels + (("code", "connect_error"),), connect)
        answered = good + bad + timeouts
        if answered > 0:
            self.w.observe("wrk2_request_duration_seconds", base, HTTP_BUCKETS, answered, min(latency, timeout), 0.0015)
        rnd = inst["round"]
        rnd["n"] += good + bad
        rnd["non2xx"] += bad
        rnd["timeouts"] += timeouts
        rnd["connect"] += connect
        rnd["lat_sum"] += (good + bad) * latency

    def _http_server(self, ns: str, svc: Service, route: Any, good: float, bad: float, latency: float) -> None:
        """The entry server's own request histogram (OpenTelemetry's HTTP server semantic conventions)."""
        base = (("namespace", ns), ("job", svc.http_metrics), ("service_name", svc.name),
                ("http_request_method", route.method), ("http_route", route.url_path))
        for count, code in ((good, "200"), (bad, "500")):
            if count > 1e-9:
                self.w.observe("http_server_request_duration_seconds", base + (("http_response_status_code", code),),
                               HTTP_BUCKETS, count, latency, 0.0015)

    def _span_metrics(self, ns: str, svc: Service, op: str, n: float, ok: float, latency: float) -> None:
        if n <= 0:
            return
        base = (("namespace", ns), ("job", "otel-spanmetrics"), ("service_name", svc.name), ("span_name", op),
                ("span_kind", "SPAN_KIND_SERVER"))
        for count, code in ((n * ok, "STATUS_CODE_UNSET"), (n * (1 - ok), "STATUS_CODE_ERROR")):
            if count > 1e-9:
                labels = base + (("status_code", code),)
                self.w.inc("traces_span_metrics_calls_total", labels, count)
                self.w.observe("traces_span_metrics_duration_milliseconds", labels, SPAN_BUCKETS_MS, count,
                               latency, svc.latency, scale=1000.0)

    # -- logs and crashes -------------------------------------------------------------------------
    def logger(self, svc: Service, pod: str) -> LogFormat:
        return LOGGERS[svc.language](svc.name, pod)

    def _error_logs(self, ns: str, app: AppGraph, groups: dict, failing: list, now: float) -> None:
        for svc_name, op, call, why, count in failing:
            if count < 0.5 or call.on_error == "crash":
                continue
            svc = app.services[svc_name]
            for rt, c in groups.get(svc_name) or []:
                if not self.w._log_once(f"g/{rt.namespace}/{rt.name}/{op}/{call.peer}", LOG_EVERY, now):
                    continue
                pod = self.w._pod(rt.namespace, rt.name)
                if pod is None:
                    continue
                t = now + self.cluster.nodes.clock_offset(rt.node)
                line = self.logger(svc, rt.name).call_error(t, op, svc.peer(call.peer), call.op, why)
                self.cluster.logs.write(pod, c.name, line, now)

    def _crashes(self, ns: str, app: AppGraph, groups: dict, failing: list, now: float) -> None:
        for svc_name, op, call, why, count in failing:
            if call.on_error != "crash" or count < 1.0:
                continue
            svc = app.services[svc_name]
            for rt, c in list(groups.get(svc_name) or []):
                if c.state != "running":
                    continue
                t = now + self.cluster.nodes.clock_offset(rt.node)
                lines, stderr, code = self.logger(svc, rt.name).crash(t, op, svc.peer(call.peer), why)
                self.cluster.kubelet.terminate(rt.namespace, rt.name, c.name, code, "Error", lines, stderr)

    def _os_limits(self, rt: PodRt, c: Ctr, now: float) -> None:
        """What each runtime prints when its node runs out of file descriptors or pids."""
        nodes = self.cluster.nodes
        if not nodes.state["faults"].get(rt.node) or not isinstance(c.instance, dict):
            return
        app = GRAPHS.get(c.instance.get("app", ""))
        svc = app.services.get(c.instance.get("svc", "")) if app else None
        pod = self.w._pod(rt.namespace, rt.name)
        if svc is None or pod is None:
            return
        t = now + nodes.clock_offset(rt.node)
        log = self.logger(svc, rt.name)
        ports = c.instance.get("ports") or svc.ports  # a program that reads its port from its config listens there
        if nodes.fd_exhausted(rt.node) and ports and self.w._log_once(f"fd/{rt.namespace}/{rt.name}", LOG_EVERY, now):
            self.cluster.logs.write(pod, c.name, log.accept_error(t, ports[0]), now, stream="stderr")
            n = nodes.get(rt.node)
            if n is not None and "fd" not in n.reported:
                n.reported["fd"] = now
                nodes.kernel_log(rt.node, [f"VFS: file-max limit {int(float(nodes.fault(rt.node, 'fileMax')))} reached"])
        if nodes.pid_exhausted(rt.node) and self.w._log_once(f"pid/{rt.namespace}/{rt.name}", 30.0, now):
            lines, code = log.thread_exhausted(t)
            self.cluster.kubelet.terminate(rt.namespace, rt.name, c.name, code, "Error", [], lines)

    # -- traces ------------------------------------------------------------------------------------
    def _traces(self, ns: str, app: AppGraph, groups: dict, lam: dict, succ: dict, lat: dict, err: dict,
                now: float) -> None:
        steps = self.w.state["steps"]
        if steps % 2:
            return  # one sampled trace per route every 10 s keeps Jaeger current at a fraction of the cost
        tracer: TraceFormat = app.tracer or OTEL
        if tracer.sample_env and app.routes:
            entry = groups.get(app.routes[0].service) or []
            if entry and env_float(entry[0][1].instance.get("env", {}), tracer.sample_env, 0.01) <= 0:
                return  # sampling switched off: nothing reaches Jaeger
        for i, route in enumerate(app.routes):
            if lam.get((route.service, route.op), 0.0) <= 0:
                continue
            if route.share < 0.05 and (steps // 2 + i) % 6:
                continue
            spans: list[dict[str, Any]] = []
            self.w.state["trace_seq"] += 1
            trace_id = hashlib.sha256(f"{self.cluster.seed}/{ns}/{self.w.state['trace_seq']}".encode()).hexdigest()[:32]
            ok = self.cluster.rng.random() < succ.get((route.service, route.op), 1.0)
            self._span(spans, trace_id, None, app, route.service, route.op, groups, succ, lat, err, now, ok, 0, route)
            if spans:
                self.cluster.obs.traces.add(spans)

    def _span(self, spans: list, trace_id: str, parent: str | None, app: AppGraph, svc_name: str, op: str,
              groups: dict, succ: dict, lat: dict, err: dict, start: float, ok: bool, depth: int, route: Any) -> float:
        insts = groups.get(svc_name) or []
        svc = app.services[svc_name]
        if not insts or depth > 6:
            return 0.0
        if not svc.traced:
            return lat.get((svc_name, op), 0.001)
        rt, c = insts[len(spans) % len(insts)]
        pod = self.w._pod(rt.namespace, rt.name)
        if pod is None or not isinstance(c.instance, dict) or not self._exporter_ok(app, pod, c.instance):
            return lat.get((svc_name, op), 0.001)
        skew = self.cluster.nodes.clock_offset(rt.node) + self.cluster.chaos.time_offset(pod, c.name)
        span_id = hashlib.sha256(f"{trace_id}/{len(spans)}".encode()).hexdigest()[:16]
        duration = max(lat.get((svc_name, op), 0.001), 0.0002)
        tracer: TraceFormat = app.tracer or OTEL
        kind = app.callee_protocol.get(svc_name, "grpc")
        tags = tracer.server_tags(route if depth == 0 else None, kind, ok)
        span = jaeger_span(trace_id, span_id, parent, op, start + skew, duration, tags,
                           None if ok else (*tracer.error_event, err.get((svc_name, op), "internal error")),
                           svc_name, tracer.process_tags(rt))
        spans.append(span)
        t = start + svc.latency * 0.3
        failed_seen = False
        for call in svc.ops.get(op, ()):
            peer = svc.peer(call.peer)
            if not peer.service and not tracer.store_spans:
                continue
            if call.share < 0.5 and self.cluster.rng.random() > call.share:
                continue
            key = (peer.service, call.op) if peer.service else None
            child_good = succ.get(key, 1.0) if key else 1.0
            child_ok = child_good >= 0.5 if ok else (not failed_seen and child_good < 0.999)
            if not ok and child_good >= 0.999:
                child_ok = True
            cid = hashlib.sha256(f"{trace_id}/c{len(spans)}".encode()).hexdigest()[:16]
            client = {**span, "spanID": cid, "operationName": call.op if peer.service else f"{call.op} {peer.name}",
                      "startTime": int((t + skew) * 1e6),
                      "references": [{"refType": "CHILD_OF", "traceID": trace_id, "spanID": span_id}],
                      "tags": tracer.client_tags(peer)
                      + ([{"key": "error", "type": "bool", "value": True}] if not child_ok else []),
                      "logs": []}
            if peer.service:
                at = len(spans)
                d = self._span(spans, trace_id, cid, app, peer.service, call.op, groups, succ, lat, err, t, child_ok,
                               depth + 1, route)
                client["duration"] = int(max(d, 0.0002) * 1e6) + 100
                spans.insert(at, client)
            else:
                d = 0.0008
                client["tags"] = client["tags"] + [{"key": "db.system", "type": "string", "value": peer.protocol}]
                client["duration"] = int(d * 1e6)
                spans.append(client)
            t += d
            if not child_ok:
                failed_seen = True
                if call.on_error != "ignore":
                    break
        return duration

    def _exporter_ok(self, app: AppGraph, pod: dict, inst: dict) -> bool:
        """Spans reach Jaeger only while the pod can resolve its trace exporter and it has endpoints."""
        key = ("exporter", pod["metadata"]["uid"])
        cache = self.w._conn_cache
        if key not in cache:
            exporter = inst["peers"].get(app.trace_peer) if app.trace_peer else None
            host = exporter["host"] if exporter else app.trace_host or ("otel-collector" if app.span_metrics else "jaeger")
            svc, e = self.cluster.network.lookup(pod, host)
            ok = False
            if svc is not None and not e:
                ep = self.cluster.store.try_get("endpoints", svc["metadata"]["namespace"], svc["metadata"]["name"])
                ok = any(s.get("addresses") for s in (ep or {}).get("subsets") or [])
            elif svc is None and not e:
                ok = True
            else:  # an ExternalName to the farm's stack (jaeger-agent.observe…): the emulated cluster is that stack
                alias = self.cluster.store.try_get("services", pod["metadata"]["namespace"], host) or {}
                target = (alias.get("spec") or {}).get("externalName", "")
                ok = (alias.get("spec") or {}).get("type") == "ExternalName" and f".{STACK_NAMESPACE}.svc." in target
            cache[key] = ok
        return cache[key]


class TraceFormat:
    """How an application's tracer tags its spans (AppGraph.tracer): OpenTelemetry's semantic
    conventions by default; an app whose tracer predates them (Jaeger's Go client) declares its own."""

    error_event: tuple[str, str] = ("exception", "exception.message")  # (event, field) logged on a failed request
    store_spans = True  # its database clients are instrumented too
    sample_env = ""  # the variable of the entry service that sets the sampled share (Jaeger's JAEGER_SAMPLE_RATIO)

    def server_tags(self, route: Any, protocol: str, ok: bool) -> list[dict[str, Any]]:
        """A server span's tags; `route` is the load generator's request for an entry span, else None."""
        tags: list[dict[str, Any]] = [{"key": "span.kind", "type": "string", "value": "server"},
                                      {"key": "otel.status_code", "type": "string", "value": "OK" if ok else "ERROR"}]
        if route is not None:
            return tags + [{"key": "http.request.method", "type": "string", "value": route.method},
                           {"key": "url.path", "type": "string", "value": route.url_path},
                           {"key": "http.response.status_code", "type": "int64", "value": 200 if ok else 500}]
        return tags + [{"key": "rpc.system" if protocol in ("grpc", "thrift") else "network.protocol.name",
                        "type": "string", "value": protocol}]

    def client_tags(self, peer: Peer) -> list[dict[str, Any]]:
        return [{"key": "span.kind", "type": "string", "value": "client"},
                {"key": "peer.service", "type": "string", "value": peer.service or peer.name}]

    def process_tags(self, rt: PodRt) -> list[dict[str, Any]]:
        return [{"key": "host.name", "type": "string", "value": rt.name},
                {"key": "k8s.pod.ip", "type": "string", "value": rt.ip},
                {"key": "k8s.namespace.name", "type": "string", "value": rt.namespace}]


OTEL = TraceFormat()


def jaeger_span(trace_id: str, span_id: str, parent: str | None, op: str, start: float, duration: float,
                tags: list[dict[str, Any]], error: tuple[str, str, str] | None, service: str,
                process_tags: list[dict[str, Any]]) -> dict[str, Any]:
    """One server span as Jaeger's API returns it; `error` is the (event, field, message) its
    tracer logs on a failed request (OpenTelemetry's exception event, the Go client's error), and
    such a span is tagged error=true after its own `tags`."""
    if error:
        tags = [*tags, {"key": "error", "type": "bool", "value": True}]
    return {"traceID": trace_id, "spanID": span_id, "flags": 1, "operationName": op,
            "references": [{"refType": "CHILD_OF", "traceID": trace_id, "spanID": parent}] if parent else [],
            "startTime": int(start * 1e6), "duration": int(duration * 1e6), "tags": tags,
            "logs": ([{"timestamp": int((start + duration) * 1e6),
                       "fields": [{"key": "event", "type": "string", "value": error[0]},
                                  {"key": error[1], "type": "string", "value": error[2]}]}] if error else []),
            "process": {"serviceName": service, "tags": process_tags}}


def _p_timeout(latency: float, timeout: float | None) -> float:
    """The share of calls of this mean latency that outlast the deadline."""
    if not timeout:
        return 0.0
    x = (latency - timeout) / (0.12 * timeout)
    return 1.0 if x > 40 else 0.0 if x < -40 else 1.0 / (1.0 + math.exp(-x))


def _locust_error(why: str, reach: float) -> str:
    if reach < 1 and ("refused" in why or "ConnectionRefused" in why):
        return "ConnectionRefusedError(111, 'Connection refused')"
    if "deadline" in why.lower() or "timeout" in why.lower():
        return "HTTPError('504 Server Error: Gateway Timeout')"
    return "HTTPError('500 Server Error: Internal Server Error')"


def graph_instances(running: Iterable[tuple[PodRt, Ctr]]) -> dict[str, dict[str, list[tuple[PodRt, Ctr]]]]:
    groups: dict[str, dict[str, list[tuple[PodRt, Ctr]]]] = {}
    for rt, c in running:
        inst = c.instance
        if isinstance(inst, dict) and inst.get("kind") == "graph":
            groups.setdefault(rt.namespace, {}).setdefault(inst["svc"], []).append((rt, c))
    return groups
