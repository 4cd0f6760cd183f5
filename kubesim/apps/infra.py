"""Infrastructure images the apps depend on: CoreDNS, the Consul dev agent (service registry of the
hotel-reservation services), Jaeger all-in-one, and the wrk2 load generator."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from kubesim.apps.invocation import find_invocation
from kubesim.apps.model import AppModel, Exited, StartContext, Started, app_model, register_image

register_image("registry.k8s.io/coredns/coredns", tags=("v1.11.1", "v1.10.1", "v1.11.3"), size=16_190_137,
               executables=("/coredns",), shell=False)
register_image("hashicorp/consul", tags=("latest", "1.13.2", "1.15", "1.16", "1.17", "1.18"), size=60_000_000,
               executables=("consul", "docker-entrypoint.sh"))
register_image("jaegertracing/all-in-one", tags=("latest", "1.57", "1.57.0", "1.52", "1.60"), size=30_000_000,
               executables=("/go/bin/all-in-one-linux",), shell=False)
register_image("deathstarbench/wrk2-client", tags=("latest",), size=180_000_000, executables=("wrk", "sh", "bash", "sleep"))


@app_model
class CoreDNS(AppModel):
    name = "coredns"
    images = ("registry.k8s.io/coredns/coredns",)
    memory_base = 18 * 2**20

    def start(self, ctx: StartContext) -> Started | Exited:
        if not any(p.endswith("/Corefile") for p in ctx.files):
            return Exited(1, ["plugin/file: open /etc/coredns/Corefile: no such file or directory"], after=0.5)
        return Started([".:53", "[INFO] plugin/reload: Running configuration SHA512 = 591cf328cccc12bc490481273e738df59329c62c0b729d94e8b61db9961c2fa5f046dd37f1cf888b953814040d180f52594972691cd6ff41be96639138a43908",
                        "CoreDNS-1.11.1", "linux/amd64, go1.20.7, ae2bbc2"], {53, 9153}, {"kind": "coredns"}, ready_after=1.0)


def _go_time(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@app_model
class Consul(AppModel):
    name = "consul"
    images = ("hashicorp/consul",)
    memory_base = 45 * 2**20

    def start(self, ctx: StartContext) -> Started | Exited:
        t = ctx.app_time()
        host = ctx.pod_name
        lines = ["==> Starting Consul agent...", "               Version: '1.18.1'",
                 "            Build Date: '2024-03-26 21:32:05 +0000 UTC'",
                 f"               Node ID: '{ctx.pod['metadata'].get('uid', '')[:36]}'",
                 f"             Node name: '{host}'", "            Datacenter: 'dc1' (Segment: '<all>')",
                 "                Server: true (Bootstrap: false)",
                 "           Client Addr: [0.0.0.0] (HTTP: 8500, HTTPS: -1, gRPC: 8502, gRPC-TLS: 8503, DNS: 8600)",
                 f"          Cluster Addr: {ctx.pod_ip} (LAN: 8301, WAN: 8302)", "",
                 "==> Log data will now stream in as it occurs:", "",
                 f"{_go_time(t)} [INFO]  agent.server: New leader elected: payload={host}",
                 f"{_go_time(t)} [INFO]  agent: Synced node info", "==> Consul agent running!"]
        # a dev agent keeps its catalog in memory: a restart forgets every registration
        ctx.cluster.workload.consul_reset(ctx.namespace, ctx.pod_name)
        return Started(lines, {8300, 8301, 8302, 8400, 8500, 8502, 8600, 53}, {"kind": "consul"}, ready_after=1.0)


@app_model
class Jaeger(AppModel):
    name = "jaeger"
    images = ("jaegertracing/all-in-one",)
    memory_base = 60 * 2**20

    def start(self, ctx: StartContext) -> Started | Exited:
        ts = ctx.app_time()
        msgs = ["Starting jaeger-collector gRPC server", "Starting jaeger-collector HTTP server",
                "Starting agent", "Query server started", "Starting HTTP server"]
        lines = [f'{{"level":"info","ts":{ts + i * 0.001:.7f},"caller":"app/server.go:242","msg":"{m}"}}' for i, m in enumerate(msgs)]
        return Started(lines, {5775, 5778, 6831, 6832, 14250, 14267, 14268, 14269, 16686, 9411, 4317, 4318},
                       {"kind": "jaeger"}, ready_after=1.0)


def parse_wrk(argv: list[str]) -> dict[str, Any] | None:
    """The `wrk` invocation inside a container's command (possibly inside `sh -c` and a loop)."""
    found = find_invocation(argv, r"wrk\s+")
    if found is None:
        return None
    words = found[1]
    out: dict[str, Any] = {"rate": 1000.0, "threads": 2, "connections": 10, "duration": 10.0, "script": None,
                           "url": None, "dist": "fixed", "timeout": 2.0}
    i = 0
    while i < len(words):
        w = words[i]
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if w in ("-R", "--rate"):
            out["rate"] = float(re.sub(r"[^0-9.]", "", nxt) or 0)
            i += 1
        elif w in ("-t", "--threads"):
            out["threads"] = int(re.sub(r"\D", "", nxt) or 1)
            i += 1
        elif w in ("-c", "--connections"):
            out["connections"] = int(re.sub(r"\D", "", nxt) or 1)
            i += 1
        elif w in ("-d", "--duration"):
            num = float(re.sub(r"[^0-9.]", "", nxt) or 10)
            out["duration"] = num * (60 if nxt.endswith("m") else 3600 if nxt.endswith("h") else 1)
            i += 1
        elif w in ("-s", "--script"):
            out["script"] = nxt
            i += 1
        elif w in ("-D", "--dist"):
            out["dist"] = nxt
            i += 1
        elif w == "--timeout":
            out["timeout"] = float(re.sub(r"[^0-9.]", "", nxt) or 2)
            i += 1
        elif w.startswith("http://") or w.startswith("https://"):
            out["url"] = w
        i += 1
    return out


@app_model
class Wrk2(AppModel):
    """deathstarbench/wrk2-client: an open-loop generator at `-R` req/s against the URL; the
    workload model turns its rate into requests and writes its round summaries to the log."""

    name = "wrk2"
    images = ("deathstarbench/wrk2-client",)
    memory_base = 12 * 2**20

    def start(self, ctx: StartContext) -> Started | Exited:
        cfg = parse_wrk(ctx.argv)
        if cfg is None:
            return Exited(0, [], after=0.0)
        if not cfg["url"]:
            return Exited(1, ["Usage: wrk <options> <url>"], after=0.0)
        m = re.match(r"https?://([^/:]+)(?::(\d+))?(/.*)?", cfg["url"])
        if not m:
            return Exited(1, [f"invalid URL: {cfg['url']}"], after=0.0)
        if cfg["script"] and cfg["script"] not in ctx.files:
            return Exited(1, [f"PANIC: unprotected error in call to Lua API (cannot open {cfg['script']})"], after=0.0)
        looped = bool(re.search(r"\bwhile\b|\bfor\b", " ".join(ctx.argv)))
        inst = {"kind": "wrk2", "rate": cfg["rate"], "host": m.group(1), "port": int(m.group(2) or 80),
                "script": cfg["script"] or "", "timeout": cfg["timeout"], "duration": cfg["duration"],
                "threads": cfg["threads"], "connections": cfg["connections"], "looped": looped, "url": cfg["url"],
                "round": {"start": ctx.now, "n": 0.0, "errors": 0.0, "non2xx": 0.0, "timeouts": 0.0, "connect": 0.0,
                          "lat_sum": 0.0}}
        lines = [f"Running {int(cfg['duration'])}s test @ {cfg['url']}",
                 f"  {cfg['threads']} threads and {cfg['connections']} connections"]
        return Started(lines, set(), inst)
