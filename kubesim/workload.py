"""The open-loop workload, every step (5 s of cluster time): the load generators (wrk2 pods,
`-R` req/s each; Locust) offer requests to the URL they target, and the call-graph engine
(kubesim/apps/callgraph.py) serves the applications declared as call graphs; what is shared lives
here: the counters and histograms the exporters read, the CPU a container burns idle and per
request (charge), the cores a container has, wrk's rounds, the init containers' wait loops, the
Consul registry's state, the health of applications without a graph, and the data stores' ticks.
Nothing is scripted: a symptom appears only when its cause is in the cluster."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from kubesim.apps.callgraph import CallGraphFlow
from kubesim.apps.graph import store_model
from kubesim.apps.model import fluid_ticks
from kubesim.quantity import parse_quantity

if TYPE_CHECKING:
    from kubesim.runtime import Ctr, PodRt
    from kubesim.view import ClusterView


class Workload:
    def __init__(self, cluster: ClusterView) -> None:
        self.cluster = cluster
        self.state: dict[str, Any] = {"consul": {}, "counters": {}, "gauges": {}, "logged": {}, "trace_seq": 0,
                                      "steps": 0}
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
        graph_groups: dict[str, dict[str, list[tuple[PodRt, Ctr]]]] = {}
        graph_clients: dict[str, list[tuple[PodRt, Ctr, Any, Any]]] = {}
        wrks: list[tuple[PodRt, Ctr]] = []
        locusts: list[tuple[PodRt, Ctr]] = []
        early_stores: list[tuple[PodRt, Ctr, Any]] = []
        data_stores: list[tuple[PodRt, Ctr, Any]] = []
        for rt, c in kubelet.running():
            inst = c.instance
            kind = inst.get("kind") if isinstance(inst, dict) else None
            if kind == "graph":
                graph_groups.setdefault(rt.namespace, {}).setdefault(inst["svc"], []).append((rt, c))
            elif kind == "wrk2":
                wrks.append((rt, c))
            elif kind == "locust":
                locusts.append((rt, c))
            elif kind == "wait":
                self._wait_loop(rt, c, now)
            elif kind == "poll":
                self._poll(rt, c, now)
            elif kind == "echo":
                self._echo(rt, c, now)
            else:
                model = store_model(c)
                if model is not None:
                    # MongoDB's disk delay and memcached's items are read by the step's requests
                    (early_stores if kind in ("mongo", "memcached") else data_stores).append((rt, c, model))
            self._idle(rt, c, dt)
        for rt, c in locusts:
            pod = self._pod(rt.namespace, rt.name)
            conn = self._connect(pod, c.instance["host"], c.instance["port"]) if pod is not None else None
            target = self.graphs.client_target(conn) if conn is not None else None
            if target is not None:
                graph_clients.setdefault(target[0], []).append((rt, c, conn, target[1]))
            else:
                self._locust(rt, c, dt)
        for rt, c in wrks:
            self._wrk_round(rt, c, now)
            pod = self._pod(rt.namespace, rt.name)
            if pod is None:
                continue
            conn = self._connect(pod, c.instance["host"], c.instance["port"])
            target = self.graphs.client_target(conn, rt.namespace)
            if target is not None:
                graph_clients.setdefault(target[0], []).append((rt, c, conn, target[1]))
        self._generic_health()
        for rt, c, model in early_stores:
            model.tick(self.cluster, rt, c, now, dt)
        self.graphs.step(now, dt, graph_groups, graph_clients)
        for rt, c, model in data_stores:
            if c.state == "running":
                model.tick(self.cluster, rt, c, now, dt)
        for tick in fluid_ticks:
            tick(self.cluster, now, dt)
        kubelet.reconcile_memory(now)

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

    def _poll(self, rt: PodRt, c: Ctr, now: float) -> None:
        """A shell loop's request, once per its sleep: made over HTTP to what answers there, so the
        server sees it as it sees any client's (a request filter runs, a proxy queues it)."""
        from urllib.parse import urlsplit

        from kubesim.userland import net
        inst = c.instance
        if now - inst.get("last", -1e18) < inst["every"]:
            return
        inst["last"] = now
        pod = self._pod(rt.namespace, rt.name)
        if pod is None:
            return
        u = urlsplit(inst["url"])
        found = net.dial(self.cluster, pod, u.hostname or "", u.port or 80)
        if found.error:
            inst["failed"] = inst.get("failed", 0) + 1
            return
        answer = net.http_answer(self.cluster, found, "GET", (u.path or "/") + (f"?{u.query}" if u.query else ""))
        ok = not (answer.hang or answer.reset or answer.status >= 400)
        inst["ok" if ok else "failed"] = inst.get("ok" if ok else "failed", 0) + 1

    def _echo(self, rt: PodRt, c: Ctr, now: float) -> None:
        """A shell loop's echo lines, each round at the time its sleep ends."""
        inst = c.instance
        if inst["next"] > now:
            return
        pod = self._pod(rt.namespace, rt.name)
        if pod is None:
            return
        logs = self.cluster.logs
        while inst["next"] <= now:
            logs.write(pod, c.name, inst["lines"], inst["next"])
            inst["next"] += inst["every"]

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

def _le(b: float) -> str:
    """Bucket bounds as the Go client prints them: 0.005, 1, 2.5, 15000."""
    return f"{b:f}".rstrip("0").rstrip(".")


__all__ = ["Workload"]
