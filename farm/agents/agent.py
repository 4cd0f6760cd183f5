"""The agent interface. An agent gets an `AgentContext` (an opaque trial id, the application
namespace, the MCP server's URL and token, its model, its limits) and works the incident only
through the MCP tools; it returns an `AgentResult` with its usage and transcript. Submissions
(diagnosis, mitigation done) are recorded by the interface server, not trusted from the result.
"""

from __future__ import annotations

import abc
from typing import Any

from pydantic import BaseModel

from core.registry import Registry


class AgentLimits(BaseModel):
    max_steps: int = 40
    wall_time_s: float = 900.0
    max_tokens: int = 2_000_000
    max_cost_usd: float = 5.0
    # What the agent's process may take of the worker host (farm/agenthost/sandbox.py)
    memory_mib: int = 2048
    processes: int = 256
    tmp_mib: int = 512


class AgentContext(BaseModel):
    trial_id: str  # opaque; never the problem id
    namespace: str  # the application namespace the incident is in
    mcp_url: str  # streamable-HTTP endpoint of this trial's MCP server
    mcp_token: str  # bearer token for it
    model: str | None = None  # litellm model string, None for agents that use no model
    limits: AgentLimits = AgentLimits()
    seed: int = 0
    tool_mode: str = "raw"  # "raw" or "summarised"
    # Extra options from the sweep spec's agent entry.
    options: dict[str, Any] = {}


class AgentResult(BaseModel):
    end_reason: str  # one of core.states END_* / LIMIT_*
    steps: int = 0
    tool_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cached: int = 0
    cost_usd: float = 0.0
    transcript: list[dict[str, Any]] = []  # messages and tool calls, secrets scrubbed
    error: str | None = None


class Agent(abc.ABC):
    """One agent implementation. `uses_model` False means it runs once per problem × seed."""

    uses_model: bool = True

    @abc.abstractmethod
    def run(self, ctx: AgentContext) -> AgentResult: ...


BUILT_IN_AGENT_MODULES = ("farm.agents.baseline", "farm.agents.react", "farm.agents.stratus",
                          "farm.agents.cli_adapters")
# Agent plugins are imported only in the agent's own process (farm/agents/runner.py, from
# FARM_AGENT_PLUGINS), never through FARM_PLUGINS: see farm/agents/known.py.
agents: Registry[Agent] = Registry("agent", modules=BUILT_IN_AGENT_MODULES, plugins_env=None)
