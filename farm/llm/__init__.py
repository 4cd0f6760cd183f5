"""The LLM side of the farm: the one litellm client (usage, cost, backoff, farm-wide limits), whose
failures are the provider's or the agent's (farm.llm.failures), the pre-flight check of a sweep's
models (farm.llm.preflight), the scripted OpenAI-compatible server for tests (farm.llm.scripted)
and the faulty provider beside it (farm.llm.faulty), the MCP toolbox and loop the LLM agents
share, ATIF export. Nothing here imports litellm at module level: it loads on the first call."""

from farm.llm.atif import to_atif
from farm.llm.client import Budget, Call, LLMClient, LLMError

__all__ = ["Budget", "Call", "LLMClient", "LLMError", "to_atif"]
