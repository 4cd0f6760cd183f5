"""react and stratus driven by a real model: local/smollm2-135m, served by the farm itself
(llama-cpp-python on loopback), called through litellm over real HTTP, against the canned incident's
MCP server. A 135M model is weak; what counts is that whatever it emits ends as a step, a clear
agent error or a limit, and that its token counts are the server's."""

from __future__ import annotations

import httpx
import pytest

from core.states import (
    END_AGENT_ERROR,
    END_AGENT_STOPPED,
    END_CONTEXT_LENGTH,
    END_SUBMITTED,
    LIMIT_REASONS,
    LIMIT_WALL_TIME,
)
from farm.agents.agent import AgentContext, AgentLimits, AgentResult
from farm.agents.react import ReactAgent
from farm.agents.stratus import StratusAgent
from farm.llm.client import LLMClient
from farm.testing.incident_mcp import IncidentMCP

pytestmark = [pytest.mark.slow, pytest.mark.local_model]
MODEL = "local/smollm2-135m"
# Few and short: the suite's budget on 2 cores (a step is seconds on an idle box, a minute or more on a
# busy one: the model server competes for the cores).
LIMITS = AgentLimits(max_steps=2, wall_time_s=400)


def ctx_for(srv: IncidentMCP, **options: object) -> AgentContext:
    return AgentContext(trial_id="trial-local", namespace="hotel-reservation", mcp_url=srv.url,
                        mcp_token=srv.token, model=MODEL, limits=LIMITS, tool_mode="raw",
                        options={"temperature": 0.0, **options})


def assert_ended_cleanly(result: AgentResult, srv: IncidentMCP) -> None:
    """How a session may end, whatever the model said: never a crash of the harness."""
    assert result.end_reason in {END_SUBMITTED, END_AGENT_STOPPED, END_AGENT_ERROR, END_CONTEXT_LENGTH} | LIMIT_REASONS
    if result.end_reason == END_AGENT_ERROR:
        # a clear reason, not a Python error of the harness
        assert result.error and not result.error.startswith(("KeyError", "TypeError", "IndexError", "AttributeError"))
    assert 1 <= result.steps <= LIMITS.max_steps
    steps = [e for e in result.transcript if e["role"] == "assistant"]
    assert len(steps) == result.steps
    # every tool call the model made was answered (an observation, an error for a bad call); the
    # harness's own calls (stratus's health checks) are counted too
    calls = [c["id"] for e in steps for c in e.get("tool_calls") or []]
    answered = [e["tool_call_id"] for e in result.transcript if e["role"] == "tool"]
    harness = [e for e in result.transcript if e["role"] == "event" and e["content"].startswith("harness called")]
    if result.end_reason == LIMIT_WALL_TIME:  # the clock may stop it between two calls of one step
        calls = calls[:len(answered)]
    assert answered == calls and result.tool_calls == len(calls) + len(harness) >= len(srv.state.calls)
    # tokens: the sum of each call's usage, as the server reported it; no price, so 0 and said so
    assert result.tokens_in == sum(e["usage"]["tokens_in"] for e in steps) > 0
    assert result.tokens_out == sum(e["usage"]["tokens_out"] for e in steps) > 0
    assert result.cost_usd == 0 and all(e["usage"]["priced"] is False for e in steps)
    assert any("no known price" in e["content"] for e in result.transcript if e["role"] == "event")


def test_react_runs_a_real_session_on_the_local_model(local_model_url: str) -> None:
    with IncidentMCP() as srv:
        result = ReactAgent().run(ctx_for(srv))
    assert_ended_cleanly(result, srv)


def test_stratus_runs_a_real_session_on_the_local_model(local_model_url: str) -> None:
    with IncidentMCP() as srv:
        result = StratusAgent().run(ctx_for(srv))
    assert_ended_cleanly(result, srv)


def test_a_prompt_larger_than_the_context_is_the_agent_s_context_length(local_model_url: str) -> None:
    # the real server's own refusal: more prompt than its n_ctx (8192 tokens)
    prompt = "You are an SRE. " + " ".join(f"service-{i} runs on port {8000 + i}." for i in range(1500))
    with IncidentMCP() as srv:
        result = ReactAgent().run(ctx_for(srv, system_prompt=prompt))
    # the agent's own failure (it must manage its context), labelled as such: farm/llm/failures.py
    assert result.end_reason == END_CONTEXT_LENGTH and result.steps == 0 and not srv.state.calls
    assert "context window" in (result.error or "")


def test_token_counts_are_the_servers_usage(local_model_url: str) -> None:
    messages = [{"role": "system", "content": "Answer in one word."},
                {"role": "user", "content": "Which tool lists Kubernetes pods?"}]
    client = LLMClient(MODEL, temperature=0.0)
    call = client.complete(messages, max_tokens=16)
    assert client.endpoint.api_base == local_model_url  # the host's shared server, not a new one
    raw = httpx.post(f"{local_model_url}/chat/completions", timeout=120,
                     json={"model": "smollm2-135m", "messages": messages, "max_tokens": 8}).json()
    assert call.tokens_in == raw["usage"]["prompt_tokens"] > 10
    assert 0 < call.tokens_out <= 16 and call.priced is False and call.cost_usd == 0
    assert client.totals.unpriced_calls == 1


def test_the_model_reads_tool_results(local_model_url: str) -> None:
    # chatml-function-calling's template drops `tool` messages; the endpoint folds them into a user turn
    def conversation(lines: int) -> list[dict]:
        call = {"id": "call_1", "type": "function", "function": {"name": "kubectl", "arguments": '{"command": "get pods"}'}}
        output = "NAME READY STATUS\n" + "geo-7d9f 0/1 ImagePullBackOff\n" * lines
        return [{"role": "user", "content": "Which pod is failing?"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_1", "content": output}]

    client = LLMClient(MODEL, temperature=0.0)
    short, long = (client.complete(conversation(n), max_tokens=4) for n in (1, 41))
    assert long.tokens_in - short.tokens_in >= 40 * 8  # every added line reached the model's prompt
