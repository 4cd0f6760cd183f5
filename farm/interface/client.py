"""Connecting to a trial's MCP server as a real MCP client (streamable HTTP with the bearer
token): `connect` for async agents, `ToolClient` for synchronous ones."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from anyio.from_thread import start_blocking_portal
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


@asynccontextmanager
async def connect(url: str, token: str) -> AsyncIterator[Client]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
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
