"""Export of an agent transcript (farm.llm.transcript entries, as in AgentResult.transcript) to ATIF,
Harbor's Agent Trajectory Interchange Format (schema ATIF-v1.4), so existing trajectory viewers
read farm transcripts. Mapping: system/user entries become system/user steps; an assistant entry
becomes an agent step whose tool calls' results (the tool entries that follow) form its observation;
harness events become system steps with the event in `extra`."""

from __future__ import annotations

import json
from typing import Any

from farm.agents.agent import AgentResult
from farm.llm.transcript import scrub_obj

SCHEMA_VERSION = "ATIF-v1.4"


def to_atif(result: AgentResult, *, session_id: str, agent_name: str, agent_version: str = "1",
            model: str | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ATIF trajectory (a JSON-ready dict) of one agent session."""
    steps: list[dict[str, Any]] = []
    open_calls: dict[str, dict[str, Any]] = {}  # tool_call_id -> the agent step that made it

    def add(step: dict[str, Any]) -> dict[str, Any]:
        step = {"step_id": len(steps) + 1, **step}
        steps.append(step)
        return step

    for e in result.transcript:
        role = e.get("role")
        ts = e.get("at")
        common: dict[str, Any] = {"timestamp": ts} if ts else {}
        sub = {"agent": e["agent"]} if e.get("agent") else {}
        if role in ("system", "user"):
            add({**common, "source": role, "message": e.get("content") or "", **({"extra": sub} if sub else {})})
        elif role == "assistant":
            step: dict[str, Any] = {**common, "source": "agent", "message": e.get("content") or ""}
            if e.get("model"):
                step["model_name"] = e["model"]
            if e.get("reasoning_content"):
                step["reasoning_content"] = e["reasoning_content"]
            calls = e.get("tool_calls") or []
            if calls:
                step["tool_calls"] = [{"tool_call_id": str(c.get("id") or f"call_{len(steps)}_{i}"),
                                       "function_name": c.get("name", ""),
                                       "arguments": c.get("arguments") if isinstance(c.get("arguments"), dict)
                                       else {"_raw": json.dumps(c.get("arguments"))}}
                                      for i, c in enumerate(calls)]
            u = e.get("usage") or {}
            if u:
                metrics: dict[str, Any] = {"prompt_tokens": int(u.get("tokens_in", 0)),
                                           "completion_tokens": int(u.get("tokens_out", 0)),
                                           "cached_tokens": int(u.get("tokens_cached", 0))}
                if "cost_usd" in u:
                    metrics["cost_usd"] = float(u["cost_usd"])
                if u.get("priced") is False:
                    metrics["extra"] = {"priced": False}
                step["metrics"] = metrics
            if sub:
                step["extra"] = sub
            made = add(step)
            for c in made.get("tool_calls", []):
                open_calls[c["tool_call_id"]] = made
        elif role == "tool":
            call_id = str(e.get("tool_call_id") or "")
            owner = open_calls.get(call_id)
            res = {"source_call_id": call_id, "content": e.get("content") or ""}
            if owner is None:  # a result whose call we never saw: keep it, as a system observation
                add({**common, "source": "system", "message": f"tool result ({e.get('name')})",
                     "observation": {"results": [res]}})
            else:
                owner.setdefault("observation", {"results": []})["results"].append(res)
        elif role == "event":
            data = {k: v for k, v in e.items() if k not in ("role", "content", "at")}
            add({**common, "source": "system", "message": e.get("content") or "", "extra": {"event": data}})
    final = {"total_prompt_tokens": result.tokens_in, "total_completion_tokens": result.tokens_out,
             "total_cached_tokens": result.tokens_cached, "total_cost_usd": result.cost_usd,
             "total_steps": len(steps),
             "extra": {"model_calls": result.steps, "tool_calls": result.tool_calls, "end_reason": result.end_reason}}
    traj: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "session_id": session_id,
                            "agent": {"name": agent_name, "version": agent_version,
                                      **({"model_name": model} if model else {})},
                            "steps": steps, "final_metrics": final}
    if result.error:
        traj["notes"] = f"session ended with an error: {result.error}"
    if extra:
        traj["extra"] = extra
    return scrub_obj(traj)


def validate_atif(traj: dict[str, Any]) -> list[str]:
    """What is wrong with `traj` against the ATIF v1.4 rules a viewer relies on; [] when valid."""
    problems = []
    for key in ("schema_version", "session_id", "agent", "steps"):
        if key not in traj:
            problems.append(f"missing root field '{key}'")
    agent = traj.get("agent") or {}
    for key in ("name", "version"):
        if key not in agent:
            problems.append(f"agent: missing '{key}'")
    call_ids: set[str] = set()
    for i, step in enumerate(traj.get("steps") or [], start=1):
        where = f"steps[{i - 1}]"
        if step.get("step_id") != i:
            problems.append(f"{where}: step_id {step.get('step_id')} should be {i}")
        if step.get("source") not in ("system", "user", "agent"):
            problems.append(f"{where}: source must be system, user or agent")
        if not isinstance(step.get("message"), str):
            problems.append(f"{where}: message must be a string")
        if step.get("source") != "agent":
            for agent_only in ("model_name", "reasoning_content", "tool_calls", "metrics"):
                if agent_only in step:
                    problems.append(f"{where}: '{agent_only}' is only allowed on agent steps")
        for c in step.get("tool_calls") or []:
            if not isinstance(c.get("arguments"), dict):
                problems.append(f"{where}: tool call arguments must be an object")
            call_ids.add(c.get("tool_call_id"))
        for r in (step.get("observation") or {}).get("results", []):
            sid = r.get("source_call_id")
            if sid and step.get("source") == "agent" and sid not in call_ids:
                problems.append(f"{where}: observation refers to unknown tool call '{sid}'")
    return problems
