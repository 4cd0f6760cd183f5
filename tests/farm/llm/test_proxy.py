"""The session's model proxy (farm/llm/proxy.py) and the agent-side client (farm/llm/remote.py),
over real HTTP to the scripted OpenAI-compatible server through the worker's real LLMClient: the
bearer token, the usage the worker counts, a limit that ends the session, a provider failure kept
for the worker."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from typing import Any

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


TOOL = {"type": "function", "function": {"name": "kubectl", "description": "run kubectl",
                                         "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}
CALL = {"content": "Looking.", "tool_calls": [{"name": "kubectl", "arguments": {"command": "get pods"}}]}


def test_the_openai_sdk_streams_chat_and_responses_through_the_proxy() -> None:
    import openai

    with ScriptedLLM([CALL], repeat_last=True) as llm:
        proxy = ModelProxy(LLMClient("openai/scripted-model", api_base=llm.url))
        url, token = proxy.start()
        try:
            sdk = openai.OpenAI(base_url=url, api_key=token, max_retries=0)
            chunks = list(sdk.chat.completions.create(model="any", messages=PING, tools=[TOOL], stream=True))
            events = list(sdk.responses.create(model="any", input="ping", stream=True, tools=[
                {"type": "function", "name": "kubectl", "parameters": TOOL["function"]["parameters"]}]))
            answer = sdk.responses.create(model="any", instructions="be brief", input=[
                {"role": "user", "content": "ping"},
                {"type": "function_call", "call_id": "c1", "name": "kubectl", "arguments": '{"command": "get pods"}'},
                {"type": "function_call_output", "call_id": "c1", "output": "geo CrashLoopBackOff"}])
        finally:
            proxy.stop()
    calls = [tc for c in chunks for ch in c.choices for tc in ch.delta.tool_calls or []]
    assert calls and calls[0].function.name == "kubectl" and json.loads(calls[0].function.arguments) == {
        "command": "get pods"}
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens > 0
    done = events[-1].response
    assert events[-1].type == "response.completed" and done.usage.input_tokens > 0
    assert [o.type for o in done.output] == ["message", "function_call"] and done.output[1].name == "kubectl"
    assert answer.output[1].call_id  # a non-streamed answer too
    # what reached the provider: the Responses input as chat messages, the call and its result paired
    sent = llm.requests[-1]["body"]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
    assert sent[2]["tool_calls"][0]["id"] == sent[3]["tool_call_id"] == "c1"


def test_anthropic_messages_with_an_api_key_header() -> None:
    with ScriptedLLM([CALL], repeat_last=True) as llm:
        proxy = ModelProxy(LLMClient("openai/scripted-model", api_base=llm.url))
        url, token = proxy.start()
        base = url.removesuffix("/v1")
        body = {"model": "claude-x", "max_tokens": 100, "system": "be brief",
                "tools": [{"name": "kubectl", "input_schema": TOOL["function"]["parameters"]}],
                "messages": [{"role": "user", "content": "ping"},
                             {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "kubectl",
                                                                "input": {"command": "get pods"}}]},
                             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                           "content": "geo CrashLoopBackOff"}]}]}

        def post(key: str) -> Any:
            request = urllib.request.Request(base + "/v1/messages?beta=true", data=json.dumps(body).encode(),
                                             headers={"x-api-key": key, "content-type": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read())

        try:
            message = post(token)
            with pytest.raises(urllib.error.HTTPError) as refused:
                post("sk-not-the-token")
            error = json.loads(refused.value.read())
        finally:
            proxy.stop()
    assert message["stop_reason"] == "tool_use" and message["usage"]["input_tokens"] > 0
    assert [b["type"] for b in message["content"]] == ["text", "tool_use"]
    assert message["content"][1]["input"] == {"command": "get pods"}
    assert refused.value.code == 401 and error["type"] == "error" and error["error"]["type"] == "authentication_error"
    sent = llm.requests[-1]["body"]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"] and len(llm.requests) == 1


def _raw_post(url: str, token: str, headers: dict[str, str], body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    """One POST written by hand to the proxy's socket (a client that announces more than it sends):
    (status, headers, body) of the answer, read until the proxy closes the connection."""
    host, port = url.removeprefix("http://").split("/", 1)[0].split(":")
    lines = ["POST /v1/chat/completions HTTP/1.1", f"Host: {host}", f"Authorization: Bearer {token}",
             *(f"{k}: {v}" for k, v in headers.items())]
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        answer = b""
        while chunk := conn.recv(65536):  # the proxy closes the connection after a refusal
            answer += chunk
    head, _, payload = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    fields = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in header_lines)}
    return int(status_line.split()[1]), fields, payload


def test_a_body_over_the_bound_is_refused_from_its_length_before_it_is_read() -> None:
    """Issue 23: a 32 MB request (under the old 32 MiB bound) was read whole into the worker.
    The 413 comes back while not one byte of the announced body has been sent, so the proxy read
    none of it; the connection is closed, since what follows on it is no request."""
    from farm.llm.proxy import MAX_REQUEST_BYTES

    with ScriptedLLM([{"content": "pong"}], repeat_last=True) as llm:
        proxy = ModelProxy(LLMClient("openai/scripted-model", api_base=llm.url))
        url, token = proxy.start()
        try:
            status, headers, body = _raw_post(url, token, {"Content-Length": str(32_000_000),
                                                           "Content-Type": "application/json"})
            chunked = _raw_post(url, token, {"Transfer-Encoding": "chunked"}, b"5\r\nhello\r\n0\r\n\r\n")
            at_bound = ProxyClient(url, token, "openai/scripted-model").complete(
                [{"role": "user", "content": "x" * (MAX_REQUEST_BYTES - 1000)}])
        finally:
            proxy.stop()
    error = json.loads(body)["error"]
    assert status == 413 and error["type"] == "request_too_large" and "32000000" in error["message"]
    assert headers["connection"] == "close"
    assert chunked[0] == 411 and json.loads(chunked[2])["error"]["type"] == "length_required"
    assert at_bound.message["content"] == "pong" and len(llm.requests) == 1  # only the one within the bound


def test_a_session_has_a_bounded_number_of_requests_under_way() -> None:
    """Requests past MAX_IN_FLIGHT get a 429 at once (not a thread and a body each in the worker);
    the ones under way are answered, and the session goes on once they are."""
    import threading

    from farm.llm.proxy import MAX_IN_FLIGHT

    release = threading.Event()

    def respond(request: dict[str, Any]) -> dict[str, Any]:
        release.wait(60)
        return {"content": "pong"}

    with ScriptedLLM(respond) as llm:
        proxy = ModelProxy(LLMClient("openai/scripted-model", api_base=llm.url))
        url, token = proxy.start()
        answers: list[str] = []
        try:
            agent = ProxyClient(url, token, "openai/scripted-model")
            held = [threading.Thread(target=lambda: answers.append(agent.complete(PING).message["content"]))
                    for _ in range(MAX_IN_FLIGHT)]
            for thread in held:
                thread.start()
            for _ in range(600):  # until all are admitted (they are, or the assertion below says how many)
                if proxy.admitted == MAX_IN_FLIGHT:
                    break
                release.wait(0.05)
            assert proxy.admitted == MAX_IN_FLIGHT
            request = urllib.request.Request(url + "/chat/completions", data=json.dumps({"messages": PING}).encode(),
                                             headers={"Authorization": f"Bearer {token}"})
            with pytest.raises(urllib.error.HTTPError) as busy:
                urllib.request.urlopen(request, timeout=30)
            error = json.loads(busy.value.read())["error"]
            release.set()
            for thread in held:
                thread.join(60)
            after = agent.complete(PING)
        finally:
            release.set()
            proxy.stop()
    assert busy.value.code == 429 and error["type"] == "too_many_requests" and proxy.refused_busy == 1
    assert answers == ["pong"] * MAX_IN_FLIGHT and after.message["content"] == "pong"
    assert len(llm.requests) == MAX_IN_FLIGHT + 1 and proxy.failures == []
