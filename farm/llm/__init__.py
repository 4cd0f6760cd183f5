"""The LLM side of the farm: the one litellm client (usage, cost, backoff, farm-wide limits), the
scripted OpenAI-compatible server for tests (farm.llm.scripted), the MCP toolbox and loop the LLM
agents share, ATIF export. Nothing here imports litellm at module level: it loads on the first call."""

from farm.llm.atif import to_atif
from farm.llm.client import Budget, Call, LLMClient, LLMError

__all__ = ["Budget", "Call", "LLMClient", "LLMError", "to_atif"]
