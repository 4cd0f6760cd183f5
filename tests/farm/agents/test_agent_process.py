"""The agent's own process (farm/agenthost, farm/trial/session.py) against a real interface on an
emulated cluster: a process that dies without an answer, one that hangs past its wall time, the
unsafe opt-out that runs it unconfined, and the spare process a session takes."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from core.states import END_AGENT_STOPPED, END_SUBMITTED, LIMIT_WALL_TIME
from farm.agenthost import process
from farm.agenthost.sandbox import SITE_PATH
from farm.agents.base import AgentContext, AgentLimits
from farm.interface import AgentInterface
from farm.pytest_plugin import SimClusters
from farm.trial.session import run_agent_process

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


def test_a_cli_agent_runs_its_cli_in_the_sandbox(iface: AgentInterface, tmp_path: Path) -> None:
    # The fake claude is a Python program: in the sandbox it finds the installed packages (the MCP
    # client) where they are mounted; a real CLI needs nothing of the sort.
    body = (Path(__file__).resolve().parents[2] / "fakes" / "claude").read_text().split("\n", 1)[1]
    fake = tmp_path / "claude"
    fake.write_text(f"#!/usr/bin/env python3\nimport sys; sys.path[:0] = {[f'{SITE_PATH}/0', f'{SITE_PATH}/1']!r}\n"
                    + body)
    fake.chmod(0o755)
    ctx = _ctx(iface, executable=str(fake)).model_copy(update={"model": "anthropic/claude-sonnet-4-5"})
    out = run_agent_process("claude-code", ctx, iface, endpoint=None)
    assert out.result is not None, (out.error, out.trace)
    assert out.result.end_reason == END_SUBMITTED and out.result.tokens_out > 0, out.result.error
    assert {"kubectl", "submit_diagnosis", "submit_mitigation"} <= {c.name for c in iface.record.tool_calls}
