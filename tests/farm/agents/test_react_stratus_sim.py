"""react and stratus end to end on the real stack: the emulated cluster with hotel-reservation
deployed and a catalog fault injected, E1's MCP agent interface (kubectl 1.20 as a real process),
real litellm against the scripted server. The interface's record, not the agent, is what counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusters.handle import ClusterHandle
from clusters.emulated import SimHandle
from core.states import END_SUBMITTED
from farm.agents.agent import AgentContext
from farm.agents.cli_adapters import ClaudeCodeAgent, CodexAgent
from farm.agents.react import ReactAgent
from farm.agents.stratus import StratusAgent
from farm.interface import AgentInterface
from farm.llm.scripted import ScriptedLLM, tool_plan
from farm.oracles.judge import judge_diagnosis
from farm.problems.catalog import load_catalog
from farm.pytest_plugin import SimClusters, as_built
from farm.testing.incident_plan import SIM_NS as NS
from farm.testing.incident_plan import SIM_PLAN as PLAN
from farm.testing.incident_plan import SIM_PROBLEM as PROBLEM
from injectors.compose import ProblemInjection
from tests.farm.agents.cli_fakes import install_fakes

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]
@pytest.fixture(scope="module")
def cluster(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served("hotel-reservation", seed=11, agent=True)


def run_agent(cluster: ClusterHandle, agent, trial: str):
    as_built(cluster)
    problem = load_catalog().get(PROBLEM)
    ProblemInjection(problem).inject(cluster, NS)
    cluster.advance(60)
    iface = AgentInterface(cluster, NS, trial, mode=agent.tool_mode)
    url, token = iface.start()
    try:
        with ScriptedLLM(tool_plan(PLAN)) as llm:
            ctx = AgentContext(trial_id=trial, namespace=NS, mcp_url=url, mcp_token=token,
                               model="openai/scripted-model", tool_mode=agent.tool_mode,
                               options={"api_base": llm.url})
            result = agent.run(ctx)
    finally:
        iface.stop()
    return result, iface.record, problem


@pytest.mark.parametrize("agent_cls", [ReactAgent, StratusAgent])
def test_whole_trial_over_the_real_interface(cluster: ClusterHandle, agent_cls) -> None:
    result, record, problem = run_agent(cluster, agent_cls(), f"t-{agent_cls.__name__.lower()}")
    assert result.end_reason == END_SUBMITTED, result.error
    assert record.diagnosis and "v2.0.1-rc" in record.diagnosis  # read off the real describe output
    assert record.mitigation_at is not None
    assert any("rollout undo" in m.command for m in record.mutations)
    # every tool call the agent counted, the interface recorded (stratus adds its own health checks)
    assert len(record.tool_calls) == result.tool_calls
    verdict = judge_diagnosis(record.diagnosis, problem.ground_truth, None)
    assert verdict.answers[0].answer and verdict.answers[4].answer  # names geo, gives the tag


def test_stratus_spends_fewer_tokens_than_react_on_the_real_interface(cluster: ClusterHandle) -> None:
    react, _, _ = run_agent(cluster, ReactAgent(), "t-cmp-react")
    stratus, _, _ = run_agent(cluster, StratusAgent(), "t-cmp-stratus")
    assert react.end_reason == stratus.end_reason == END_SUBMITTED
    assert stratus.tokens_in + stratus.tokens_out < react.tokens_in + react.tokens_out



@pytest.mark.parametrize("agent_cls", [ClaudeCodeAgent, CodexAgent])
def test_cli_adapters_over_the_real_interface(cluster: ClusterHandle, agent_cls, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from farm.llm.faulty import FaultyProvider
    from farm.llm.scripted import tool_plan

    install_fakes(tmp_path / "bin", monkeypatch)
    monkeypatch.setenv("CLI_MODEL_KEY", "sk-provider-key-for-the-worker-only")
    # The CLI's model is the worker's (through its model proxy): a scripted OpenAI-compatible server.
    play = tool_plan([("kubectl", {"command": f"get pods -n {NS}"}),
                      ("submit_diagnosis", {"text": "geo crash-loops: GEO_DB_PORT points at the wrong port; "
                                                    "frontend fails downstream."}),
                      ("kubectl", {"command": f"set env deployment/geo GEO_DB_PORT=27017 -n {NS}"}),
                      ("submit_mitigation", {})], finish="submitted")
    as_built(cluster)
    iface = AgentInterface(cluster, NS, f"t-{agent_cls.executable}", mode="raw")
    url, token = iface.start()
    try:
        with FaultyProvider(answer=play) as provider:
            ctx = AgentContext(trial_id=f"t-{agent_cls.executable}", namespace=NS, mcp_url=url, mcp_token=token,
                               model="openai/cli-model",
                               options={"api_base": provider.url, "api_key_env": "CLI_MODEL_KEY"})
            result = agent_cls().run(ctx)
    finally:
        iface.stop()
    assert result.end_reason == END_SUBMITTED, result.error
    assert iface.record.diagnosis and "GEO_DB_PORT" in iface.record.diagnosis
    assert iface.record.mitigation_at is not None
    assert len(iface.record.tool_calls) == result.tool_calls
    outputs = [e["content"] for e in result.transcript if e["role"] == "tool"]
    assert any("geo" in o for o in outputs[:1])  # the first call's real output (pods or geo's logs)
