"""Condensing of tool output, and the ATIF validator on broken trajectories."""

from __future__ import annotations

from farm.agents.atif import to_atif, validate_atif
from farm.agents.agent import AgentResult
from farm.llm.condense import clip, condense, dedupe_lines


def test_repeated_log_lines_collapse_with_counts() -> None:
    lines = [f"2026-12-02T17:00:{i:02d}Z geo-7c9d5b8f4-q8wzt panic: dial tcp 10.96.0.{i}:27018: refused"
             for i in range(50)] + ["geo: starting", "geo: starting"]
    out = dedupe_lines("\n".join(lines))
    assert out.splitlines()[0].startswith("[x50] ") and "[x2] geo: starting" in out
    assert len(out) < len("\n".join(lines)) / 10
    assert dedupe_lines("a\nb\nc\nd") == "a\nb\nc\nd"  # nothing repeats: unchanged


def test_clip_keeps_head_and_tail() -> None:
    text = "HEAD" + "x" * 5000 + "TAIL"
    out = clip(text, 1000)
    assert out.startswith("HEAD") and out.endswith("TAIL") and "characters omitted" in out
    assert len(condense(text, 1000)) < 1100


def test_atif_export_of_a_result_and_validator_catches_breakage() -> None:
    result = AgentResult(end_reason="submitted", steps=1, tool_calls=1, tokens_in=10, tokens_out=2, transcript=[
        {"role": "system", "content": "s", "at": "2026-12-02T17:00:00Z"},
        {"role": "assistant", "content": None, "usage": {"tokens_in": 10, "tokens_out": 2, "tokens_cached": 0,
                                                         "cost_usd": 0.0, "priced": False},
         "tool_calls": [{"id": "c1", "name": "kubectl", "arguments": {"command": "get pods"}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "kubectl", "content": "pod list", "is_error": False},
        {"role": "event", "content": "rollback", "agent": "mitigation"}])
    traj = to_atif(result, session_id="t", agent_name="stratus", model="m")
    assert validate_atif(traj) == []
    agent_step = traj["steps"][1]
    assert agent_step["observation"]["results"] == [{"source_call_id": "c1", "content": "pod list"}]
    assert agent_step["metrics"]["extra"] == {"priced": False}
    assert traj["steps"][2]["source"] == "system" and traj["steps"][2]["extra"]["event"]["agent"] == "mitigation"
    broken = {**traj, "steps": [{**traj["steps"][0], "step_id": 5, "tool_calls": []}] + traj["steps"][1:]}
    del broken["agent"]["version"]
    problems = validate_atif(broken)
    assert any("step_id 5" in p for p in problems) and any("version" in p for p in problems)
    assert any("only allowed on agent steps" in p for p in problems)
