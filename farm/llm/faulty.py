"""A faulty model provider for tests: the scripted OpenAI-compatible server (farm.llm.scripted) on
loopback, answering some requests with the failures real providers produce, on a schedule the
test sets. Clients talk real HTTP to it through litellm, as they would to a provider.

The schedule says, per model (the name the server sees: litellm strips `openai/`), which fault
the n-th request for that model meets:

    {"flaky": ["rate_limit", "rate_limit"],   # the first two requests get a 429, the rest answer
     "down": "unavailable",                   # every request gets a 503
     "*": [None, "context_length"]}           # any other model: the second request overflows

A list that runs out answers normally; None (or "ok") in it answers normally; a string is that
fault for every request. `set_schedule` replaces it (and restarts the counts) while the server
runs, so a test can break a provider for one run and mend it for the next. Requests that are
answered are answered by `answer` (a scripted responder; by default a plain "OK").

Faults and what a client should make of them (farm.llm.failures): FAULT_KINDS.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from farm.llm.scripted import Respond, ScriptedLLM, Turn

Schedule = Mapping[str, "str | Sequence[str | None] | None"]

# fault -> the farm.llm.failures kind a client classifies it as (None: the call is answered; the
# agent meets the damage in the answer, e.g. tool-call arguments that are not JSON).
FAULT_KINDS: dict[str, str | None] = {
    "rate_limit": "rate_limited",  # 429 with Retry-After
    "server_error": "server_error",  # 500
    "unavailable": "overloaded",  # 503
    "overloaded": "overloaded",  # 529 (Anthropic's "overloaded_error")
    "auth": "auth",  # 401 invalid_api_key
    "unknown_model": "unknown_model",  # 404 model_not_found
    "slow": "timeout",  # answers after `slow_s`: a timeout for a client that waits less
    "drop": "connection",  # the connection closes halfway through the answer (a dropped stream)
    "malformed_body": "bad_response",  # HTTP 200 whose body is not a completion
    "context_length": "context_length",  # 400 context_length_exceeded: the agent's own failure
    "truncated_tool_call": None,  # a tool call whose JSON arguments are cut short
    "malformed_tool_call": None,  # a tool call whose arguments are not JSON at all
}
PROVIDER_FAULTS = frozenset(f for f, k in FAULT_KINDS.items() if k is not None and k != "context_length")


def _ok(request: dict[str, Any]) -> dict[str, Any]:
    return {"content": "OK"}


class FaultyProvider(ScriptedLLM):
    """The server; `.url` is the api_base. `.served` counts (model, fault) per request answered
    ("ok" for a normal answer)."""

    def __init__(self, schedule: Schedule | None = None, answer: Respond | None = None, *,
                 slow_s: float = 3.0, retry_after_s: float = 0.05, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(self._respond_to, host=host, port=port)
        self._answer = answer or _ok
        self.slow_s, self.retry_after_s = slow_s, retry_after_s
        self._schedule_lock = threading.Lock()
        self._schedule: dict[str, str | list[str | None] | None] = {}
        self._seen: Counter[str] = Counter()
        self.served: Counter[tuple[str, str]] = Counter()
        self.set_schedule(schedule or {})

    def set_schedule(self, schedule: Schedule) -> None:
        """Replace the schedule and restart the per-model request counts."""
        parsed: dict[str, str | list[str | None] | None] = {}
        for model, plan in schedule.items():
            faults = [plan] if isinstance(plan, str) or plan is None else list(plan)
            for f in faults:
                if f not in (None, "ok") and f not in FAULT_KINDS:
                    raise ValueError(f"schedule for {model!r}: unknown fault {f!r} (known: {', '.join(FAULT_KINDS)})")
            parsed[model] = plan if isinstance(plan, str) or plan is None else list(plan)
        with self._schedule_lock:
            self._schedule = parsed
            self._seen = Counter()

    def fault_for(self, model: str) -> str | None:
        """The fault the next request for `model` meets (and count it)."""
        with self._schedule_lock:
            self._seen[model] += 1
            n = self._seen[model]
            plan = self._schedule.get(model, self._schedule.get("*"))
        if isinstance(plan, str):
            fault: str | None = plan
        elif plan is None or n > len(plan):
            fault = None
        else:
            fault = plan[n - 1]
        return None if fault == "ok" else fault

    def _respond_to(self, request: dict[str, Any]) -> Turn:
        model = str(request.get("model", ""))
        fault = self.fault_for(model)
        with self._schedule_lock:
            self.served[(model, fault or "ok")] += 1
        if fault is None:
            return _turn(self._answer(request))
        return self.turn_for(fault, request)

    def turn_for(self, fault: str, request: dict[str, Any]) -> Turn:
        """The scripted answer that plays `fault`."""
        model = request.get("model", "?")
        if fault == "rate_limit":
            return Turn(status=429, retry_after=self.retry_after_s, error={
                "message": f"Rate limit reached for {model}. Please try again in {self.retry_after_s:g}s.",
                "type": "rate_limit_error", "code": "rate_limit_exceeded"})
        if fault == "server_error":
            return Turn(status=500, error={"message": "The server had an error while processing your request.",
                                           "type": "server_error", "code": None})
        if fault == "unavailable":
            return Turn(status=503, error={"message": "The engine is currently overloaded, please try again later.",
                                           "type": "server_error", "code": "service_unavailable"})
        if fault == "overloaded":
            return Turn(status=529, error={"message": "Overloaded", "type": "overloaded_error", "code": None})
        if fault == "auth":
            return Turn(status=401, error={"message": "Incorrect API key provided.", "type": "invalid_request_error",
                                           "code": "invalid_api_key"})
        if fault == "unknown_model":
            return Turn(status=404, error={"message": f"The model `{model}` does not exist or you do not have "
                                                      "access to it.", "type": "invalid_request_error",
                                           "code": "model_not_found"})
        if fault == "context_length":
            return Turn(status=400, error={
                "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in "
                           "9001 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"})
        if fault == "slow":
            return _turn(self._answer(request)).model_copy(update={"delay": self.slow_s})
        if fault == "drop":
            return _turn(self._answer(request)).model_copy(update={"drop": True})
        if fault == "malformed_body":
            return Turn(body='{"id": "chatcmpl-broken", "object": "chat.completion", "choices": [{"index": 0, "mess')
        if fault in ("truncated_tool_call", "malformed_tool_call"):
            return _damaged_tool_call(_turn(self._answer(request)), fault)
        raise ValueError(f"unknown fault {fault!r}")


def _turn(answer: Turn | dict[str, Any]) -> Turn:
    return answer if isinstance(answer, Turn) else Turn.model_validate(answer)


def _damaged_tool_call(turn: Turn, fault: str) -> Turn:
    """The answer's first tool call (or a kubectl call) with its arguments damaged."""
    calls = [c.model_copy() for c in turn.tool_calls]
    if not calls:
        turn = turn.model_copy(update={"content": turn.content or "Checking the pods."})
        from farm.llm.scripted import ScriptedToolCall

        calls = [ScriptedToolCall(name="kubectl", arguments={"command": "get pods"})]
    args = calls[0].arguments if isinstance(calls[0].arguments, str) else json.dumps(calls[0].arguments)
    damaged = args[: max(1, len(args) // 2)] if fault == "truncated_tool_call" else "kubectl get pods, please"
    calls[0] = calls[0].model_copy(update={"arguments": damaged})
    return turn.model_copy(update={"tool_calls": calls, "finish_reason": "tool_calls"})

