"""Where a sweep's model string is sent. Most are litellm model strings, passed through as given;
`local/<name>` is a model the farm serves itself (farm/llm/local_server.py): it resolves to the
host's OpenAI-compatible server for it, called through litellm as `openai/<name>`, so the whole
real path (litellm, the agent's loop, tool-call parsing) runs. The one place a model name is
turned into an endpoint: per-model settings hook in here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Messages = list[dict[str, Any]]

LOCAL_PREFIX = "local/"


@dataclass(frozen=True)
class Endpoint:
    """How to call a model through litellm."""

    litellm_model: str
    api_base: str | None = None
    api_key: str | None = None
    # completion arguments the model needs (a local model's reply size, its tool-choice mode)
    call_options: dict[str, Any] = field(default_factory=dict)
    served_locally: bool = False  # the farm's own server: no provider bills it
    # what the server needs of the conversation's shape, applied to a copy on the wire (the
    # transcript keeps the OpenAI shape)
    adapt_messages: Callable[[Messages], Messages] | None = None


def tool_results_as_user_turns(messages: Messages) -> Messages:
    """For llama-cpp-python's chatml-function-calling: its template renders no `tool` message (the
    model would never see a tool's output) and its request schema refuses an assistant message
    whose content is null. Each run of tool results becomes one user turn naming the calls."""
    names = {c["id"]: c["function"]["name"] for m in messages if m.get("role") == "assistant"
             for c in m.get("tool_calls") or []}
    out: Messages = []
    results: list[str] = []  # the tool results since the last other message
    for m in messages:
        if m.get("role") == "tool":
            results.append(f"[{names.get(m.get('tool_call_id', ''), 'tool')} result]\n{m.get('content') or ''}")
            continue
        if results:
            out.append({"role": "user", "content": "\n\n".join(results)})
            results = []
        out.append({**m, "content": ""} if m.get("role") == "assistant" and m.get("content") is None else m)
    if results:
        out.append({"role": "user", "content": "\n\n".join(results)})
    return out


def is_local(model: str) -> bool:
    return model.startswith(LOCAL_PREFIX)


def check_model(model: str) -> str | None:
    """Why `model` cannot be used, known without starting anything (a spec's validation), or None."""
    if not is_local(model):
        return None
    from farm.llm.local_server import LOCAL_MODELS

    name = model.removeprefix(LOCAL_PREFIX)
    if name not in LOCAL_MODELS:
        return f"no local model '{name}' (known: {', '.join(LOCAL_PREFIX + n for n in sorted(LOCAL_MODELS))})"
    return None


def resolve(model: str, api_base: str | None = None, api_key: str | None = None) -> Endpoint:
    """The endpoint for `model`; a local model's server is started (or reused) here. Raises
    ConfigurationError for a local model that is unknown or not installed, InfrastructureError for
    one whose server does not start."""
    if not is_local(model):
        return Endpoint(model, api_base, api_key)
    from farm.llm import local_server

    name = model.removeprefix(LOCAL_PREFIX)
    spec = local_server.local_model(name)
    url = local_server.ensure(name)
    # chatml-function-calling offers the tools only when tool_choice is "auto" (or names one)
    return Endpoint(f"openai/{name}", url, "no-key-needed",
                    {"max_tokens": spec.max_tokens, "tool_choice": "auto"}, served_locally=True,
                    adapt_messages=tool_results_as_user_turns)
