"""One MCP server per trial: streamable HTTP on 127.0.0.1 (a random port, a background thread with
its own event loop), a per-trial bearer token, and the tools an on-call engineer uses. Every call
is recorded in a SessionRecord; a failed, refused or timed-out call returns its reason to the
agent as an error result and never ends the session."""

from __future__ import annotations

import asyncio
import hmac
import json
import re
import secrets
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError as McpToolError
from mcp_types import CallToolResult, TextContent

from clusters.handle import ClusterHandle
from core.errors import InputError, ToolError
from core.records import Mutation, StructuredDiagnosis, ToolCall
from core.secrets import hide_path, hide_secret, scrub
from core.states import LIMIT_COST, LIMIT_STEPS, LIMIT_TOKENS, LIMIT_WALL_TIME
from farm.interface import undo as undo_mod
from farm.interface.client import MAX_WAIT_S, SESSION_ENDED, TOOL_TIMEOUT_S
from farm.interface.kubectl import Kubectl, parse_command, targets_of
from farm.interface.record import SessionRecord, count_tokens
from farm.interface.summarise import dedupe_text
from farm.interface.telemetry import Telemetry

if TYPE_CHECKING:
    from farm.agents.agent import AgentLimits

Mode = Literal["raw", "summarised"]
MODES = ("raw", "summarised")
TOOL_NAMES = (
    "kubectl", "undo_last", "prometheus_query", "prometheus_query_range", "get_alerts",
    "loki_query", "loki_labels", "jaeger_services", "jaeger_operations", "jaeger_traces",
    "jaeger_dependencies", "wait", "submit_diagnosis", "submit_mitigation",
)
MAX_DIAGNOSIS_CHARS = 4_000  # a longer diagnosis is refused, never cut: a judge reads what was sent
_AFTER_MITIGATION = "refused: the mitigation was already submitted; no further changes are accepted"
MAX_CONCURRENT_CALLS = 4  # tool calls of one session running at once; more wait their turn
# Usage of the session's model calls as the worker counted them (farm.trial.checkpoint.LLMUsageTap):
# {"tokens_in": int, "tokens_out": int, "cost_usd": float}.
UsageReader = Callable[[], Mapping[str, Any]]


def _text_result(text: str, error: bool) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=error)


class _RecordingServer(MCPServer[Any]):
    """Records the calls the SDK rejects before a tool runs (unknown tool, malformed arguments)."""

    def __init__(self, on_rejected: Callable[[str, dict[str, Any], str], None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._on_rejected = on_rejected

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except McpToolError as exc:
            self._on_rejected(name, arguments, str(exc))
            raise


class _BearerAuth:
    """ASGI middleware: every HTTP request must carry `Authorization: Bearer <trial token>`."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.expected = app, f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                body = json.dumps({"error": "invalid_token",
                                   "error_description": "missing or wrong bearer token"}).encode()
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"), (b"www-authenticate", b'Bearer error="invalid_token"'),
                    (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


class AgentInterface:
    """The agent's only way into the trial. `start()` returns (url, token); `record` holds what
    happened; `finished` is set once the agent calls submit_mitigation."""

    def __init__(self, cluster: ClusterHandle, namespace: str, trial_id: str, mode: Mode = "raw", *,
                 kubectl_binary: str | None = None, tool_timeout_s: float = TOOL_TIMEOUT_S,
                 kubectl_timeout_s: float = 60.0, max_output_chars: int = 30_000,
                 max_wait_s: float = MAX_WAIT_S, also_namespaces: tuple[str, ...] = (),
                 limits: AgentLimits | None = None, usage: UsageReader | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be 'raw' or 'summarised', not '{mode}'")
        self.cluster, self.namespace, self.trial_id, self.mode = cluster, namespace, trial_id, mode
        self.also_namespaces = tuple(also_namespaces)  # the application's other namespaces (its operator's)
        self.summarised = mode == "summarised"
        self.tool_timeout_s, self.max_output_chars, self.max_wait_s = tool_timeout_s, max_output_chars, max_wait_s
        self._kubectl_binary, self._kubectl_timeout_s = kubectl_binary, kubectl_timeout_s
        self.record = SessionRecord(trial_id=trial_id, namespace=namespace, mode=mode)
        self.finished = threading.Event()
        self.token = ""
        self.url = ""
        self._lock = threading.Lock()
        self._next_index = 0
        self._thread: threading.Thread | None = None
        self._uvicorn: Any = None
        self._kubectl: Kubectl | None = None
        self._telemetry: Telemetry | None = None
        # The interface, not the agent, holds the limits: the agent cannot count for itself.
        self.limits, self._usage = limits, usage
        # Called once, with (reason, detail), when a limit ends the session: the worker stops the
        # agent's process there, since nothing the agent does after it counts.
        self.on_end: Callable[[str, str], None] | None = None
        self._started_mono = 0.0
        self._calls_running: anyio.Semaphore | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> tuple[str, str]:
        import uvicorn

        if self._thread is not None:
            return self.url, self.token
        _hide_cluster_internals(self.cluster)
        kubeconfig = self.cluster.agent_kubeconfig(self.namespace, also=self.also_namespaces)
        self._kubectl = Kubectl(kubeconfig, self.namespace,
                                binary=self._kubectl_binary, timeout_s=self._kubectl_timeout_s,
                                virtual_time=self.cluster.capabilities.virtual_clock)
        self.record.sandbox = self._kubectl.sandbox
        ep = self.cluster.endpoints
        self._telemetry = Telemetry(ep.prometheus, ep.loki, ep.jaeger, self.cluster.now, self.namespace,
                                    self.summarised, also=self.also_namespaces)
        self.record.started_at = self._now()
        self._started_mono = time.monotonic()
        self.token = secrets.token_urlsafe(32)
        server = self._build_server()
        app = _BearerAuth(server.streamable_http_app(host="127.0.0.1"), self.token)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False,
                                timeout_graceful_shutdown=3)
        self._uvicorn = uvicorn.Server(config)
        self._thread = threading.Thread(target=lambda: asyncio.run(self._uvicorn.serve(sockets=[sock])),
                                        name=f"mcp-{self.trial_id}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._uvicorn.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the MCP server did not start")
            time.sleep(0.01)
        self.url = f"http://127.0.0.1:{port}/mcp"
        return self.url, self.token

    def stop(self) -> None:
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        for part in (self._kubectl, self._telemetry):
            if part is not None:
                part.close()
        self._thread = None

    def __enter__(self) -> AgentInterface:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- recording -------------------------------------------------------------------------
    def _now(self) -> float:
        try:
            return self.cluster.now()
        except Exception:  # the clock's own failure must not lose the record
            return time.time()

    def _append(self, index: int, name: str, args: dict[str, Any], output: str, at: float, wall_s: float,
                error: str | None) -> ToolCall:
        call = ToolCall(index=index, name=name, args=_scrub_args(args), output=output,
                        tokens=count_tokens(output), at=at, wall_s=wall_s, error=error)
        with self._lock:
            self.record.tool_calls.append(call)
            self.record.tool_calls.sort(key=lambda c: c.index)
        return call

    def _on_rejected(self, name: str, args: dict[str, Any], message: str) -> None:
        text = scrub(message)
        admitted = self._admit(name, dict(args or {}), self._now())
        if isinstance(admitted, int):
            self._append(admitted, name, dict(args or {}), text, self._now(), 0.0, text)

    # -- limits ----------------------------------------------------------------------------
    def end(self, reason: str, detail: str = "") -> None:
        """End the session for a limit: every later call is refused, and what it would have
        submitted does not count. The first limit to fire stays the end reason."""
        with self._lock:
            first = self.record.end_reason is None
            if first:
                self.record.end_reason, self.record.end_detail = reason, detail or None
                self.record.ended_at = self._now()
        if first and self.on_end is not None:
            self.on_end(reason, detail)

    def _limit_passed(self, calls_before: int) -> tuple[str, str] | None:
        """The limit this call would exceed: steps count every call the session took, those the
        tool refused included (a refused command is still a turn); calls after the end are not
        steps."""
        lim = self.limits
        if lim is None:
            return None
        if calls_before >= lim.max_steps:
            return LIMIT_STEPS, f"{calls_before} tool calls of {lim.max_steps}"
        used_s = time.monotonic() - self._started_mono
        if used_s >= lim.wall_time_s:
            return LIMIT_WALL_TIME, f"{used_s:.0f} s of {lim.wall_time_s:g} s"
        if self._usage is not None:
            usage = self._usage()
            tokens = int(usage.get("tokens_in", 0)) + int(usage.get("tokens_out", 0))
            if tokens >= lim.max_tokens:
                return LIMIT_TOKENS, f"{tokens} model tokens of {lim.max_tokens}"
            cost = float(usage.get("cost_usd", 0.0))
            if cost >= lim.max_cost_usd:
                return LIMIT_COST, f"${cost:.4f} of ${lim.max_cost_usd:g}"
        return None

    def _admit(self, name: str, args: dict[str, Any], at: float,
               late: Callable[[], str | None] | None = None) -> int | CallToolResult:
        """The step index of a call the session takes, or its refusal: once a limit ended the
        session or this call would pass one, and for a change after submit_mitigation (`late`
        says so). A refused call is recorded in `refused_late` and is not a step: an agent
        that keeps calling after the end cannot add to its count."""
        newly_ended = False
        with self._lock:
            if self.record.end_reason is None:
                passed = self._limit_passed(self._next_index)
                if passed is not None:
                    self.record.end_reason, self.record.end_detail = passed[0], passed[1] or None
                    self.record.ended_at = self._now()
                    newly_ended = True
            reason, detail = self.record.end_reason, self.record.end_detail
            if reason is not None:
                text: str | None = (f"{SESSION_ENDED}{reason} ({detail or 'limit reached'}); this call and every "
                                    "later one are refused, and nothing submitted from now on counts")
            else:
                text = late() if late is not None else None
            if text is None:
                self._next_index += 1
                return self._next_index - 1
            self.record.refused_late.append(ToolCall(
                index=self._next_index, name=name, args=_scrub_args(args), output=text,
                tokens=count_tokens(text), at=at, error=text))
        if newly_ended and self.on_end is not None and reason is not None:
            self.on_end(reason, detail or "")  # the worker stops the agent's process (outside the lock)
        return _text_result(text, True)

    def wait_deadline_s(self, seconds: Any) -> float:
        """The wall-clock deadline of wait(seconds): on a wall clock the wait itself takes that long,
        so the ordinary tool timeout is only its margin; on a virtual clock waiting costs CPU, not
        the requested seconds, and the ordinary timeout holds."""
        if self.cluster.capabilities.virtual_clock:
            return self.tool_timeout_s
        try:
            asked = min(max(float(seconds), 0.0), self.max_wait_s)
        except (TypeError, ValueError):
            asked = 0.0  # refused by the tool body; nothing to wait for
        return asked + self.tool_timeout_s

    async def _invoke(self, name: str, args: dict[str, Any], fn: Callable[[int], str],
                      timeout_s: float | None = None, late: Callable[[], str | None] | None = None) -> CallToolResult:
        """Run a tool body in a worker thread under its deadline (the tool timeout unless given),
        record it, and turn every failure into an error result the agent can read."""
        at, t0 = self._now(), time.monotonic()
        admitted = self._admit(name, args, at, late)
        if not isinstance(admitted, int):
            return admitted
        index = admitted
        deadline = self.tool_timeout_s if timeout_s is None else timeout_s
        error: str | None = None
        if self._calls_running is None:
            self._calls_running = anyio.Semaphore(MAX_CONCURRENT_CALLS)
        try:
            async with self._calls_running:
                with anyio.fail_after(deadline):
                    output = await anyio.to_thread.run_sync(fn, index, abandon_on_cancel=True)
        except ToolError as exc:
            output = error = str(exc)
        except TimeoutError:
            output = error = f"{name} did not finish within {deadline:.0f} s; try a narrower request"
        except Exception as exc:  # a tool bug must not end the session
            output = error = f"{name} failed: {type(exc).__name__}: {exc}"
        output = scrub(output)
        if error:
            error = scrub(error)
        if len(output) > self.max_output_chars:
            cut = len(output) - self.max_output_chars
            output = output[: self.max_output_chars] + f"\n[output truncated: {cut} more characters; narrow the request]"
        self._append(index, name, args, output, at, time.monotonic() - t0, error)
        return _text_result(output, error is not None)

    # -- tools -----------------------------------------------------------------------------
    def _build_server(self) -> MCPServer[Any]:
        server = _RecordingServer(
            self._on_rejected,
            name="sre-incident",
            log_level="WARNING",
            instructions=(
                f"You are on call for incident {self.trial_id} in Kubernetes namespace '{self.namespace}'"
                + (f" (the application also runs in {', '.join(self.also_namespaces)})" if self.also_namespaces else "")
                + ". "
                "Investigate with kubectl, metrics, logs and traces; submit_diagnosis with the root cause; "
                "mitigate; then submit_mitigation. Time passes only through the wait tool."
            ),
        )
        tools: list[tuple[Callable[..., Awaitable[CallToolResult]], str]] = []

        # A manifest may arrive as an object: the MCP SDK parses a JSON-looking string given for an
        # argument not annotated plain `str`, so a JSON manifest sent as text arrives parsed.
        async def kubectl(command: str, manifest: str | dict[str, Any] | list[Any] | None = None) -> CallToolResult:
            """Run one kubectl command in the incident's namespace, e.g. "get pods", "describe pod NAME",
            "logs POD --tail=50", "rollout undo deployment/NAME", "scale deployment NAME --replicas=2".
            No shell: no pipes, redirects, ';' or '&&'; no interactive verbs (exec -it, attach, edit,
            port-forward, proxy, cp); no other namespaces. For apply/create/replace pass the YAML or
            JSON in `manifest` and use "-f -". Mutating commands are recorded and can be undone
            with undo_last, except exec, which is recorded but cannot be undone."""
            text = manifest if manifest is None or isinstance(manifest, str) else json.dumps(manifest)
            return await self._invoke("kubectl", {"command": command, "manifest": text},
                                      lambda i: self._kubectl_call(i, command, text),
                                      late=lambda: self._late_change(command))

        async def undo_last() -> CallToolResult:
            """Undo the most recent mutating kubectl command that has not been undone yet, by
            restoring the objects it changed as they were captured before it ran."""
            return await self._invoke("undo_last", {}, lambda i: self._undo_last(),
                                      late=lambda: _AFTER_MITIGATION if self.finished.is_set() else None)

        async def prometheus_query(query: str, time: str | None = None) -> CallToolResult:
            """Evaluate an instant PromQL query. `time` is unix seconds, RFC 3339 or relative
            ("now-10m"); default now (cluster time)."""
            return await self._invoke("prometheus_query", {"query": query, "time": time},
                                      lambda i: self._tel.prometheus_query(query, time))

        async def prometheus_query_range(query: str, start: str, end: str = "now", step: str = "60s") -> CallToolResult:
            """Evaluate a PromQL query over a range. start/end: unix seconds, RFC 3339 or relative
            ("now-30m", "now"); step: seconds or a duration such as "30s", "1m"."""
            return await self._invoke("prometheus_query_range",
                                      {"query": query, "start": start, "end": end, "step": step},
                                      lambda i: self._tel.prometheus_query_range(query, start, end, step))

        async def get_alerts() -> CallToolResult:
            """The alerts firing now."""
            return await self._invoke("get_alerts", {}, lambda i: self._tel.get_alerts())

        async def loki_query(query: str, minutes: float = 15) -> CallToolResult:
            """Run a LogQL query over the last `minutes` minutes, e.g. '{app="frontend"} |= "error"'."""
            return await self._invoke("loki_query", {"query": query, "minutes": minutes},
                                      lambda i: self._tel.loki_query(query, minutes))

        async def loki_labels() -> CallToolResult:
            """The log stream labels and their values, to build LogQL selectors."""
            return await self._invoke("loki_labels", {}, lambda i: self._tel.loki_labels())

        async def jaeger_services() -> CallToolResult:
            """The services that report traces."""
            return await self._invoke("jaeger_services", {}, lambda i: self._tel.jaeger_services())

        async def jaeger_operations(service: str) -> CallToolResult:
            """The span operations recorded for one service."""
            return await self._invoke("jaeger_operations", {"service": service},
                                      lambda i: self._tel.jaeger_operations(service))

        async def jaeger_traces(service: str, minutes: float = 15, limit: int = 20) -> CallToolResult:
            """Recent traces through `service` over the last `minutes` minutes (at most `limit`)."""
            return await self._invoke("jaeger_traces", {"service": service, "minutes": minutes, "limit": limit},
                                      lambda i: self._tel.jaeger_traces(service, minutes, limit))

        async def jaeger_dependencies() -> CallToolResult:
            """The service call graph over the last hour, with call counts."""
            return await self._invoke("jaeger_dependencies", {}, lambda i: self._tel.jaeger_dependencies())

        async def wait(seconds: float) -> CallToolResult:
            """Let `seconds` of cluster time pass (at most 900 per call), e.g. to see a fix take effect."""
            return await self._invoke("wait", {"seconds": seconds}, lambda i: self._wait(seconds),
                                      timeout_s=self.wait_deadline_s(seconds))

        async def submit_diagnosis(text: str, root_causes: list[str] | None = None, fault_type: str | None = None,
                                   affected: list[str] | None = None) -> CallToolResult:
            """Submit the diagnosis in prose: the faulty component, the mechanism with the concrete
            detail (key, value, port, limit), and what is affected. Submitting again replaces it.
            Optionally also structured: root_causes (the faulty objects by name, most likely first,
            at most 3), fault_type (one of the taxonomy: see the error a wrong one gets) and affected
            (the components that fail only downstream); these are scored exactly, on their own."""
            args: dict[str, Any] = {"text": text}
            args |= {k: v for k, v in (("root_causes", root_causes), ("fault_type", fault_type),
                                       ("affected", affected)) if v is not None}
            return await self._invoke("submit_diagnosis", args,
                                      lambda i: self._diagnose(text, root_causes, fault_type, affected))

        async def submit_mitigation() -> CallToolResult:
            """Declare the incident mitigated. Ends the session: no further changes are accepted."""
            return await self._invoke("submit_mitigation", {}, lambda i: self._mitigated())

        tools = [(f, f.__name__) for f in (
            kubectl, undo_last, prometheus_query, prometheus_query_range, get_alerts, loki_query,
            loki_labels, jaeger_services, jaeger_operations, jaeger_traces, jaeger_dependencies, wait,
            submit_diagnosis, submit_mitigation)]
        for fn, name in tools:
            server.add_tool(fn, name=name, structured_output=False)
        return server

    @property
    def _tel(self) -> Telemetry:
        assert self._telemetry is not None
        return self._telemetry

    def _late_change(self, command: str) -> str | None:
        """The refusal of a change after submit_mitigation; a command that does not parse is
        left for the tool to refuse (as a step, like any other refusal)."""
        if not self.finished.is_set():
            return None
        try:
            parsed = parse_command(command, self.namespace, virtual_time=self.cluster.capabilities.virtual_clock,
                                   also=self.also_namespaces)
        except ToolError:
            return None
        return _AFTER_MITIGATION if parsed.mutating else None

    def _kubectl_call(self, index: int, command: str, manifest: str | None) -> str:
        assert self._kubectl is not None
        parsed = parse_command(command, self.namespace, virtual_time=self.cluster.capabilities.virtual_clock,
                               also=self.also_namespaces)
        if parsed.uses_stdin and not manifest:
            raise ToolError("'-f -' needs the manifest text in the 'manifest' argument")
        if parsed.mutating and self.finished.is_set():  # submitted while this call waited its turn
            raise ToolError(_AFTER_MITIGATION)
        before = undo_mod.capture(self._kubectl, parsed, manifest) if parsed.undoable else {}
        at = self._now()
        result = self._kubectl.run_tokens(parsed.tokens, stdin=manifest if parsed.uses_stdin else None)
        if parsed.mutating and not parsed.undoable and (result.returncode == 0 or _ran_remotely(result.stderr)):
            # A command that ran inside a container may have changed it even when it failed there.
            with self._lock:
                self.record.mutations.append(Mutation(
                    call_index=index, command=command, at=at, targets=[parsed.exec_target()], undo=None,
                    note=(f"{parsed.verb} ran a command inside the container (exit status {result.returncode}); "
                          "what it changed there cannot be captured, so it cannot be undone")))
        # What kubectl wrote is read back from the cluster, not assumed from its exit status; a
        # command whose objects the tool cannot name counts as a write when it succeeded.
        if parsed.undoable and (undo_mod.wrote(self._kubectl, parsed, manifest, before)
                                if targets_of(parsed, manifest) else result.returncode == 0):
            with self._lock:
                self.record.mutations.append(Mutation(
                    call_index=index, command=command, at=at, targets=list(before),
                    undo=undo_mod.describe_undo(before), before=before))
        if result.returncode != 0:
            raise ToolError(result.text)
        structured = "output" in parsed.flags
        # Structured output (json, yaml, jsonpath) is left whole: collapsing lines would corrupt it.
        return dedupe_text(result.text) if self.summarised and not structured else result.text

    def _undo_last(self) -> str:
        assert self._kubectl is not None
        if self.finished.is_set():
            raise ToolError(_AFTER_MITIGATION)
        with self._lock:
            pending = [m for m in self.record.mutations if not m.undone and m.undo]
            last_index = pending[-1].call_index if pending else -1
            # Later changes without an undo (exec) are skipped: say so, so the agent is not misled.
            skipped = [m.command for m in self.record.mutations if m.undo is None and m.call_index > last_index]
        note = "".join(f"; '{c}' cannot be undone and was left as it is" for c in skipped)
        if not pending:
            raise ToolError("nothing to undo: no recorded change with an undo" + note)
        last = pending[-1]
        done = undo_mod.undo(self._kubectl, last.before)
        last.undone = True
        return f"undid '{last.command}': {done}{note}"

    def _wait(self, seconds: float) -> str:
        if not 0 < seconds <= self.max_wait_s:
            raise ToolError(f"seconds must be between 0 and {self.max_wait_s:.0f}")
        self.cluster.advance(seconds)
        now = datetime.fromtimestamp(self._now(), UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"waited {seconds:g} s; cluster time is now {now}"

    def _diagnose(self, text: str, root_causes: list[str] | None = None, fault_type: str | None = None,
                  affected: list[str] | None = None) -> str:
        structured = None
        if root_causes is not None or fault_type is not None or affected is not None:
            from farm.oracles.structured import check_structured

            structured = StructuredDiagnosis(root_causes=[scrub(n.strip()) for n in root_causes or []],
                                             fault_type=fault_type, affected=[scrub(n.strip()) for n in affected or []])
            try:
                check_structured(structured)
            except InputError as exc:
                raise ToolError(f"{exc} (the diagnosis was not recorded)") from None
        if not text or not text.strip():
            raise ToolError("the diagnosis is empty; describe the root cause in prose")
        if len(text.strip()) > MAX_DIAGNOSIS_CHARS:
            raise ToolError(f"the diagnosis is {len(text.strip())} characters; at most {MAX_DIAGNOSIS_CHARS} are "
                            "accepted (it was not recorded): state the root cause, mechanism and impact briefly")
        with self._lock:
            if self.record.end_reason is not None:  # a limit fired while this call waited its turn
                raise ToolError(f"{SESSION_ENDED}{self.record.end_reason}; the diagnosis was not recorded")
            self.record.diagnosis = scrub(text.strip())
            self.record.structured = structured
            self.record.diagnosis_at = self._now()
            self.record.diagnoses_submitted += 1
        return f"diagnosis recorded ({len(text.strip())} characters)"

    def _mitigated(self) -> str:
        if self.finished.is_set():
            return "mitigation was already submitted"
        with self._lock:
            if self.record.end_reason is not None:
                raise ToolError(f"{SESSION_ENDED}{self.record.end_reason}; the mitigation was not recorded")
            self.record.mitigation_at = self._now()
        self.finished.set()
        return "mitigation submitted; the session is over"


def _hide_cluster_internals(cluster: ClusterHandle) -> None:
    """Register the cluster's admin credentials and folders with the scrubber: no text an agent
    receives may carry them, whatever printed them."""
    import yaml

    admin = Path(cluster.kubeconfig)
    hide_path(admin.parent)
    try:
        doc = yaml.safe_load(admin.read_text()) or {}
    except (OSError, yaml.YAMLError):
        doc = {}
    for entry in doc.get("users") or []:
        user = entry.get("user") or {}
        for key in ("token", "client-key-data", "password"):
            if isinstance(user.get(key), str):
                hide_secret(user[key])
    hide_path(cluster.workdir)


def _ran_remotely(stderr: str) -> bool:
    """True when kubectl exec says the command ran in the container and exited non-zero; 126 and
    127 mean it could not be started (no such executable), so nothing ran."""
    found = re.search(r"command terminated with exit code (\d+)", stderr)
    return found is not None and int(found.group(1)) not in (126, 127)


def _scrub_args(args: dict[str, Any]) -> dict[str, Any]:
    return {k: scrub(v) if isinstance(v, str) else v for k, v in args.items()}
