"""What one agent session did, as recorded by the interface server (never trusted from the agent):
every tool call with its output and token count, the submissions, and the mutating commands."""

from __future__ import annotations

import os
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from core.records import Mutation, StructuredDiagnosis, ToolCall
from farm.interface.client import SESSION_ENDED

RECORD_VERSION = 1


class SessionRecord(BaseModel):
    version: int = RECORD_VERSION
    trial_id: str
    namespace: str
    mode: str  # "raw" or "summarised"
    started_at: float | None = None  # cluster time when the server started
    tool_calls: list[ToolCall] = []  # the session's steps, in order (index = position)
    # Calls refused because the session was over (a limit had ended it, or a change came after
    # submit_mitigation): kept for the reader, never steps. `index` is the step each would have been.
    refused_late: list[ToolCall] = []
    diagnosis: str | None = None  # the last submitted diagnosis
    structured: StructuredDiagnosis | None = None  # its structured fields, when given
    diagnosis_at: float | None = None
    diagnoses_submitted: int = 0
    mitigation_at: float | None = None  # when submit_mitigation was called
    mutations: list[Mutation] = []
    # Set when a limit the interface enforces ended the session (core.states LIMIT_*): later calls
    # were refused and nothing they submitted counts.
    end_reason: str | None = None
    end_detail: str | None = None
    ended_at: float | None = None  # cluster time
    sandbox: str = ""  # how kubectl ran: "bwrap", or the unsafe opt-out, which a reader must see

    @property
    def tool_tokens(self) -> int:
        return sum(call.tokens for call in self.tool_calls)

    def tokens_per_tool(self, calls: list[ToolCall] | None = None) -> dict[str, dict[str, int]]:
        """Calls and output tokens per tool name (of `calls`, default all of this session's)."""
        return tokens_per_tool(self.tool_calls if calls is None else calls)

    def counted_calls(self, calls: list[ToolCall] | None = None) -> list[ToolCall]:
        """The calls that were steps of the session: not those refused because it had ended."""
        return [c for c in (self.tool_calls if calls is None else calls)
                if not (c.error or "").startswith(SESSION_ENDED)]

    @property
    def errors(self) -> list[ToolCall]:
        return [call for call in self.tool_calls if call.error]


def tokens_per_tool(calls: list[ToolCall]) -> dict[str, dict[str, int]]:
    per: dict[str, dict[str, int]] = {}
    for call in calls:
        entry = per.setdefault(call.name, {"calls": 0, "tokens": 0})
        entry["calls"] += 1
        entry["tokens"] += call.tokens or 0
    return per


@cache
def _encoding() -> Any:
    # The machine may have no internet: tiktoken reads cl100k_base from the copy litellm ships,
    # found without importing litellm (which takes seconds).
    if not os.environ.get("TIKTOKEN_CACHE_DIR"):
        spec = find_spec("litellm")
        if spec and spec.origin:
            bundled = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
            if bundled.is_dir():
                os.environ["TIKTOKEN_CACHE_DIR"] = str(bundled)
    import tiktoken

    return tiktoken.get_encoding("cl100k_base")


def count_tokens(text: str) -> int:
    return len(_encoding().encode(text, disallowed_special=()))
