"""Agent plugins for bench/sandbox_bench.py (FARM_AGENT_PLUGINS=bench.agent_bench_plugin), run in the
agent's sandboxed process: `bench-noop` returns at once (what starting an agent costs);
`bench-calls` makes `calls` MCP tool calls (`tool`, default get_alerts) and `model_calls` model
calls through the session's model proxy, and returns each one's wall time in ms."""

from __future__ import annotations

import time

from core.states import END_AGENT_STOPPED
from farm.agents.agent import Agent, AgentContext, AgentResult, agents


@agents.register("bench-noop")
class Noop(Agent):
    uses_model = False

    def run(self, ctx: AgentContext) -> AgentResult:
        return AgentResult(end_reason=END_AGENT_STOPPED)


@agents.register("bench-calls")
class Calls(Agent):
    uses_model = False

    def run(self, ctx: AgentContext) -> AgentResult:
        from farm.interface.client import ToolClient
        from farm.llm.remote import model_client

        tool, model = [], []
        with ToolClient(ctx.mcp_url, ctx.mcp_token) as tools:
            for _ in range(int(ctx.options.get("calls", 30))):
                t0 = time.perf_counter()
                tools.call(str(ctx.options.get("tool", "get_alerts")))
                tool.append((time.perf_counter() - t0) * 1000)
        if int(ctx.options.get("model_calls", 0)):
            client = model_client(ctx)
            for _ in range(int(ctx.options["model_calls"])):
                t0 = time.perf_counter()
                client.complete([{"role": "user", "content": "ping"}])
                model.append((time.perf_counter() - t0) * 1000)
        return AgentResult(end_reason=END_AGENT_STOPPED, transcript=[{"kind": "timings", "tool": tool, "model": model}])
