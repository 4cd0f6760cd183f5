"""The report's numbers: SQL aggregates over a sweep's recorded trial and attempt rows (the
leaderboard's for rates; the rest here). Each function returns plain dicts and lists, so plots and
the page only draw and print what was computed from rows."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from sqlalchemy import Integer, case, cast, func, select
from sqlalchemy.engine import Engine

from core.states import AttemptState, TrialState
from results import leaderboard
from results.models import Attempt, InfraEvent, Sweep, Trial

DONE = Trial.state == TrialState.FINISHED


def _optional(model: Any, name: str) -> Any:
    """A column another change may add (a recorded pass rule, a mitigation-scored flag): read when
    the model has it, else None so the page says "not recorded"."""
    return getattr(model, name, None)


def sweep_info(engine: Engine, sweep_id: str) -> dict[str, Any]:
    """The sweep's spec and who scored it: the judge(s) and pass rule(s) its recorded attempts name."""
    with engine.connect() as conn:
        sweep = conn.execute(select(Sweep).where(Sweep.id == sweep_id)).mappings().one_or_none()
        if sweep is None:
            raise KeyError(sweep_id)
        recorded = (Attempt.state == AttemptState.RECORDED) & (Trial.sweep_id == sweep_id)
        judges = conn.execute(
            select(Attempt.judge, Attempt.judge_offline, Attempt.diagnosis_threshold, func.count())
            .join(Trial, Trial.id == Attempt.trial_id).where(recorded)
            .group_by(Attempt.judge, Attempt.judge_offline, Attempt.diagnosis_threshold)
        ).all()
        rule_col = _optional(Attempt, "pass_rule")
        rules: list[tuple[Any, int]] | None = None
        if rule_col is not None:
            rules = [(r, int(n)) for r, n in conn.execute(
                select(rule_col, func.count()).join(Trial, Trial.id == Attempt.trial_id).where(recorded)
                .group_by(rule_col)).all()]
        scored_col = _optional(Trial, "mitigation_scored")
        not_scored = None if scored_col is None else int(conn.execute(
            select(func.count()).where(Trial.sweep_id == sweep_id, scored_col.is_(False))).scalar_one())
    spec = json.loads(sweep["spec_json"])
    return {
        "sweep_id": sweep_id, "spec": spec, "created_at": sweep["created_at"], "updated_at": sweep["updated_at"],
        "spec_judge": sweep["judge"], "cost_cap_usd": sweep["cost_cap_usd"],
        "judges": [{"judge": j, "offline": o, "threshold": t, "attempts": int(n)} for j, o, t, n in judges],
        "pass_rules": rules, "mitigation_not_scored": not_scored,
    }


def rates(engine: Engine, sweep_id: str, by: str) -> list[dict[str, Any]]:
    return leaderboard.compute(engine, sweep_id, by)


def conditional_mitigation(engine: Engine, sweep_id: str) -> list[dict[str, Any]]:
    """Per agent × model: P(M|D) and P(M|not D) with Wilson intervals (finished trials)."""
    diag = cast(Trial.diagnosis_passed, Integer)
    mit = cast(Trial.mitigation_passed, Integer)
    stmt = (
        select(Trial.agent, Trial.model,
               func.coalesce(func.sum(diag), 0).label("d"),
               func.coalesce(func.sum(case((Trial.diagnosis_passed & Trial.mitigation_passed, 1), else_=0)), 0)
               .label("m_d"),
               func.count().label("n"),
               func.coalesce(func.sum(mit), 0).label("m"))
        .where(Trial.sweep_id == sweep_id, DONE, Trial.diagnosis_passed.is_not(None),
               Trial.mitigation_passed.is_not(None))
        .group_by(Trial.agent, Trial.model).order_by(Trial.agent, Trial.model)
    )
    out = []
    with engine.connect() as conn:
        for agent, model, d, m_d, n, m in conn.execute(stmt).all():
            d, m_d, n, m = int(d), int(m_d), int(n), int(m)
            not_d, m_not_d = n - d, m - m_d
            row: dict[str, Any] = {"agent": agent, "model": model, "n": n, "diagnosed": d, "not_diagnosed": not_d,
                                   "p_m_given_d": m_d / d if d else None,
                                   "p_m_given_not_d": m_not_d / not_d if not_d else None}
            row["p_m_given_d_lo"], row["p_m_given_d_hi"] = leaderboard.wilson(m_d, d)
            row["p_m_given_not_d_lo"], row["p_m_given_not_d_hi"] = leaderboard.wilson(m_not_d, not_d)
            out.append(row)
    return out


def times(engine: Engine, sweep_id: str) -> dict[tuple[str, str], dict[str, list[float]]]:
    """TTD and TTM (cluster seconds from the injection) of finished trials, per agent × model."""
    stmt = (select(Trial.agent, Trial.model, Trial.time_to_diagnosis_s, Trial.time_to_mitigation_s)
            .where(Trial.sweep_id == sweep_id, DONE))
    out: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: {"ttd": [], "ttm": []})
    with engine.connect() as conn:
        for agent, model, ttd, ttm in conn.execute(stmt):
            entry = out[(agent, model)]
            if ttd is not None:
                entry["ttd"].append(float(ttd))
            if ttm is not None:
                entry["ttm"].append(float(ttm))
    return dict(sorted(out.items()))


def spend(engine: Engine, sweep_id: str) -> dict[tuple[str, str], dict[str, float]]:
    """Per agent × model, what every attempt spent (lost and cut ones too: the money is gone)
    and what the judge spent on them."""
    stmt = (select(Trial.agent, Trial.model, func.coalesce(func.sum(Attempt.cost_usd), 0.0),
                   func.coalesce(func.sum(Attempt.judge_cost_usd), 0.0), func.count())
            .join(Trial, Trial.id == Attempt.trial_id).where(Trial.sweep_id == sweep_id)
            .group_by(Trial.agent, Trial.model))
    with engine.connect() as conn:
        return {(a, m): {"agent_cost_usd": float(c), "judge_cost_usd": float(j), "attempts": int(n)}
                for a, m, c, j, n in conn.execute(stmt)}


def token_usage(engine: Engine, sweep_id: str) -> list[dict[str, Any]]:
    """Per model, over every attempt that called it: prompt, completion and cached tokens, and how
    many attempts recorded a cached count at all (older rows have none)."""
    stmt = (select(Trial.model, func.count(),
                   func.coalesce(func.sum(Attempt.tokens_in), 0), func.coalesce(func.sum(Attempt.tokens_out), 0),
                   func.coalesce(func.sum(Attempt.tokens_cached), 0), func.count(Attempt.tokens_cached),
                   func.coalesce(func.sum(Attempt.cost_usd), 0.0))
            .join(Trial, Trial.id == Attempt.trial_id)
            .where(Trial.sweep_id == sweep_id, Trial.model != "-")
            .group_by(Trial.model).order_by(Trial.model))
    out = []
    with engine.connect() as conn:
        for model, n, tin, tout, cached, cached_recorded, cost in conn.execute(stmt):
            tin, cached = int(tin), int(cached)
            out.append({"model": model, "attempts": int(n), "prompt_tokens": tin, "completion_tokens": int(tout),
                        "cached_tokens": cached if cached_recorded else None,
                        "cache_hit_share": (cached / tin if tin else None) if cached_recorded else None,
                        "attempts_with_cached_count": int(cached_recorded), "cost_usd": float(cost)})
    return out


def tool_tokens(engine: Engine, sweep_id: str) -> dict[str, Any]:
    """Tool output tokens per tool and per tool mode, from each attempt's recorded per-tool
    counts (attempts recorded before those were stored count as `not_recorded`)."""
    stmt = (select(Attempt.tool_tokens_json, Attempt.tool_mode, Attempt.tool_calls, Attempt.tool_output_tokens,
                   Attempt.state, Trial.e2e_passed, Trial.state)
            .join(Trial, Trial.id == Attempt.trial_id).where(Trial.sweep_id == sweep_id))
    per_tool: dict[str, dict[str, int]] = defaultdict(lambda: {"calls": 0, "tokens": 0})
    per_mode: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"attempts": 0, "tool_calls": 0, "tokens": 0, "trials": 0, "e2e": 0})
    not_recorded = 0
    with engine.connect() as conn:
        for tt_json, mode, calls, tokens, a_state, e2e, t_state in conn.execute(stmt):
            if tt_json is None:
                not_recorded += 1
            else:
                for name, entry in json.loads(tt_json).items():
                    per_tool[name]["calls"] += int(entry.get("calls", 0))
                    per_tool[name]["tokens"] += int(entry.get("tokens", 0))
            m = per_mode[mode or "not recorded"]
            m["attempts"] += 1
            m["tool_calls"] += int(calls or 0)
            m["tokens"] += int(tokens or 0)
            if a_state == AttemptState.RECORDED and t_state == TrialState.FINISHED:
                m["trials"] += 1
                m["e2e"] += int(bool(e2e))
    for m in per_mode.values():
        m["tokens_per_call"] = m["tokens"] / m["tool_calls"] if m["tool_calls"] else None
        m["e2e_rate"] = m["e2e"] / m["trials"] if m["trials"] else None
        m["e2e_lo"], m["e2e_hi"] = leaderboard.wilson(m["e2e"], m["trials"])
    tools = sorted(({"tool": k, **v, "tokens_per_call": v["tokens"] / v["calls"] if v["calls"] else None}
                    for k, v in per_tool.items()), key=lambda r: -r["tokens"])
    return {"per_tool": tools, "per_mode": dict(sorted(per_mode.items())), "attempts_not_recorded": not_recorded}


def infrastructure(engine: Engine, sweep_id: str) -> dict[str, Any]:
    """Everything kept apart from the agents' scores: trial states, attempt states (lost,
    infrastructure errors by phase, cost-capped, superseded) and infrastructure events."""
    with engine.connect() as conn:
        trial_states = dict(conn.execute(select(Trial.state, func.count()).where(Trial.sweep_id == sweep_id)
                                         .group_by(Trial.state)).all())
        attempt_states = dict(conn.execute(
            select(Attempt.state, func.count()).join(Trial, Trial.id == Attempt.trial_id)
            .where(Trial.sweep_id == sweep_id).group_by(Attempt.state)).all())
        phases = {phase or "unknown": n for phase, n in conn.execute(
            select(Attempt.error_phase, func.count()).join(Trial, Trial.id == Attempt.trial_id)
            .where(Trial.sweep_id == sweep_id, Attempt.state == AttemptState.INFRA_ERROR)
            .group_by(Attempt.error_phase)).all()}
        events = dict(conn.execute(select(InfraEvent.kind, func.count()).where(InfraEvent.sweep_id == sweep_id)
                                   .group_by(InfraEvent.kind)).all())
    return {"trial_states": {str(k): int(v) for k, v in trial_states.items()},
            "attempt_states": {str(k): int(v) for k, v in attempt_states.items()},
            "infra_errors_by_phase": {str(k): int(v) for k, v in phases.items()},
            "infra_events": {str(k): int(v) for k, v in events.items()}}


TRIAL_COLUMNS = ("id", "key", "problem_id", "layer", "composition", "agent", "model", "seed", "noise", "state",
                 "diagnosis_passed", "mitigation_passed", "e2e_passed", "diagnosis_score", "tokens_in", "tokens_out",
                 "cost_usd", "time_to_diagnosis_s", "time_to_mitigation_s", "end_reason", "final_attempt")


def trial_rows(engine: Engine, sweep_id: str) -> list[dict[str, Any]]:
    """Every trial of the sweep with its attempts (token, state, artifacts), for the drill-down."""
    cols = [getattr(Trial, c) for c in TRIAL_COLUMNS]
    with engine.connect() as conn:
        trials = [dict(r) for r in conn.execute(select(*cols).where(Trial.sweep_id == sweep_id)
                                                .order_by(Trial.problem_id, Trial.agent, Trial.model, Trial.seed,
                                                          Trial.noise)).mappings()]
        attempts: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in conn.execute(
                select(Attempt.trial_id, Attempt.token, Attempt.state, Attempt.artifacts_uri, Attempt.worker,
                       Attempt.error_phase, Attempt.error)
                .join(Trial, Trial.id == Attempt.trial_id).where(Trial.sweep_id == sweep_id)
                .order_by(Attempt.trial_id, Attempt.token)).mappings():
            attempts[r["trial_id"]].append(dict(r))
    for t in trials:
        t["attempts"] = attempts.get(t["id"], [])
    return trials


def exists(engine: Engine, sweep_id: str) -> bool:
    with engine.connect() as conn:
        return conn.execute(select(Sweep.id).where(Sweep.id == sweep_id)).first() is not None
