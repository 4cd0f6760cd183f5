"""The model endpoint an agent's process is given, on loopback, one per session, behind a bearer
token of its own: `POST /v1/chat/completions` (OpenAI chat, the farm's own agents), `POST
/v1/messages` (Anthropic Messages, claude) and `POST /v1/responses` (OpenAI Responses, codex), each
streamed when asked (farm/llm/dialects.py). Every request goes through the worker's
`LLMClient.complete`, so the provider's key, the usage the worker records, the trial's token and
cost budgets, the sweep's cost cap, the farm-wide concurrency slots and the backoff all stay in the
worker; the agent sees the assistant message and its usage, nothing else. The token is accepted as
`Authorization: Bearer` or `x-api-key` (what the Anthropic SDK sends for an API key).

A limit the client raises ends the session (`on_limit`) and answers 429 with
`{"error": {"type": "limit_reached", "code": LIMIT_*, "message": detail}}`; any other failure is
kept in `failures` (the worker decides what it means for the trial) and answered 502; a provider
failure (core.errors.ProviderError) is also reported to `on_provider_failure`, so the worker can end
a session that a CLI would otherwise spend retrying against a provider that already failed.

The agent is untrusted, so what one session can make the worker hold is bounded (issue 23): a body
of at most MAX_REQUEST_BYTES, refused from its Content-Length before a byte of it is read (413); at
most MAX_IN_FLIGHT requests of a session being read or answered at once, more answered 429 with
`too_many_requests` at once (the SDKs' own backoff retries them; the session goes on); a connection
that sends nothing for IDLE_TIMEOUT_S is closed. A refused request's connection is closed, since the
body it announced was never read."""

from __future__ import annotations

import json
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from core.errors import InfrastructureError, LimitReached
from core.secrets import scrub
from farm.llm import dialects
from farm.llm.client import LLMClient

PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
RESPONSES_PATH = "/v1/responses"
PATHS = (PATH, ANTHROPIC_PATH, RESPONSES_PATH)
# A conversation as text of ~2M tokens, beyond any model's context window: more is no model call.
MAX_REQUEST_BYTES = 8 * 1024 * 1024
# An agent's concurrent model calls (subagents, parallel tool reasoning); with the body bound, a
# session holds at most this many bodies (and parsed copies) in the worker's memory.
MAX_IN_FLIGHT = 8
IDLE_TIMEOUT_S = 120.0  # a read of the request that waits this long ends the connection


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
                 on_limit: Callable[[str, str], None] | None = None,
                 on_provider_failure: Callable[[InfrastructureError], None] | None = None) -> None:
        self.client, self.deadline, self.on_limit = client, deadline, on_limit
        self.on_provider_failure = on_provider_failure
        self.token = secrets.token_urlsafe(32)
        self.failures: list[BaseException] = []  # model calls that failed for a reason other than a limit
        self.calls = 0
        self._in_flight = 0  # calls to the client under way (awaited by stop)
        self._admitted = 0  # requests being read or answered (bounded by MAX_IN_FLIGHT)
        self.refused_busy = 0  # requests answered 429 because MAX_IN_FLIGHT were under way
        self._idle = threading.Condition()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> tuple[str, str]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = IDLE_TIMEOUT_S  # the socket's: a trickled body or an idle keep-alive ends here

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
                pass  # the worker records calls itself, scrubbed

            def do_POST(self) -> None:  # noqa: N802 - the base's name
                auth = self.headers.get("Authorization") or ""
                if not auth and self.headers.get("x-api-key"):
                    auth = f"Bearer {self.headers['x-api-key']}"
                status, data, content_type = proxy._admit(self.path, auth, self.headers, self.rfile)
                if status != 200:  # its body may be left unread: what follows on this connection is not a request
                    self.close_connection = True
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                if self.close_connection:
                    self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="model-proxy", daemon=True)
        self._thread.start()
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1", self.token

    def stop(self, drain_s: float = 30.0) -> None:
        """Stop serving. A call still in flight (its agent gave up or was stopped) is awaited up to
        `drain_s`: how it ends, a provider's failure say, is part of the session's record."""
        with self._idle:
            self._idle.wait_for(lambda: self._in_flight == 0, timeout=drain_s)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def admitted(self) -> int:
        """Requests of the session being read or answered now."""
        with self._idle:
            return self._admitted

    def _admit(self, path: str, auth: str, headers: Any, stream: Any) -> tuple[int, bytes, str]:
        """The bounds a request meets before its body is read, then `_serve` within a slot."""
        route = path.split("?", 1)[0].rstrip("/")
        refusal: tuple[int, dict[str, Any]] | None = None
        length_header = headers.get("Content-Length")
        if not secrets.compare_digest(auth, f"Bearer {self.token}"):
            refusal = 401, {"error": {"type": "unauthorized", "message": "a bearer token is required"}}
        elif headers.get("Transfer-Encoding") or length_header is None or not length_header.strip().isdigit():
            refusal = 411, {"error": {"type": "length_required",
                                      "message": "a request needs a Content-Length (chunked bodies are not read)"}}
        elif int(length_header) > MAX_REQUEST_BYTES:
            refusal = 413, {"error": {"type": "request_too_large",
                                      "message": f"a request body of {int(length_header)} bytes; at most "
                                                 f"{MAX_REQUEST_BYTES} are read"}}
        else:
            with self._idle:
                if self._admitted >= MAX_IN_FLIGHT:
                    self.refused_busy += 1
                    refusal = 429, {"error": {"type": "too_many_requests",
                                              "message": f"{MAX_IN_FLIGHT} requests of this session are under way; "
                                                         "retry when one has been answered"}}
                else:
                    self._admitted += 1
        if refusal is not None:
            return self._render(route, *refusal)
        try:
            return self._serve(route, auth, int(length_header or 0), stream)
        finally:
            with self._idle:
                self._admitted -= 1

    def _render(self, route: str, status: int, body: dict[str, Any]) -> tuple[int, bytes, str]:
        if route == ANTHROPIC_PATH:
            error = body.get("error") or {}
            body = dialects.anthropic_error(status, str(error.get("code") or error.get("type")),
                                            str(error.get("message", "")))
        return status, json.dumps(body).encode(), "application/json"

    def _serve(self, route: str, auth: str, length: int, stream: Any) -> tuple[int, bytes, str]:
        """One request in any of the served dialects: (status, body, content type)."""
        status, body = self._handle(route, auth, length, stream)
        if status != 200:
            return self._render(route, status, body)
        streamed = bool(body.pop("_stream", False))
        if not streamed:
            return 200, json.dumps(body).encode(), "application/json"
        render = {PATH: dialects.chat_stream, ANTHROPIC_PATH: dialects.anthropic_stream,
                  RESPONSES_PATH: dialects.responses_stream}[route]
        return 200, render(body), "text/event-stream"

    def _handle(self, route: str, auth: str, length: int, stream: Any) -> tuple[int, dict[str, Any]]:
        if not secrets.compare_digest(auth, f"Bearer {self.token}"):
            return 401, {"error": {"type": "unauthorized", "message": "a bearer token is required"}}
        if route not in PATHS:
            return 404, {"error": {"type": "not_found", "message": f"only POST {', '.join(PATHS)} are served"}}
        if length <= 0:
            return 400, {"error": {"type": "bad_request", "message": "an empty request"}}
        try:
            raw = stream.read(length)
        except OSError:  # the socket's timeout: a body trickled slower than IDLE_TIMEOUT_S a read
            return 408, {"error": {"type": "request_timeout", "message": f"no body within {IDLE_TIMEOUT_S:.0f} s"}}
        try:
            request = json.loads(raw)
            if route == ANTHROPIC_PATH:
                messages, tools = dialects.anthropic_request(request)
            elif route == RESPONSES_PATH:
                messages, tools = dialects.responses_request(request)
            else:
                messages, tools = request["messages"], request.get("tools") or None
            if not isinstance(messages, list) or not (tools is None or isinstance(tools, list)):
                raise TypeError("messages and tools must be lists")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return 400, {"error": {"type": "bad_request", "message": f"not a {route} request: {exc}"}}
        with self._idle:
            self._in_flight += 1
        try:
            call = self.client.complete(messages, tools, deadline=self.deadline)
        except LimitReached as exc:
            if self.on_limit is not None:
                self.on_limit(exc.reason, exc.detail)
            return error_reply(exc)
        except Exception as exc:  # noqa: BLE001 - any failure is the agent's observation and the worker's record
            self.failures.append(exc)
            if isinstance(exc, InfrastructureError) and self.on_provider_failure is not None:
                self.on_provider_failure(exc)
            return error_reply(exc)
        finally:
            with self._idle:
                self._in_flight -= 1
                self._idle.notify_all()
        self.calls += 1
        if route == ANTHROPIC_PATH:
            body = dialects.anthropic_message(call)
        elif route == RESPONSES_PATH:
            body = dialects.responses_response(call)
        else:
            body = completion_body(call)
        return 200, {**body, "_stream": bool(request.get("stream"))}
