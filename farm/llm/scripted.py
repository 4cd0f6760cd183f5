"""A scripted OpenAI-compatible chat-completions server on loopback, for testing agents and judges
without a paid API: litellm (or any OpenAI client) talks real HTTP to it.

A script is a list of turns, consumed one per request, or a callable that sees each request (so a
test can answer a tool call from the tool results the agent sent back). A turn is a dict (or a
`Turn`) with any of:

    content: "text"                      assistant message text
    tool_calls: [{name, arguments}]      arguments a dict or a JSON string; ids are generated
    usage: {prompt_tokens, completion_tokens, cached_tokens}   overrides the estimate
    status: 429, retry_after: 0.2        an HTTP error (any status) instead of a completion
    raw: "not json"                      the assistant content verbatim (malformed judge replies)
    finish_reason: "stop"
    error: {type, code, message}         the error object sent with a non-200 status
    body: "{not a completion"            the HTTP 200 response body verbatim
    drop: true                           close the connection halfway through the answer
    delay: 2.5                           seconds to wait before answering

farm.llm.faulty builds on it: a provider that fails on a schedule a test sets.

Without a `usage` override, prompt tokens are estimated at one per four characters of the request's
messages and tools, and cached tokens are the estimate of the longest message prefix shared with the
previous request (how provider prompt caches behave). Requests are recorded in `.requests` with the
Authorization header replaced by whether it was present.

    python -m farm.llm.scripted --script turns.json --port 8123      # .json/.yaml list of turns,
    python -m farm.llm.scripted --script answer.py --port 8123       # or a .py defining respond(request)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

MODEL_LIST = ["scripted-model"]


class ScriptedToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    arguments: dict[str, Any] | str = {}
    id: str | None = None


class Usage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0


class Turn(BaseModel):
    """One scripted reply."""

    model_config = ConfigDict(extra="forbid")
    content: str | None = None
    tool_calls: list[ScriptedToolCall] = []
    usage: Usage | None = None
    status: int = 200
    retry_after: float | None = None
    raw: str | None = None
    finish_reason: str | None = None
    delay: float = 0.0  # seconds to wait before answering (concurrency tests, timeouts)
    error: dict[str, Any] | None = None  # the error object of a non-200 answer (default: from status)
    body: str | None = None  # a 200 answer's body verbatim (a provider that answers garbage)
    drop: bool = False  # close the connection halfway through the answer (a dropped stream)


Respond = Callable[[dict[str, Any]], "Turn | dict[str, Any]"]


def estimate_tokens(obj: Any) -> int:
    text = obj if isinstance(obj, str) else json.dumps(obj, sort_keys=True, default=str)
    return max(1, math.ceil(len(text) / 4)) if text else 0


def _shared_prefix(a: list[Any], b: list[Any]) -> list[Any]:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return a[:n]


class ScriptedLLM:
    """The server. Use as a context manager or call start()/stop(); `.url` is the api_base."""

    def __init__(self, script: Iterable[Turn | dict[str, Any]] | Respond, *, host: str = "127.0.0.1",
                 port: int = 0, repeat_last: bool = False) -> None:
        if callable(script):
            self._respond: Respond | None = script
            self._turns: list[Turn] = []
        else:
            self._respond = None
            self._turns = [t if isinstance(t, Turn) else Turn.model_validate(t) for t in script]
        self._repeat_last = repeat_last
        self._next = 0
        self._lock = threading.Lock()
        self._prev_messages: list[Any] = []
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0  # most completions being answered at once (concurrency-limit tests)
        self._host, self._port = host, port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> ScriptedLLM:
        handler = _make_handler(self)
        self._server = ThreadingHTTPServer((self._host, self._port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="scripted-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ScriptedLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """The api_base to give litellm / the OpenAI client."""
        return f"http://{self._host}:{self.port}/v1"

    @property
    def remaining(self) -> int:
        return max(0, len(self._turns) - self._next)

    # -- answering -------------------------------------------------------------------------------
    def _turn_for(self, request: dict[str, Any]) -> Turn:
        if self._respond is not None:
            out = self._respond(request)
            return out if isinstance(out, Turn) else Turn.model_validate(out)
        with self._lock:
            if self._next >= len(self._turns):
                if self._repeat_last and self._turns:
                    return self._turns[-1]
                return Turn(status=500, content=f"scripted server: script exhausted after {len(self._turns)} turns")
            turn = self._turns[self._next]
            self._next += 1
            return turn

    def _usage(self, request: dict[str, Any], turn: Turn, message: dict[str, Any]) -> dict[str, Any]:
        if turn.usage is not None:
            u = turn.usage
            prompt, completion, cached = u.prompt_tokens, u.completion_tokens, u.cached_tokens
        else:
            messages = request.get("messages", [])
            prompt = estimate_tokens(messages) + (estimate_tokens(request["tools"]) if request.get("tools") else 0)
            completion = estimate_tokens({k: v for k, v in message.items() if k != "role" and v})
            with self._lock:
                prefix = _shared_prefix(messages, self._prev_messages)
                self._prev_messages = list(messages)
            cached = min(prompt, estimate_tokens(prefix)) if prefix else 0
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        }

    def completion(self, request: dict[str, Any], turn: Turn) -> dict[str, Any]:
        """The chat.completion object for `turn` (non-streaming shape)."""
        message: dict[str, Any] = {"role": "assistant", "content": turn.raw if turn.raw is not None else turn.content}
        if turn.tool_calls:
            message["tool_calls"] = [
                {
                    "id": tc.id or f"call_{uuid.uuid4().hex[:12]}",
                    "type": "function",
                    "function": {
                        "name": tc.name,
                        "arguments": tc.arguments if isinstance(tc.arguments, str) else json.dumps(tc.arguments),
                    },
                }
                for tc in turn.tool_calls
            ]
        finish = turn.finish_reason or ("tool_calls" if turn.tool_calls else "stop")
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", "scripted-model"),
            "system_fingerprint": "scripted",
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": self._usage(request, turn, message),
        }


def _stream_chunks(completion: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """The SSE chunk sequence OpenAI sends for one completion."""
    base = {k: completion[k] for k in ("id", "created", "model", "system_fingerprint")}
    base["object"] = "chat.completion.chunk"
    msg = completion["choices"][0]["message"]
    chunks: list[dict[str, Any]] = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                                          "finish_reason": None}]}]
    text = msg.get("content") or ""
    for i in range(0, len(text), 16):
        chunks.append({**base, "choices": [{"index": 0, "delta": {"content": text[i:i + 16]}, "finish_reason": None}]})
    for idx, tc in enumerate(msg.get("tool_calls") or []):
        args = tc["function"]["arguments"]
        first = {"index": idx, "id": tc["id"], "type": "function", "function": {"name": tc["function"]["name"],
                                                                               "arguments": ""}}
        chunks.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [first]}, "finish_reason": None}]})
        for i in range(0, len(args), 24):
            part = {"index": idx, "function": {"arguments": args[i:i + 24]}}
            chunks.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [part]}, "finish_reason": None}]})
    chunks.append({**base, "choices": [{"index": 0, "delta": {},
                                        "finish_reason": completion["choices"][0]["finish_reason"]}]})
    if include_usage:
        chunks.append({**base, "choices": [], "usage": completion["usage"]})
    return chunks


def _make_handler(llm: ScriptedLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet by design
            return

        def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            path = self.path.split("?")[0].rstrip("/")
            if path in ("/v1/models", "/models"):
                self._send_json(200, {"object": "list", "data": [
                    {"id": m, "object": "model", "created": 0, "owned_by": "scripted"} for m in MODEL_LIST]})
            elif path in ("/health", "/v1/health"):
                self._send_json(200, {"ok": True})
            else:
                self._send_json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})

        def do_POST(self) -> None:  # noqa: N802
            path = self.path.split("?")[0].rstrip("/")
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if path not in ("/v1/chat/completions", "/chat/completions"):
                self._send_json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})
                return
            try:
                request = json.loads(raw or b"{}")
            except json.JSONDecodeError as exc:
                self._send_json(400, {"error": {"message": f"request body is not JSON: {exc}",
                                                "type": "invalid_request_error"}})
                return
            record = {"path": path, "body": request, "authorized": bool(self.headers.get("Authorization")),
                      "at": time.time()}
            with llm._lock:
                llm.requests.append(record)
            try:
                turn = llm._turn_for(request)
            except Exception as exc:  # a test's callable failed: say so to the client, loudly
                self._send_json(500, {"error": {"message": f"scripted responder raised {exc!r}",
                                                "type": "server_error"}})
                return
            with llm._lock:
                llm.in_flight += 1
                llm.max_in_flight = max(llm.max_in_flight, llm.in_flight)
            try:
                self._answer(request, turn)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client gave up first (its timeout): nothing to answer
            finally:
                with llm._lock:
                    llm.in_flight -= 1

        def _answer(self, request: dict[str, Any], turn: Turn) -> None:
            if turn.delay:
                time.sleep(turn.delay)
            if turn.status != 200:
                headers = {"Retry-After": f"{turn.retry_after:g}"} if turn.retry_after is not None else {}
                kind = "rate_limit_error" if turn.status == 429 else "server_error"
                error = turn.error or {"message": turn.content or f"scripted {turn.status}", "type": kind,
                                       "code": str(turn.status)}
                self._send_json(turn.status, {"error": error}, headers)
                return
            if turn.body is not None:
                data = turn.body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            completion = llm.completion(request, turn)
            if turn.drop:
                self._drop(request, completion)
                return
            if not request.get("stream"):
                self._send_json(200, completion)
                return
            include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for chunk in _stream_chunks(completion, include_usage):
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

        def _drop(self, request: dict[str, Any], completion: dict[str, Any]) -> None:
            """Start the answer, then close the connection halfway through it."""
            import socket

            self.send_response(200)
            if request.get("stream"):
                chunks = _stream_chunks(completion, False)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                for chunk in chunks[: max(1, len(chunks) // 2)]:
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            else:
                data = json.dumps(completion).encode()
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

    return Handler


def tool_results(request: dict[str, Any]) -> list[tuple[str, str]]:
    """The request's tool results as (tool name, content), in order, for responders that answer
    from what the agent has seen so far."""
    names: dict[str, str] = {}
    for m in request.get("messages", []):
        for tc in m.get("tool_calls") or []:
            names[tc["id"]] = tc["function"]["name"]
    out: list[tuple[str, str]] = []
    for m in request.get("messages", []):
        if m.get("role") == "tool":
            content = m.get("content")
            if isinstance(content, list):  # content parts
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            out.append((names.get(m.get("tool_call_id", ""), "?"), content or ""))
    return out


PlanStep = tuple[str, "dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]"]


def tool_plan(steps: list[PlanStep], finish: str = "Done.") -> Respond:
    """A responder that plays a fixed investigation: each reply calls the next step whose tool the
    request offers and that this conversation has not called yet; arguments may be a callable of the
    request (to build a diagnosis from earlier tool results). With nothing left, it answers `finish`.
    Steps up to and including each submit_* tool form a phase; a conversation that is not offered a
    phase's submit tool skips that phase. The same plan thus drives a single-context agent and one
    split into sub-agents (a diagnosis and a mitigation conversation) alike."""
    phases: list[list[PlanStep]] = [[]]
    for step in steps:
        phases[-1].append(step)
        if step[0].startswith("submit_"):
            phases.append([])

    def respond(request: dict[str, Any]) -> dict[str, Any]:
        # A coding-agent CLI offers an MCP server's tools under its own prefix (mcp__farm__kubectl,
        # farm__kubectl): a step's tool is the offered one of that name, prefixed or not.
        offered: dict[str, str] = {}
        for t in request.get("tools") or []:
            full = t["function"]["name"]
            offered.setdefault(full.rsplit("__", 1)[-1], full)
            offered[full] = full
        done: list[tuple[str, str]] = []
        for m in request.get("messages", []):
            for tc in m.get("tool_calls") or []:
                done.append((tc["function"]["name"], tc["function"]["arguments"]))
        called = {name for name, _ in done}
        playable = [s for phase in phases if phase and (not phase[-1][0].startswith("submit_")
                                                        or phase[-1][0] in offered) for s in phase]
        for name, args in playable:
            key_args = args(request) if callable(args) else args
            full = offered.get(name, name)
            if name in offered and (full, json.dumps(key_args)) not in done and not (
                    name.startswith("submit_") and full in called):
                return {"content": f"Next I call {name}.", "tool_calls": [{"name": full, "arguments": key_args}]}
        return {"content": finish}

    return respond


def load_script(path: str | Path) -> list[Turn] | Respond:
    """A script file: .json / .yaml / .yml holding a list of turns, or .py defining respond(request)."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: script file not found")
    if p.suffix == ".py":
        spec = importlib.util.spec_from_file_location(f"scripted_{p.stem}", p)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        respond = getattr(module, "respond", None)
        if not callable(respond):
            raise ValueError(f"{p}: a .py script must define respond(request) -> dict")
        return respond
    text = p.read_text()
    if p.suffix in (".yaml", ".yml"):
        import yaml

        data = yaml.safe_load(text)
    else:
        data = json.loads(text)
    if not isinstance(data, list):
        raise ValueError(f"{p}: a script is a list of turns, got {type(data).__name__}")
    turns = []
    for i, item in enumerate(data):
        try:
            turns.append(Turn.model_validate(item))
        except Exception as exc:
            raise ValueError(f"{p}: turn {i}: {exc}") from None
    return turns


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m farm.llm.scripted", description=__doc__.split("\n\n")[0])
    parser.add_argument("--script", required=True, help=".json/.yaml list of turns, or .py with respond(request)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--repeat-last", action="store_true", help="answer with the last turn once exhausted")
    args = parser.parse_args(argv)
    try:
        script = load_script(args.script)
    except (OSError, ValueError) as exc:
        parser.exit(2, f"error: {exc}\n")
    llm = ScriptedLLM(script, host=args.host, port=args.port, repeat_last=args.repeat_last).start()
    print(f"scripted LLM serving on {llm.url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        llm.stop()


if __name__ == "__main__":
    main()
