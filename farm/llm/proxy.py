"""The model endpoint an agent's process is given: an OpenAI-compatible `POST /v1/chat/completions`
on loopback, one per session, behind a bearer token of its own. Every request goes through the
worker's `LLMClient.complete`, so the provider's key, the usage the worker records, the trial's
token and cost budgets, the sweep's cost cap, the farm-wide concurrency slots and the backoff all
stay in the worker; the agent sees the assistant message and its usage, nothing else.

A limit the client raises ends the session (`on_limit`) and answers 429 with
`{"error": {"type": "limit_reached", "code": LIMIT_*, "message": detail}}`; any other failure is
kept in `failures` (the worker decides what it means for the trial) and answered 502."""

from __future__ import annotations

import json
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from core.errors import LimitReached
from core.secrets import scrub
from farm.llm.client import LLMClient

PATH = "/v1/chat/completions"
MAX_REQUEST_BYTES = 32 * 1024 * 1024  # a long conversation with every tool's output in it


def error_reply(exc: BaseException) -> tuple[int, dict[str, Any]]:
    """The HTTP status and body the agent gets for a failed model call."""
    if isinstance(exc, LimitReached):
        return 429, {"error": {"type": "limit_reached", "code": exc.reason, "message": scrub(exc.detail)}}
    return 502, {"error": {"type": "model_error", "code": type(exc).__name__, "message": scrub(str(exc))[:500]}}


def completion_body(call: Any) -> dict[str, Any]:
    """A chat.completion object (OpenAI shape) for one completed call, with the farm's own usage
    figures (cost, pricing, retries) under `farm_usage`."""
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
        "model": call.model,
        "choices": [{"index": 0, "message": call.message, "finish_reason": call.finish_reason or "stop"}],
        "usage": {"prompt_tokens": call.tokens_in, "completion_tokens": call.tokens_out,
                  "total_tokens": call.tokens_in + call.tokens_out,
                  "prompt_tokens_details": {"cached_tokens": call.tokens_cached}},
        "farm_usage": call.usage(),
    }


class ModelProxy:
    """`url, token = proxy.start()`; `proxy.stop()`. Calls past `deadline` (time.monotonic()) wait
    for nothing: the client's slot wait and backoff are bounded by it."""

    def __init__(self, client: LLMClient, *, deadline: float | None = None,
                 on_limit: Callable[[str, str], None] | None = None) -> None:
        self.client, self.deadline, self.on_limit = client, deadline, on_limit
        self.token = secrets.token_urlsafe(32)
        self.failures: list[BaseException] = []  # model calls that failed for a reason other than a limit
        self.calls = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> tuple[str, str]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
                pass  # the worker records calls itself, scrubbed

            def do_POST(self) -> None:  # noqa: N802 - the base's name
                status, body = proxy._handle(self.path, self.headers.get("Authorization", ""),
                                             int(self.headers.get("Content-Length") or 0), self.rfile)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="model-proxy", daemon=True)
        self._thread.start()
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1", self.token

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _handle(self, path: str, auth: str, length: int, stream: Any) -> tuple[int, dict[str, Any]]:
        if not secrets.compare_digest(auth, f"Bearer {self.token}"):
            return 401, {"error": {"type": "unauthorized", "message": "a bearer token is required"}}
        if path.rstrip("/") != PATH:
            return 404, {"error": {"type": "not_found", "message": f"only POST {PATH} is served"}}
        if length <= 0 or length > MAX_REQUEST_BYTES:
            return 413, {"error": {"type": "bad_request", "message": f"a body of 1 to {MAX_REQUEST_BYTES} bytes"}}
        try:
            request = json.loads(stream.read(length))
            messages, tools = request["messages"], request.get("tools") or None
            if not isinstance(messages, list) or not (tools is None or isinstance(tools, list)):
                raise TypeError("messages and tools must be lists")
        except (ValueError, KeyError, TypeError) as exc:
            return 400, {"error": {"type": "bad_request", "message": f"not a chat completion request: {exc}"}}
        try:
            call = self.client.complete(messages, tools, deadline=self.deadline)
        except LimitReached as exc:
            if self.on_limit is not None:
                self.on_limit(exc.reason, exc.detail)
            return error_reply(exc)
        except Exception as exc:  # noqa: BLE001 - any failure is the agent's observation and the worker's record
            self.failures.append(exc)
            return error_reply(exc)
        self.calls += 1
        return 200, completion_body(call)
