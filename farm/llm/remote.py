"""The model client of an agent that runs in its own process: the same `complete` an LLM agent's
loop calls on `LLMClient`, sent to the worker's model proxy (farm/llm/proxy.py) over HTTP with the
session's bearer token. It holds no provider key and charges nothing: the worker does both. It
imports neither litellm nor an HTTP library (the agent's process pays its imports every trial)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from core.errors import LimitReached
from farm.llm.client import Call, LLMClient, LLMError, Totals

# Options that name the session's model endpoint (set by the worker for an out-of-process agent).
ENDPOINT_OPTION, TOKEN_OPTION = "model_endpoint", "model_token"


class ProxyClient:
    """`LLMClient.complete` through the worker's model proxy; `totals` is what the proxy reported."""

    def __init__(self, url: str, token: str, model: str, request_timeout_s: float = 600.0) -> None:
        self.url, self._token, self.model = url.rstrip("/") + "/chat/completions", token, model
        self.request_timeout_s = request_timeout_s
        self.totals = Totals()

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, *,
                 deadline: float | None = None, timeout: float | None = None, **_: Any) -> Call:
        body = json.dumps({"model": self.model, "messages": messages, **({"tools": tools} if tools else {})})
        request = urllib.request.Request(self.url, data=body.encode(), method="POST", headers={
            "Authorization": f"Bearer {self._token}", "Content-Type": "application/json"})
        # The worker bounds the provider's call (its request timeout, its backoff, the session's
        # deadline) and answers with the provider's failure: waiting less here would make a slow
        # provider look like the agent's error. This wait only guards against a proxy that is gone.
        wait = max(timeout or 0.0, self.request_timeout_s) * 4
        if deadline is not None:
            wait = max(wait, deadline - time.monotonic() + 30.0)
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=wait) as response:
                reply = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            error = _error_of(exc)
            if error.get("type") == "limit_reached":
                raise LimitReached(str(error.get("code")), str(error.get("message", ""))) from None
            raise LLMError(f"{self.model}: {error.get('code', exc.code)}: {error.get('message', '')}") from None
        except (OSError, ValueError) as exc:
            raise LLMError(f"{self.model}: the model endpoint failed: {type(exc).__name__}: {exc}") from None
        choice = reply["choices"][0]
        usage = reply.get("farm_usage") or {}
        call = Call(message=choice["message"], model=str(reply.get("model") or self.model),
                    tokens_in=int(usage.get("tokens_in", 0)), tokens_out=int(usage.get("tokens_out", 0)),
                    tokens_cached=int(usage.get("tokens_cached", 0)), cost_usd=float(usage.get("cost_usd", 0.0)),
                    priced=bool(usage.get("priced", True)), retries=int(usage.get("retries", 0)),
                    latency_s=time.monotonic() - started, finish_reason=choice.get("finish_reason"))
        t = self.totals
        t.calls += 1
        t.tokens_in += call.tokens_in
        t.tokens_out += call.tokens_out
        t.tokens_cached += call.tokens_cached
        t.cost_usd += call.cost_usd
        t.retries += call.retries
        t.unpriced_calls += 0 if call.priced else 1
        return call


def _error_of(exc: urllib.error.HTTPError) -> dict[str, Any]:
    try:
        error = json.loads(exc.read()).get("error")
    except (OSError, ValueError, AttributeError):
        error = None
    return error if isinstance(error, dict) else {"code": exc.code, "message": exc.reason}


def model_client(ctx: Any) -> LLMClient | ProxyClient:
    """The client an LLM agent's loop uses: the worker's model proxy when the context names one
    (the agent runs in its own process), else a client of its own (an agent run in-process, in tests
    and notebooks)."""
    opts = ctx.options
    if opts.get(ENDPOINT_OPTION):
        if not ctx.model:
            raise LLMError("this agent needs a model: set a litellm model string in the sweep's models")
        return ProxyClient(str(opts[ENDPOINT_OPTION]), str(opts.get(TOKEN_OPTION, "")), ctx.model,
                           float(opts.get("request_timeout_s", 600.0)))
    return LLMClient.from_context(ctx)
