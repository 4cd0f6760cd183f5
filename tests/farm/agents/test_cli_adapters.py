"""The claude-code and codex adapters against fake executables (tests/fakes) that work as those CLIs
do: they ask their model through the Anthropic Messages / OpenAI Responses API (streamed), run the
model's tool calls against the trial's MCP server and print the CLIs' JSON event formats. Their
only model endpoint is a farm model proxy (farm/llm/proxy.py) in front of the scripted or faulty
provider (farm/llm/faulty.py), over real HTTP through litellm: usage and transcripts, provider
failures ending as the provider's (infrastructure), the provider's key kept out of the CLI's
reach, isolation from the farm's disk (what the fakes record of their argv, cwd and environment),
and the farm-wide limits on real Redis (database 12, keys of the test's own, deleted afterwards)."""

from __future__ import annotations

import json
import os
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis

from core.errors import ProviderError
from core.states import END_SUBMITTED, LIMIT_SWEEP_COST, LIMIT_TOKENS
from farm.agents.atif import to_atif, validate_atif
from farm.agents.agent import AgentContext, AgentLimits
from farm.agents.cli_adapters import ClaudeCodeAgent, CodexAgent, Sandbox
from farm.llm.faulty import FaultyProvider
from farm.llm.limits import RedisSemaphore, SweepLedger
from farm.llm.scripted import PlanStep, tool_plan
from farm.testing.incident_mcp import IncidentMCP
from tests.farm.agents.cli_fakes import install_fakes

ROOT = Path(__file__).resolve().parents[3]
REDIS_URL = "redis://127.0.0.1:6379/12"
MODEL = "openai/cli-model"  # the sweep's model: an OpenAI-compatible server (the faulty provider)
PRICE = {"input_cost_per_token": 1e-6, "output_cost_per_token": 4e-6}
KEY = "sk-provider-key-never-for-the-agent-4f1e"
PLAN: list[PlanStep] = [
    ("kubectl", {"command": "get pods -n hotel-reservation"}),
    ("submit_diagnosis", {"text": "geo crash-loops: GEO_DB_PORT is 27018, MongoDB listens on 27017; "
                                  "frontend fails downstream with HTTP 500."}),
    ("kubectl", {"command": "set env deployment/geo GEO_DB_PORT=27017 -n hotel-reservation"}),
    ("submit_mitigation", {}),
]
AGENTS = [ClaudeCodeAgent, CodexAgent]


@pytest.fixture(autouse=True)
def fakes_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_fakes(tmp_path / "bin", monkeypatch)
    monkeypatch.setenv("CLI_MODEL_KEY", KEY)  # the provider's key, in the worker's environment


@pytest.fixture
def rkeys():
    """Redis keys this test creates, deleted afterwards (never a flush)."""
    made: list[str] = []
    yield made
    if made:
        redis.Redis.from_url(REDIS_URL).delete(*made)


def planned(usage: dict[str, int] | None = None) -> Any:
    play = tool_plan(PLAN, finish="geo's database port was wrong; diagnosis and mitigation submitted.")

    def respond(request: dict[str, Any]) -> dict[str, Any]:
        return {**play(request), **({"usage": usage} if usage else {})}

    return respond


def ctx_for(srv: IncidentMCP, provider: FaultyProvider, limits: AgentLimits | None = None,
            **options: Any) -> AgentContext:
    opts = {"api_base": provider.url, "api_key_env": "CLI_MODEL_KEY", "price": PRICE, "max_backoff_retries": 1,
            "max_backoff_s": 0.05, **options}
    return AgentContext(trial_id="trial-c0de", namespace="hotel-reservation", mcp_url=srv.url, mcp_token=srv.token,
                        model=MODEL, limits=limits or AgentLimits(), options=opts)


@pytest.mark.parametrize("agent_cls", AGENTS)
def test_a_cli_session_through_the_model_proxy(agent_cls) -> None:
    with FaultyProvider(answer=planned()) as provider, IncidentMCP() as srv:
        result = agent_cls().run(ctx_for(srv, provider))
        requests = list(provider.requests)
    assert result.end_reason == END_SUBMITTED, result.error
    assert srv.state.diagnosis and "27018" in srv.state.diagnosis and srv.state.mitigated
    # Each model turn reached the provider as a chat completion with the CLI's tools translated.
    assert len(requests) == 5 and all(r["authorized"] for r in requests)
    offered = {t["function"]["name"] for t in requests[0]["body"]["tools"]}
    assert ("mcp__farm__kubectl" if agent_cls is ClaudeCodeAgent else "farm__kubectl") in offered
    last = requests[-1]["body"]["messages"]
    assert [m["role"] for m in last][:2] == ["system", "user"] and sum(m["role"] == "tool" for m in last) == 4
    assert "CrashLoopBackOff" in next(m["content"] for m in last if m["role"] == "tool")
    # The usage is the proxy's count of the provider's answers, priced by the worker's client.
    assert result.tokens_in > 0 and result.tokens_out > 0 and result.cost_usd == pytest.approx(
        result.tokens_in * 1e-6 + result.tokens_out * 4e-6)
    tools = [e for e in result.transcript if e["role"] == "tool"]
    assert [t["name"] for t in tools] == ["kubectl", "submit_diagnosis", "kubectl", "submit_mitigation"]
    assert validate_atif(to_atif(result, session_id="s", agent_name=agent_cls.__name__)) == []


def test_the_mcp_token_is_not_in_the_codex_command_line_or_transcript() -> None:
    with FaultyProvider(answer=planned()) as provider, IncidentMCP(token="secret-trial-token-9f8e7d") as srv:
        agent = CodexAgent()
        box = Sandbox.create("farm-test-")
        try:
            argv, env = agent.command(ctx_for(srv, provider), box, ("http://127.0.0.1:1/v1", "session-token"))
        finally:
            box.remove()
        result = agent.run(ctx_for(srv, provider))
    assert not any("secret-trial-token-9f8e7d" in a for a in argv) and env["FARM_MCP_TOKEN"] == srv.token
    assert not any("session-token" in a for a in argv) and env["FARM_MODEL_TOKEN"] == "session-token"
    assert "secret-trial-token-9f8e7d" not in json.dumps(result.model_dump())


@pytest.mark.parametrize("agent_cls", AGENTS)
def test_the_providers_key_never_reaches_the_cli(agent_cls, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "record.jsonl"
    monkeypatch.setenv("FAKE_CLI_RECORD", str(record))
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FaultyProvider(answer=planned()) as provider, IncidentMCP() as srv:
        # A sweep entry that asks for the keys by name gets none of them.
        ctx = ctx_for(srv, provider, pass_env=["FAKE_CLI_RECORD", "ANTHROPIC_API_KEY", "OPENAI_API_KEY",
                                               "CLI_MODEL_KEY", "OPENAI_BASE_URL"])
        result = agent_cls().run(ctx)
    assert result.end_reason == END_SUBMITTED, result.error
    rec = json.loads(record.read_text().splitlines()[0])
    assert KEY not in json.dumps(rec), "the provider's key reached the CLI's argv, environment or config"
    assert "CLI_MODEL_KEY" not in rec["env"] and "OPENAI_BASE_URL" not in rec["env"]
    if agent_cls is ClaudeCodeAgent:
        assert rec["env"]["ANTHROPIC_BASE_URL"].startswith("http://127.0.0.1:")
    else:
        assert rec["config"]["model_provider"] == "farm" and rec["env"]["FARM_MODEL_TOKEN"]
    assert KEY not in json.dumps(result.model_dump())


# A provider that keeps failing, and how: (fault, the failure kind the worker records).
PROVIDER_FAULTS = [("auth", "auth"), ("unknown_model", "unknown_model"), ("rate_limit", "rate_limited"),
                   ("unavailable", "overloaded"), ("server_error", "server_error"), ("slow", "timeout")]


@pytest.mark.parametrize(("agent_cls", "fault", "kind"),
                         [(ClaudeCodeAgent, f, k) for f, k in PROVIDER_FAULTS]
                         + [(CodexAgent, f, k) for f, k in PROVIDER_FAULTS[::2]])
def test_a_provider_failure_is_the_providers_not_the_agents(agent_cls, fault: str, kind: str) -> None:
    with FaultyProvider({"*": fault}, answer=planned(), slow_s=2.0) as provider, IncidentMCP() as srv:
        with pytest.raises(ProviderError) as failed:
            agent_cls().run(ctx_for(srv, provider, request_timeout_s=0.5))
        served = sum(provider.served.values())
        calls = list(srv.state.calls)
    assert failed.value.kind == kind and failed.value.phase == "provider"
    assert calls == []  # the model never answered, so the agent did nothing
    # Transient failures were retried by the worker's client (once here), then the session ended:
    # the CLI's own retries did not reach the provider again.
    assert served == (1 if not failed.value.transient else 2)
    assert KEY not in str(failed.value)


def test_a_context_overflow_stays_the_agents_own_failure() -> None:
    with FaultyProvider({"*": "context_length"}, answer=planned()) as provider, IncidentMCP() as srv:
        result = ClaudeCodeAgent().run(ctx_for(srv, provider))
    assert result.end_reason == "agent_error" and "context" in (result.error or "")


# -- isolation -------------------------------------------------------------------------------------

CATALOG = ROOT / "farm" / "problems" / "catalog"


@pytest.mark.parametrize("agent_cls", AGENTS)
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
    with FaultyProvider(answer=planned()) as provider, IncidentMCP() as srv:
        result = agent_cls(pass_env=asked).run(ctx_for(srv, provider))
    assert result.end_reason == END_SUBMITTED, result.error
    rec = json.loads(record.read_text().splitlines()[0])
    cwd = Path(rec["cwd"])
    assert not str(cwd).startswith(str(ROOT)) and rec["cwd_entries"] == []
    assert not cwd.exists(), "the trial's folder is removed after the session"
    env = rec["env"]
    for name, value in env.items():
        assert str(ROOT) not in value, (name, value)
    assert not [n for n in env if n.startswith("FARM_") and n not in ("FARM_MCP_TOKEN", "FARM_MODEL_TOKEN")]
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
        # Its own CODEX_HOME, empty: no login (its model is the proxy), not the user's config.
        assert rec["codex_home_entries"] == []
        assert not env["CODEX_HOME"].startswith(str(home))


# -- farm-wide limits ------------------------------------------------------------------------------


def test_the_token_budget_stops_the_cli_at_the_proxy() -> None:
    with FaultyProvider(answer=planned({"prompt_tokens": 100, "completion_tokens": 40_000})) as provider, \
            IncidentMCP() as srv:
        result = ClaudeCodeAgent().run(ctx_for(srv, provider, AgentLimits(max_tokens=60_000)))
        calls = [name for name, _ in srv.state.calls]
    assert result.end_reason == LIMIT_TOKENS
    assert len(provider.requests) == 2 and not srv.state.mitigated and len(calls) <= 2


def _sweep_ctx(srv: IncidentMCP, provider: FaultyProvider, sweep: str, cap: float | None = None,
               concurrency: dict[str, int] | None = None, **options: Any) -> AgentContext:
    ctx = ctx_for(srv, provider, **options)
    ctx.options.update({"sweep_id": sweep, "redis_url": REDIS_URL})
    if cap is not None:
        ctx.options["sweep_cost_cap"] = cap
    if concurrency:
        ctx.options["concurrency"] = concurrency
    return ctx


@pytest.mark.redis
def test_cli_sessions_charge_the_sweep_ledger(rkeys: list[str]) -> None:
    sweep = f"e2cli-{uuid.uuid4().hex[:8]}"
    rkeys.append(SweepLedger(sweep, None, REDIS_URL).key)
    with FaultyProvider(answer=planned()) as provider, IncidentMCP() as a, IncidentMCP() as b:
        claude = ClaudeCodeAgent().run(_sweep_ctx(a, provider, sweep, cap=10.0))
        codex = CodexAgent().run(_sweep_ctx(b, provider, sweep, cap=10.0))
    assert claude.end_reason == codex.end_reason == END_SUBMITTED
    assert claude.cost_usd > 0 and codex.cost_usd > 0  # the worker's count, not the CLI's report
    assert SweepLedger(sweep, None, REDIS_URL).spent() == pytest.approx(claude.cost_usd + codex.cost_usd)


@pytest.mark.redis
@pytest.mark.parametrize("agent_cls", AGENTS)
def test_a_sweep_over_its_cap_starts_no_cli_session(agent_cls, rkeys: list[str], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    sweep = f"e2cli-{uuid.uuid4().hex[:8]}"
    ledger = SweepLedger(sweep, 0.05, REDIS_URL)
    rkeys.append(ledger.key)
    ledger.add(0.05)
    record = tmp_path / "record.jsonl"
    monkeypatch.setenv("FAKE_CLI_RECORD", str(record))
    with FaultyProvider(answer=planned()) as provider, IncidentMCP() as srv:
        result = agent_cls().run(_sweep_ctx(srv, provider, sweep, cap=0.05, pass_env=["FAKE_CLI_RECORD"]))
        calls = list(srv.state.calls)
        requests = list(provider.requests)
    assert result.end_reason == LIMIT_SWEEP_COST and "spent" in (result.error or "")
    assert not record.exists() and calls == [] and requests == []  # the CLI never ran
    assert ledger.spent() == pytest.approx(0.05)


@pytest.mark.redis
def test_cli_sessions_share_their_models_concurrency_slots(rkeys: list[str]) -> None:
    model = f"openai/e2-cli-{uuid.uuid4().hex[:8]}"
    rkeys.append(RedisSemaphore(REDIS_URL, model, 1).key)

    def slow_plan(request: dict[str, Any]) -> dict[str, Any]:
        return {**planned()(request), "delay": 0.2}

    results: list = []
    with FaultyProvider(answer=slow_plan) as provider, IncidentMCP() as a, IncidentMCP() as b:
        def one(srv: IncidentMCP) -> None:
            ctx = _sweep_ctx(srv, provider, f"e2cli-{uuid.uuid4().hex[:8]}", concurrency={model: 1})
            results.append(ClaudeCodeAgent().run(ctx.model_copy(update={"model": model})))
        threads = [threading.Thread(target=one, args=(srv,)) for srv in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        most = provider.max_in_flight
    assert [r.end_reason for r in results] == [END_SUBMITTED, END_SUBMITTED]
    assert most == 1, "two calls to a model with one slot ran at once"
    assert RedisSemaphore(REDIS_URL, model, 1).holders() == 0  # released afterwards
