"""The react agent: whole sessions through real litellm (scripted server on loopback) over a real
MCP server (streamable HTTP, bearer token), and each way a session can end."""

from __future__ import annotations

import json

import pytest

from core.errors import ProviderError
from core.states import (
    END_AGENT_ERROR,
    END_AGENT_STOPPED,
    END_CONTEXT_LENGTH,
    END_SUBMITTED,
    LIMIT_COST,
    LIMIT_STEPS,
    LIMIT_TOKENS,
    LIMIT_WALL_TIME,
)
from farm.agents.atif import to_atif, validate_atif
from farm.agents.agent import AgentContext, AgentLimits
from farm.agents.react import ReactAgent
from farm.llm.scripted import ScriptedLLM, tool_plan
from farm.testing.incident_mcp import IncidentMCP
from farm.testing.incident_plan import responder

PRICE = {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}


def ctx_for(srv: IncidentMCP, llm: ScriptedLLM, limits: AgentLimits | None = None, **options) -> AgentContext:
    return AgentContext(trial_id="trial-7f3a", namespace="hotel-reservation", mcp_url=srv.url,
                        mcp_token=srv.token, model="openai/scripted-model", limits=limits or AgentLimits(),
                        options={"api_base": llm.url, **options})


def test_whole_session_diagnoses_and_mitigates() -> None:
    with IncidentMCP() as srv, ScriptedLLM(responder()) as llm:
        result = ReactAgent().run(ctx_for(srv, llm))
        first = llm.requests[0]["body"]
    assert result.end_reason == END_SUBMITTED, result.error
    assert "27018" in (srv.state.diagnosis or "")  # written from the logs the agent read
    assert srv.state.mitigated and srv.state.geo_ok
    assert result.steps == len(llm.requests) and result.tool_calls == len(srv.state.calls)
    assert result.tokens_in > 0 and result.tokens_out > 0 and result.tokens_cached > 0
    # every MCP tool offered to the model in OpenAI function form, with its input schema
    offered = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert {"kubectl", "prometheus_query", "jaeger_traces", "submit_diagnosis", "undo_last"} <= set(offered)
    assert offered["kubectl"]["parameters"]["properties"]["command"]["type"] == "string"
    assert result.cost_usd == 0 and "no known price" in result.transcript[-1]["content"]  # flagged, not hidden
    roles = [e["role"] for e in result.transcript]
    assert roles[:2] == ["system", "user"] and roles.count("tool") == result.tool_calls
    atif = to_atif(result, session_id="trial-7f3a", agent_name="react", model="openai/scripted-model")
    assert validate_atif(atif) == []
    assert atif["final_metrics"]["total_prompt_tokens"] == result.tokens_in
    assert sum(len(s.get("tool_calls", [])) for s in atif["steps"]) == result.tool_calls


def test_step_limit_ends_the_session_with_the_reason() -> None:
    with IncidentMCP() as srv, ScriptedLLM(responder()) as llm:
        result = ReactAgent().run(ctx_for(srv, llm, AgentLimits(max_steps=3)))
    assert result.end_reason == LIMIT_STEPS and result.steps == 3
    assert srv.state.diagnosis is None
    events = [e["content"] for e in result.transcript if e["role"] == "event"]
    assert any("limit reached: limit_steps" in e for e in events)


def test_wall_time_limit() -> None:
    slow = [{"content": "thinking", "tool_calls": [{"name": "get_alerts", "arguments": {}}], "delay": 0.6}]
    with IncidentMCP() as srv, ScriptedLLM(slow, repeat_last=True) as llm:
        result = ReactAgent().run(ctx_for(srv, llm, AgentLimits(wall_time_s=1.0)))
    assert result.end_reason == LIMIT_WALL_TIME
    assert 1 <= result.steps <= 3


def test_a_reply_still_coming_when_the_wall_time_runs_out_is_the_limit() -> None:
    # the request's timeout is the session's remaining time (at least 5 s): a slow model's last
    # call times out at the limit, which is the wall-time limit, not an agent error
    slow = [{"content": "thinking", "tool_calls": [{"name": "get_alerts", "arguments": {}}], "delay": 8}]
    with IncidentMCP() as srv, ScriptedLLM(slow) as llm:
        result = ReactAgent().run(ctx_for(srv, llm, AgentLimits(wall_time_s=2.0)))
    assert result.end_reason == LIMIT_WALL_TIME and result.error is None and result.steps == 0
    events = [e["content"] for e in result.transcript if e["role"] == "event"]
    assert any("still answering when the wall time ran out" in e for e in events)


def test_token_and_cost_limits() -> None:
    big = [{"content": "look", "tool_calls": [{"name": "get_alerts", "arguments": {}}],
            "usage": {"prompt_tokens": 4000, "completion_tokens": 100}}]
    with IncidentMCP() as srv, ScriptedLLM(big, repeat_last=True) as llm:
        tokens = ReactAgent().run(ctx_for(srv, llm, AgentLimits(max_tokens=10_000)))
        cost = ReactAgent().run(ctx_for(srv, llm, AgentLimits(max_cost_usd=0.01), price=PRICE))
    assert tokens.end_reason == LIMIT_TOKENS and tokens.steps == 3 and tokens.tokens_in == 12_000
    assert cost.end_reason == LIMIT_COST and cost.cost_usd >= 0.01


def test_model_that_stops_without_tools_and_a_failing_model() -> None:
    with IncidentMCP() as srv, ScriptedLLM([{"content": "I cannot help with that."}]) as llm:
        stopped = ReactAgent().run(ctx_for(srv, llm))
    assert stopped.end_reason == END_AGENT_STOPPED and stopped.steps == 1
    # A request the provider rejects is the agent's own error; a model the provider does not know
    # is the provider's failure (infrastructure: the trial runner retries it, n does not count it).
    with IncidentMCP() as srv, ScriptedLLM([{"status": 400, "content": "messages[2]: tool_call_id missing"}]) as llm:
        failed = ReactAgent().run(ctx_for(srv, llm))
    assert failed.end_reason == END_AGENT_ERROR and "tool_call_id missing" in (failed.error or "")
    with IncidentMCP() as srv, ScriptedLLM([{"status": 400, "content": "model not found"}]) as llm:
        with pytest.raises(ProviderError) as err:
            ReactAgent().run(ctx_for(srv, llm))
    assert err.value.kind == "unknown_model" and err.value.phase == "provider"


def test_a_conversation_longer_than_the_context_is_the_agents_own_error() -> None:
    from farm.llm.faulty import FaultyProvider

    with IncidentMCP() as srv, FaultyProvider({"*": [None, "context_length"]}, answer=lambda r: {
            "content": "pods first", "tool_calls": [{"name": "kubectl", "arguments": {"command": "get pods"}}]}) as llm:
        result = ReactAgent().run(ctx_for(srv, llm))
    assert result.end_reason == END_CONTEXT_LENGTH and result.steps == 1 and result.tool_calls == 1
    assert "context window" in (result.error or "")


def test_malformed_and_unknown_tool_calls_come_back_as_observations() -> None:
    plan = [{"content": "x", "tool_calls": [{"name": "kubectl", "arguments": "{not json"}]},
            {"content": "y", "tool_calls": [{"name": "rm_rf", "arguments": {}}]},
            {"content": "z", "tool_calls": [{"name": "wait", "arguments": {"seconds": "soon"}}]},
            {"content": "done"}]
    with IncidentMCP() as srv, ScriptedLLM(plan) as llm:
        result = ReactAgent().run(ctx_for(srv, llm))
        last = llm.requests[-1]["body"]["messages"]
    tool_msgs = [m["content"] for m in last if m["role"] == "tool"]
    assert "not a JSON object" in tool_msgs[0]
    assert "not available" in tool_msgs[1]
    assert "valid number" in tool_msgs[2]  # the MCP server's own validation error
    assert result.end_reason == END_AGENT_STOPPED and result.tool_calls == 3
    assert [e["is_error"] for e in result.transcript if e["role"] == "tool"] == [True, True, True]


def test_a_context_overflow_in_a_server_s_own_words_is_the_agent_s_context_length() -> None:
    # llama.cpp's server words it as OpenAI does; litellm maps it to ContextWindowExceededError
    too_long = ("This model's maximum context length is 6144 tokens. However, you requested 6913 tokens "
                "(6657 in the messages, 256 in the completion). Please reduce the length of the messages.")
    plan = [{"content": "x", "tool_calls": [{"name": "get_alerts", "arguments": {}}]},
            {"status": 400, "content": too_long}]
    with IncidentMCP() as srv, ScriptedLLM(plan) as llm:
        result = ReactAgent().run(ctx_for(srv, llm))
    assert result.end_reason == END_CONTEXT_LENGTH and result.steps == 1
    assert "context window" in (result.error or "")
    # a server that words it its own way is recognised as well
    plan = [{"status": 400, "content": "Requested tokens (7000) exceed context window of 6144"}]
    with IncidentMCP() as srv, ScriptedLLM(plan) as llm:
        result = ReactAgent().run(ctx_for(srv, llm))
    assert result.end_reason == END_CONTEXT_LENGTH and "context window" in (result.error or "")


def test_a_tool_call_without_a_name_is_an_unknown_tool() -> None:
    plan = [{"content": None, "tool_calls": [{"name": "", "arguments": "{}"}]}, {"content": "done"}]
    with IncidentMCP() as srv, ScriptedLLM(plan) as llm:
        result = ReactAgent().run(ctx_for(srv, llm))
        last = llm.requests[-1]["body"]["messages"]
    assert result.end_reason == END_AGENT_STOPPED and result.tool_calls == 1
    assert "tool '(no name)' is not available" in next(m["content"] for m in last if m["role"] == "tool")


def test_no_model_configured_is_an_agent_error_not_a_crash() -> None:
    with IncidentMCP() as srv:
        ctx = AgentContext(trial_id="t", namespace="hotel-reservation", mcp_url=srv.url, mcp_token=srv.token)
        result = ReactAgent().run(ctx)
    assert result.end_reason == END_AGENT_ERROR and "needs a model" in (result.error or "")


def test_api_keys_in_the_environment_never_reach_the_transcript(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-proj-Zx81Qw0p9LmNb7Vc6Xa5Sd4Fg3Hj2Kl1"
    token = "hf_private_token_value_1234567890"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("HF_TOKEN", token)
    # a model that leaks both, in its text and in a tool call's arguments
    plan = tool_plan([("kubectl", {"command": f"get pods --token={key}"}),
                      ("submit_diagnosis", {"text": f"geo is broken; my key is {key} and {token}"})],
                     finish=f"bye {key}")
    with IncidentMCP() as srv, ScriptedLLM(plan) as llm:
        result = ReactAgent().run(ctx_for(srv, llm))
        assert all(r["authorized"] for r in llm.requests)  # the key did reach the provider
    dumped = json.dumps(result.model_dump()) + json.dumps(to_atif(result, session_id="s", agent_name="react"))
    assert key not in dumped and token not in dumped
    assert "[REDACTED]" in dumped


def test_the_llm_agents_are_registered() -> None:
    from farm.agents import agents

    assert {"react", "stratus", "claude-code", "codex"} <= set(agents.names())
    agent = agents.create("stratus", output_chars=800)
    assert agent.plugin_spec.args == {"output_chars": 800} and agent.tool_mode == "summarised"
