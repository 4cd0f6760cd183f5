"""The report's numbers: SQL aggregates over a sweep's recorded trial and attempt rows (the
leaderboard's for rates; the rest here). Each function returns plain dicts and lists, so plots and
the page only draw and print what was computed from rows."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from sqlalchemy import Integer, case, cast, func, select
from sqlalchemy.engine import Engine
from sqlmodel import col

from core.states import AttemptState, TrialState
from results import leaderboard
from results.models import Attempt, DiagnosisVerdictRow, InfraEvent, Sweep, Trial

DONE = col(Trial.state) == TrialState.FINISHED


def _optional(model: Any, name: str) -> Any:
    """A column another change may add (a recorded pass rule, a mitigation-scored flag): read when
    the model has it, else None so the page says "not recorded"."""
    return getattr(model, name, None)


def sweep_info(engine: Engine, sweep_id: str) -> dict[str, Any]:
    """The sweep's spec and who scored it: the judge(s) and pass rule(s) its recorded attempts name."""
    with engine.connect() as conn:
        sweep = conn.execute(select(Sweep).where(col(Sweep.id) == sweep_id)).mappings().one_or_none()
        if sweep is None:
            raise KeyError(sweep_id)
        recorded = (col(Attempt.state) == AttemptState.RECORDED) & (col(Trial.sweep_id) == sweep_id)
        judges = conn.execute(
            select(col(Attempt.judge), col(Attempt.judge_offline), col(Attempt.diagnosis_threshold), func.count())
            .join(Trial, col(Trial.id) == col(Attempt.trial_id)).where(recorded)
            .group_by(col(Attempt.judge), col(Attempt.judge_offline), col(Attempt.diagnosis_threshold))
        ).all()
        rule_col = _optional(Attempt, "diagnosis_pass_rule")
        rules: list[tuple[Any, int]] | None = None
        if rule_col is not None:
            rules = [(r, int(n)) for r, n in conn.execute(
                select(rule_col, func.count()).join(Trial, col(Trial.id) == col(Attempt.trial_id)).where(recorded)
                .group_by(rule_col)).all()]
        rejudged = conn.execute(  # `farm judge rescore`'s verdicts, beside the recorded ones
            select(col(DiagnosisVerdictRow.judge), col(DiagnosisVerdictRow.pass_rule), func.count(),
                   func.sum(cast(col(DiagnosisVerdictRow.passed), Integer)))
            .where(col(DiagnosisVerdictRow.sweep_id) == sweep_id)
            .group_by(col(DiagnosisVerdictRow.judge), col(DiagnosisVerdictRow.pass_rule))).all()
        scored_col = _optional(Trial, "mitigation_scored")
        not_scored = None if scored_col is None else int(conn.execute(
            select(func.count()).where(col(Trial.sweep_id) == sweep_id, scored_col.is_(False))).scalar_one())
    spec = json.loads(sweep["spec_json"])
    return {
        "sweep_id": sweep_id, "spec": spec, "created_at": sweep["created_at"], "updated_at": sweep["updated_at"],
        "spec_judge": sweep["judge"], "cost_cap_usd": sweep["cost_cap_usd"],
        "judges": [{"judge": j, "offline": o, "threshold": t, "attempts": int(n)} for j, o, t, n in judges],
        "pass_rules": rules, "mitigation_not_scored": not_scored,
        "rejudged": [{"judge": j, "pass_rule": r, "trials": int(n), "passed": int(p or 0)} for j, r, n, p in rejudged],
    }


def rates(engine: Engine, sweep_id: str, by: str) -> list[dict[str, Any]]:
    return leaderboard.compute(engine, sweep_id, by)


def conditional_mitigation(engine: Engine, sweep_id: str) -> list[dict[str, Any]]:
    """Per agent × model: P(M|D) and P(M|not D) with Wilson intervals (finished trials)."""
    diag = cast(col(Trial.diagnosis_passed), Integer)
    mit = cast(col(Trial.mitigation_passed), Integer)
    stmt = (
        select(col(Trial.agent), col(Trial.model),
               func.coalesce(func.sum(diag), 0).label("d"),
               func.coalesce(func.sum(case((col(Trial.diagnosis_passed) & col(Trial.mitigation_passed), 1), else_=0)), 0)
               .label("m_d"),
               func.count().label("n"),
               func.coalesce(func.sum(mit), 0).label("m"))
        .where(col(Trial.sweep_id) == sweep_id, DONE, col(Trial.diagnosis_passed).is_not(None),
               col(Trial.mitigation_passed).is_not(None))
        .group_by(col(Trial.agent), col(Trial.model)).order_by(col(Trial.agent), col(Trial.model))
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
    stmt = (select(col(Trial.agent), col(Trial.model), col(Trial.time_to_diagnosis_s), col(Trial.time_to_mitigation_s))
            .where(col(Trial.sweep_id) == sweep_id, DONE))
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
    stmt = (select(col(Trial.agent), col(Trial.model), func.coalesce(func.sum(col(Attempt.cost_usd)), 0.0),
                   func.coalesce(func.sum(col(Attempt.judge_cost_usd)), 0.0), func.count())
            .join(Trial, col(Trial.id) == col(Attempt.trial_id)).where(col(Trial.sweep_id) == sweep_id)
            .group_by(col(Trial.agent), col(Trial.model)))
    with engine.connect() as conn:
        return {(a, m): {"agent_cost_usd": float(c or 0.0), "judge_cost_usd": float(j or 0.0), "attempts": int(n)}
                for a, m, c, j, n in conn.execute(stmt)}


def token_usage(engine: Engine, sweep_id: str, per_agent: bool = False) -> list[dict[str, Any]]:
    """Per model (per agent × model with `per_agent`), over every attempt that called it: prompt,
    completion and cached tokens, and how many attempts recorded a cached count at all (older
    rows have none)."""
    keys = [col(Trial.agent), col(Trial.model)] if per_agent else [col(Trial.model)]
    stmt = (select(*keys, func.count(),
                   func.coalesce(func.sum(col(Attempt.tokens_in)), 0), func.coalesce(func.sum(col(Attempt.tokens_out)), 0),
                   func.coalesce(func.sum(col(Attempt.tokens_cached)), 0), func.count(col(Attempt.tokens_cached)),
                   func.coalesce(func.sum(col(Attempt.cost_usd)), 0.0))
            .join(Trial, col(Trial.id) == col(Attempt.trial_id))
            .where(col(Trial.sweep_id) == sweep_id, col(Trial.model) != "-")
            .group_by(*keys).order_by(*keys))
    out = []
    with engine.connect() as conn:
        for row in conn.execute(stmt):
            group, (n, tin, tout, cached, cached_recorded, cost) = row[:len(keys)], row[len(keys):]
            tin, cached = int(tin or 0), int(cached or 0)  # (coalesced: never NULL)
            out.append({**dict(zip(("agent", "model") if per_agent else ("model",), group, strict=True)),
                        "attempts": int(n), "prompt_tokens": tin, "completion_tokens": int(tout or 0),
                        "cached_tokens": cached if cached_recorded else None,
                        "cache_hit_share": (cached / tin if tin else None) if cached_recorded else None,
                        "attempts_with_cached_count": int(cached_recorded), "cost_usd": float(cost or 0.0)})
    return out


def tool_tokens(engine: Engine, sweep_id: str) -> dict[str, Any]:
    """Tool output tokens per tool and per tool mode, from each attempt's recorded per-tool
    counts (attempts recorded before those were stored count as `not_recorded`)."""
    stmt = (select(col(Attempt.tool_tokens), col(Attempt.tool_mode), col(Attempt.tool_calls), col(Attempt.tool_output_tokens),
                   col(Attempt.state), col(Trial.e2e_passed), col(Trial.state), col(Trial.agent), col(Trial.model))
            .join(Trial, col(Trial.id) == col(Attempt.trial_id)).where(col(Trial.sweep_id) == sweep_id))
    per_tool: dict[str, dict[str, int]] = defaultdict(lambda: {"calls": 0, "tokens": 0})
    per_mode: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"attempts": 0, "tool_calls": 0, "tokens": 0, "trials": 0, "e2e": 0})
    per_am: dict[tuple[str, str], dict[str, Any]] = defaultdict(lambda: {"attempts": 0, "tool_calls": 0, "tokens": 0})
    not_recorded = 0
    with engine.connect() as conn:
        for recorded, mode, calls, tokens, a_state, e2e, t_state, agent, model in conn.execute(stmt):
            am = per_am[(agent, model)]
            am["attempts"] += 1
            am["tool_calls"] += int(calls or 0)
            am["tokens"] += int(tokens or 0)
            if recorded is None:
                not_recorded += 1
            else:
                for name, entry in recorded.items():
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
    tools = [{"tool": k, **v, "tokens_per_call": v["tokens"] / v["calls"] if v["calls"] else None}
             for k, v in sorted(per_tool.items(), key=lambda kv: -kv[1]["tokens"])]
    by_am = [{"agent": a, "model": m, **v, "tokens_per_call": v["tokens"] / v["tool_calls"] if v["tool_calls"] else None,
              "tokens_per_attempt": v["tokens"] / v["attempts"]} for (a, m), v in sorted(per_am.items())]
    return {"per_tool": tools, "per_mode": dict(sorted(per_mode.items())), "per_agent_model": by_am,
            "attempts_not_recorded": not_recorded}


def infrastructure(engine: Engine, sweep_id: str) -> dict[str, Any]:
    """Everything kept apart from the agents' scores: trial states, attempt states (lost,
    infrastructure errors by phase, cost-capped, superseded) and infrastructure events."""
    with engine.connect() as conn:
        trial_states = dict(conn.execute(select(col(Trial.state), func.count()).where(col(Trial.sweep_id) == sweep_id)
                                         .group_by(col(Trial.state))).all())
        attempt_states = dict(conn.execute(
            select(col(Attempt.state), func.count()).join(Trial, col(Trial.id) == col(Attempt.trial_id))
            .where(col(Trial.sweep_id) == sweep_id).group_by(col(Attempt.state))).all())
        phases = {phase or "unknown": n for phase, n in conn.execute(
            select(col(Attempt.error_phase), func.count()).join(Trial, col(Trial.id) == col(Attempt.trial_id))
            .where(col(Trial.sweep_id) == sweep_id, col(Attempt.state) == AttemptState.INFRA_ERROR)
            .group_by(col(Attempt.error_phase))).all()}
        events = dict(conn.execute(select(col(InfraEvent.kind), func.count()).where(col(InfraEvent.sweep_id) == sweep_id)
                                   .group_by(col(InfraEvent.kind))).all())
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
        trials = [dict(r) for r in conn.execute(select(*cols).where(col(Trial.sweep_id) == sweep_id)
                                                .order_by(col(Trial.problem_id), col(Trial.agent), col(Trial.model), col(Trial.seed),
                                                          col(Trial.noise))).mappings()]
        attempts: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in conn.execute(
                select(col(Attempt.trial_id), col(Attempt.token), col(Attempt.state), col(Attempt.artifacts_uri), col(Attempt.worker),
                       col(Attempt.error_phase), col(Attempt.error))
                .join(Trial, col(Trial.id) == col(Attempt.trial_id)).where(col(Trial.sweep_id) == sweep_id)
                .order_by(col(Attempt.trial_id), col(Attempt.token))).mappings():
            attempts[r["trial_id"]].append(dict(r))
    for t in trials:
        t["attempts"] = attempts.get(t["id"], [])
    return trials


def exists(engine: Engine, sweep_id: str) -> bool:
    with engine.connect() as conn:
        return conn.execute(select(col(Sweep.id)).where(col(Sweep.id) == sweep_id)).first() is not None
