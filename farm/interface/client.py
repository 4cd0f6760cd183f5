"""Connecting to a trial's MCP server as a real MCP client (streamable HTTP with the bearer
token): `connect` for async agents, `ToolClient` for synchronous ones."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from anyio.from_thread import start_blocking_portal
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_TIMEOUT, create_mcp_http_client

TOOL_TIMEOUT_S = 90.0  # one tool call's deadline on the server (wall clock), wait excepted
MAX_WAIT_S = 900.0  # the longest single wait an agent may ask for
# How long a client must be ready to wait for one tool result: the longest wall-clock wait plus
# the ordinary deadline as its margin, and a minute for the transport. The SDK's default read
# timeout (300 s) would cut a long wait on a real cluster short.
CLIENT_TIMEOUT_S = MAX_WAIT_S + TOOL_TIMEOUT_S + 60.0
# A limit the interface enforces ended the session: every later call is refused with this text
# first, then the limit (core.states LIMIT_*), so a client can stop instead of retrying.
SESSION_ENDED = "session ended: "


def ended_by(text: str) -> tuple[str, str] | None:
    """(limit, detail) of a refusal that says the session ended, else None."""
    if not text.startswith(SESSION_ENDED):
        return None
    rest = text[len(SESSION_ENDED):]
    reason = rest.split(" ", 1)[0].strip(";,.")
    detail = rest.split("(", 1)[1].split(")", 1)[0] if "(" in rest else ""
    return (reason, detail) if reason else None


def http_client(token: str) -> Any:
    """The HTTP client for a trial's MCP server: its bearer token, and a read timeout long enough
    for the longest wait."""
    import httpx2

    return create_mcp_http_client(headers={"Authorization": f"Bearer {token}"},
                                  timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=CLIENT_TIMEOUT_S))


@asynccontextmanager
async def connect(url: str, token: str) -> AsyncIterator[Client]:
    http = http_client(token)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client


def result_text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


class ToolClient:
    """A blocking MCP client: `call(name, **args) -> (text, is_error)`. Use as a context manager."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self._portal_cm: Any = None
        self._client_cm: Any = None
        self._client: Client | None = None
        self.tools: list[Any] = []

    def __enter__(self) -> ToolClient:
        self._portal_cm = start_blocking_portal()
        portal = self._portal_cm.__enter__()
        try:
            self._client_cm = portal.wrap_async_context_manager(connect(self.url, self.token))
            self._client = self._client_cm.__enter__()
            self.tools = portal.call(self._client.list_tools).tools
        except BaseException:
            self._portal_cm.__exit__(None, None, None)
            raise
        self._portal = portal
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            if self._client_cm is not None:
                self._client_cm.__exit__(None, None, None)
        finally:
            self._portal_cm.__exit__(None, None, None)

    def call(self, name: str, **arguments: Any) -> tuple[str, bool]:
        assert self._client is not None, "use ToolClient as a context manager"
        args = {k: v for k, v in arguments.items() if v is not None}
        result = self._portal.call(self._client.call_tool, name, args)
        return result_text(result), bool(result.is_error)
