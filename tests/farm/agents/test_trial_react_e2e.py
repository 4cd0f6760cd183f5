"""One whole trial for an LLM agent through farm/trial/'s chain: a sweep row in SQLite, a claim,
deploy → inject → agent_session → oracle → record on an emulated cluster, the `react` agent talking
to the scripted OpenAI-compatible server through real litellm, the interface over real HTTP and a
real kubectl. The agent runs out of steps (the interface counts every tool call against max_steps):
the end reason, the artifacts and the recorded row say so, the diagnosis sent past the limit does
not count, and nothing the agent could see names the problem or its ground truth."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select

from core.states import LIMIT_STEPS
from farm.agents.atif import validate_atif
from farm.dispatcher import submit
from farm.llm.scripted import ScriptedLLM
from farm.oracles.judge import PASS_RULE
from farm.problems.catalog import load_catalog
from farm.pytest_plugin import SimClusters
from farm.spec import SweepSpec
from farm.trial import run_all, start_run
from results import ledger
from results.artifact_store import LocalArtifactStore
from results.db import engine_for
from results.models import Attempt, Trial
from tests.farm.agents.cli_fakes import observe_handoff

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]
PROBLEM = "hr-geo-image-tag-wrong"
MAX_STEPS = 4
TURNS = [
    {"content": "Looking at the pods first.", "tool_calls": [{"name": "kubectl", "arguments": {"command": "get pods"}}]},
    {"tool_calls": [{"name": "kubectl", "arguments": {"command": "describe deployment geo"}},
                    {"name": "get_alerts", "arguments": {}}]},
    {"tool_calls": [{"name": "kubectl", "arguments": {"command": "set env deployment/geo E2E_PROBE=1"}}]},
    # The fifth tool call: the interface refuses it (4 tool calls of 4) and ends the session.
    {"tool_calls": [{"name": "submit_diagnosis", "arguments": {"text": "sent past the limit"}}]},
]


def _texts_of_truth(problem_id: str) -> list[str]:
    """What would give the answer away: the id, and the catalog's prose about the fault."""
    problem = load_catalog().get(problem_id)
    truth = problem.ground_truth
    return [s for s in (problem.id, problem.description, truth.mechanism, truth.symptom) if s]


def _server_surface(iface: Any) -> str:
    """The interface's instructions and every tool's name, description and schema, as an MCP
    client is given them."""
    server = iface._build_server()
    tools = asyncio.run(server.list_tools())
    return json.dumps({"instructions": server.instructions,
                       "tools": [t.model_dump(mode="json") for t in tools]})


def test_a_react_trial_that_runs_out_of_steps(sim_clusters: SimClusters, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The agent runs in its own process: what it is handed is observed where the worker hands it.
    contexts, commands = observe_handoff(monkeypatch)
    engine = engine_for(f"sqlite:///{tmp_path / 'farm.sqlite'}")
    store = LocalArtifactStore(tmp_path / "artifacts")
    cluster = sim_clusters.served(seed=3)
    with ScriptedLLM(TURNS) as llm:
        spec = SweepSpec(name="e2e-react", problems={"ids": [PROBLEM]},
                         agents=[{"name": "react", "options": {"api_base": llm.url}}],
                         models=["openai/scripted-model"], limits={"max_steps": MAX_STEPS, "wall_time_s": 600})
        sub = submit(engine, spec)
        assert sub.total == 1
        claim = ledger.claim(engine, sub.to_run[0], "e2e-worker", cluster.ref)
        assert claim is not None
        run = start_run(engine, claim, cluster, store)
        assert run is not None
        outcome = run_all(run)
        requests = list(llm.requests)
        provider_url = llm.url
    assert outcome == "recorded", run.events[-3:]
    surface = _server_surface(run.interface)
    kubectl_env = dict(run.interface._kubectl.env)
    kubeconfig = Path(run.interface._kubectl.kubeconfig).read_text()

    # -- how it ended ---------------------------------------------------------------------------
    assert len(requests) == MAX_STEPS  # the loop stopped at the interface's refusal
    with Session(engine) as s:
        trial = s.exec(select(Trial)).one()
        attempt = s.exec(select(Attempt)).one()
    assert trial.end_reason == attempt.end_reason == LIMIT_STEPS
    # the refused call is recorded, but it was no step of the session
    assert trial.steps == MAX_STEPS and attempt.tool_calls == MAX_STEPS
    assert attempt.diagnosis_submitted is False and attempt.diagnosis_passed is False
    # the v2 rule has no composite floor: the verdict records which rule judged it instead
    assert attempt.diagnosis_threshold is None and trial.diagnosis_threshold is None
    assert attempt.diagnosis_pass_rule == trial.diagnosis_pass_rule == PASS_RULE.id
    assert attempt.mitigation_passed is False  # an env var nobody reads fixes nothing

    # -- artifacts ------------------------------------------------------------------------------
    folder = Path(attempt.artifacts_uri.removeprefix("file://"))
    names = {p.name for p in folder.iterdir()}
    assert {"transcript.json", "trajectory.atif.json", "tool_calls.json", "mutations.json", "attempt.json",
            "verdicts.json"} <= names, names
    transcript = json.loads((folder / "transcript.json").read_text())
    ended = [e["content"] for e in transcript if e["role"] == "event" and "session ended" in e["content"]]
    assert ended == [f"session ended: limit reached: limit_steps ({MAX_STEPS} tool calls of {MAX_STEPS})"]
    tool_entries = [e for e in transcript if e["role"] == "tool"]
    assert [e["name"] for e in tool_entries] == ["kubectl", "kubectl", "get_alerts", "kubectl"]
    assert "geo" in tool_entries[0]["content"]  # real kubectl output from the emulated cluster
    assert validate_atif(json.loads((folder / "trajectory.atif.json").read_text())) == []
    calls = json.loads((folder / "tool_calls.json").read_text())
    assert [c["args"].get("command") for c in calls if c["name"] == "kubectl"] == [
        "get pods", "describe deployment geo", "set env deployment/geo E2E_PROBE=1"]
    assert len(calls) == MAX_STEPS and calls[-1]["name"] == "kubectl"
    # the call past the limit: refused and kept apart, no step
    (late,) = json.loads((folder / "refused_calls.json").read_text())
    assert late["name"] == "submit_diagnosis" and late["error"].startswith("session ended: limit_steps")
    mutations = json.loads((folder / "mutations.json").read_text())
    assert [m["command"] for m in mutations] == ["set env deployment/geo E2E_PROBE=1"]
    assert mutations[0]["targets"] == ["deployment/geo"] and mutations[0]["undo"]
    assert mutations[0]["before"]["deployment/geo"]["metadata"]["name"] == "geo"
    assert mutations[0]["call_index"] == 3

    # -- nothing the agent could see gives the answer away ----------------------------------------
    assert len(contexts) == 1
    ctx = contexts[0]
    assert ctx.trial_id == run.opaque_id and ctx.model == "openai/scripted-model"
    # the provider's address stays in the worker: the agent has the session's model proxy
    assert "api_base" not in ctx.options and provider_url not in ctx.model_dump_json()
    assert ctx.options["model_endpoint"].startswith("http://127.0.0.1:")
    assert commands and all(argv[0].endswith("bwrap") for argv, _ in commands)
    seen = {
        "model requests (prompts, tool descriptions, tool results)": json.dumps(requests),
        "tool results in the transcript": json.dumps(tool_entries),
        "the MCP server's instructions and tool descriptions": surface,
        "the agent's context": ctx.model_dump_json(),
        "kubectl's environment": json.dumps(kubectl_env),
        "the agent's kubeconfig": kubeconfig,
        "the agent process's command line and environment": json.dumps(commands),
    }
    assert "hotel-reservation" in seen["the MCP server's instructions and tool descriptions"]  # not vacuous
    assert "describe deployment geo" in seen["model requests (prompts, tool descriptions, tool results)"]
    for text in _texts_of_truth(PROBLEM):
        for where, shown in seen.items():
            assert text not in shown, f"{text[:60]!r} reached {where}"
