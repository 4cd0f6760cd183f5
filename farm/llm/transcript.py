"""An agent session's transcript: OpenAI-shaped messages plus timestamps, usage and the sub-agent
that produced them, scrubbed of secrets as they are recorded (never afterwards, so a transcript
held in memory is already safe to write anywhere).

Entry shapes (AgentResult.transcript, and what farm.agents.atif exports):
    {"role": "system"|"user", "content": str, "at": iso}
    {"role": "assistant", "content": str|None, "tool_calls": [{"id", "name", "arguments": dict}],
     "usage": {tokens_in, tokens_out, tokens_cached, cost_usd, priced}, "model": str, "at": iso}
    {"role": "tool", "tool_call_id": str, "name": str, "content": str, "is_error": bool, "at": iso}
    {"role": "event", "content": str, "at": iso}         a note by the agent harness (limit hit, rollback)
Every entry may carry "agent": the sub-agent name (stratus: "diagnosis", "mitigation").
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from core.secrets import scrub


def scrub_obj(obj: Any) -> Any:
    """`obj` with every string in it scrubbed (dict keys included)."""
    if isinstance(obj, str):
        return scrub(obj)
    if isinstance(obj, dict):
        return {scrub_obj(k): scrub_obj(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [scrub_obj(v) for v in obj]
    return obj


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Transcript:
    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    def add(self, entry: dict[str, Any], agent: str | None = None) -> dict[str, Any]:
        e = dict(entry)
        e.setdefault("at", now_iso())
        if agent:
            e["agent"] = agent
        clean = scrub_obj(e)
        self.entries.append(clean)
        return clean

    def message(self, role: str, content: str, agent: str | None = None) -> None:
        self.add({"role": role, "content": content}, agent)

    def event(self, content: str, agent: str | None = None, **data: Any) -> None:
        self.add({"role": "event", "content": content, **data}, agent)

    def assistant(self, message: dict[str, Any], usage: dict[str, Any], model: str,
                  tool_calls: list[dict[str, Any]], agent: str | None = None) -> None:
        entry: dict[str, Any] = {"role": "assistant", "content": message.get("content"), "usage": usage,
                                 "model": model}
        if tool_calls:
            entry["tool_calls"] = tool_calls
        if message.get("reasoning_content"):
            entry["reasoning_content"] = message["reasoning_content"]
        self.add(entry, agent)

    def tool(self, call_id: str, name: str, content: str, is_error: bool, agent: str | None = None) -> None:
        self.add({"role": "tool", "tool_call_id": call_id, "name": name, "content": content,
                  "is_error": is_error}, agent)
