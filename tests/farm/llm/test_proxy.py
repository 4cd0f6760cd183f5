"""The session's model proxy (farm/llm/proxy.py) and the agent-side client (farm/llm/remote.py),
over real HTTP to the scripted OpenAI-compatible server through the worker's real LLMClient: the
bearer token, the usage the worker counts, a limit that ends the session, a provider failure kept
for the worker."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request

import pytest

from core.errors import LimitReached, ProviderError
from core.states import LIMIT_TOKENS
from farm.llm.client import Budget, LLMClient, LLMError
from farm.llm.proxy import ModelProxy
from farm.llm.remote import ProxyClient
from farm.llm.scripted import ScriptedLLM

PRICE = {"input_cost_per_token": 1e-4, "output_cost_per_token": 2e-4}
PING = [{"role": "user", "content": "ping"}]


def test_calls_go_through_the_workers_client_and_report_its_usage() -> None:
    with ScriptedLLM([{"content": "pong"}], repeat_last=True) as llm:
        worker = LLMClient("openai/scripted-model", api_base=llm.url, price=PRICE)
        proxy = ModelProxy(worker)
        url, token = proxy.start()
        try:
            agent = ProxyClient(url, token, "openai/scripted-model")
            call = agent.complete(PING)
            agent.complete(PING)
        finally:
            proxy.stop()
    assert call.message["content"] == "pong" and call.tokens_in > 0 and call.cost_usd > 0
    assert worker.totals.calls == proxy.calls == agent.totals.calls == 2  # counted where the key is
    assert agent.totals.cost_usd == pytest.approx(worker.totals.cost_usd)
    assert len(llm.requests) == 2 and llm.requests[0]["body"]["messages"] == PING


def test_a_request_without_the_sessions_token_is_refused() -> None:
    with ScriptedLLM([{"content": "pong"}]) as llm:
        proxy = ModelProxy(LLMClient("openai/scripted-model", api_base=llm.url))
        url, _ = proxy.start()
        try:
            with pytest.raises(LLMError, match="unauthorized|401"):
                ProxyClient(url, "not-the-token", "openai/scripted-model").complete(PING)
            request = urllib.request.Request(url + "/chat/completions", data=json.dumps({"messages": PING}).encode())
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=10)
            assert refused.value.code == 401
        finally:
            proxy.stop()
    assert llm.requests == []  # nothing reached the provider


def test_a_limit_ends_the_session_and_reaches_the_agent_as_a_limit() -> None:
    ended: list[tuple[str, str]] = []
    with ScriptedLLM([{"content": "pong"}], repeat_last=True) as llm:
        proxy = ModelProxy(LLMClient("openai/scripted-model", api_base=llm.url, budget=Budget(max_tokens=1)),
                           on_limit=lambda reason, detail: ended.append((reason, detail)))
        url, token = proxy.start()
        try:
            agent = ProxyClient(url, token, "openai/scripted-model")
            agent.complete(PING)  # the budget is checked before a call: the first one passes it
            with pytest.raises(LimitReached) as limit:
                agent.complete(PING)
        finally:
            proxy.stop()
    assert limit.value.reason == LIMIT_TOKENS and ended and ended[0][0] == LIMIT_TOKENS
    assert len(llm.requests) == 1 and proxy.failures == []


def test_a_provider_failure_is_kept_for_the_worker_and_relayed_as_an_error() -> None:
    with socket.socket() as s:  # a port nothing listens on: the provider is down
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    proxy = ModelProxy(LLMClient("openai/scripted-model", api_base=dead, max_backoff_retries=0))
    url, token = proxy.start()
    try:
        with pytest.raises(LLMError, match="ProviderError"):  # the agent sees an error, not the cause's class
            ProxyClient(url, token, "openai/scripted-model").complete(PING)
    finally:
        proxy.stop()
    # the worker keeps the provider's failure: infrastructure, re-raised after the session
    assert len(proxy.failures) == 1 and isinstance(proxy.failures[0], ProviderError)
