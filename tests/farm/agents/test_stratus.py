"""The stratus agent: diagnosis and mitigation sub-agents through real litellm over a real MCP server,
rollback when a change makes health worse, and fewer tokens than react on the same decisions."""

from __future__ import annotations

from core.states import END_SUBMITTED
from farm.agents.atif import to_atif, validate_atif
from farm.agents.agent import AgentContext
from farm.agents.react import ReactAgent
from farm.agents.stratus import StratusAgent, count_firing, parse_pods
from farm.llm.scripted import ScriptedLLM, tool_plan
from farm.testing.incident_mcp import IncidentMCP
from farm.testing.incident_plan import PLAN, responder


def ctx_for(srv: IncidentMCP, llm: ScriptedLLM) -> AgentContext:
    return AgentContext(trial_id="trial-51c2", namespace="hotel-reservation", mcp_url=srv.url, mcp_token=srv.token,
                        model="openai/scripted-model", tool_mode=srv.mode, options={"api_base": llm.url})


def test_two_sub_agents_diagnose_then_mitigate() -> None:
    with IncidentMCP(mode="summarised") as srv, ScriptedLLM(responder()) as llm:
        result = StratusAgent().run(ctx_for(srv, llm))
        requests = [r["body"] for r in llm.requests]
    assert result.end_reason == END_SUBMITTED, result.error
    assert "27018" in (srv.state.diagnosis or "") and srv.state.mitigated and srv.state.geo_ok
    diag = [r for r in requests if any(t["function"]["name"] == "submit_diagnosis" for t in r["tools"])]
    mitig = [r for r in requests if any(t["function"]["name"] == "submit_mitigation" for t in r["tools"])]
    assert diag and mitig and len(diag) + len(mitig) == len(requests)
    # the diagnosis sub-agent cannot change anything; the mitigation one starts from the diagnosis alone
    assert not any(t["function"]["name"] in ("undo_last", "wait", "submit_mitigation") for t in diag[0]["tools"])
    assert "27018" in mitig[0]["messages"][0]["content"]
    assert not any(m["role"] == "tool" for m in mitig[0]["messages"])
    assert {e.get("agent") for e in result.transcript} >= {"diagnosis", "mitigation", "harness"}
    assert validate_atif(to_atif(result, session_id="s", agent_name="stratus")) == []


def test_diagnosis_phase_refuses_mutating_kubectl() -> None:
    plan = tool_plan([("kubectl", {"command": "delete deployment geo -n hotel-reservation"}),
                      ("submit_diagnosis", {"text": "geo is broken"})])
    with IncidentMCP(mode="summarised") as srv, ScriptedLLM(plan) as llm:
        StratusAgent().run(ctx_for(srv, llm))
        first_tool = next(m for m in llm.requests[1]["body"]["messages"] if m["role"] == "tool")
    assert "read-only" in first_tool["content"]
    assert ("kubectl", {"command": "delete deployment geo -n hotel-reservation"}) not in srv.state.calls


def test_a_change_that_makes_health_worse_is_rolled_back() -> None:
    bad_then_good = PLAN[:8] + [
        ("kubectl", {"command": "scale deployment/frontend --replicas=0 -n hotel-reservation"})] + PLAN[8:]
    with IncidentMCP(mode="summarised") as srv, ScriptedLLM(tool_plan(bad_then_good)) as llm:
        result = StratusAgent().run(ctx_for(srv, llm))
        seen = [m["content"] for r in llm.requests for m in r["body"]["messages"] if m["role"] == "tool"]
    assert ("undo_last", {}) in srv.state.calls
    assert srv.state.frontend_replicas == 1 and srv.state.geo_ok and srv.state.mitigated
    assert any("HEALTH GOT WORSE" in c for c in seen)  # the sub-agent is told why
    assert any(e["role"] == "event" and e["content"].startswith("rollback") for e in result.transcript)
    assert result.end_reason == END_SUBMITTED


def test_stratus_uses_fewer_tokens_than_react_on_the_same_scenario() -> None:
    results = {}
    for agent in (ReactAgent(), StratusAgent()):
        with IncidentMCP(mode=agent.tool_mode) as srv, ScriptedLLM(responder()) as llm:
            results[type(agent).__name__] = (agent.run(ctx_for(srv, llm)), srv.state)
    react, stratus = results["ReactAgent"][0], results["StratusAgent"][0]
    assert react.end_reason == stratus.end_reason == END_SUBMITTED
    assert results["ReactAgent"][1].diagnosis == results["StratusAgent"][1].diagnosis  # same decisions
    assert stratus.tokens_in + stratus.tokens_out < 0.5 * (react.tokens_in + react.tokens_out)
    # even when the interface gives stratus raw output, its own condensing keeps it cheaper
    with IncidentMCP(mode="raw") as srv, ScriptedLLM(responder()) as llm:
        raw = StratusAgent().run(ctx_for(srv, llm))
    assert raw.end_reason == END_SUBMITTED
    assert raw.tokens_in + raw.tokens_out < react.tokens_in + react.tokens_out


def test_health_parsing() -> None:
    pods = ("NAME READY STATUS RESTARTS AGE\n"
            "geo-7c9d5b8f4-q8wzt 0/1 CrashLoopBackOff 7 12m\n"
            "frontend-5f7d8c9b6-x2k4q 1/1 Running 0 12m\n"
            "profile-5f7d8c9b6-abcde 0/1 Running 0 12m\n"
            "mongodb-geo-0 1/1 Running 0 12m\n"
            "job-xyz12 0/1 Completed 0 1m")
    unhealthy, workloads = parse_pods(pods)
    assert unhealthy == 2 and {"geo", "frontend", "profile", "mongodb-geo"} <= workloads
    assert count_firing("No firing alerts") == 0
    assert count_firing("2 firing alerts:\n- A\n- B") == 2
    assert count_firing('[{"labels": {}, "state": "firing"}, {"labels": {}, "state": "pending"}]') == 1
