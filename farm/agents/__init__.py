"""Agents: plugins behind one interface (`Agent.run(AgentContext) -> AgentResult`). Built in:
baseline (no LLM), react and stratus (litellm), claude-code and codex (CLI adapters)."""

from farm.agents.agent import Agent, AgentContext, AgentLimits, AgentResult, agents

__all__ = ["Agent", "AgentContext", "AgentLimits", "AgentResult", "agents"]
