"""The LLM side of the farm: the one litellm client (usage, cost, backoff, farm-wide limits), the
scripted OpenAI-compatible server for tests, the MCP toolbox and loop the LLM agents share, ATIF export.

Nothing here imports litellm at module level: it loads on the first model call."""

from farm.llm.atif import to_atif
from farm.llm.client import Budget, Call, LLMClient, LLMError
from farm.llm.scripted import ScriptedLLM, Turn, tool_plan

__all__ = ["Budget", "Call", "LLMClient", "LLMError", "ScriptedLLM", "Turn", "to_atif", "tool_plan"]
