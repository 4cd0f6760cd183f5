"""The one place the farm calls litellm.completion. Every call goes through `LLMClient.complete`,
which takes a farm-wide concurrency slot for the model, backs off on rate limits and the
provider's other transient failures (5xx, overload, timeouts, dropped connections; honouring
Retry-After, bounded), raises what farm.llm.failures makes of a failure that persists
(core.errors.ProviderError, infrastructure; or LLMError, the agent's own, e.g. context length), records usage (tokens in/out/cached) and cost (litellm's price table; a
model without a price costs 0 and is flagged `priced=False`), and enforces the trial's token and
cost budgets and the sweep's cost cap by raising core.errors.LimitReached. farm/llm/models.py
turns the model string into an endpoint on the first call (`local/<name>`: the farm's own server,
started then).

Options read from AgentContext.options (all optional): api_base, api_key (prefer the provider's
environment variable), temperature, sweep_id, sweep_cost_cap, redis_url, concurrency (an int for
this model, or {model: int}), price ({input_cost_per_token, output_cost_per_token}) for models
litellm has no price for, max_backoff_retries, max_backoff_s, request_timeout_s; and from a sweep's
model entry (farm.spec.ModelEntry.call_options): api_key_env (the variable the key is read from, in
the worker, at call time: a key is never in an option, the spec or the database), reasoning_effort and
max_tokens (per completion).
"""

from __future__ import annotations

import email.utils
import json
import os
import random
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from core.errors import LimitReached, ProviderError
from core.states import LIMIT_COST, LIMIT_TOKENS, LIMIT_WALL_TIME
from farm.llm.failures import LLMError, classify, error_for
from farm.llm.limits import LocalSemaphore, RedisSemaphore, Slot, SweepLedger, redis_url_from
from farm.llm.models import Endpoint, resolve


class TrialContext(Protocol):
    """What a client needs of the trial it serves (an agent's AgentContext has it): the model,
    the limits and the options of the sweep."""

    @property
    def model(self) -> str | None: ...
    @property
    def limits(self) -> Any: ...
    @property
    def options(self) -> dict[str, Any]: ...

_litellm_lock = threading.Lock()


def load_litellm() -> Any:
    """Import litellm on first use (it takes seconds), with the local price map and quiet output."""
    with _litellm_lock:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import logging

        import litellm

        litellm.suppress_debug_info = True
        litellm.telemetry = False
        # litellm logs every call at INFO; the farm records calls itself, scrubbed
        for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
            logging.getLogger(name).setLevel(logging.WARNING)
        return litellm


__all__ = ["Budget", "Call", "LLMClient", "LLMError", "ProviderError", "Totals", "load_litellm", "parse_arguments",
           "price_tokens"]


@dataclass
class Call:
    """One completed model call."""

    message: dict[str, Any]  # the assistant message, OpenAI shape (role, content, tool_calls)
    model: str
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cached: int = 0
    cost_usd: float = 0.0
    priced: bool = True
    retries: int = 0
    latency_s: float = 0.0
    finish_reason: str | None = None

    def usage(self) -> dict[str, Any]:
        return {"tokens_in": self.tokens_in, "tokens_out": self.tokens_out, "tokens_cached": self.tokens_cached,
                "cost_usd": self.cost_usd, "priced": self.priced, "retries": self.retries}


@dataclass
class Totals:
    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cached: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0
    retries: int = 0

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out


@dataclass
class Budget:
    """Per-trial ceilings; None means no ceiling."""

    max_tokens: int | None = None
    max_cost_usd: float | None = None


def _retry_after(exc: Exception) -> float | None:
    """Seconds the server asked us to wait, from Retry-After (seconds or an HTTP date)."""
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return float(value) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time()) if when else None


def _as_dict(obj: Any) -> Any:
    if hasattr(obj, "model_dump"):
        return obj.model_dump()
    return obj


def _arguments_text(raw: Any) -> str:
    if isinstance(raw, dict):
        return json.dumps(raw)
    return str(raw) if raw else "{}"


def _message_dict(message: Any) -> dict[str, Any]:
    msg = _as_dict(message)
    out: dict[str, Any] = {"role": "assistant", "content": msg.get("content")}
    calls = msg.get("tool_calls") or []
    if calls:
        # A weak model's server may leave out an id or a name; the loop answers every call by its id
        # and reports an unnamed one as an unknown tool.
        out["tool_calls"] = [
            {"id": c.get("id") or f"call_{uuid.uuid4().hex[:16]}", "type": "function",
             "function": {"name": (c.get("function") or {}).get("name") or "",
                          "arguments": _arguments_text((c.get("function") or {}).get("arguments"))}}
            for c in (_as_dict(c) for c in calls)
        ]
    reasoning = msg.get("reasoning_content")
    if reasoning:
        out["reasoning_content"] = reasoning
    return out


def _usage_numbers(usage: Any) -> tuple[int, int, int]:
    u = _as_dict(usage) or {}
    tokens_in = int(u.get("prompt_tokens") or 0)
    tokens_out = int(u.get("completion_tokens") or 0)
    details = u.get("prompt_tokens_details") or {}
    cached = int((details.get("cached_tokens") if isinstance(details, dict) else 0) or 0)
    cached = cached or int(u.get("cache_read_input_tokens") or 0)
    return tokens_in, tokens_out, cached


class LLMClient:
    """A model and its limits for one trial (or one judge run). Thread-safe for concurrent calls."""

    def __init__(self, model: str, *, api_base: str | None = None, api_key: str | None = None,
                 temperature: float | None = None, budget: Budget | None = None,
                 ledger: SweepLedger | None = None, concurrency: int | None = None,
                 redis_url: str | None = None, lease_s: float = 30.0, price: dict[str, float] | None = None,
                 max_backoff_retries: int = 6, max_backoff_s: float = 60.0, request_timeout_s: float = 600.0,
                 extra: dict[str, Any] | None = None) -> None:
        self.model = model
        self.api_base, self._api_key = api_base, api_key
        self.temperature = temperature
        self.budget = budget or Budget()
        self.ledger = ledger
        self.price = price
        self.max_backoff_retries, self.max_backoff_s = max_backoff_retries, max_backoff_s
        self.request_timeout_s = request_timeout_s
        self.extra = extra or {}
        self._endpoint: Endpoint | None = None  # resolved on the first call: a local model starts its server
        self.totals = Totals()
        self._lock = threading.Lock()
        self._sleep = time.sleep  # tests can observe waits without patching the module
        self.waits: list[float] = []
        if concurrency is None:
            self._slots: RedisSemaphore | LocalSemaphore | None = None
        elif redis_url:
            self._slots = RedisSemaphore(redis_url, model, concurrency, lease_s=lease_s)
        else:
            self._slots = LocalSemaphore(model, concurrency)

    @classmethod
    def from_context(cls, ctx: TrialContext, model: str | None = None) -> LLMClient:
        """A client for the trial described by `ctx` (its model, limits and options)."""
        opts = ctx.options
        name = model or ctx.model
        if not name:
            raise LLMError("this agent needs a model: set a litellm model string in the sweep's models")
        redis_url = redis_url_from(opts)
        ledger = None
        if opts.get("sweep_id"):
            cap = opts.get("sweep_cost_cap")
            ledger = SweepLedger(str(opts["sweep_id"]), float(cap) if cap is not None else None, redis_url)
        conc = opts.get("concurrency")
        if isinstance(conc, dict):
            conc = conc.get(name)
        api_key = opts.get("api_key")
        if api_key is None and opts.get("api_key_env"):
            api_key = os.environ.get(str(opts["api_key_env"]))
            if not api_key:  # the worker's setup, not the agent, is wrong: infrastructure
                raise ProviderError(f"{name}: the environment variable {opts['api_key_env']} (the model's "
                                    "api_key_env) is not set in the worker", kind="auth", model=name, transient=False)
        extra = {k: opts[k] for k in ("reasoning_effort", "max_tokens") if opts.get(k) is not None}
        return cls(
            name,
            api_base=opts.get("api_base"),
            api_key=api_key,
            temperature=opts.get("temperature"),
            budget=Budget(max_tokens=ctx.limits.max_tokens, max_cost_usd=ctx.limits.max_cost_usd),
            ledger=ledger,
            concurrency=int(conc) if conc is not None else None,
            redis_url=redis_url,
            price=opts.get("price"),
            max_backoff_retries=int(opts.get("max_backoff_retries", 6)),
            max_backoff_s=float(opts.get("max_backoff_s", 60.0)),
            request_timeout_s=float(opts.get("request_timeout_s", 600.0)),
            extra=extra,
        )

    # -- limits ----------------------------------------------------------------------------------
    def check_budget(self) -> None:
        """Raise LimitReached if this client's spend already reached a ceiling."""
        t, b = self.totals, self.budget
        if b.max_tokens is not None and t.tokens >= b.max_tokens:
            raise LimitReached(LIMIT_TOKENS, f"{t.tokens} tokens used of {b.max_tokens}")
        if b.max_cost_usd is not None and t.cost_usd >= b.max_cost_usd:
            raise LimitReached(LIMIT_COST, f"${t.cost_usd:.4f} spent of ${b.max_cost_usd:.4f}")
        if self.ledger is not None:
            self.ledger.check()

    def _acquire(self, deadline: float | None) -> Slot | None:
        if self._slots is None:
            return None
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            return self._slots.acquire(timeout=timeout)
        except TimeoutError:
            raise LimitReached(LIMIT_WALL_TIME, f"no free {self.model} slot before the deadline") from None

    # -- the call --------------------------------------------------------------------------------
    @property
    def endpoint(self) -> Endpoint:
        """Where the model is called (farm/llm/models.py); resolving a local model starts its server."""
        with self._lock:
            if self._endpoint is None:
                self._endpoint = resolve(self.model, self.api_base, self._api_key)
            return self._endpoint

    def _kwargs(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                overrides: dict[str, Any]) -> dict[str, Any]:
        ep = self.endpoint
        if ep.adapt_messages is not None:
            messages = ep.adapt_messages(messages)
        kw: dict[str, Any] = {"model": ep.litellm_model, "messages": messages, "timeout": self.request_timeout_s,
                              # our backoff is the only retry loop: the OpenAI SDK's own retries would
                              # hide 429s from the farm-wide accounting
                              "max_retries": 0, "num_retries": 0, "drop_params": True}
        kw.update(ep.call_options)
        if tools:
            kw["tools"] = tools
        else:
            kw.pop("tool_choice", None)
        if self.temperature is not None:
            kw["temperature"] = self.temperature
        if ep.api_base:
            kw["api_base"] = ep.api_base
        key = ep.api_key
        if key is None and ep.api_base and ep.litellm_model.startswith(("openai/", "hosted_vllm/")) \
                and not os.environ.get("OPENAI_API_KEY"):
            key = "no-key-needed"  # a local OpenAI-compatible server; the SDK insists on some key
        if key is not None:
            kw["api_key"] = key
        kw.update(self.extra)
        kw.update(overrides)
        return kw

    def _cost(self, response: Any) -> tuple[float, bool]:
        litellm = load_litellm()
        if self.endpoint.served_locally and not self.price:
            return 0.0, False  # no provider's price applies to the farm's own server
        try:
            if self.price:
                return float(litellm.completion_cost(completion_response=response, model=self.model,
                                                     custom_cost_per_token=self.price)), True
            return float(litellm.completion_cost(completion_response=response, model=self.model)), True
        except Exception:  # no price known for this model: cost 0, flagged so reports can say so
            return 0.0, False

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, *,
                 deadline: float | None = None, **overrides: Any) -> Call:
        """One chat completion, with backoff on the provider's transient failures; raises
        LimitReached, ProviderError (the provider failed: infrastructure) or LLMError (the agent's
        own request failed, e.g. context length). `deadline` (time.monotonic()) bounds the wait
        for a concurrency slot and for backoff."""
        litellm = load_litellm()
        self.check_budget()
        kwargs = self._kwargs(messages, tools, overrides)
        retries = 0
        started = time.monotonic()
        while True:
            slot = self._acquire(deadline)
            try:
                response = litellm.completion(**kwargs)
                break
            except Exception as exc:
                failure = classify(exc)
                if failure.kind == "timeout" and deadline is not None and time.monotonic() >= deadline:
                    # the request's timeout was the session's remaining time: a limit, not a failure
                    raise LimitReached(LIMIT_WALL_TIME, f"{self.model} was still answering when the "
                                                        "wall time ran out") from None
                if not failure.transient or retries >= self.max_backoff_retries:
                    raise error_for(failure, self.model, retries) from None
                wait = _retry_after(exc)
                if wait is None:
                    wait = min(self.max_backoff_s, 2.0 ** retries) * (0.5 + random.random() / 2)
                wait = min(wait, self.max_backoff_s)
                if deadline is not None and time.monotonic() + wait > deadline:
                    # The provider, not the agent, would use up the session's time: infrastructure.
                    raise ProviderError(f"{self.model}: {failure.meaning} (HTTP {failure.status}); the backoff "
                                        f"would run past the session's deadline after {retries} retries",
                                        kind=failure.kind, model=self.model, transient=True) from None
                retries += 1
            finally:
                if slot is not None:
                    slot.release()
            self.waits.append(wait)
            self._sleep(wait)
        if not getattr(response, "choices", None):  # an answer with nothing to read: the provider's failure
            raise ProviderError(f"{self.model}: the provider's answer was not a completion: it has no choices",
                                kind="bad_response", model=self.model, transient=True)
        choice = response.choices[0]
        tokens_in, tokens_out, cached = _usage_numbers(getattr(response, "usage", None))
        cost, priced = self._cost(response)
        call = Call(message=_message_dict(choice.message), model=self.model, tokens_in=tokens_in,
                    tokens_out=tokens_out, tokens_cached=cached, cost_usd=cost, priced=priced, retries=retries,
                    latency_s=time.monotonic() - started, finish_reason=getattr(choice, "finish_reason", None))
        with self._lock:
            t = self.totals
            t.calls += 1
            t.tokens_in += tokens_in
            t.tokens_out += tokens_out
            t.tokens_cached += cached
            t.cost_usd += cost
            t.retries += retries
            t.unpriced_calls += 0 if priced else 1
        if self.ledger is not None:
            self.ledger.add(cost)
        return call


def price_tokens(model: str | None, tokens_in: int, tokens_out: int, tokens_cached: int = 0,
                 tokens_cache_written: int = 0) -> tuple[float, bool]:
    """Cost of token counts reported by a tool that does not report cost (codex), or does only at
    the end (claude), from litellm's price table; (0, False) for a model it has no price for.
    `tokens_in` counts every input token, cache reads and cache writes included."""
    if not model:
        return 0.0, False
    litellm = load_litellm()
    try:
        cin, cout = litellm.cost_per_token(model=model, prompt_tokens=tokens_in, completion_tokens=tokens_out,
                                           cache_read_input_tokens=tokens_cached,
                                           cache_creation_input_tokens=tokens_cache_written)
        return float(cin + cout), True
    except Exception:  # unknown model: cost 0, flagged
        return 0.0, False


def parse_arguments(raw: str | dict[str, Any] | None) -> dict[str, Any]:
    """A tool call's arguments as a dict; a malformed JSON string becomes {"_malformed": raw}."""
    if isinstance(raw, dict):
        return raw
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return {"_malformed": raw}
    return value if isinstance(value, dict) else {"_malformed": raw}
