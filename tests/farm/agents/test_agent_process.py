"""The agent's own process (farm/agenthost, farm/trial/session.py) against a real interface on an
emulated cluster: a process that dies without an answer, one that hangs past its wall time, the
unsafe opt-out that runs it unconfined, the spare process a session takes, and a CLI agent in the
same sandbox with the worker's model proxy as its only model endpoint."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from core.errors import ProviderError
from core.states import END_AGENT_STOPPED, END_SUBMITTED, LIMIT_WALL_TIME
from farm.agenthost import process
from farm.agents.agent import AgentContext, AgentLimits
from farm.interface import AgentInterface
from farm.llm.client import LLMClient
from farm.llm.faulty import FaultyProvider
from farm.llm.proxy import ModelProxy
from farm.llm.scripted import tool_plan
from farm.pytest_plugin import SimClusters
from farm.trial.session import model_failure, run_agent_process
from tests.farm.agents.cli_fakes import sandboxed_fake

pytestmark = [pytest.mark.kubectl]
NS = "hotel-reservation"


@pytest.fixture()
def iface(sim_clusters: SimClusters, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("FARM_AGENT_PLUGINS", "tests.fakes.probe_agent,tests.security.agent_plugins")
    process.discard_spare()
    interface = AgentInterface(sim_clusters.served(seed=3), NS, "t-process")
    interface.start()
    yield interface
    interface.stop()
    process.discard_spare()


def _ctx(iface: AgentInterface, wall_time_s: float = 60, **options: Any) -> AgentContext:
    return AgentContext(trial_id="t-process", namespace=NS, mcp_url=iface.url, mcp_token=iface.token,
                        limits=AgentLimits(wall_time_s=wall_time_s), options=options)


def test_a_process_that_dies_without_an_answer_has_crashed(iface: AgentInterface) -> None:
    out = run_agent_process("crasher", _ctx(iface), iface, endpoint=None)
    assert out.result is None and not out.stopped
    assert out.error == "the agent's process exited with status 3 without a result"
    assert "crasher: going down" in (out.trace or "")


def test_a_hung_process_is_killed_at_its_wall_time(iface: AgentInterface) -> None:
    out = run_agent_process("probe", _ctx(iface, wall_time_s=2, rounds=0, end="hang"), iface, endpoint=None)
    assert out.stopped and out.result is None and out.error is None
    assert iface.record.end_reason == LIMIT_WALL_TIME
    assert "did not stop within 2 s" in (iface.record.end_detail or "")


def test_the_unsafe_opt_out_runs_the_agent_unconfined_and_says_so(iface: AgentInterface,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    root = Path(__file__).resolve().parents[3]
    monkeypatch.setenv("FARM_UNSAFE_NO_SANDBOX", "1")
    with caplog.at_level(logging.WARNING, logger="farm.agenthost.sandbox"):
        out = run_agent_process("snoop", _ctx(iface, project=str(root)), iface, endpoint=None)
    assert out.result is not None and out.result.end_reason == END_AGENT_STOPPED
    assert "farm" in out.result.transcript[0]["project"]  # unconfined: the project is in reach
    assert any("UNCONFINED" in r.message for r in caplog.records)


def test_a_session_takes_the_spare_process_and_leaves_a_new_one(iface: AgentInterface) -> None:
    process.prepare(["tests.fakes.probe_agent", "tests.security.agent_plugins"])
    spare = process._spare
    assert spare is not None and spare.ready(120)
    out = run_agent_process("snoop", _ctx(iface), iface, endpoint=None)
    assert out.result is not None and out.result.transcript[0]["kind"] == "found"
    assert spare.proc is not None and spare.proc.returncode == 0  # the spare ran this session
    assert process._spare is not None and process._spare is not spare


KEY = "sk-provider-key-never-for-the-agent-77aa"


def _run_cli(iface: AgentInterface, tmp_path: Path, provider: FaultyProvider,
             monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ModelProxy, list[Any]]:
    """claude-code in its sandbox, its model the worker's proxy in front of `provider` (the key held
    by the worker's client); returns the outcome, the proxy and what the sandbox was started with."""
    started: list[Any] = []
    real_popen = process.subprocess.Popen

    def spy(argv: Any, **kw: Any) -> Any:  # what the agent's process is given: argv and environment
        started.append((argv, kw.get("env")))
        return real_popen(argv, **kw)

    monkeypatch.setattr(process.subprocess, "Popen", spy)
    process.discard_spare()
    client = LLMClient("openai/cli-model", api_base=provider.url, api_key=KEY, max_backoff_retries=1,
                       max_backoff_s=0.05)
    proxy = ModelProxy(client, on_limit=iface.end, on_provider_failure=lambda exc: iface.end(
        END_AGENT_STOPPED, f"the model provider failed: {exc}"))
    endpoint = proxy.start()
    ctx = _ctx(iface, executable=str(sandboxed_fake("claude", tmp_path))).model_copy(update={"model": "openai/cli-model"})
    try:
        out = run_agent_process("claude-code", ctx, iface, endpoint=endpoint)
    finally:
        proxy.stop()
    return out, proxy, started


def test_a_cli_agent_runs_its_cli_in_the_sandbox_with_the_proxy_as_its_model(
        iface: AgentInterface, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = tool_plan([("kubectl", {"command": f"get pods -n {NS}"}),
                      ("submit_diagnosis", {"text": "geo crash-loops on a wrong GEO_DB_PORT."}),
                      ("submit_mitigation", {})], finish="Done.")
    with FaultyProvider(answer=plan) as provider:
        out, proxy, started = _run_cli(iface, tmp_path, provider, monkeypatch)
    assert out.result is not None, (out.error, out.trace)
    assert out.result.end_reason == END_SUBMITTED and out.result.tokens_out > 0, out.result.error
    assert {"kubectl", "submit_diagnosis", "submit_mitigation"} <= {c.name for c in iface.record.tool_calls}
    assert proxy.calls == 4 and len(provider.requests) == 4  # every model turn went through the worker
    assert started and "--unshare-net" in started[0][0], "the CLI's sandbox has a network of its own"
    assert KEY not in json.dumps(started) and KEY not in json.dumps(out.result.model_dump())


def test_a_provider_failure_ends_a_cli_session_as_the_providers(iface: AgentInterface, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    with FaultyProvider({"*": "unavailable"}) as provider:
        out, proxy, started = _run_cli(iface, tmp_path, provider, monkeypatch)
        served = sum(provider.served.values())
    failure = model_failure(proxy.failures)
    assert isinstance(failure, ProviderError) and failure.kind == "overloaded"
    # The worker ended the session at the first failure past its retries: the CLI's own retries
    # through the proxy may still have come, but the session was over (stopped) before its end.
    assert iface.record.end_reason == END_AGENT_STOPPED and "provider failed" in (iface.record.end_detail or "")
    assert served >= 2 and not iface.record.tool_calls
    assert KEY not in json.dumps(started) and KEY not in (out.trace or "") + (out.error or "")
