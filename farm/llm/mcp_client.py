"""A synchronous handle on a trial's MCP server for the LLM agents: lists the tools (converted to the
OpenAI function schema, which litellm translates for other providers) and calls them. The official
`mcp` client runs in a private event loop on a background thread; one session per toolbox."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from dataclasses import dataclass
from typing import Any

from core.errors import InfrastructureError, LimitReached


@dataclass
class ToolOutcome:
    text: str
    is_error: bool


class MCPToolbox:
    """`with MCPToolbox(url, token) as tools: tools.call("kubectl", {"command": "get pods"})`."""

    def __init__(self, url: str, token: str, *, timeout_s: float | None = None) -> None:
        from farm.interface.client import CLIENT_TIMEOUT_S

        # A wait on a real cluster takes its full wall-clock time: the default outlasts the longest.
        timeout_s = CLIENT_TIMEOUT_S if timeout_s is None else timeout_s
        self.url, self._token, self.timeout_s = url, token, timeout_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: Any = None
        self._closing: asyncio.Event | None = None
        self._done: concurrent.futures.Future[None] | None = None
        self.tools: list[Any] = []

    def __enter__(self) -> MCPToolbox:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._done = concurrent.futures.Future()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            try:
                self._loop.run_until_complete(self._session(ready))
            except BaseException as exc:  # noqa: BLE001 - reported to whoever waits on ready/done
                if not ready.done():
                    ready.set_exception(exc)
            finally:
                self._done.set_result(None)  # type: ignore[union-attr]
                self._loop.close()

        self._thread = threading.Thread(target=run, name="mcp-toolbox", daemon=True)
        self._thread.start()
        try:
            ready.result(timeout=60)
        except Exception as exc:
            raise InfrastructureError(f"cannot open the MCP session at {self.url}: {exc!r}") from None
        self.tools = self._run(self._client.list_tools()).tools

    async def _session(self, ready: concurrent.futures.Future[None]) -> None:
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        from farm.interface.client import http_client

        self._closing = asyncio.Event()
        http = http_client(self._token)
        async with http, Client(streamable_http_client(self.url, http_client=http)) as client:
            self._client = client
            ready.set_result(None)
            await self._closing.wait()

    def _run(self, coro: Any) -> Any:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=self.timeout_s)

    def close(self) -> None:
        if self._loop is not None and self._closing is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._closing.set)
            if self._done is not None:
                try:
                    self._done.result(timeout=10)
                except concurrent.futures.TimeoutError:
                    pass
        self._loop = None

    # -- tools -----------------------------------------------------------------------------------
    def names(self) -> list[str]:
        return [t.name for t in self.tools]

    def openai_tools(self, only: set[str] | None = None) -> list[dict[str, Any]]:
        """The tools in OpenAI function-calling form (the form litellm accepts for every provider)."""
        out = []
        for t in self.tools:
            if only is not None and t.name not in only:
                continue
            schema = dict(t.input_schema or {"type": "object", "properties": {}})
            schema.setdefault("type", "object")
            schema.setdefault("properties", {})
            schema.pop("title", None)
            out.append({"type": "function", "function": {"name": t.name, "description": (t.description or "").strip(),
                                                         "parameters": schema}})
        return out

    def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Call a tool; protocol-level failures come back as an error outcome, never an exception,
        because the agent must see them as observations."""
        try:
            result = self._run(self._client.call_tool(name, arguments))
        except Exception as exc:  # noqa: BLE001 - the agent sees every failure as an observation
            return ToolOutcome(f"error: tool call failed: {type(exc).__name__}: {exc}", True)
        parts = []
        for block in result.content or []:
            text = getattr(block, "text", None)
            parts.append(text if text is not None else f"[{getattr(block, 'type', 'content')}]")
        if not parts and result.structured_content is not None:
            import json

            parts.append(json.dumps(result.structured_content))
        outcome = ToolOutcome("\n".join(parts), bool(result.is_error))
        if outcome.is_error:
            from farm.interface.client import ended_by

            ended = ended_by(outcome.text)
            if ended is not None:  # the interface ended the session: stop, do not retry
                raise LimitReached(*ended)
        return outcome
