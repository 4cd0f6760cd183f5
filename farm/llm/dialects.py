"""The model APIs a coding-agent CLI speaks, translated to and from the chat-completions shape the
worker's `LLMClient.complete` takes, so that the session's model proxy (farm/llm/proxy.py) can be
the only model endpoint of `claude` (Anthropic Messages, `POST /v1/messages`) and `codex` (OpenAI
Responses, `POST /v1/responses`; or chat completions) as it is of the farm's own agents.

Each dialect turns a request body into (messages, tools) and a completed `Call` into that API's
answer: one JSON body, or, when the request asked for `stream`, the same answer as the API's
server-sent events (the whole completion is made first: the worker's client does not stream)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from farm.llm.client import Call, parse_arguments

Messages = list[dict[str, Any]]
Tools = list[dict[str, Any]] | None


def _text_of(content: Any) -> str:
    """The text of a content field: a string, or a list of text parts of any of these APIs."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content
                         if not isinstance(p, dict) or "text" in p)
    return json.dumps(content)


def _function_tool(name: Any, description: Any, parameters: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": str(name), "description": str(description or ""),
                                             "parameters": parameters or {"type": "object", "properties": {}}}}


def _sse(events: list[tuple[str | None, Any]]) -> bytes:
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        out.append(f"{head}data: {data if isinstance(data, str) else json.dumps(data)}\n\n")
    return "".join(out).encode()


# -- Anthropic Messages (claude) --------------------------------------------------------------------

def anthropic_request(body: dict[str, Any]) -> tuple[Messages, Tools]:
    """An Anthropic Messages request as chat messages and function tools; thinking blocks and the
    provider's own server tools (web search...) have no counterpart and are left out."""
    messages: Messages = []
    system = body.get("system")
    if system:
        messages.append({"role": "system", "content": _text_of(system)})
    turns = body["messages"]
    if not isinstance(turns, list):
        raise TypeError("messages must be a list")
    for turn in turns:
        role, content = turn["role"], turn.get("content")
        if isinstance(content, str):
            messages.append({"role": role, "content": content})
            continue
        blocks = [b for b in content or [] if isinstance(b, dict)]
        texts = [str(b.get("text", "")) for b in blocks if b.get("type") == "text"]
        if role == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) or None}
            calls = [{"id": b.get("id"), "type": "function",
                      "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input") or {})}}
                     for b in blocks if b.get("type") == "tool_use"]
            if calls:
                msg["tool_calls"] = calls
            messages.append(msg)
            continue
        # A user turn: tool results answer the assistant's calls first, then any text it adds.
        for b in blocks:
            if b.get("type") == "tool_result":
                text = _text_of(b.get("content"))
                messages.append({"role": "tool", "tool_call_id": b.get("tool_use_id"),
                                 "content": f"Error: {text}" if b.get("is_error") else text})
        if texts:
            messages.append({"role": role, "content": "\n".join(texts)})
    tools = [_function_tool(t["name"], t.get("description"), t.get("input_schema"))
             for t in body.get("tools") or [] if isinstance(t, dict) and "name" in t and "input_schema" in t]
    return messages, tools or None


def anthropic_message(call: Call) -> dict[str, Any]:
    """The Anthropic Messages answer for a completed call."""
    content: list[dict[str, Any]] = []
    if call.message.get("content"):
        content.append({"type": "text", "text": str(call.message["content"])})
    for c in call.message.get("tool_calls") or []:
        content.append({"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                        "input": parse_arguments(c["function"]["arguments"])})
    if any(b["type"] == "tool_use" for b in content):
        stop = "tool_use"
    else:
        stop = "max_tokens" if call.finish_reason == "length" else "end_turn"
    return {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant", "model": call.model,
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": call.tokens_in - call.tokens_cached, "output_tokens": call.tokens_out,
                      "cache_read_input_tokens": call.tokens_cached, "cache_creation_input_tokens": 0}}


def anthropic_stream(message: dict[str, Any]) -> bytes:
    """The same message as Anthropic's stream events (message_start ... message_stop)."""
    start = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 0}}
    events: list[tuple[str | None, Any]] = [("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(message["content"]):
        opened: dict[str, Any]
        delta: dict[str, Any]
        if block["type"] == "text":
            opened, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        else:
            opened = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events += [("content_block_start", {"type": "content_block_start", "index": i, "content_block": opened}),
                   ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}),
                   ("content_block_stop", {"type": "content_block_stop", "index": i})]
    events += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": message["stop_reason"],
                                                                     "stop_sequence": None},
                                  "usage": {"output_tokens": message["usage"]["output_tokens"]}}),
               ("message_stop", {"type": "message_stop"})]
    return _sse(events)


def anthropic_error(status: int, kind: str, message: str) -> dict[str, Any]:
    names = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
             413: "request_too_large", 429: "rate_limit_error"}
    return {"type": "error", "error": {"type": names.get(status, "api_error"), "message": message, "code": kind}}


# -- OpenAI Responses (codex) -----------------------------------------------------------------------

def responses_request(body: dict[str, Any]) -> tuple[Messages, Tools]:
    """An OpenAI Responses request (instructions, input items) as chat messages and tools;
    reasoning items and built-in tools (web search, shell) have no counterpart and are left out."""
    messages: Messages = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": str(body["instructions"])})
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    if not isinstance(items, list):
        raise TypeError("input must be a string or a list")
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            role = "system" if item.get("role") == "developer" else item["role"]
            messages.append({"role": role, "content": _text_of(item.get("content"))})
        elif kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments") or "{}"}}
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)  # one turn's text and calls are one message
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": _text_of(item.get("output"))})
    tools = [_function_tool(t["name"], t.get("description"), t.get("parameters"))
             for t in body.get("tools") or [] if isinstance(t, dict) and t.get("type") == "function" and "name" in t]
    return messages, tools or None


def responses_response(call: Call) -> dict[str, Any]:
    """The OpenAI Responses answer for a completed call."""
    output: list[dict[str, Any]] = []
    if call.message.get("content"):
        output.append({"type": "message", "id": f"msg_{uuid.uuid4().hex[:24]}", "status": "completed",
                       "role": "assistant", "content": [{"type": "output_text", "text": str(call.message["content"]),
                                                         "annotations": []}]})
    for c in call.message.get("tool_calls") or []:
        output.append({"type": "function_call", "id": f"fc_{uuid.uuid4().hex[:24]}", "call_id": c["id"],
                       "name": c["function"]["name"], "arguments": c["function"]["arguments"], "status": "completed"})
    return {"id": f"resp_{uuid.uuid4().hex[:24]}", "object": "response", "created_at": int(time.time()),
            "status": "completed", "model": call.model, "output": output,
            "usage": {"input_tokens": call.tokens_in, "input_tokens_details": {"cached_tokens": call.tokens_cached},
                      "output_tokens": call.tokens_out, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": call.tokens_in + call.tokens_out}}


def responses_stream(response: dict[str, Any]) -> bytes:
    """The same response as the Responses API's stream events (response.created ... completed)."""
    seq = iter(range(1_000_000))
    opened = {**response, "status": "in_progress", "output": []}
    events: list[tuple[str | None, Any]] = [
        ("response.created", {"type": "response.created", "sequence_number": next(seq), "response": opened})]
    for i, item in enumerate(response["output"]):
        events.append(("response.output_item.added", {"type": "response.output_item.added", "sequence_number": next(seq),
                                                      "output_index": i, "item": {**item, "status": "in_progress"}}))
        if item["type"] == "message":
            events.append(("response.output_text.delta", {
                "type": "response.output_text.delta", "sequence_number": next(seq), "item_id": item["id"],
                "output_index": i, "content_index": 0, "delta": item["content"][0]["text"]}))
        else:
            events.append(("response.function_call_arguments.delta", {
                "type": "response.function_call_arguments.delta", "sequence_number": next(seq), "item_id": item["id"],
                "output_index": i, "delta": item["arguments"]}))
        events.append(("response.output_item.done", {"type": "response.output_item.done", "sequence_number": next(seq),
                                                     "output_index": i, "item": item}))
    events.append(("response.completed", {"type": "response.completed", "sequence_number": next(seq),
                                          "response": response}))
    return _sse(events)


# -- OpenAI chat completions, streamed ----------------------------------------------------------------

def chat_stream(body: dict[str, Any]) -> bytes:
    """A chat.completion body as `chat.completion.chunk` events, the usage in the last one."""
    base = {"id": body["id"], "object": "chat.completion.chunk", "created": body["created"], "model": body["model"]}
    choice = body["choices"][0]
    msg = choice["message"]
    delta: dict[str, Any] = {"role": "assistant", "content": msg.get("content")}
    if msg.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(msg["tool_calls"])]
    return _sse([(None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}),
                 (None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]}),
                 (None, {**base, "choices": [], "usage": body["usage"]}),
                 (None, "[DONE]")])
