"""The agent interface: one MCP server per trial (streamable HTTP, bearer token) whose tools reach
the trial's cluster — kubectl, metrics, logs, traces, wait — and take the agent's submissions."""

from core.records import Mutation, ToolCall
from farm.interface.record import SessionRecord, count_tokens
from farm.interface.server import MODES, TOOL_NAMES, AgentInterface

__all__ = ["AgentInterface", "MODES", "Mutation", "SessionRecord", "TOOL_NAMES", "ToolCall", "count_tokens"]
