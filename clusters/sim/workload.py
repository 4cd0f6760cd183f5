"""The open-loop workload and the fluid request model. Every step (5 s of cluster time):

1. the load generators (wrk2 pods, `-R` req/s each) offer requests to the URL they target;
2. offered rates flow down the call graph (apps/hotel.py OPS), multiplied by the retries each edge
   made in the previous step (that feedback is what lets retry storms sustain themselves);
3. from the leaves up, each service's capacity (replicas × CPU limit / CPU per request, rate's
   token bucket) serves its queue; the queue lives in the pods (a new pod starts empty) and is live
   heap, so the Go collector's cost per request (apps/hotel.py: GOGC, GOMEMLIMIT) follows it; waits,
   timeouts, retries and errors give every operation a success fraction and a latency, propagated
   to callers as gRPC errors and 5xx;
4. side effects: counters for the exporters, CPU and memory per container (OOM kills), crashes the
   real code would have (a memcached error panics profile/rate/reservation), log lines and
   sampled Jaeger traces.
Nothing is scripted: a symptom appears only when its cause is in the cluster."""

from __future__ import annotations

import hashlib
import math
from typing import TYPE_CHECKING, Any

from clusters.sim.apps.base import env_float, fluid_ticks, mongo_log, zerolog
from clusters.sim.apps.goruntime import GO_ALLOC_PER_REQUEST, go_gc_cpu, go_live
from clusters.sim.apps.graph import store_model
from clusters.sim.apps.hotel import (
    CACHES,
    CPU_PER_REQUEST,
    OPS,
    ROUTES,
    SERVICE_TIME,
    SERVICES,
    split_addr,
)
from clusters.sim.callgraph import CallGraphFlow, jaeger_span
from clusters.sim.controllers.quantity import parse_quantity

if TYPE_CHECKING:
    from clusters.sim.cluster import SimCluster
    from clusters.sim.controllers.kubelet import Ctr, PodRt

TOPO = ["frontend", "search", "geo", "rate", "profile", "recommendation", "reservation", "user"]
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
SPAN_BUCKETS_MS = (2, 4, 6, 8, 10, 50, 100, 200, 400, 800, 1000, 1400, 2000, 5000, 10000, 15000)
WRK_TIMEOUT = 2.0
STORE_CAPACITY = {"memcached": 25000.0, "mongo": 3000.0}


def logistic(x: float) -> float:
    if x > 40:
        return 1.0
    if x < -40:
        return 0.0
    return 1.0 / (1.0 + math.exp(-x))


def p_timeout(latency: float, timeout: float | None) -> float:
    if not timeout:
        return 0.0
    return logistic((latency - timeout) / (0.12 * timeout))


def exp_cdf(b: float, mean: float, floor: float) -> float:
    if b <= floor * 0.5:
        return 0.0
    return 1.0 - math.exp(-max(0.0, b - floor * 0.5) / max(1e-6, mean - floor * 0.5))


class Workload:
    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster
        self.state: dict[str, Any] = {"consul": {}, "groups": {}, "edges": {}, "counters": {}, "gauges": {},
                                      "logged": {}, "trace_seq": 0, "steps": 0}
        self._conn_cache: dict[Any, Any] = {}
        self._conn_rv = -1
        self._bucket_keys: dict[Any, Any] = {}
        self.graphs = CallGraphFlow(self)

    # -- consul --------------------------------------------------------------------------------
    def consul_register(self, consul_pod: dict, name: str, pod: dict, port: int) -> None:
        key = f"{consul_pod['metadata']['namespace']}/{consul_pod['metadata']['name']}"
        reg = self.state["consul"].setdefault(key, {}).setdefault(name, [])
        entry = [pod["metadata"]["namespace"], pod["metadata"]["name"], port]
        if entry not in reg:
            reg.append(entry)

    def consul_reset(self, namespace: str, pod: str) -> None:
        self.state["consul"][f"{namespace}/{pod}"] = {}

    def forget_pod(self, namespace: str, pod: str) -> None:
        self.state["consul"].pop(f"{namespace}/{pod}", None)

    def instance_of(self, pod: dict, port: int) -> Any:
        rt = self.cluster.kubelet.runtime(pod)
        if rt is None:
            return None
        for c in rt.containers.values():
            if c.state == "running" and c.stage == "run" and port in c.ports:
                return c.instance
        return None

    # -- cached network views (recomputed when the store changes) -------------------------------
    def _fresh(self) -> None:
        rv = self.cluster.store.resource_version
        if rv != self._conn_rv:
            self._conn_cache.clear()
            self._conn_rv = rv

    def _pod(self, ns: str, name: str) -> dict | None:
        key = ("pod", ns, name)
        if key not in self._conn_cache:
            self._conn_cache[key] = self.cluster.raw("pods", ns, name)
        return self._conn_cache[key]

    def _connect(self, pod: dict, host: str, port: int) -> Any:
        key = ("dns", pod["metadata"]["uid"], host, port)
        if key not in self._conn_cache:
            self._conn_cache[key] = self.cluster.network.connect(pod, host, port)
        return self._conn_cache[key]

    def _connect_pod(self, pod: dict, target: dict, port: int) -> Any:
        key = ("pod2", pod["metadata"]["uid"], target["metadata"]["uid"], port)
        if key not in self._conn_cache:
            self._conn_cache[key] = self.cluster.network.connect_pod(pod, target, port)
        return self._conn_cache[key]

    # -- counters --------------------------------------------------------------------------------
    def inc(self, metric: str, labels: tuple, v: float) -> None:
        if v:
            key = (metric, labels)
            self.state["counters"][key] = self.state["counters"].get(key, 0.0) + v

    def gauge(self, metric: str, labels: tuple, v: float) -> None:
        self.state["gauges"][(metric, labels)] = v

    def observe(self, metric: str, labels: tuple, buckets: tuple, n: float, mean: float, floor: float,
                scale: float = 1.0) -> None:
        """Record `n` requests of mean latency `mean` (seconds) into a histogram; the buckets are
        filled when the exporter is scraped (one exponential spread per scrape interval)."""
        if n <= 0:
            return
        pending = self.state.setdefault("pending", {})
        acc = pending.get((metric, labels))
        if acc is None:
            pending[(metric, labels)] = [n, n * mean, floor, buckets, scale]
        else:
            acc[0] += n
            acc[1] += n * mean

    def flush_histograms(self) -> None:
        c = self.state["counters"]
        exp = math.exp
        for (metric, labels), (n, weighted, floor, buckets, scale) in self.state.get("pending", {}).items():
            mean = weighted / n
            keys = self._bucket_keys.get((metric, labels))
            if keys is None:
                keys = [((metric + "_bucket", labels + (("le", _le(b)),)), b / scale) for b in buckets]
                keys.append(((metric + "_bucket", labels + (("le", "+Inf"),)), math.inf))
                self._bucket_keys[(metric, labels)] = keys
            half = floor * 0.5
            span = max(1e-6, mean - half)
            for key, b in keys:
                if b <= half:
                    if key not in c:
                        c[key] = 0.0
                    continue
                x = (b - half) / span
                c[key] = c.get(key, 0.0) + (n if x > 30 else n * (1.0 - exp(-x)))
            c[(metric + "_sum", labels)] = c.get((metric + "_sum", labels), 0.0) + weighted * scale
            c[(metric + "_count", labels)] = c.get((metric + "_count", labels), 0.0) + n
        self.state["pending"] = {}

    def _log_once(self, key: str, every: float, now: float) -> bool:
        last = self.state["logged"].get(key, -1e18)
        if now - last < every:
            return False
        self.state["logged"][key] = now
        return True

    # -- one step ------------------------------------------------------------------------------
    def step(self, now: float, dt: float) -> None:
        self._fresh()
        self.state["steps"] += 1
        kubelet = self.cluster.kubelet
        groups: dict[str, dict[str, list[tuple[PodRt, Ctr]]]] = {}
        graph_groups: dict[str, dict[str, list[tuple[PodRt, Ctr]]]] = {}
        graph_clients: dict[str, list[tuple[PodRt, Ctr, Any, Any]]] = {}
        wrks: list[tuple[PodRt, Ctr]] = []
        locusts: list[tuple[PodRt, Ctr]] = []
        stores: list[tuple[PodRt, Ctr]] = []
        data_stores: list[tuple[PodRt, Ctr, Any]] = []
        for rt, c in kubelet.running():
            inst = c.instance
            kind = inst.get("kind") if isinstance(inst, dict) else None
            if kind == "hotel":
                groups.setdefault(rt.namespace, {}).setdefault(inst["svc"], []).append((rt, c))
            elif kind == "graph":
                graph_groups.setdefault(rt.namespace, {}).setdefault(inst["svc"], []).append((rt, c))
            elif kind == "wrk2":
                wrks.append((rt, c))
            elif kind == "locust":
                locusts.append((rt, c))
            elif kind == "wait":
                self._wait_loop(rt, c, now)
            elif kind in ("mongo", "memcached"):
                stores.append((rt, c))  # hotel-reservation's stores: ticked below as that model expects
            else:
                model = store_model(c)
                if model is not None:
                    data_stores.append((rt, c, model))
            self._idle(rt, c, dt)
        for rt, c in locusts:
            pod = self._pod(rt.namespace, rt.name)
            conn = self._connect(pod, c.instance["host"], c.instance["port"]) if pod is not None else None
            target = self.graphs.client_target(conn) if conn is not None else None
            if target is not None:
                graph_clients.setdefault(target[0], []).append((rt, c, conn, target[1]))
            else:
                self._locust(rt, c, dt)
        client_conns: dict[str, list[tuple[PodRt, Ctr, Any]]] = {}
        for rt, c in wrks:
            self._wrk_round(rt, c, now)
            pod = self._pod(rt.namespace, rt.name)
            if pod is None:
                continue
            inst = c.instance
            conn = self._connect(pod, inst["host"], inst["port"])
            target = self.graphs.client_target(conn)
            if target is not None:
                graph_clients.setdefault(target[0], []).append((rt, c, conn, target[1]))
                continue
            ns = None
            for tg in conn.targets:
                ti = self.instance_of(tg.pod, tg.port) if not tg.error else None
                if isinstance(ti, dict) and ti.get("kind") == "hotel":
                    ns = tg.pod["metadata"]["namespace"]
            if ns is None and conn.service is not None:
                ns = conn.service["metadata"]["namespace"]
            client_conns.setdefault(ns or rt.namespace, []).append((rt, c, conn))
        self._generic_health()
        for ns in set(groups) | set(client_conns):
            self._namespace_step(ns, groups.get(ns, {}), client_conns.get(ns, []), now, dt)
        for ns_groups in groups.values():
            for insts in ns_groups.values():
                for rt, c in insts:
                    self._os_limits(rt, c, now)
        for rt, c in stores:
            self._store_tick(rt, c, now, dt)
        self.graphs.step(now, dt, graph_groups, graph_clients)
        for rt, c, model in data_stores:
            if c.state == "running":
                model.tick(self.cluster, rt, c, now, dt)
        for tick in fluid_ticks:
            tick(self.cluster, now, dt)
        kubelet.reconcile_memory(now)

    def _os_limits(self, rt: PodRt, c: Ctr, now: float) -> None:
        """What the Go services print when their node runs out of file descriptors or pids."""
        nodes = self.cluster.nodes
        if not nodes.state["faults"].get(rt.node):
            return
        pod = self._pod(rt.namespace, rt.name)
        if pod is None or not isinstance(c.instance, dict):
            return  # gone, or crashed earlier in this step
        from datetime import UTC, datetime
        t = now + nodes.clock_offset(rt.node)
        stamp = datetime.fromtimestamp(t, UTC).strftime("%Y/%m/%d %H:%M:%S")
        svc, port = c.instance["svc"], c.instance["port"]
        if nodes.fd_exhausted(rt.node) and self._log_once(f"fd/{rt.namespace}/{rt.name}", 15.0, now):
            if svc == "frontend":
                line = f"{stamp} http: Accept error: accept tcp [::]:{port}: accept4: too many open files; retrying in 1s"
            else:
                line = (f"WARNING: {stamp} [core] [Server #1] grpc: Server.Serve failed to accept: accept tcp "
                        f"[::]:{port}: accept4: too many open files; retrying in 1s")
            self.cluster.logs.write(pod, c.name, line, now, stream="stderr")
            n = nodes.get(rt.node)
            if n is not None and "fd" not in n.reported:
                n.reported["fd"] = now
                nodes.kernel_log(rt.node, [f"VFS: file-max limit {int(float(nodes.fault(rt.node, 'fileMax')))} reached"])
        if nodes.pid_exhausted(rt.node) and self._log_once(f"pid/{rt.namespace}/{rt.name}", 30.0, now):
            threads = 9 + int(now) % 7
            self.cluster.kubelet.terminate(rt.namespace, rt.name, c.name, 2, "Error", [], [
                f"runtime: failed to create new OS thread (have {threads} already; errno=11)",
                "runtime: may need to increase max user processes (ulimit -u)", "fatal error: newosproc", "",
                "runtime stack:", "runtime.throw({0x9a8f3e?, 0x0?})", "\t/usr/local/go/src/runtime/panic.go:1047 +0x5d"])

    def _generic_health(self) -> None:
        """For apps without a call-graph model: a pod serves as well as the dependencies its *_ADDR
        variables name are reachable and healthy (a failed peer costs its share of requests)."""
        pods = {}
        for rt, c in self.cluster.kubelet.running():
            if isinstance(c.instance, dict) and c.instance.get("kind") == "generic":
                pods[rt.uid] = (rt, c)
        health = {uid: 1.0 for uid in pods}
        for _ in range(3):
            nxt = {}
            for uid, (rt, c) in pods.items():
                deps = c.instance.get("deps") or []
                pod = self._pod(rt.namespace, rt.name)
                if not deps or pod is None:
                    nxt[uid] = 1.0
                    continue
                total = 0.0
                for host, port in deps:
                    conn = self._connect(pod, host, port)
                    oks = [health.get(t.pod["metadata"]["uid"], 1.0) for t in conn.targets if not t.error] if not conn.error else []
                    n = len(conn.targets) if conn.targets else 1
                    total += sum(oks) / n
                nxt[uid] = total / len(deps)
            health = nxt
        self.state["generic_health"] = health

    def generic_success(self, conn: Any) -> float:
        if conn.error or not conn.targets:
            return 0.0
        hs = self.state.get("generic_health", {})
        return sum(0.0 if t.error else hs.get(t.pod["metadata"]["uid"], 1.0) for t in conn.targets) / len(conn.targets)

    def _wait_loop(self, rt: PodRt, c: Ctr, now: float) -> None:
        """`until nc -z host port; do ...; done` init containers: done once the port answers."""
        pod = self._pod(rt.namespace, rt.name)
        if pod is None:
            return
        inst = c.instance
        if self.cluster.network.connect(pod, inst["host"], inst["port"]).ok_share > 0:
            self.cluster.kubelet.terminate(rt.namespace, rt.name, c.name, 0, "Completed",
                                           [f"{inst['host']} ({inst['port']}) open"])
        elif inst.get("line"):
            self.cluster.logs.write(pod, c.name, [inst["line"]] * 2, now)

    def _locust(self, rt: PodRt, c: Ctr, dt: float) -> None:
        """Locust's own counters as locust_exporter (the pod's sidecar) exports them: requests reach
        the entry service or fail (no call graph for these apps yet)."""
        pod = self._pod(rt.namespace, rt.name)
        if pod is None:
            return
        sidecar = any(o.name != c.name and o.state == "running" for o in rt.containers.values())
        inst = c.instance
        conn = self._connect(pod, inst["host"], inst["port"])
        n = inst["rate"] * dt
        fail = n * (1 - self.generic_success(conn))
        if not sidecar:
            return
        for name in ("/", "Aggregated"):
            labels = (("namespace", rt.namespace), ("job", f"locust-{rt.namespace}"), ("pod", rt.name), ("method", "GET"), ("name", name))
            self.inc("locust_requests_num_requests", labels, n)
            self.inc("locust_requests_num_failures", labels, fail)

    def _idle(self, rt: PodRt, c: Ctr, dt: float) -> None:
        c.cpu_seconds += 0.002 * dt
        c.cpu_periods += dt / 0.1
        stress = self.cluster.chaos.stress(rt.namespace, rt.name, c.name)
        if stress and stress.get("cpu"):
            limit = self._cores(rt, c) + stress["cpu"] if self._conn_cache.get(("cores", rt.uid, c.name)) else None
            burn = min(stress["cpu"], limit * 0.95) if limit else stress["cpu"]
            c.cpu_seconds += burn * dt
            self.cluster.nodes.account_cpu(rt.node, burn * dt)
            if limit and stress["cpu"] >= limit * 0.5:
                c.cpu_throttled_periods += dt / 0.1 * min(0.95, stress["cpu"] / limit)
        model_mem = c.memory
        extra = stress.get("memory", 0.0) if stress else 0.0
        c.memory = max(0.0, model_mem - c.__dict__.get("_stress_mem", 0.0)) + extra
        c.__dict__["_stress_mem"] = extra
        self.cluster.nodes.account_cpu(rt.node, 0.002 * dt)

    # -- hotel-reservation ----------------------------------------------------------------------
    def _namespace_step(self, ns: str, groups: dict[str, list], clients: list, now: float, dt: float) -> None:
        st = self.state
        edges = st["edges"]
        lam: dict[tuple[str, str], float] = {}
        entry = 0.0
        for _, c, conn in clients:
            rate = c.instance["rate"]
            entry += rate * conn.ok_share
            for route, share in ROUTES:
                lam[("frontend", route)] = lam.get(("frontend", route), 0.0) + rate * share * conn.ok_share
        gstate = st["groups"].setdefault(ns, {})
        prev = {k: v for k, v in gstate.get("_succ", {}).items()}
        miss: dict[str, float] = {}
        for svc in ("rate", "profile", "reservation"):
            miss[svc] = self._miss_fraction(ns, svc, groups)
        # 1. offered rates, top-down, with last step's retry amplification
        store_load: dict[tuple[str, str, str], float] = {}
        for svc in TOPO:
            for (s, op), calls in OPS.items():
                if s != svc or lam.get((s, op), 0.0) <= 0:
                    continue
                rate_in = lam[(s, op)]
                ok = 1.0
                for tsvc, top, how in calls:
                    e = f"{s}|{op}|{tsvc}|{top}"
                    f_prev = edges.get(e, {}).get("f", 0.0)
                    attempts = self._attempts(ns, s, tsvc, groups)
                    amp = sum(f_prev ** k for k in range(int(attempts)))
                    if how == "consul":
                        lam[(tsvc, top)] = lam.get((tsvc, top), 0.0) + rate_in * ok * amp
                        ok *= prev.get((tsvc, top), 1.0) if tsvc != "reservation" or "MakeReservation" not in top else 1.0
                    else:
                        frac = 1.0 if how == "memc" or "insert" in top else miss.get(s, 0.0)
                        store_load[(s, how, top)] = store_load.get((s, how, top), 0.0) + rate_in * ok * frac
        # 2. evaluate bottom-up
        succ: dict[tuple[str, str], float] = {}
        lat: dict[tuple[str, str], float] = {}
        err: dict[tuple[str, str], str] = {}
        store_edges = self._store_edges(ns, groups, store_load, now, dt)
        for svc in reversed(TOPO):
            insts = groups.get(svc, [])
            ops = [(s, op) for (s, op) in OPS if s == svc]
            offered = sum(lam.get(k, 0.0) for k in ops)
            served_frac, wait, served = self._serve(ns, svc, insts, offered, dt, now)
            slow = self.state["groups"].get(ns, {}).get(svc, {}).get("slow", 1.0) if insts else 1.0
            for key in ops:
                s, op = key
                ok, latency, why = served_frac, SERVICE_TIME[svc] * slow + wait, None if served_frac > 0.999 else \
                    "rpc error: code = ResourceExhausted desc = rate request queue is full"
                first = True
                for tsvc, top, how in OPS[key]:
                    if how == "consul":
                        e_ok, e_lat, e_err = self._edge(ns, svc, op, tsvc, top, insts, groups, succ, lat, err,
                                                        lam.get(key, 0.0))
                    else:
                        e_ok, e_lat, e_err = store_edges.get((svc, how, top), (1.0, 0.0005, None))
                        if how == "mongo":
                            m = 1.0 if "insert" in top else miss.get(svc, 0.0)
                            e_ok, e_lat = 1 - m * (1 - e_ok), e_lat * m
                    if first or ok > 0:
                        ok *= e_ok
                        latency += e_lat
                    if e_err and why is None:
                        why = e_err
                    first = False
                if key == ("frontend", "HTTP GET /hotels") and any(
                        c.instance.get("env", {}).get("SEARCH_BACKEND_VERSION") == "true" for _, c in insts):
                    bad = sum(1 for _, c in insts if c.instance.get("env", {}).get("SEARCH_BACKEND_VERSION") == "true")
                    ok *= 1 - bad / len(insts)
                    why = "internal server error"
                    for rt, c in insts:
                        if c.instance.get("env", {}).get("SEARCH_BACKEND_VERSION") == "true" and \
                                self._log_once(f"{rt.namespace}/{rt.name}/latent", 15.0, now) and \
                                (pod := self._pod(rt.namespace, rt.name)):
                            self.cluster.logs.write(pod, c.name, zerolog(
                                now + self.cluster.nodes.clock_offset(rt.node), "ERR", "services/frontend/server.go:187",
                                "search backend unavailable: upstream search-v2 returned no results; responding 500"), now)
                succ[key], lat[key] = ok, latency
                if why and ok < 0.999:
                    err[key] = why
                self._op_metrics(ns, svc, op, lam.get(key, 0.0) * dt, ok, latency)
            if insts:
                self._cpu(insts, served, svc, dt)
        gstate["_succ"] = succ
        gstate["_err"] = err  # what the frontend answers a failing request with (an HTTP client in a pod reads it)
        # 3. the clients
        for rt, c, conn in clients:
            self._client(ns, rt, c, conn, succ, lat, err, dt, now)
        self._service_logs(ns, groups, lam, succ, err, now)
        self._traces(ns, groups, lam, succ, lat, err, now)
        self._crashes(ns, groups, store_edges, store_load, now, dt)
        del entry

    def _attempts(self, ns: str, caller: str, callee: str, groups: dict[str, list]) -> float:
        if caller == "search" and callee == "rate":
            insts = groups.get("search") or []
            if insts:
                return float(int(insts[0][1].instance.get("policy", {}).get("attempts", 1)))
        return 1.0

    def _timeout(self, caller: str, callee: str, groups: dict[str, list]) -> tuple[float | None, dict[str, float]]:
        if caller == "search" and callee == "rate":
            insts = groups.get("search") or []
            if insts:
                pol = insts[0][1].instance.get("policy", {})
                return pol.get("timeout"), pol
        return None, {}

    def _serve(self, ns: str, svc: str, insts: list, offered: float, dt: float, now: float) -> tuple[float, float, float]:
        """(fraction accepted, queue wait, requests served this step) for a service group."""
        g = self.state["groups"].setdefault(ns, {}).setdefault(svc, {"q": 0.0})
        if not insts:
            g["q"] = 0.0
            return 1.0, 0.0, 0.0
        # The backlog lives in the processes: a new pod starts with none, a killed one takes its share along.
        g["q"] = sum(c.instance.get("queued", 0.0) for _, c in insts)
        mu = 0.0
        qcap = 0.0
        for rt, c in insts:
            cores = self._cores(rt, c)
            # The collector's share: its cost per request follows the heap the pod held at the start
            # of the step, so a backlog that fills the heap slows the pod that must drain it.
            c.instance["gc_cost"] = self._gc_cost(c, svc, cores)
            cap = cores / (CPU_PER_REQUEST[svc] + c.instance["gc_cost"])
            if svc == "rate":
                cap = min(cap, c.instance.get("qps_limit", 20.0))
                qcap += c.instance.get("queue_capacity", 256.0)
            else:
                qcap += 100000.0
            mu += cap
        mu = max(mu, 1e-6)
        g["slow"] = max(self._slowdown(rt, c) for rt, c in insts)
        arrivals = offered * dt
        total = g["q"] + arrivals
        served = min(total, mu * dt)
        rest = total - served
        q_new = min(rest, qcap)
        rejected = rest - q_new
        g["q"] = q_new
        g["mu"] = mu
        for _, c in insts:
            c.instance["queued"] = q_new / len(insts)  # parked in the process: live heap
        accepted = 1.0 - (rejected / arrivals if arrivals > 0 else 0.0)
        wait = (g["q"]) / mu
        if svc == "rate":
            labels = (("namespace", ns), ("job", "hotel-reservation-application"), ("instance", "rate:9091"))
            self.gauge("rate_queue_depth", labels, q_new)
            self.gauge("rate_in_flight", labels, min(q_new, mu * 0.01) + min(served / dt, mu) * SERVICE_TIME[svc])
            self.gauge("rate_backend_qps_limit", labels, sum(c.instance.get("qps_limit", 20.0) for _, c in insts))
            self.gauge("rate_queue_capacity", labels, qcap)
            self.inc("rate_requests_received_total", labels, arrivals)
            self.inc("rate_requests_rejected_total", labels, rejected)
            g["served"] = served
        return max(0.0, accepted), wait, served

    def _cores(self, rt: PodRt, c: Ctr) -> float:
        key = ("cores", rt.uid, c.name)
        if key not in self._conn_cache:
            pod = self._pod(rt.namespace, rt.name)
            lim = None
            for s in (pod or {}).get("spec", {}).get("containers", []):
                if s["name"] == c.name:
                    lim = ((s.get("resources") or {}).get("limits") or {}).get("cpu")
            self._conn_cache[key] = parse_quantity(lim) if lim else None
        limit = self._conn_cache[key]
        node = self.cluster.nodes.get(rt.node)
        cores = limit if limit is not None else (node.cpu if node else 1.0)
        cores *= self.cluster.nodes.cpu_factor(rt.node)
        stress = self.cluster.chaos.stress(rt.namespace, rt.name, c.name)
        if stress and stress.get("cpu"):
            cores = max(cores * 0.05, cores - stress["cpu"])
        return cores

    def _slowdown(self, rt: PodRt, c: Ctr) -> float:
        """How many times longer a request's CPU work takes: node throttling, CPU burners."""
        slow = 1.0 / self.cluster.nodes.cpu_factor(rt.node)
        stress = self.cluster.chaos.stress(rt.namespace, rt.name, c.name)
        if stress and stress.get("cpu"):
            slow *= 1.0 + stress["cpu"]  # the CFS shares the quota between the app and the burners
        return slow

    def _gc_cost(self, c: Ctr, svc: str, cores: float) -> float:
        go = c.instance.get("go")
        if go is None:
            return 0.0
        live = go_live(go, c.instance.get("rps", 0.0), c.instance.get("queued", 0.0))
        return go_gc_cpu(go, live, CPU_PER_REQUEST[svc], cores)

    def _cpu(self, insts: list, served: float, svc: str, dt: float) -> None:
        per = served / len(insts)
        for rt, c in insts:
            c.instance["rps"] = per / dt
            go = c.instance.get("go")
            if go is not None and go["gogc"] < 0 and go.get("memlimit") is None:
                go["allocated"] = go.get("allocated", 0.0) + per * GO_ALLOC_PER_REQUEST  # GC off: nothing is freed
            work = CPU_PER_REQUEST[svc] + c.instance.get("gc_cost", 0.0)
            self.charge(rt, c, per, per * work / self.cluster.nodes.cpu_factor(rt.node), dt, 600, 1800)

    def charge(self, rt: Any, c: Any, served: float, used: float, dt: float, rx_bytes: float, tx_bytes: float) -> None:
        """What serving `served` requests in `dt` costs a container: `used` CPU seconds (throttled
        as the CFS quota would, in 100 ms periods, once it nears its cores), bytes each way per
        request, the memory its model holds at that rate, and the node's CPU."""
        cores = self._cores(rt, c)
        c.cpu_seconds += used
        c.net_rx += served * rx_bytes
        c.net_tx += served * tx_bytes
        if cores * dt > 0 and used >= cores * dt * 0.98:
            c.cpu_throttled_periods += dt / 0.1 * 0.9
        elif used > cores * dt * 0.6:
            c.cpu_throttled_periods += dt / 0.1 * (used / (cores * dt) - 0.6)
        model = self.cluster.kubelet._model_by_name(c.model)
        if model is not None:
            c.memory = model.memory(c.instance, served / dt) + c.__dict__.get("_stress_mem", 0.0)
        self.cluster.nodes.account_cpu(rt.node, used)

    def _resolve(self, ns: str, caller_insts: list, callee: str) -> list[tuple[dict, dict, int]]:
        """Targets the caller's Consul knows for `callee`: [(caller pod, target pod, port)]."""
        name = SERVICES[callee].consul
        out = []
        for rt, c in caller_insts:
            pod = self._pod(rt.namespace, rt.name)
            if pod is None:
                continue
            inst = c.instance
            chost, cport = split_addr(inst["cfg"]["consulAddress"])
            conn = self._connect(pod, chost, cport)
            regs = None
            for tg in conn.targets:
                if not tg.error:
                    regs = self.state["consul"].get(f"{tg.pod['metadata']['namespace']}/{tg.pod['metadata']['name']}", {})
                    break
            if regs is not None:
                inst["consul_cache"][name] = [list(r) for r in regs.get(name, [])]
            entries = inst["consul_cache"].get(name, [])
            found = False
            for tns, tname, port in entries:
                target = self._pod(tns, tname)
                if target is not None:
                    out.append((pod, target, port))
                    found = True
            if not found:
                out.append((pod, None, 0))  # type: ignore[arg-type]  # nothing registered that still exists
        return out

    def _edge(self, ns: str, svc: str, op: str, tsvc: str, top: str, insts: list, groups: dict,
              succ: dict, lat: dict, err: dict, rate_in: float) -> tuple[float, float, str | None]:
        e = f"{svc}|{op}|{tsvc}|{top}"
        pairs = self._resolve(ns, insts, tsvc) if insts else []
        if not pairs:
            self.state["edges"][e] = {"f": 0.0}
            return 1.0, 0.0, None
        ok_pairs, delay, loss = 0.0, 0.0, 0.0
        why = None
        for pod, target, port in pairs:
            if target is None:
                why = why or "rpc error: code = Unavailable desc = there is no address available"
                continue
            t = self._connect_pod(pod, target, port)
            if t.error:
                why = why or f'rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing {t.error}"'
                continue
            ok_pairs += 1
            delay += t.delay_ms / 1000.0
            loss += t.loss
        reach = ok_pairs / len(pairs)
        if ok_pairs:
            delay /= ok_pairs
            loss /= ok_pairs
        sc = succ.get((tsvc, top), 1.0)
        lc = lat.get((tsvc, top), 0.001) + 2 * delay + loss * 0.6
        fail_loss = min(1.0, loss ** 2 * 3)
        timeout, pol = self._timeout(svc, tsvc, groups)
        pto = p_timeout(lc, timeout)
        f = 1.0 - reach * sc * (1 - pto) * (1 - fail_loss)
        attempts = int(self._attempts(ns, svc, tsvc, groups))
        ok = 1.0 - f ** attempts
        per_attempt = min(lc, timeout) if timeout else lc
        latency = sum(f ** k * per_attempt for k in range(attempts))
        back = pol.get("backoff", 0.0)
        for k in range(1, attempts):
            latency += f ** k * back * pol.get("multiplier", 2.0) ** (k - 1)
        self.state["edges"][e] = {"f": f}
        if why is None and f > 0.001:
            if pto > 0.5:
                why = "rpc error: code = DeadlineExceeded desc = context deadline exceeded"
            elif err.get((tsvc, top)):
                why = err[(tsvc, top)]
            elif fail_loss > 0.3:
                why = "rpc error: code = Unavailable desc = error reading from server: read tcp: i/o timeout"
        if svc == "search" and tsvc == "rate":
            labels = (("namespace", ns), ("job", "hotel-reservation-application"), ("instance", "search:9092"))
            dt = 5.0
            attempts_n = rate_in * dt * sum(f ** k for k in range(attempts))
            self.inc("search_requests_total", labels, rate_in * dt)
            self.inc("search_rate_attempts_total", labels, attempts_n)
            self.inc("search_rate_timeouts_total", labels, attempts_n * pto * reach)
            self.inc("search_rate_successes_total", labels, rate_in * dt * ok)
            self.inc("search_rate_failures_total", labels, rate_in * dt * (1 - ok))
            if (1 - ok) > 0.5 and why and "DeadlineExceeded" in why:
                why = "rpc error: code = Unavailable desc = search dependency unavailable"
            g = self.state["groups"].get(ns, {}).get("rate", {})
            rlabels = (("namespace", ns), ("job", "hotel-reservation-application"), ("instance", "rate:9091"))
            served = g.get("served", 0.0)
            self.inc("rate_requests_completed_total", rlabels, served * (1 - pto))
            self.inc("rate_requests_expired_total", rlabels, served * pto)
        return ok, latency, why

    # -- stores -------------------------------------------------------------------------------
    def _miss_fraction(self, ns: str, svc: str, groups: dict) -> float:
        insts = groups.get(svc) or []
        if not insts:
            return 0.0
        rt, c = insts[0]
        pod = self._pod(rt.namespace, rt.name)
        if pod is None:
            return 0.0
        conn = self._connect(pod, *split_addr(c.instance["cfg"][SERVICES[svc].memc_key]))
        for tg in conn.targets:
            mi = self.instance_of(tg.pod, tg.port) if not tg.error else None
            if isinstance(mi, dict) and mi.get("kind") == "memcached":
                items = mi.setdefault("keys", {}).get(svc, 0.0)
                return min(1.0, max(CACHES[svc].floor, 1.0 - items / CACHES[svc].keys))
        return 1.0

    def _store_edges(self, ns: str, groups: dict, load: dict, now: float, dt: float) -> dict:
        out: dict[tuple[str, str, str], tuple[float, float, str | None]] = {}
        for (svc, how, top), rate_in in load.items():
            insts = groups.get(svc) or []
            if not insts:
                continue
            key = SERVICES[svc].mongo_key if how == "mongo" else SERVICES[svc].memc_key
            ok_n, lat_sum, why = 0.0, 0.0, None
            for rt, c in insts:
                pod = self._pod(rt.namespace, rt.name)
                if pod is None:
                    continue
                addr = c.instance["cfg"][key]
                conn = self._connect(pod, *split_addr(addr))
                share = conn.ok_share
                if share < 1:
                    why = why or conn.first_error()
                s_ok, s_lat = share, 0.0005 + conn.delay_ms / 1000.0 * 2
                for tg in conn.targets:
                    if tg.error:
                        continue
                    si = self.instance_of(tg.pod, tg.port)
                    if not isinstance(si, dict):
                        continue
                    if si.get("kind") == "memcached":
                        keys = si.setdefault("keys", {})
                        cache = CACHES[svc]
                        miss = 1.0 - min(1.0, keys.get(svc, 0.0) / cache.keys)
                        keys[svc] = min(cache.keys, keys.get(svc, 0.0) + rate_in * dt * max(miss, 0.0) * 0.5)
                        si["items"] = sum(keys.values())
                    elif si.get("kind") == "mongo":
                        from clusters.sim.apps.stores import authorize
                        write = "insert" in top
                        user = "admin" if SERVICES[svc].auth else None
                        e = authorize(si, user, "admin", SERVICES[svc].db, write, "insert" if write else "find")
                        if e:
                            s_ok -= 1.0 / len(conn.targets)
                            why = why or e
                        si["load"] = si.get("load", 0.0) + rate_in
                        si.setdefault("io", {"read": 0.0, "write": 0.0})["write" if write else "read"] += rate_in * dt
                        cap = STORE_CAPACITY["mongo"]
                        s_lat += 0.002 / max(0.05, 1 - min(0.95, rate_in / cap)) + si.get("io_delay", 0.0)
                ok_n += max(0.0, s_ok)
                lat_sum += s_lat
            n = max(1, len(insts))
            out[(svc, how, top)] = (ok_n / n, lat_sum / n, why)
        return out

    def _store_tick(self, rt: PodRt, c: Ctr, now: float, dt: float) -> None:
        inst = c.instance
        if inst.get("kind") != "mongo":
            load = 0.0
        else:
            load = inst.pop("load", 0.0)
            io = inst.pop("io", {"read": 0.0, "write": 0.0})
            cl = self.cluster
            reads, writes = io["read"] * 0.05, io["write"]
            podobj = self._pod(rt.namespace, rt.name) or {}
            delay = cl.chaos.io_delay(podobj, c.name, "/data/db")
            inst["io_delay"] = delay
            if delay > 0:
                n = cl.nodes.get(rt.node)
                if n is not None:
                    n.disks[0].io_time += min(dt, (reads + writes + 4) * delay)
                if self._log_once(f"slowio/{rt.namespace}/{rt.name}", 15.0, now) and podobj:
                    t0 = now + cl.nodes.clock_offset(rt.node)
                    ms = int(delay * 1000) + 3
                    cl.logs.write(podobj, c.name, [mongo_log(t0, "I", "COMMAND", 51803, f"conn{3 + int(now) % 40}", "Slow query",
                                                             {"type": "command", "ns": "local.oplog", "command": {"find": "inventory"},
                                                              "planSummary": "COLLSCAN", "durationMillis": ms,
                                                              "storage": {"data": {"bytesRead": 4096, "timeReadingMicros": ms * 1000}}}),
                                                   mongo_log(t0, "I", "STORAGE", 22430, "Checkpointer", "WiredTiger message",
                                                             {"message": f"[{int(t0)}:0][1:0x7f3c2d1fe700], WT_SESSION.checkpoint: "
                                                                         f"[WT_VERB_CHECKPOINT_PROGRESS] Checkpoint has been running for {max(1, int(delay * 40))} seconds and wrote: 40 pages (1 MB)"})], now)
            if now - inst.get("last_checkpoint", now) >= 60.0:
                inst["last_checkpoint"] = now
                writes += 40
            node = rt.node
            t = now + cl.nodes.clock_offset(node)
            for op, count in (("read", reads), ("write", writes)):
                if count <= 0:
                    continue
                errno = cl.chaos.io_error(self._pod(rt.namespace, rt.name) or {}, c.name, "/data/db", op, count)
                frac = cl.nodes.io(node, op, 4096, count) if rt.volumes else 0.0
                if errno or (frac > 0 and cl.rng.random() < 1 - (1 - frac) ** max(1.0, count)):
                    ctx_name = "Checkpointer" if op == "write" else "conn" + str(3 + int(now) % 40)
                    lines = wiredtiger_lines(t, op, errno or 5, ctx_name)
                    cl.kubelet.terminate(rt.namespace, rt.name, c.name, 14, "Error", lines)
                    return
            c.cpu_seconds += load * dt * 0.0003
        model = self.cluster.kubelet._model_by_name(c.model)
        if model is not None:
            c.memory = model.memory(inst, load) + c.__dict__.get("_stress_mem", 0.0)

    # -- consequences --------------------------------------------------------------------------
    def _crashes(self, ns: str, groups: dict, store_edges: dict, load: dict, now: float, dt: float) -> None:
        """Any memcached error but a miss, and a failed Mongo read, make the handler log.Panic."""
        for (svc, how, top), (ok, _, why) in store_edges.items():
            if ok >= 0.999 or load.get((svc, how, top), 0.0) * dt * (1 - ok) < 1.0:
                continue
            for rt, c in groups.get(svc) or []:
                t = now + self.cluster.nodes.clock_offset(rt.node)
                if how == "memc":
                    msg = f"Tried to get hotelId [{1 + int(now) % 80}], but got memmcached error = {why}"
                else:
                    msg = f"Tried to find hotelId [{1 + int(now) % 80}], but got error: {why}"
                lines = [zerolog(t, "PNC", f"services/{svc}/server.go:{133 if how == 'memc' else 118}", msg)]
                stderr = [f"panic: {msg}", "", "goroutine 1843 [running]:",
                          "github.com/rs/zerolog.(*Logger).Panic.func1({0xc0003c2000, 0x9a})",
                          "\t/go/pkg/mod/github.com/rs/zerolog@v1.26.1/log.go:359 +0x2d"]
                self.cluster.kubelet.terminate(rt.namespace, rt.name, c.name, 2, "Error", lines, stderr)

    def _op_metrics(self, ns: str, svc: str, op: str, n: float, ok: float, latency: float) -> None:
        if n <= 0:
            return
        base = (("namespace", ns), ("job", "otel-spanmetrics"), ("service_name", svc), ("span_name", op),
                ("span_kind", "SPAN_KIND_SERVER"))
        good, bad = n * ok, n * (1 - ok)
        for count, code in ((good, "STATUS_CODE_UNSET"), (bad, "STATUS_CODE_ERROR")):
            if count > 1e-9:
                labels = base + (("status_code", code),)
                self.inc("traces_span_metrics_calls_total", labels, count)
                self.observe("traces_span_metrics_duration_milliseconds", labels, SPAN_BUCKETS_MS, count,
                             latency, SERVICE_TIME[svc], scale=1000.0)

    def _client(self, ns: str, rt: PodRt, c: Ctr, conn: Any, succ: dict, lat: dict, err: dict,
                dt: float, now: float) -> None:
        inst = c.instance
        rate = inst["rate"]
        timeout = inst.get("timeout", WRK_TIMEOUT)
        rnd = inst["round"]
        reach = conn.ok_share
        base = (("namespace", rt.namespace), ("job", "wrk2"), ("pod", rt.name))
        fbase = (("namespace", ns), ("job", "hotel-reservation-application"), ("service_name", "frontend"))
        generic = self.generic_success(conn) / reach if reach > 0 and not succ else 1.0
        for route, share in ROUTES:
            n = rate * share * dt
            method, path = route.split(" ", 2)[1:]
            s = succ.get(("frontend", route), 0.0 if reach == 0 else generic)
            latency = lat.get(("frontend", route), 0.002) + conn.delay_ms / 500.0
            pto = p_timeout(latency, timeout)
            connect = n * (1 - reach)
            timeouts = n * reach * pto
            good = n * reach * (1 - pto) * s
            bad = n * reach * (1 - pto) * (1 - s)
            labels = base + (("endpoint", path),)
            self.inc("wrk2_requests_total", labels + (("code", "200"),), good)
            self.inc("wrk2_requests_total", labels + (("code", "500"),), bad)
            self.inc("wrk2_requests_total", labels + (("code", "timeout"),), timeouts)
            self.inc("wrk2_requests_total", labels + (("code", "connect_error"),), connect)
            answered = good + bad + timeouts
            if answered > 0:
                self.observe("wrk2_request_duration_seconds", base, HTTP_BUCKETS, answered, min(latency, timeout), 0.0015)
            if reach > 0:
                for count, code in ((good, "200"), (bad, "500")):
                    if count > 1e-9:
                        self.observe("http_server_request_duration_seconds",
                                     fbase + (("http_request_method", method), ("http_route", path),
                                              ("http_response_status_code", code)), HTTP_BUCKETS, count, latency, 0.0015)
            rnd["n"] += good + bad
            rnd["non2xx"] += bad
            rnd["timeouts"] += timeouts
            rnd["connect"] += connect
            rnd["lat_sum"] += (good + bad) * latency

    def _wrk_round(self, rt: PodRt, c: Ctr, now: float) -> None:
        inst = c.instance
        rnd = inst["round"]
        dur = inst["duration"]
        if now - rnd["start"] < dur:
            return
        pod = self._pod(rt.namespace, rt.name)
        if pod is None:
            return
        n = rnd["n"]
        mean_ms = (rnd["lat_sum"] / n * 1000.0) if n else 0.0
        lines = ["  Thread Stats   Avg      Stdev     Max   +/- Stdev",
                 f"    Latency   {mean_ms:6.2f}ms  {mean_ms * 0.6:6.2f}ms  {mean_ms * 4 + 1:7.2f}ms   85.00%",
                 f"  {int(n)} requests in {dur:.2f}s, {n * 2.1 / 1024:.2f}MB read"]
        if rnd["connect"] >= 1 or rnd["timeouts"] >= 1:  # wrk counts whole sockets
            lines.append(f"  Socket errors: connect {int(rnd['connect'])}, read 0, write 0, timeout {int(rnd['timeouts'])}")
        if rnd["non2xx"] >= 1:
            lines.append(f"  Non-2xx or 3xx responses: {int(rnd['non2xx'])}")
        lines += [f"Requests/sec: {n / dur:10.2f}", f"Transfer/sec: {n * 2.1 / dur:8.2f}KB"]
        if not inst.get("looped"):
            self.cluster.kubelet.terminate(rt.namespace, rt.name, c.name, 0, "Completed", lines)
            return
        lines += [f"Running {int(dur)}s test @ {inst['url']}",
                  f"  {inst['threads']} threads and {inst['connections']} connections"]
        self.cluster.logs.write(pod, c.name, lines, now)
        inst["round"] = {"start": now + 1.0, "n": 0.0, "errors": 0.0, "non2xx": 0.0, "timeouts": 0.0, "connect": 0.0,
                         "lat_sum": 0.0}

    def _service_logs(self, ns: str, groups: dict, lam: dict, succ: dict, err: dict, now: float) -> None:
        for (svc, op), why in err.items():
            if svc not in ("search", "frontend") or lam.get((svc, op), 0.0) <= 0:
                continue
            for rt, c in groups.get(svc) or []:
                if not self._log_once(f"{rt.namespace}/{rt.name}/{op}", 15.0, now):
                    continue
                pod = self._pod(rt.namespace, rt.name)
                if pod is None:
                    continue
                t = now + self.cluster.nodes.clock_offset(rt.node)
                if svc == "search":
                    line = zerolog(t, "ERR", "services/search/server.go:171", f"rate GetRates failed after retries: {why}")
                else:
                    line = zerolog(t, "ERR", "services/frontend/server.go:233", f"SearchHandler {op.split()[-1]}: {why}")
                self.cluster.logs.write(pod, c.name, line, now)

    # -- traces ---------------------------------------------------------------------------------
    def _traces(self, ns: str, groups: dict, lam: dict, succ: dict, lat: dict, err: dict, now: float) -> None:
        fronts = groups.get("frontend") or []
        if not fronts:
            return
        ratio = env_float(fronts[0][1].instance.get("env", {}), "JAEGER_SAMPLE_RATIO", 0.01)
        if ratio <= 0:
            return
        steps = self.state["steps"]
        if steps % 2:
            return  # one sampled trace per route every 10 s keeps Jaeger's view current at a fraction of the cost
        for route, share in ROUTES:
            if lam.get(("frontend", route), 0.0) <= 0:
                continue
            if share < 0.1 and steps % 12:
                continue
            spans: list[dict[str, Any]] = []
            self.state["trace_seq"] += 1
            seed = f"{self.cluster.seed}/{ns}/{self.state['trace_seq']}"
            trace_id = hashlib.sha256(seed.encode()).hexdigest()[:32]
            ok = self.cluster.rng.random() < succ.get(("frontend", route), 1.0)
            self._span(spans, trace_id, None, "frontend", route, groups, succ, lat, err, now, ok, 0)
            if spans:
                self.cluster.obs.traces.add(spans)

    def _span(self, spans: list, trace_id: str, parent: str | None, svc: str, op: str, groups: dict, succ: dict,
              lat: dict, err: dict, start: float, ok: bool, depth: int) -> float:
        insts = groups.get(svc) or []
        if not insts or depth > 4:
            return 0.0
        rt, c = insts[len(spans) % len(insts)]
        if not self._jaeger_ok(rt, c):
            return lat.get((svc, op), 0.001)
        skew = self.cluster.nodes.clock_offset(rt.node) + self.cluster.chaos.time_offset(
            self._pod(rt.namespace, rt.name) or {"metadata": {"namespace": rt.namespace, "name": rt.name, "labels": {}}}, c.name)
        span_id = hashlib.sha256(f"{trace_id}/{len(spans)}".encode()).hexdigest()[:16]
        duration = max(lat.get((svc, op), 0.001), 0.0002)
        tags: list[dict[str, Any]] = [{"key": "span.kind", "type": "string", "value": "server"}]
        if svc == "frontend":
            method, path = op.split(" ")[1:]
            tags += [{"key": "component", "type": "string", "value": "net/http"},
                     {"key": "http.method", "type": "string", "value": method},
                     {"key": "http.url", "type": "string", "value": path},
                     {"key": "http.status_code", "type": "int64", "value": 200 if ok else 500},
                     {"key": "sampler.type", "type": "string", "value": "probabilistic"},
                     {"key": "sampler.param", "type": "float64", "value": 1}]
        else:
            tags.append({"key": "component", "type": "string", "value": "gRPC"})
        span = jaeger_span(trace_id, span_id, parent, op, start + skew, duration, tags,
                           None if ok else ("error", "message", err.get((svc, op), "internal error")),
                           svc, [{"key": "hostname", "type": "string", "value": rt.name},
                                 {"key": "ip", "type": "string", "value": rt.ip},
                                 {"key": "jaeger.version", "type": "string", "value": "Go-2.30.0"}])
        spans.append(span)
        t = start + SERVICE_TIME[svc] * 0.3
        failed_seen = False
        for tsvc, top, how in OPS.get((svc, op), []):
            if how != "consul":
                continue
            child_ok = succ.get((tsvc, top), 1.0) >= 0.5 if ok else not failed_seen and succ.get((tsvc, top), 1.0) < 0.999
            if not ok and succ.get((tsvc, top), 1.0) >= 0.999:
                child_ok = True
            cid = hashlib.sha256(f"{trace_id}/c{len(spans)}".encode()).hexdigest()[:16]
            client_start = len(spans)
            d = self._span(spans, trace_id, cid, tsvc, top, groups, succ, lat, err, t, child_ok, depth + 1)
            if len(spans) > client_start:
                spans.insert(client_start, {**span, "spanID": cid, "operationName": top, "startTime": int((t + skew) * 1e6),
                                            "duration": int(max(d, 0.0002) * 1e6) + 100,
                                            "references": [{"refType": "CHILD_OF", "traceID": trace_id, "spanID": span_id}],
                                            "tags": [{"key": "span.kind", "type": "string", "value": "client"},
                                                     {"key": "component", "type": "string", "value": "gRPC"}]
                                            + ([{"key": "error", "type": "bool", "value": True}] if not child_ok else []),
                                            "logs": []})
            t += d
            if not child_ok:
                failed_seen = True
                break
        return duration

    def _jaeger_ok(self, rt: PodRt, c: Ctr) -> bool:
        pod = self._pod(rt.namespace, rt.name)
        if pod is None:
            return False
        key = ("jaeger", pod["metadata"]["uid"])
        if key not in self._conn_cache:
            host, _ = split_addr(c.instance["cfg"].get("jaegerAddress", "jaeger:6831"))
            svc, e = self.cluster.network.lookup(pod, host)
            ok = False
            if svc is not None and not e:
                ep = self.cluster.store.try_get("endpoints", svc["metadata"]["namespace"], svc["metadata"]["name"])
                ok = any(s.get("addresses") for s in (ep or {}).get("subsets") or [])
            self._conn_cache[key] = ok
        return self._conn_cache[key]


def _le(b: float) -> str:
    """Bucket bounds as the Go client prints them: 0.005, 1, 2.5, 15000."""
    return f"{b:f}".rstrip("0").rstrip(".")


def wiredtiger_lines(t: float, op: str, errno: int, ctx: str) -> list[str]:
    from clusters.sim.apps.stores import wiredtiger_failure
    return wiredtiger_failure(t, "collection-0-4587235146126372893.wt" if op == "read" else "WiredTiger.wt", op, errno, ctx)


__all__ = ["Workload", "mongo_log"]
