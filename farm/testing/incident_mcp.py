"""A small real MCP server (the official `mcp` package, streamable HTTP, bearer token) serving the
agent tool set over one canned incident, for the LLM-agent tests and the token bench while they do
not need a whole emulated cluster: hotel-reservation's `geo` has a wrong MongoDB port in its env
(GEO_DB_PORT=27018), so geo crash-loops and `frontend` returns 500 on /hotels. `kubectl set env`
with the right port fixes it; scaling frontend to 0 makes health worse (for rollback tests).
Raw mode returns verbose output; summarised mode the de-duplicated form, as the real interface does."""

from __future__ import annotations

import contextlib
import json
import shlex
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

CRASH_LOG = "panic: no reachable servers: dial tcp 10.96.0.27:27018: connect: connection refused"


@dataclass
class IncidentState:
    geo_port: str = "27018"
    frontend_replicas: int = 1
    history: list[tuple[str, Any]] = field(default_factory=list)
    diagnosis: str | None = None
    mitigated: bool = False
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    now: float = 0.0

    @property
    def geo_ok(self) -> bool:
        return self.geo_port == "27017"

    def unhealthy(self) -> int:
        return (0 if self.geo_ok else 1) + (1 if self.frontend_replicas == 0 else 0)


def _pods(state: IncidentState) -> str:
    rows = ["NAME                            READY   STATUS             RESTARTS   AGE"]
    for svc in ("consul", "frontend", "mongodb-geo", "mongodb-profile", "profile", "rate", "recommendation",
                "reservation", "search", "user", "memcached-rate"):
        if svc == "frontend" and state.frontend_replicas == 0:
            continue
        rows.append(f"{svc + '-5f7d8c9b6-x2k4q':<32}1/1     Running            0          12m")
    if state.geo_ok:
        rows.append(f"{'geo-7c9d5b8f4-q8wzt':<32}1/1     Running            0          1m")
    else:
        rows.append(f"{'geo-7c9d5b8f4-q8wzt':<32}0/1     CrashLoopBackOff   7          12m")
    return "\n".join(rows)


def _kubectl(state: IncidentState, command: str, mode: str) -> str:
    args = shlex.split(command)
    if args and args[0] == "kubectl":
        args = args[1:]
    if not args:
        return "error: empty command"
    verb = args[0]
    text = " ".join(args)
    if verb == "get" and "pods" in args[1:2] + args[1:3]:
        return _pods(state)
    if verb == "get" and any(a.startswith("deploy") for a in args[1:]):
        return "\n".join(["NAME        READY   UP-TO-DATE   AVAILABLE   AGE",
                          f"frontend    {state.frontend_replicas}/{state.frontend_replicas}     1            1           12m",
                          f"geo         {'1/1' if state.geo_ok else '0/1'}     1            {int(state.geo_ok)}           12m",
                          "profile     1/1     1            1           12m"])
    if verb == "describe" and "geo" in text:
        lines = ["Name: geo-7c9d5b8f4-q8wzt", "Namespace: hotel-reservation", "Containers:", "  hotel-reserv-geo:",
                 "    Image: yinfangchen/hotelreservation:latest", "    Environment:",
                 "      GEO_DB_HOST: mongodb-geo", f"      GEO_DB_PORT: {state.geo_port}",
                 "    State: Waiting (CrashLoopBackOff)" if not state.geo_ok else "    State: Running",
                 "Events:"]
        lines += [f"  Warning  BackOff  {i}m  kubelet  Back-off restarting failed container" for i in range(1, 9)] \
            if not state.geo_ok else []
        return "\n".join(lines)
    if verb == "logs" and "geo" in text:
        if state.geo_ok:
            return "geo: connected to mongodb-geo:27017\ngeo: serving on :8083"
        lines = [f"2026-12-02T17:{i // 60:02d}:{i % 60:02d}Z {CRASH_LOG}" for i in range(120)]
        if mode == "summarised":
            return f"[x120, 17:00:00 to 17:01:59] {CRASH_LOG}"
        return "\n".join(lines)
    if verb == "logs" and "frontend" in text:
        lines = [f"2026-12-02T17:00:{i % 60:02d}Z GET /hotels 500 rpc error: code = Unavailable desc = geo: "
                 "connection refused" for i in range(80)]
        if mode == "summarised":
            return "[x80] GET /hotels 500 rpc error: code = Unavailable desc = geo: connection refused"
        return "\n".join(lines)
    if verb == "set" and len(args) > 1 and args[1] == "env" and "geo" in text:
        for a in args:
            if a.startswith("GEO_DB_PORT="):
                state.history.append(("geo_port", state.geo_port))
                state.geo_port = a.split("=", 1)[1]
                return "deployment.apps/geo env updated"
        return "error: no GEO_DB_PORT given"
    if verb == "scale" and "frontend" in text:
        for a in args:
            if a.startswith("--replicas="):
                state.history.append(("frontend_replicas", state.frontend_replicas))
                state.frontend_replicas = int(a.split("=", 1)[1])
                return "deployment.apps/frontend scaled"
    if verb == "rollout" and "undo" in args:
        return "deployment.apps/geo rolled back (no change: the env var was set outside a rollout)"
    return f"error: unsupported in this test incident: kubectl {text}"


class _Bearer:
    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization", b"").decode() != f"Bearer {self.token}":
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json")]})
                await send({"type": "http.response.body", "body": b'{"error":"unauthorized"}'})
                return
        await self.app(scope, receive, send)


def build_server(state: IncidentState, mode: str) -> MCPServer:
    srv = MCPServer("incident")

    def note(name: str, **args: Any) -> None:
        state.calls.append((name, args))

    @srv.tool()
    def kubectl(command: str) -> str:
        """Run one kubectl command in the application namespace (no shell, no pipes)."""
        note("kubectl", command=command)
        return _kubectl(state, command, mode)

    @srv.tool()
    def prometheus_query(query: str, time: str | None = None) -> str:
        """Instant PromQL query against the cluster's Prometheus."""
        note("prometheus_query", query=query)
        rate = 0.0 if state.geo_ok and state.frontend_replicas else 0.42
        series = [{"metric": {"service": "frontend", "code": "500"}, "value": [state.now, f"{rate}"]}]
        if mode == "raw":
            series += [{"metric": {"service": s, "code": "200"}, "value": [state.now, "12.5"]}
                       for s in ("profile", "rate", "recommendation", "reservation", "search", "user")]
        return json.dumps({"status": "success", "data": {"resultType": "vector", "result": series}})

    @srv.tool()
    def prometheus_query_range(query: str, start: str, end: str, step: str) -> str:
        """Range PromQL query."""
        note("prometheus_query_range", query=query)
        return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}})

    @srv.tool()
    def get_alerts() -> str:
        """Firing alerts."""
        note("get_alerts")
        alerts = []
        if not state.geo_ok:
            alerts.append({"labels": {"alertname": "KubePodCrashLooping", "pod": "geo-7c9d5b8f4-q8wzt"},
                           "state": "firing"})
        if not state.geo_ok or state.frontend_replicas == 0:
            alerts.append({"labels": {"alertname": "HighErrorRate", "service": "frontend"}, "state": "firing"})
        return json.dumps({"alerts": alerts})

    @srv.tool()
    def loki_query(query: str, minutes: int = 15) -> str:
        """LogQL query over the last `minutes`."""
        note("loki_query", query=query)
        return _kubectl(state, "logs deploy/geo", mode) if "geo" in query else ""

    @srv.tool()
    def loki_labels() -> str:
        """Log stream labels."""
        return json.dumps(["app", "namespace", "pod", "container"])

    @srv.tool()
    def jaeger_services() -> str:
        """Services that report traces."""
        return json.dumps(["frontend", "geo", "profile", "rate", "search"])

    @srv.tool()
    def jaeger_operations(service: str) -> str:
        """Operations of one service."""
        return json.dumps([f"{service}/Nearby"])

    @srv.tool()
    def jaeger_traces(service: str, minutes: int = 15, limit: int = 20) -> str:
        """Recent traces of a service."""
        note("jaeger_traces", service=service)
        if mode == "summarised":
            return "errors by span: frontend HTTP GET /hotels -> search/Nearby -> geo/Nearby: 41 errors (Unavailable)"
        spans = [{"traceID": f"{i:016x}", "spans": [{"operationName": "geo/Nearby", "tags": [
            {"key": "error", "value": True}, {"key": "grpc.status_code", "value": 14}]}]} for i in range(limit)]
        return json.dumps({"data": spans})

    @srv.tool()
    def jaeger_dependencies() -> str:
        """Service call graph."""
        return json.dumps([{"parent": "frontend", "child": "search"}, {"parent": "search", "child": "geo"}])

    @srv.tool()
    def wait(seconds: float) -> str:
        """Let cluster time pass."""
        note("wait", seconds=seconds)
        state.now += seconds
        return f"waited {seconds}s"

    @srv.tool()
    def submit_diagnosis(text: str) -> str:
        """Submit the root-cause diagnosis."""
        note("submit_diagnosis", text=text)
        state.diagnosis = text
        return "diagnosis recorded"

    @srv.tool()
    def submit_mitigation() -> str:
        """Declare the mitigation done."""
        note("submit_mitigation")
        state.mitigated = True
        return "mitigation recorded"

    @srv.tool()
    def undo_last() -> str:
        """Undo the last mutating kubectl command."""
        note("undo_last")
        if not state.history:
            return "nothing to undo"
        attr, value = state.history.pop()
        setattr(state, attr, value)
        return f"undone: {attr} restored to {value}"

    return srv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class IncidentMCP:
    """Serves one incident on 127.0.0.1:<random>/mcp in a background thread."""

    def __init__(self, mode: str = "raw", token: str = "trial-token-123") -> None:
        self.state = IncidentState()
        self.mode, self.token = mode, token
        self.port = _free_port()
        app = _Bearer(build_server(self.state, mode).streamable_http_app(), token)
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def __enter__(self) -> IncidentMCP:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("incident MCP server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        with contextlib.suppress(RuntimeError):
            self._thread.join(timeout=10)
