"""The LLM side of the farm: the one litellm client (usage, cost, backoff, farm-wide limits), whose
failures are the provider's or the agent's (farm.llm.failures), the scripted OpenAI-compatible
server for tests (farm.llm.scripted) and the faulty provider beside it (farm.llm.faulty), the MCP
toolbox the LLM agents share, the model proxy of a session. It knows nothing of agents: the loop
the LLM agents run and their ATIF export live in farm.agents, the pre-flight check of a sweep's
agents and models in farm.preflight. Nothing here imports litellm at module level: it loads on the
first call."""

from farm.llm.client import Budget, Call, LLMClient, LLMError

__all__ = ["Budget", "Call", "LLMClient", "LLMError"]
