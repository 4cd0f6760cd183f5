"""The tool-calling loop the LLM agents share: ask the model, run the tool calls it makes over MCP,
feed the results back, until it stops, calls a stopping tool, or a per-trial limit is hit. The
`Session` holds what limits count across sub-agents (steps, wall time, tokens, cost)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core.errors import ConfigurationError, InfrastructureError, LimitReached
from core.secrets import scrub
from core.states import (
    END_AGENT_ERROR,
    END_AGENT_STOPPED,
    END_CONTEXT_LENGTH,
    END_SUBMITTED,
    LIMIT_STEPS,
    LIMIT_WALL_TIME,
)
from farm.agents.agent import AgentContext, AgentResult
from farm.llm.client import LLMClient, LLMError, parse_arguments
from farm.llm.condense import stub
from farm.llm.mcp_client import MCPToolbox, ToolOutcome
from farm.llm.remote import ProxyClient, model_client
from farm.llm.transcript import Transcript

# A hook that may rewrite what the model sees of a tool's result (stratus checks health there).
ToolHook = Callable[[str, dict[str, Any], ToolOutcome, str], str]


@dataclass
class Session:
    ctx: AgentContext
    client: LLMClient | ProxyClient
    tools: MCPToolbox
    transcript: Transcript = field(default_factory=Transcript)
    started: float = field(default_factory=time.monotonic)
    steps: int = 0
    tool_calls: int = 0
    diagnosis_submitted: bool = False
    mitigation_submitted: bool = False
    diagnosis: str | None = None  # the text of the last diagnosis the interface accepted

    @property
    def remaining_s(self) -> float:
        return self.ctx.limits.wall_time_s - (time.monotonic() - self.started)

    def check_time(self) -> None:
        if self.remaining_s <= 0:
            raise LimitReached(LIMIT_WALL_TIME, f"{self.ctx.limits.wall_time_s:g}s of wall time used")

    def check_step(self) -> None:
        self.check_time()
        if self.steps >= self.ctx.limits.max_steps:
            raise LimitReached(LIMIT_STEPS, f"{self.steps} model calls of {self.ctx.limits.max_steps}")

    def call_tool(self, name: str, args: dict[str, Any], agent: str | None = None) -> ToolOutcome:
        """A tool call made by the harness itself (not the model), recorded in the transcript."""
        self.check_time()
        outcome = self.tools.call(name, args)
        self._count(name, args, outcome)
        self.transcript.event(f"harness called {name}", agent, tool=name, arguments=args,
                              output=outcome.text[:4000], is_error=outcome.is_error)
        return outcome

    def _count(self, name: str, args: dict[str, Any], outcome: ToolOutcome) -> None:
        self.tool_calls += 1
        if not outcome.is_error:
            if name == "submit_diagnosis":
                self.diagnosis_submitted = True
                self.diagnosis = str(args.get("text", ""))
            elif name == "submit_mitigation":
                self.mitigation_submitted = True

    def result(self, end_reason: str, error: str | None = None) -> AgentResult:
        t = self.client.totals
        return AgentResult(end_reason=end_reason, steps=self.steps, tool_calls=self.tool_calls,
                           tokens_in=t.tokens_in, tokens_out=t.tokens_out, tokens_cached=t.tokens_cached,
                           cost_usd=t.cost_usd, transcript=self.transcript.entries,
                           error=scrub(error) if error else None)


def converse(session: Session, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
             agent: str | None = None, stop_after: frozenset[str] = frozenset({"submit_mitigation"}),
             shape_output: Callable[[str], str] | None = None, on_tool: ToolHook | None = None,
             keep_outputs: int | None = None, max_steps: int | None = None,
             refuse: Callable[[str, dict[str, Any]], str | None] | None = None) -> str:
    """Run the loop on `messages` (mutated in place). Returns "stopped" when the model answered
    without a tool call, "done" after a stopping tool succeeded, "budget" when this conversation's
    own `max_steps` ran out. `refuse` may veto a call before it reaches the server (its message is
    the observation). Per-trial limits raise LimitReached."""
    allowed = {t["function"]["name"] for t in tools}
    own_steps = 0
    while True:
        if max_steps is not None and own_steps >= max_steps:
            return "budget"
        session.check_step()
        timeout = max(5.0, min(session.client.request_timeout_s, session.remaining_s))
        call = session.client.complete(messages, tools, timeout=timeout,
                                       deadline=time.monotonic() + session.remaining_s)
        session.steps += 1
        own_steps += 1
        msg = call.message
        parsed = [(tc["id"], tc["function"]["name"], parse_arguments(tc["function"]["arguments"]))
                  for tc in msg.get("tool_calls") or []]
        session.transcript.assistant(msg, call.usage(), call.model,
                                     [{"id": i, "name": n, "arguments": a} for i, n, a in parsed], agent)
        messages.append(msg)
        if not parsed:
            return "stopped"
        stop = False
        for call_id, name, args in parsed:
            session.check_time()
            if name not in allowed:
                outcome = ToolOutcome(f"error: tool '{name or '(no name)'}' is not available here (available: "
                                      f"{', '.join(sorted(allowed))})", True)
            elif refuse is not None and (why := refuse(name, args)) is not None:
                outcome = ToolOutcome(why, True)
            elif "_malformed" in args:
                outcome = ToolOutcome(f"error: the arguments of {name} are not a JSON object: "
                                      f"{str(args['_malformed'])[:200]}", True)
            else:
                outcome = session.tools.call(name, args)
            session._count(name, args, outcome)
            text = shape_output(outcome.text) if shape_output else outcome.text
            if on_tool is not None:
                text = on_tool(name, args, outcome, text)
            messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
            session.transcript.tool(call_id, name, text, outcome.is_error, agent)
            stop = stop or (name in stop_after and not outcome.is_error)
        if keep_outputs is not None:
            _elide_old_outputs(messages, keep_outputs)
        if stop:
            return "done"


def _elide_old_outputs(messages: list[dict[str, Any]], keep: int) -> None:
    """Replace all but the last `keep` tool outputs by a stub (first line and salient lines): the
    model already read them, and its own later messages carry what it concluded."""
    tool_idx = [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    for i in tool_idx[:-keep] if keep else tool_idx:
        content = messages[i]["content"]
        if not content.startswith("[elided"):
            messages[i] = {**messages[i], "content": stub(content)}


def run_session(ctx: AgentContext, body: Callable[[Session], None], *, agent_name: str) -> AgentResult:
    """Open the client and toolbox, run `body`, and map how it ended to an AgentResult."""
    try:
        client = model_client(ctx)
    except LLMError as exc:
        return AgentResult(end_reason=END_AGENT_ERROR, error=scrub(str(exc)))
    toolbox = MCPToolbox(ctx.mcp_url, ctx.mcp_token)
    session = Session(ctx=ctx, client=client, tools=toolbox)
    reason: str | None = None
    error: str | None = None
    try:
        toolbox.open()
        body(session)
    except LimitReached as exc:
        session.transcript.event(f"session ended: {exc}")
        reason = exc.reason
    except (InfrastructureError, ConfigurationError):
        # The MCP server, the cluster, the model provider (ProviderError) or the farm's own model
        # server failed, not the agent: the trial runner reports it apart and the trial is retried.
        raise
    except LLMError as exc:  # the agent's own request failed (its context outgrew the model's window, ...)
        session.transcript.event(f"{agent_name} failed: {exc}", kind=exc.kind)
        reason = END_CONTEXT_LENGTH if exc.kind == "context_length" else END_AGENT_ERROR
        error = f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # noqa: BLE001 - any failure ends the session, never the worker
        session.transcript.event(f"{agent_name} failed: {type(exc).__name__}: {exc}")
        reason, error = END_AGENT_ERROR, f"{type(exc).__name__}: {exc}"
    finally:
        toolbox.close()
    if client.totals.unpriced_calls:
        session.transcript.event(f"{client.totals.unpriced_calls} calls to {client.model} had no known price; "
                                 "their cost is recorded as 0", unpriced_calls=client.totals.unpriced_calls)
    if reason is None:
        submitted = session.diagnosis_submitted or session.mitigation_submitted
        reason = END_SUBMITTED if submitted else END_AGENT_STOPPED
    return session.result(reason, error)
