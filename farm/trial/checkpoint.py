"""Checkpoints of a running agent session, so that an attempt whose worker dies (SIGKILL, a lost
node) still holds what the agent produced: the trial runner saves its partial record every few
seconds or tool calls, to the artifact store and the attempt row.

What a checkpoint can see runs in the worker's own process: the interface server's record (tool
calls, submissions, mutations) and, through `LLMUsageTap`, every model call made through litellm
(tokens, cost, the conversation so far). An agent that keeps its model calls elsewhere (a CLI
agent's own process) reports those only when its session ends.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypedDict

log = logging.getLogger("farm.trial.checkpoint")

# A checkpoint every CHECKPOINT_S seconds of wall time, or as soon as CHECKPOINT_CALLS more tool
# calls were made: long enough apart to cost nothing next to a session, close enough that a
# lost worker loses little.
CHECKPOINT_S = float(os.environ.get("FARM_CHECKPOINT_S", "10"))
CHECKPOINT_CALLS = int(os.environ.get("FARM_CHECKPOINT_CALLS", "5"))
MAX_MESSAGES = 400  # of the conversation kept in a checkpoint (the latest ones)


class UsageSnapshot(TypedDict):
    """The model calls a tap counted so far, and the last call's conversation."""

    calls: int
    tokens_in: int
    tokens_out: int
    tokens_cached: int
    cost_usd: float
    messages: list[dict[str, Any]]


class LLMUsageTap:
    """Counts the model calls this process makes through litellm while installed. A worker runs
    one trial at a time, so while its agent session runs, every such call is that agent's."""

    def __init__(self, model: str | None, price: dict[str, float] | None = None) -> None:
        self.model, self.price = model, price
        self.calls = self.tokens_in = self.tokens_out = self.tokens_cached = 0
        self.cost_usd = 0.0
        self.messages: list[dict[str, Any]] = []  # the last call's conversation and its answer
        self._lock = threading.Lock()
        self._logger: Any = None
        self._litellm: Any = None

    def install(self) -> bool:
        """Register with litellm; False (and nothing to count) when it is not installed."""
        try:
            from farm.llm.client import load_litellm

            litellm = load_litellm()
            from litellm.integrations.custom_logger import CustomLogger
        except Exception as exc:  # no litellm (or it fails to load): the final result still counts
            log.debug("no usage tap: %s", exc)
            return False
        tap = self

        class _Logger(CustomLogger):
            tap_id = ""
            def log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
                tap._seen(kwargs, response_obj)

            async def async_log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any,
                                              end_time: Any) -> None:
                tap._seen(kwargs, response_obj)

        logger = _Logger()
        # litellm keeps one logger per class name and public attributes, across every list it
        # promotes callbacks into: a distinct id keeps this tap from being taken for the last one.
        logger.tap_id = f"{os.getpid()}-{id(self)}"
        self._litellm, self._logger = litellm, logger
        litellm.callbacks.append(logger)
        return True

    def remove(self) -> None:
        if self._litellm is None or self._logger is None:
            return
        manager = getattr(self._litellm, "logging_callback_manager", None)
        if manager is not None and hasattr(manager, "remove_callback_from_all_lists"):
            manager.remove_callback_from_all_lists(self._logger)
        elif self._logger in self._litellm.callbacks:
            self._litellm.callbacks.remove(self._logger)
        self._logger = None

    def _cost(self, kwargs: Any, response: Any) -> float:
        # The same figure the LLM client charges (its own price when the agent names one).
        if self.price:
            try:
                return float(self._litellm.completion_cost(completion_response=response, model=self.model,
                                                           custom_cost_per_token=self.price))
            except Exception:  # an unusable price: fall back to what litellm computed
                pass
        cost = (kwargs or {}).get("response_cost")
        return float(cost) if cost else 0.0

    def _seen(self, kwargs: Any, response: Any) -> None:
        """One successful model call (from litellm's logging thread): never raises."""
        try:
            usage = getattr(response, "usage", None)
            tin = int(getattr(usage, "prompt_tokens", 0) or 0)
            tout = int(getattr(usage, "completion_tokens", 0) or 0)
            details = getattr(usage, "prompt_tokens_details", None)
            cached = int(getattr(details, "cached_tokens", 0) or 0)
            answer: dict[str, Any] = {}
            choices = getattr(response, "choices", None) or []
            if choices:
                msg = choices[0].message
                answer = msg.model_dump() if hasattr(msg, "model_dump") else dict(msg)
            messages = list((kwargs or {}).get("messages") or [])
            cost = self._cost(kwargs, response)
            with self._lock:
                self.calls += 1
                self.tokens_in, self.tokens_out, self.tokens_cached = (
                    self.tokens_in + tin, self.tokens_out + tout, self.tokens_cached + cached)
                self.cost_usd += cost
                self.messages = [*messages, answer][-MAX_MESSAGES:] if answer else messages[-MAX_MESSAGES:]
        except Exception as exc:  # a checkpoint aid must never disturb the agent's call
            log.debug("usage tap: %s", exc)

    def snapshot(self) -> UsageSnapshot:
        with self._lock:
            return {"calls": self.calls, "tokens_in": self.tokens_in, "tokens_out": self.tokens_out,
                    "tokens_cached": self.tokens_cached, "cost_usd": self.cost_usd,
                    "messages": list(self.messages)}


class Checkpointer:
    """Calls `save()` from a daemon thread every `every_s` seconds, or sooner once `progress()`
    (a count of tool calls) grew by `every_calls`, until the `with` block ends."""

    def __init__(self, save: Callable[[], None], progress: Callable[[], int], every_s: float | None = None,
                 every_calls: int | None = None, poll_s: float = 0.5) -> None:
        self.save, self.progress = save, progress
        self.every_s = CHECKPOINT_S if every_s is None else every_s
        self.every_calls = max(1, CHECKPOINT_CALLS if every_calls is None else every_calls)
        self.poll_s = poll_s
        self.saved = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        last_at, last_calls = time.monotonic(), 0
        while not self._stop.wait(self.poll_s):
            try:
                calls = self.progress()
            except Exception:  # progress is advisory; the timer still fires
                calls = last_calls
            if calls - last_calls >= self.every_calls or time.monotonic() - last_at >= self.every_s:
                try:
                    self.save()
                    self.saved += 1
                except Exception as exc:  # the next checkpoint may succeed; the final save reports
                    log.warning("checkpoint failed: %s", exc)
                last_at, last_calls = time.monotonic(), calls

    def __enter__(self) -> Checkpointer:
        self._thread = threading.Thread(target=self._run, name="checkpoint", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
