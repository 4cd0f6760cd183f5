"""The claude-code and codex adapters against fake executables (tests/fakes) that print those CLIs'
JSON event formats and really call the trial's MCP server: usage and transcripts, isolation from
the farm's disk (what the fakes record of their argv, cwd and environment), and the farm-wide
limits on real Redis (database 12, keys of the test's own, deleted afterwards)."""

from __future__ import annotations

import json
import os
import threading
import uuid
from pathlib import Path

import pytest
import redis

from core.states import END_AGENT_ERROR, END_SUBMITTED, LIMIT_COST, LIMIT_SWEEP_COST, LIMIT_TOKENS
from farm.agents.base import AgentContext, AgentLimits
from farm.agents.cli_adapters import ClaudeCodeAgent, CodexAgent, Sandbox
from farm.llm.atif import to_atif, validate_atif
from farm.llm.limits import RedisSemaphore, SweepLedger
from tests.farm.agents.cli_fakes import install_fakes
from tests.farm.agents.incident_mcp import IncidentMCP

ROOT = Path(__file__).resolve().parents[3]
REDIS_URL = "redis://127.0.0.1:6379/12"


@pytest.fixture(autouse=True)
def fakes_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_fakes(tmp_path / "bin", monkeypatch)


@pytest.fixture
def rkeys():
    """Redis keys this test creates, deleted afterwards (never a flush)."""
    made: list[str] = []
    yield made
    if made:
        redis.Redis.from_url(REDIS_URL).delete(*made)


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
        box = Sandbox.create("farm-test-")
        try:
            argv, env = agent.command(ctx_for(srv, "openai/gpt-5"), box)
        finally:
            box.remove()
        result = agent.run(ctx_for(srv, "openai/gpt-5"))
    assert not any("secret-trial-token-9f8e7d" in a for a in argv) and env["FARM_MCP_TOKEN"] == srv.token
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


# -- isolation -------------------------------------------------------------------------------------

CATALOG = ROOT / "farm" / "problems" / "catalog"


@pytest.mark.parametrize("agent_cls", [ClaudeCodeAgent, CodexAgent])
def test_the_cli_runs_in_an_empty_folder_with_no_farm_path_in_reach(agent_cls, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    assert any(CATALOG.glob("*.yaml")), "the ground truth this test keeps out of reach"
    record = tmp_path / "record.jsonl"
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "auth.json").write_text('{"OPENAI_API_KEY": null}')
    # A user config with another MCP server (one that serves files) must not reach the agent.
    (home / ".codex" / "config.toml").write_text(f'[mcp_servers.files]\ncommand = "npx"\nargs = ["fs", "{ROOT}"]\n')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.setenv("FAKE_CLI_RECORD", str(record))
    # What a careless adapter would hand over: the farm's settings and paths into the project.
    monkeypatch.setenv("FARM_DATABASE_URL", "postgresql://farm:hunter2hunter2@db/farm")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("VIRTUAL_ENV", str(ROOT / ".venv"))
    monkeypatch.setenv("FARM_CATALOG_HINT", str(CATALOG))
    fakes, _, rest = os.environ["PATH"].partition(os.pathsep)  # the installed fakes stay first
    monkeypatch.setenv("PATH", os.pathsep.join([fakes, str(ROOT / ".venv" / "bin"), str(ROOT / "tests" / "fakes"), rest]))
    asked = ["FAKE_CLI_RECORD", "FARM_DATABASE_URL", "PYTHONPATH", "VIRTUAL_ENV", "FARM_CATALOG_HINT"]
    model = "openai/gpt-5" if agent_cls is CodexAgent else "anthropic/claude-sonnet-4-5"
    with IncidentMCP() as srv:
        result = agent_cls(pass_env=asked).run(ctx_for(srv, model))
    assert result.end_reason == END_SUBMITTED, result.error
    rec = json.loads(record.read_text().splitlines()[0])
    cwd = Path(rec["cwd"])
    assert not str(cwd).startswith(str(ROOT)) and rec["cwd_entries"] == []
    assert not cwd.exists(), "the trial's folder is removed after the session"
    env = rec["env"]
    for name, value in env.items():
        assert str(ROOT) not in value, (name, value)
    assert not [n for n in env if n.startswith("FARM_") and n != "FARM_MCP_TOKEN"]
    assert "PYTHONPATH" not in env and "VIRTUAL_ENV" not in env and "hunter2" not in json.dumps(env)
    assert env["KUBECONFIG"] == "/dev/null"
    for arg in rec["argv"]:
        assert str(ROOT) not in arg and "catalog" not in arg, arg
    if agent_cls is ClaudeCodeAgent:
        assert {"Read", "Glob", "Grep", "LS", "Task", "Agent", "Bash", "NotebookRead", "WebFetch"} <= set(rec["disallowed"])
        assert rec["allowed"] == ["mcp__farm"] and rec["strict_mcp_config"]
        assert set(rec["mcp_config"]["mcpServers"]) == {"farm"}
        assert int(env["MCP_TOOL_TIMEOUT"]) >= 900_000  # a 15-minute wait on a real cluster fits
    else:
        conf = rec["config"]
        assert conf["features.shell_tool"] is False and conf["features.view_image_tool"] is False
        assert rec["sandbox"] == "read-only"
        assert {k.split(".")[1] for k in conf if k.startswith("mcp_servers.")} == {"farm"}
        assert conf["mcp_servers.farm.tool_timeout_sec"] >= 900
        # Its own CODEX_HOME: the login, not the user's config with the file server.
        assert rec["codex_home_entries"] == ["auth.json"]
        assert not env["CODEX_HOME"].startswith(str(home))


# -- farm-wide limits ------------------------------------------------------------------------------


def _sweep_ctx(srv: IncidentMCP, model: str, sweep: str, cap: float | None = None,
               concurrency: dict[str, int] | None = None, limits: AgentLimits | None = None,
               pass_env: list[str] | None = None) -> AgentContext:
    ctx = ctx_for(srv, model, limits)
    ctx.options.update({"sweep_id": sweep, "redis_url": REDIS_URL})
    if cap is not None:
        ctx.options["sweep_cost_cap"] = cap
    if concurrency:
        ctx.options["concurrency"] = concurrency
    if pass_env:
        ctx.options["pass_env"] = pass_env
    return ctx


@pytest.mark.redis
def test_cli_sessions_charge_the_sweep_ledger(rkeys: list[str]) -> None:
    sweep = f"e2cli-{uuid.uuid4().hex[:8]}"
    rkeys.append(SweepLedger(sweep, None, REDIS_URL).key)
    with IncidentMCP() as a, IncidentMCP() as b:
        claude = ClaudeCodeAgent().run(_sweep_ctx(a, "anthropic/claude-sonnet-4-5", sweep, cap=10.0))
        codex = CodexAgent().run(_sweep_ctx(b, "openai/gpt-5", sweep, cap=10.0))
    assert claude.end_reason == codex.end_reason == END_SUBMITTED
    assert claude.cost_usd == pytest.approx(0.0421) and codex.cost_usd > 0
    assert SweepLedger(sweep, None, REDIS_URL).spent() == pytest.approx(claude.cost_usd + codex.cost_usd)


@pytest.mark.redis
@pytest.mark.parametrize("agent_cls", [ClaudeCodeAgent, CodexAgent])
def test_a_sweep_over_its_cap_starts_no_cli_session(agent_cls, rkeys: list[str], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    sweep = f"e2cli-{uuid.uuid4().hex[:8]}"
    ledger = SweepLedger(sweep, 0.05, REDIS_URL)
    rkeys.append(ledger.key)
    ledger.add(0.05)
    record = tmp_path / "record.jsonl"
    monkeypatch.setenv("FAKE_CLI_RECORD", str(record))
    with IncidentMCP() as srv:
        result = agent_cls().run(_sweep_ctx(srv, "openai/gpt-5", sweep, cap=0.05, pass_env=["FAKE_CLI_RECORD"]))
        calls = list(srv.state.calls)
    assert result.end_reason == LIMIT_SWEEP_COST and "spent" in (result.error or "")
    assert not record.exists() and calls == []  # the CLI never ran
    assert ledger.spent() == pytest.approx(0.05)


@pytest.mark.redis
def test_the_claude_cost_limit_stops_the_process_from_streamed_usage(rkeys: list[str], tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # 4000 output tokens a turn at claude-sonnet-4-5's $15/M: about $0.06 a message, so a $0.10
    # budget is gone at the second message, long before the final result would report a cost.
    monkeypatch.setenv("FAKE_CLAUDE_OUTPUT_TOKENS", "4000")
    monkeypatch.setenv("FAKE_CLAUDE_TURN_DELAY", "0.5")
    sweep = f"e2cli-{uuid.uuid4().hex[:8]}"
    rkeys.append(SweepLedger(sweep, None, REDIS_URL).key)
    with IncidentMCP() as srv:
        result = ClaudeCodeAgent().run(_sweep_ctx(
            srv, "anthropic/claude-sonnet-4-5", sweep, limits=AgentLimits(max_cost_usd=0.10),
            pass_env=["FAKE_CLAUDE_OUTPUT_TOKENS", "FAKE_CLAUDE_TURN_DELAY"]))
        calls = [name for name, _ in srv.state.calls]
        mitigated = srv.state.mitigated
    assert result.end_reason == LIMIT_COST
    assert 0.10 < result.cost_usd < 0.2
    ended = [e for e in result.transcript if e["role"] == "event" and "limit_cost" in e["content"]]
    assert ended and ended[0]["cost_exact"] is False
    assert not mitigated and "submit_mitigation" not in calls and len(calls) <= 2  # stopped mid-run
    assert SweepLedger(sweep, None, REDIS_URL).spent() == pytest.approx(result.cost_usd)


def _claude_runs(model: str, concurrency: dict[str, int] | None, record: Path) -> list[dict]:
    record.unlink(missing_ok=True)
    results: list = []
    with IncidentMCP() as a, IncidentMCP() as b:
        def one(srv: IncidentMCP) -> None:
            results.append(ClaudeCodeAgent().run(_sweep_ctx(
                srv, model, f"e2cli-{uuid.uuid4().hex[:8]}", concurrency=concurrency,
                pass_env=["FAKE_CLI_RECORD", "FAKE_CLAUDE_TURN_DELAY"])))
        threads = [threading.Thread(target=one, args=(srv,)) for srv in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert [r.end_reason for r in results] == [END_SUBMITTED, END_SUBMITTED]
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    starts = sorted(x["started_at"] for x in lines if "started_at" in x)
    ends = sorted(x["ended_at"] for x in lines if "ended_at" in x)
    assert len(starts) == len(ends) == 2
    return [{"start": s, "end": e} for s, e in zip(starts, ends, strict=True)]


@pytest.mark.redis
def test_a_claude_session_holds_its_models_slot_throughout(rkeys: list[str], tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    model = f"anthropic/e2-cli-{uuid.uuid4().hex[:8]}"
    rkeys.append(RedisSemaphore(REDIS_URL, model, 1).key)
    record = tmp_path / "record.jsonl"
    monkeypatch.setenv("FAKE_CLI_RECORD", str(record))
    monkeypatch.setenv("FAKE_CLAUDE_TURN_DELAY", "0.3")
    first, second = _claude_runs(model, {model: 1}, record)
    assert second["start"] >= first["end"], "the second session started while the first held the only slot"
    assert RedisSemaphore(REDIS_URL, model, 1).holders() == 0  # released afterwards
    # The same two sessions without a limit do overlap, so the assertion above can fail.
    first, second = _claude_runs(model, None, record)
    assert second["start"] < first["end"]

