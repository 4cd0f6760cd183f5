"""A test agent plugin (FARM_AGENT_PLUGINS=tests.fakes.probe_agent): the `probe` agent makes model
calls (through the session's model proxy, to the scripted server the sweep names in `api_base`)
and MCP tool calls for `rounds` rounds, then returns, raises or hangs (`end` option), so tests can
see what a session produced whatever ended it. It runs in the agent's sandboxed process."""

from __future__ import annotations

import time

from core.errors import LimitReached
from core.states import END_AGENT_STOPPED, END_SUBMITTED
from farm.agents.agent import Agent, AgentContext, AgentResult, agents


@agents.register("probe")
class Probe(Agent):
    """Model calls and tool calls in rounds, then an ending chosen by the test."""

    uses_model = True

    def run(self, ctx: AgentContext) -> AgentResult:
        from farm.llm.mcp_client import MCPToolbox
        from farm.llm.remote import ENDPOINT_OPTION, model_client

        opts = ctx.options
        # The worker hands a model agent its session's model proxy (the scripted server behind it).
        client = model_client(ctx) if opts.get(ENDPOINT_OPTION) else None
        calls = 0
        reason = END_SUBMITTED if opts.get("diagnose") else END_AGENT_STOPPED
        with MCPToolbox(ctx.mcp_url, ctx.mcp_token) as tools:
            try:
                for i in range(int(opts.get("rounds", 2))):
                    if client is not None:
                        client.complete([{"role": "user", "content": f"round {i}: what is wrong with the cluster?"}])
                    tools.call("kubectl", {"command": "get pods"})
                    calls += 1
                    time.sleep(float(opts.get("pause_s", 0)))
            except LimitReached as exc:  # as the farm's own agents do: the limit is the ending
                reason = exc.reason
            if opts.get("diagnose"):
                tools.call("submit_diagnosis", {"text": str(opts["diagnose"])})
                calls += 1
            end = opts.get("end", "return")
            if end == "raise":
                raise RuntimeError("the probe agent crashed on purpose")
            if end == "hang":
                time.sleep(float(opts.get("hang_s", 3600)))
        t = client.totals if client is not None else None
        return AgentResult(end_reason=reason,
                           steps=t.calls if t else calls, tool_calls=calls,
                           tokens_in=t.tokens_in if t else 0, tokens_out=t.tokens_out if t else 0,
                           cost_usd=t.cost_usd if t else 0.0,
                           transcript=[{"kind": "note", "text": f"probe made {calls} tool calls"}])


@agents.register("crasher")
class Crasher(Agent):
    """Dies the hard way mid-session: no exception to report, no answer, a message on stderr."""

    uses_model = False

    def run(self, ctx: AgentContext) -> AgentResult:
        import os
        import sys

        print("crasher: going down", file=sys.stderr, flush=True)
        os._exit(3)
