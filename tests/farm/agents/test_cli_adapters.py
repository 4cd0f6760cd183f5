"""The claude-code and codex adapters against fake executables (tests/fakes) that print those CLIs'
JSON event formats and really call the trial's MCP server."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from farm.agents.base import AgentContext, AgentLimits
from farm.agents.cli_adapters import ClaudeCodeAgent, CodexAgent
from farm.llm.atif import to_atif, validate_atif
from farm.states import END_AGENT_ERROR, END_SUBMITTED, LIMIT_TOKENS
from tests.farm.agents.incident_mcp import IncidentMCP

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def fakes_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # the fakes are Python scripts that need the venv's mcp package
    path = f"{ROOT / 'tests' / 'fakes'}{os.pathsep}{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"
    monkeypatch.setenv("PATH", path)


def ctx_for(srv: IncidentMCP, model: str, limits: AgentLimits | None = None) -> AgentContext:
    return AgentContext(trial_id="trial-c0de", namespace="hotel-reservation", mcp_url=srv.url, mcp_token=srv.token,
                        model=model, limits=limits or AgentLimits())


def test_claude_code_session_usage_and_transcript() -> None:
    with IncidentMCP() as srv:
        result = ClaudeCodeAgent().run(ctx_for(srv, "anthropic/claude-sonnet-4-5"))
    assert result.end_reason == END_SUBMITTED, result.error
    assert srv.state.diagnosis and "27018" in srv.state.diagnosis and srv.state.mitigated
    # totals from the final result event: input includes cache creation and cache reads
    assert result.tokens_in == 4 * 12 + 900 + 3 * 150 + (900 + 1050 + 1200)
    assert result.tokens_cached == 900 + 1050 + 1200 and result.tokens_out == 160
    assert result.cost_usd == pytest.approx(0.0421) and result.steps == 5 and result.tool_calls == 4
    tools = [e for e in result.transcript if e["role"] == "tool"]
    assert [t["name"] for t in tools] == ["kubectl", "submit_diagnosis", "kubectl", "submit_mitigation"]
    assert "CrashLoopBackOff" in tools[0]["content"]  # the real MCP server's output, parsed back
    calls = [c for e in result.transcript if e["role"] == "assistant" for c in e.get("tool_calls", [])]
    assert calls[0]["name"] == "kubectl" and calls[0]["arguments"]["command"].startswith("get pods")
    assert validate_atif(to_atif(result, session_id="s", agent_name="claude-code")) == []


def test_codex_session_usage_and_transcript() -> None:
    with IncidentMCP() as srv:
        result = CodexAgent().run(ctx_for(srv, "openai/gpt-5"))
    assert result.end_reason == END_SUBMITTED, result.error
    assert srv.state.diagnosis and srv.state.mitigated
    assert (result.tokens_in, result.tokens_cached, result.tokens_out) == (24763, 24448, 122)
    assert result.cost_usd > 0  # codex reports no cost: priced from litellm's table for gpt-5
    tools = [e for e in result.transcript if e["role"] == "tool"]
    assert [t["name"] for t in tools] == ["kubectl", "submit_diagnosis", "submit_mitigation"]
    assert "connection refused" in tools[0]["content"]
    assert any(e.get("reasoning_content") for e in result.transcript if e["role"] == "assistant")


def test_the_mcp_token_is_not_in_the_codex_command_line_or_transcript() -> None:
    with IncidentMCP(token="secret-trial-token-9f8e7d") as srv:
        agent = CodexAgent()
        argv, env = agent.command(ctx_for(srv, "openai/gpt-5"), ROOT)
        result = agent.run(ctx_for(srv, "openai/gpt-5"))
    assert not any("secret-trial-token-9f8e7d" in a for a in argv) and env == {"FARM_MCP_TOKEN": srv.token}
    assert "secret-trial-token-9f8e7d" not in json.dumps(result.model_dump())


def test_token_limit_stops_the_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CLAUDE_OUTPUT_TOKENS", "50000")
    with IncidentMCP() as srv:
        result = ClaudeCodeAgent(pass_env=["FAKE_CLAUDE_OUTPUT_TOKENS"]).run(
            ctx_for(srv, "anthropic/claude-sonnet-4-5", AgentLimits(max_tokens=60_000)))
    assert result.end_reason == LIMIT_TOKENS
    assert "limit_tokens" in result.transcript[-1]["content"]


def test_failures_are_agent_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CODEX_FAIL", "1")
    with IncidentMCP() as srv:
        ctx = ctx_for(srv, "openai/gpt-5")
        ctx.options["pass_env"] = ["FAKE_CODEX_FAIL"]  # as a sweep entry's options would
        failed = CodexAgent().run(ctx)
        missing = ClaudeCodeAgent(executable="claude-not-installed").run(ctx_for(srv, "anthropic/claude-sonnet-4-5"))
    assert failed.end_reason == END_AGENT_ERROR and "stream disconnected" in (failed.error or "")
    assert missing.end_reason == END_AGENT_ERROR and "claude-not-installed" in (missing.error or "")
