"""Leaderboards: aggregates computed by SQL over finished trial rows, grouped by agent × model,
layer, noise or problem; 95% Wilson intervals from those counts; CSV that pandas reads.

pass@1 over seeds is the mean success over a group's trials (each seed is one sample). Seeds of one
problem are not independent, so beside the per-trial Wilson intervals each group has pass@k and
pass^k over its problems' seeds and 95% intervals from a bootstrap over problems (results/stats.py);
the terminal table shows those clustered intervals once a problem has more than one trial.
Every row names its sweep; without a sweep the leaderboard groups by sweep, never pooling two.
A diagnosis passes by the verdict its trial recorded, or, with `judge` given, by that judge's
verdict from `farm judge rescore` (results.models.DiagnosisVerdictRow; a trial it has not judged
counts as not diagnosed, and `unjudged` says how many); `diagnosis_judge` names which.
A model without a known price (litellm's table or the sweep's `price:`) is marked `priced` false:
its cost is recorded as 0, not measured.
Never in n, counted apart: infrastructure failures (`infra_failed`; of those, `provider_failed`
were given up because the model provider failed the agent: a re-run retries them), trials the
sweep's cost cap kept from running or cut short (`cost_capped`); clusters that could not be reset
after a trial (`reset_failures`, events: the trial's own result stands and is in n).
In n, counted apart as well: `agent_errors`, sessions that ended in the agent's own error (it
crashed, or its conversation outgrew the model's context window).
No-fault controls (composition "none": nothing injected, the right diagnosis is that nothing is
wrong) are in n and every rate like any problem; `no_fault_n` counts them and `false_alarm_rate` is
the share of them whose submitted diagnosis blamed something (did not pass), with its Wilson
interval: an agent that cries wolf. A control with no diagnosis submitted fails, but is no alarm.
Diagnosis-only problems (no fix an agent could make from its scope) are in n and in the
diagnosis rate, but their mitigation is not scored: `mitigation_n` counts the trials whose
mitigation was, and the mitigation and E2E rates and P(M|D) are over those alone.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from sqlalchemy import Integer, case, cast, func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import aliased
from sqlmodel import col

from core.errors import ProviderError
from core.states import END_AGENT_ERROR, END_CONTEXT_LENGTH, EVENT_RESET_FAILED, TrialState
from results.models import Attempt, DiagnosisVerdictRow, InfraEvent, Sweep, Trial
from results.stats import cluster_bootstrap, common_k, mean_over_problems

# What `--by` may combine (comma-separated, any subset, in the order given): the name a user
# types -> the trial column it groups on.
GROUP_COLUMNS: dict[str, str] = {
    "sweep": "sweep_id", "agent": "agent", "model": "model", "layer": "layer", "noise": "noise", "problem": "problem_id",
    "app": "app", "composition": "composition", "seed": "seed",
}

# Common groupings, for help texts and callers that name one.
GROUPINGS: dict[str, tuple[str, ...]] = {
    "agent,model": ("agent", "model"),
    "layer": ("layer",),
    "noise": ("noise",),
    "problem": ("problem_id",),
    "app": ("app",),
    "agent,model,noise": ("agent", "model", "noise"),
    "agent,model,noise_level": ("agent", "model", "noise", "noise_level"),  # a sweep's {intensity: ...}
    "agent,model,layer": ("agent", "model", "layer"),
}

COLUMNS = [
    "n", "infra_failed", "provider_failed", "agent_errors", "cost_capped", "reset_failures", "diagnosis_rate", "diagnosis_lo", "diagnosis_hi",
    "mitigation_n", "mitigation_rate", "mitigation_lo", "mitigation_hi", "e2e_rate", "e2e_lo", "e2e_hi",
    "p_mitigation_given_diagnosis", "mean_tokens", "mean_tokens_in", "mean_tokens_out",
    "mean_cost_usd", "total_cost_usd", "mean_time_to_diagnosis_s", "mean_time_to_mitigation_s",
    "offline_judge", "diagnosis_pass_rule",
    "problems", "k", "diagnosis_pass_at_k", "diagnosis_pass_hat_k", "e2e_pass_at_k", "e2e_pass_hat_k",
    "diagnosis_cluster_lo", "diagnosis_cluster_hi", "mitigation_cluster_lo", "mitigation_cluster_hi",
    "e2e_cluster_lo", "e2e_cluster_hi", "priced",
    "diagnosis_judge", "unjudged", "structured_n", "rca_top1_rate", "rca_top3_rate", "fault_type_n", "fault_type_rate",
    "no_fault_n", "false_alarm_rate", "false_alarm_lo", "false_alarm_hi",
]
BOOTSTRAP_SEED = 0


def group_keys(by: str) -> tuple[str, ...]:
    """The trial columns of a `--by` value such as "agent,model,noise"; ValueError naming the
    offending part when it is not a combination of GROUP_COLUMNS."""
    parts = [p.strip() for p in by.split(",")]
    wrong = [p for p in parts if p not in GROUP_COLUMNS]
    if not by.strip() or wrong:
        what = f"'{', '.join(wrong)}' is not a grouping column" if wrong and by.strip() else "it is empty"
        raise ValueError(f"--by must be one of {', '.join(GROUP_COLUMNS)} or a comma-separated combination "
                         f"of them (e.g. agent,model,noise): {what}")
    if len(set(parts)) != len(parts):
        raise ValueError(f"--by names a column twice: {by}")
    return tuple(GROUP_COLUMNS[p] for p in parts)


def wilson(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float | None, float | None]:
    if n == 0:
        return None, None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _as_int(column: Any) -> Any:
    return func.coalesce(func.sum(cast(column, Integer)), 0)


# The attempt a trial's row points at (its latest): for an infra_failed trial, the one that gave it up.
_last = aliased(Attempt, name="last_attempt")
_LAST_ATTEMPT = (col(_last.trial_id) == col(Trial.id)) & (col(_last.token) == col(Trial.current_attempt))


def _given_up_by_provider() -> Any:
    """1 for a trial given up because the model provider failed (its last attempt's phase)."""
    return case(((col(Trial.state) == TrialState.INFRA_FAILED) & (col(_last.error_phase) == ProviderError.phase), 1),
                else_=0)


def _agent_error() -> Any:
    """1 for a finished trial whose session ended in the agent's own error."""
    return case(((col(Trial.state) == TrialState.FINISHED)
                 & col(Trial.end_reason).in_([END_AGENT_ERROR, END_CONTEXT_LENGTH]), 1), else_=0)


def failure_counts(engine: Engine, sweep_id: str) -> dict[str, int]:
    """Trials of the sweep that the model provider failed (infra_failed, outside n), that other
    infrastructure failed, and that ended in the agent's own error (finished, in n)."""
    stmt = (select(func.coalesce(func.sum(_given_up_by_provider()), 0),
                   func.coalesce(func.sum(case((col(Trial.state) == TrialState.INFRA_FAILED, 1), else_=0)), 0),
                   func.coalesce(func.sum(_agent_error()), 0),
                   func.coalesce(func.sum(case((col(Trial.end_reason) == END_CONTEXT_LENGTH, 1), else_=0)), 0))
            .select_from(Trial).outerjoin(_last, _LAST_ATTEMPT).where(col(Trial.sweep_id) == sweep_id))
    with engine.connect() as conn:
        provider, infra, agent, context = (int(v) for v in conn.execute(stmt).one())
    return {"provider_failed": provider, "infra_failed_other": infra - provider, "agent_errors": agent,
            "context_length": context}


def _grouping(sweep_id: str | None, by: str) -> tuple[str, ...]:
    """The trial columns a leaderboard groups on: `by`'s, with the sweep first when no sweep is
    named (two sweeps' trials are never pooled)."""
    names = group_keys(by)
    if sweep_id is None and "sweep_id" not in names:
        names = ("sweep_id", *names)
    return names


def compute(engine: Engine, sweep_id: str | None = None, by: str = "agent,model",
            k: int | None = None, where: dict[str, Any] | None = None, judge: str | None = None,
            pass_rule: str | None = None) -> list[dict[str, Any]]:
    """One row per group. `k` for pass@k and pass^k: default, per group, the number of trials every
    one of its problems has (its seeds). `where` keeps only the trials whose grouping columns (by
    their `--by` names, e.g. {"layer": "os"}) have those values. With `judge`, diagnoses pass by that
    judge's verdicts from `farm judge rescore` under `pass_rule` (the current rule's id, which the
    caller names: results does not know the judge) instead of the recorded ones."""
    names = _grouping(sweep_id, by)
    keys = [getattr(Trial, k) for k in names]
    done = col(Trial.state) == TrialState.FINISHED

    def of_done(column: Any) -> Any:
        # Figures come from finished trials only, whatever an unfinished row may still carry.
        return case((done, column), else_=None)

    verdicts = _rejudged(judge, pass_rule)
    passed: Any = col(Trial.diagnosis_passed)
    offline: Any = col(Trial.judge_offline)
    rule: Any = col(Trial.diagnosis_pass_rule)
    if verdicts is not None:
        passed, offline, rule = verdicts.c.passed, verdicts.c.offline, verdicts.c.pass_rule
    both = case((done & passed & col(Trial.mitigation_passed), 1), else_=0)
    scored = done & col(Trial.mitigation_passed).is_not(None)  # a diagnosis-only trial's mitigation is NULL
    diag_scored = case((scored & passed, 1), else_=0)
    no_fault = done & (col(Trial.composition) == "none")
    resets = (
        select(col(InfraEvent.trial_id).label("trial_id"), func.count().label("resets"))
        .where(col(InfraEvent.kind) == EVENT_RESET_FAILED, col(InfraEvent.trial_id).is_not(None))
        .group_by(col(InfraEvent.trial_id))
        .subquery()
    )
    stmt = (
        select(
            *keys,
            func.sum(case((done, 1), else_=0)).label("n"),
            func.sum(case((col(Trial.state) == TrialState.INFRA_FAILED, 1), else_=0)).label("infra_failed"),
            func.sum(_given_up_by_provider()).label("provider_failed"),
            func.sum(_agent_error()).label("agent_errors"),
            func.sum(case((col(Trial.state) == TrialState.SKIPPED_COST_CAP, 1), else_=0)).label("cost_capped"),
            func.coalesce(func.sum(resets.c.resets), 0).label("reset_failures"),
            _as_int(of_done(passed)).label("diag"),
            _as_int(of_done(col(Trial.mitigation_passed))).label("mit"),
            _as_int(of_done(col(Trial.e2e_passed))).label("e2e"),
            func.coalesce(func.sum(both), 0).label("both"),
            func.sum(case((scored, 1), else_=0)).label("mit_n"),
            func.coalesce(func.sum(diag_scored), 0).label("diag_scored"),
            func.avg(of_done(col(Trial.tokens_in) + col(Trial.tokens_out))).label("mean_tokens"),
            func.avg(of_done(col(Trial.tokens_in))).label("mean_tokens_in"),
            func.avg(of_done(col(Trial.tokens_out))).label("mean_tokens_out"),
            func.avg(of_done(col(Trial.cost_usd))).label("mean_cost_usd"),
            func.coalesce(func.sum(of_done(col(Trial.cost_usd))), 0).label("total_cost_usd"),
            func.avg(of_done(col(Trial.time_to_diagnosis_s))).label("ttd"),
            func.avg(of_done(col(Trial.time_to_mitigation_s))).label("ttm"),
            func.max(cast(of_done(offline), Integer)).label("offline"),
            func.min(of_done(rule)).label("rule_lo"),
            func.max(of_done(rule)).label("rule_hi"),
            func.sum(case((done & rule.is_(None), 1), else_=0)).label("rule_unknown"),
            # structured diagnoses, scored exactly: over the trials that gave root causes / a fault type
            func.sum(case((done & col(Trial.rca_top1).is_not(None), 1), else_=0)).label("structured_n"),
            _as_int(of_done(col(Trial.rca_top1))).label("top1"),
            _as_int(of_done(col(Trial.rca_top3))).label("top3"),
            func.sum(case((done & col(Trial.fault_type_correct).is_not(None), 1), else_=0)).label("fault_type_n"),
            _as_int(of_done(col(Trial.fault_type_correct))).label("fault_type"),
            func.sum(case((no_fault, 1), else_=0)).label("no_fault_n"),
            func.sum(case((no_fault & col(Trial.diagnosis_submitted) & ~func.coalesce(passed, False), 1),
                          else_=0)).label("false_alarms"),
        )
        .select_from(Trial)
        .outerjoin(resets, resets.c.trial_id == col(Trial.id))
        .outerjoin(_last, _LAST_ATTEMPT)
        .where(col(Trial.state).in_([TrialState.FINISHED, TrialState.INFRA_FAILED, TrialState.SKIPPED_COST_CAP]))
        .group_by(*keys)
        .order_by(*keys)
    )
    if verdicts is not None:
        stmt = stmt.outerjoin(verdicts, verdicts.c.trial_id == col(Trial.id))
    if sweep_id:
        stmt = stmt.where(col(Trial.sweep_id) == sweep_id)
    filters = [getattr(Trial, GROUP_COLUMNS[name]) == value for name, value in (where or {}).items()]
    stmt = stmt.where(*filters)
    per_problem = _per_problem(engine, sweep_id, names, filters, verdicts)
    priced = _priced_models(engine, sweep_id)
    rows: list[dict[str, Any]] = []
    with engine.connect() as conn:
        for r in conn.execute(stmt).mappings():
            n = int(r["n"] or 0)
            row: dict[str, Any] = {"sweep": sweep_id} if sweep_id else {}
            row.update({("sweep" if k == "sweep_id" else k): r[k] for k in names})
            row["n"], row["infra_failed"] = n, int(r["infra_failed"] or 0)
            row["provider_failed"], row["agent_errors"] = int(r["provider_failed"] or 0), int(r["agent_errors"] or 0)
            row["cost_capped"], row["reset_failures"] = int(r["cost_capped"] or 0), int(r["reset_failures"] or 0)
            mit_n = int(r["mit_n"] or 0)
            row["mitigation_n"] = mit_n
            for name, count, of in (("diagnosis", r["diag"], n), ("mitigation", r["mit"], mit_n), ("e2e", r["e2e"], mit_n)):
                count = int(count or 0)
                row[f"{name}_rate"] = count / of if of else None
                row[f"{name}_lo"], row[f"{name}_hi"] = wilson(count, of)
            diag = int(r["diag_scored"] or 0)
            row["p_mitigation_given_diagnosis"] = int(r["both"] or 0) / diag if diag else None
            for out, src in (("mean_tokens", "mean_tokens"), ("mean_tokens_in", "mean_tokens_in"),
                             ("mean_tokens_out", "mean_tokens_out"), ("mean_cost_usd", "mean_cost_usd"),
                             ("total_cost_usd", "total_cost_usd"), ("mean_time_to_diagnosis_s", "ttd"),
                             ("mean_time_to_mitigation_s", "ttm")):
                row[out] = None if r[src] is None else float(r[src])
            row["offline_judge"] = bool(r["offline"]) if r["offline"] is not None else None
            unjudged = int(r["rule_unknown"] or 0)
            row["diagnosis_pass_rule"] = _rules(r["rule_lo"], r["rule_hi"], 0 if judge else unjudged)
            row.update(_repeated(per_problem.get(tuple(r[k] for k in names), {}), k, priced))
            row["diagnosis_judge"] = judge or "recorded"
            row["unjudged"] = unjudged if judge else 0
            sn, fn = int(r["structured_n"] or 0), int(r["fault_type_n"] or 0)
            row["structured_n"], row["fault_type_n"] = sn, fn
            row["rca_top1_rate"] = int(r["top1"] or 0) / sn if sn else None
            row["rca_top3_rate"] = int(r["top3"] or 0) / sn if sn else None
            row["fault_type_rate"] = int(r["fault_type"] or 0) / fn if fn else None
            nf, alarms = int(r["no_fault_n"] or 0), int(r["false_alarms"] or 0)
            row["no_fault_n"] = nf
            row["false_alarm_rate"] = alarms / nf if nf else None
            row["false_alarm_lo"], row["false_alarm_hi"] = wilson(alarms, nf)
            rows.append(row)
    return rows


def _rejudged(judge: str | None, pass_rule: str | None) -> Any:
    """The verdicts `farm judge rescore` recorded for `judge` under `pass_rule`, one per trial, as a
    subquery (trial_id, passed, offline, pass_rule); None without a judge."""
    if judge is None:
        return None
    if pass_rule is None:
        raise ValueError("a leaderboard by a judge's rescored verdicts needs the pass rule they were judged by")
    return (select(col(DiagnosisVerdictRow.trial_id).label("trial_id"), col(DiagnosisVerdictRow.passed).label("passed"),
                   col(DiagnosisVerdictRow.offline).label("offline"),
                   col(DiagnosisVerdictRow.pass_rule).label("pass_rule"))
            .where(col(DiagnosisVerdictRow.judge) == judge, col(DiagnosisVerdictRow.pass_rule) == pass_rule)
            .subquery())


def _per_problem(engine: Engine, sweep_id: str | None, names: tuple[str, ...], filters: list[Any] | None = None,
                 verdicts: Any = None) -> dict[tuple[Any, ...], dict[tuple[Any, ...], list[int]]]:
    """Per group, per (sweep, agent, model, problem): [trials, diagnoses passed, mitigation-scored trials,
    E2E passed, mitigations passed], over finished trials: what pass@k and the clustered intervals are computed from."""
    done = col(Trial.state) == TrialState.FINISHED
    scored = col(Trial.mitigation_passed).is_not(None)
    passed = col(Trial.diagnosis_passed) if verdicts is None else verdicts.c.passed
    extra = [c for c in ("sweep_id", "agent", "model", "problem_id") if c not in names]
    stmt = (
        select(*[getattr(Trial, c) for c in names], *[getattr(Trial, c) for c in extra],
               func.count().label("n"), _as_int(passed).label("diag"),
               func.sum(case((scored, 1), else_=0)).label("mit_n"), _as_int(col(Trial.e2e_passed)).label("e2e"),
               _as_int(col(Trial.mitigation_passed)).label("mit"))
        .where(done, *(filters or [])).group_by(*[getattr(Trial, c) for c in (*names, *extra)])
    )
    if verdicts is not None:
        stmt = stmt.outerjoin(verdicts, verdicts.c.trial_id == col(Trial.id))
    if sweep_id:
        stmt = stmt.where(col(Trial.sweep_id) == sweep_id)
    out: dict[tuple[Any, ...], dict[tuple[Any, ...], list[int]]] = {}
    with engine.connect() as conn:
        for r in conn.execute(stmt).mappings():
            cell = (r["sweep_id"], r["agent"], r["model"], r["problem_id"])
            out.setdefault(tuple(r[c] for c in names), {})[cell] = [
                int(r["n"] or 0), int(r["diag"] or 0), int(r["mit_n"] or 0), int(r["e2e"] or 0), int(r["mit"] or 0)]
    return out


def _priced_models(engine: Engine, sweep_id: str | None) -> dict[tuple[str, str, str], bool]:
    """(sweep, agent label, model label) -> whether those trials had a price to charge: the model
    entry's `price`, the agent's `price` option, or litellm's table (farm.spec.is_priced's rule,
    read here from the spec as recorded, whose entries carry their labels)."""
    import json

    from core.pricing import has_price

    stmt = select(col(Sweep.id), col(Sweep.spec_json))
    if sweep_id:
        stmt = stmt.where(col(Sweep.id) == sweep_id)
    out: dict[tuple[str, str, str], bool] = {}
    with engine.connect() as conn:
        for sid, spec_json in conn.execute(stmt):
            try:
                spec = json.loads(spec_json)
            except ValueError:
                continue  # unreadable: its rows stay unmarked
            entries = [{"name": e} if isinstance(e, str) else e for e in (spec.get("agents") or [])]
            for m in spec.get("models") or []:
                model = {"name": m} if isinstance(m, str) else m
                for a in entries:
                    priced = (model.get("price") is not None or "price" in (a.get("options") or {})
                              or has_price(str(model.get("name"))))
                    agent = str(a.get("label") or a.get("name"))
                    out[(sid, agent, str(model.get("label") or model.get("name")))] = priced
    return out


def _repeated(cells: dict[tuple[Any, ...], list[int]], k: int | None,
              priced: dict[tuple[str, str, str], bool]) -> dict[str, Any]:
    """pass@k, pass^k and problem-clustered intervals of one group (a problem under two agents,
    models or sweeps of the group is two clusters: its trials there are different experiments)."""
    diag = [(n, d) for n, d, _, _, _ in cells.values()]
    e2e = [(m, e) for _, _, m, e, _ in cells.values() if m]
    mit = [(m, p) for _, _, m, _, p in cells.values() if m]
    kk = k if k is not None else common_k(diag)
    out: dict[str, Any] = {"problems": len({cell[3] for cell in cells}), "k": kk or None}
    for name, counts in (("diagnosis", diag), ("e2e", e2e)):
        out[f"{name}_pass_at_k"] = mean_over_problems(counts, kk, "at") if kk else None
        out[f"{name}_pass_hat_k"] = mean_over_problems(counts, kk, "hat") if kk else None
        lo, hi = cluster_bootstrap([(c, n) for n, c in counts], seed=BOOTSTRAP_SEED)
        out[f"{name}_cluster_lo"], out[f"{name}_cluster_hi"] = lo, hi
    out["mitigation_cluster_lo"], out["mitigation_cluster_hi"] = cluster_bootstrap([(c, n) for n, c in mit],
                                                                                   seed=BOOTSTRAP_SEED)
    marks = [priced.get(cell[:3], False) for cell in cells if cell[2] != "-"]
    out["priced"] = all(marks) if marks else None
    return out


def _rules(lo: str | None, hi: str | None, unknown: int) -> str | None:
    """The pass rule a group's diagnoses were judged by; 'mixed: ...' when they differ, since such a
    group's diagnosis rate mixes two definitions of a pass."""
    rules = sorted({r for r in (lo, hi) if r})
    if unknown and rules:
        rules.append("pre-v2")
    if not rules:
        return None
    return rules[0] if len(rules) == 1 else "mixed: " + ", ".join(rules)


def header(by: str) -> list[str]:
    return ["sweep"] + [k for k in group_keys(by) if k != "sweep_id"] + COLUMNS


def write_csv(rows: list[dict[str, Any]], by: str, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=header(by))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    tmp.replace(path)
    return path


def render(rows: list[dict[str, Any]], by: str) -> Any:
    """A rich Table for the terminal. Intervals are the problem-clustered ones where a problem has
    repeated trials (seeds), Wilson's otherwise; a cost marked * is of a model without a price."""
    from rich.table import Table

    def pct(v: float | None) -> str:
        return "–" if v is None else f"{100 * v:.1f}%"

    def ci(r: dict[str, Any], name: str) -> str:
        clustered = (r.get("k") or 0) > 1
        lo, hi = (r.get(f"{name}_cluster_lo"), r.get(f"{name}_cluster_hi")) if clustered else \
            (r.get(f"{name}_lo"), r.get(f"{name}_hi"))
        return "" if lo is None or hi is None else f" [{100 * lo:.0f}–{100 * hi:.0f}]"

    offline = any(r.get("offline_judge") for r in rows)
    rules = sorted({str(r["diagnosis_pass_rule"]) for r in rows if r.get("diagnosis_pass_rule")})
    sweeps = sorted({str(r.get("sweep")) for r in rows if r.get("sweep")})
    rejudged = sorted({str(r["diagnosis_judge"]) for r in rows if r.get("diagnosis_judge") not in (None, "recorded")})
    unjudged = sum(int(r.get("unjudged") or 0) for r in rows)
    said = [("sweep " + ", ".join(sweeps) if len(sweeps) == 1 else ""),
            ("diagnosis judged again by " + ", ".join(rejudged) + (f", {unjudged} trial(s) it has not judged count "
                                                                   "as not diagnosed" if unjudged else "")
             if rejudged else "diagnosis judged by the offline judge" if offline else "diagnosis verdicts as recorded"),
            ("pass rule " + "; ".join(rules) if rules else "")]
    clustered = any((r.get("k") or 0) > 1 for r in rows)
    unpriced = any(r.get("priced") is False for r in rows)
    notes = [("intervals: 95% bootstrap over problems" if clustered else "intervals: 95% Wilson"),
             ("* unpriced model: cost recorded as 0, not measured" if unpriced else "")]
    table = Table(title="Leaderboard" + (f" ({', '.join(s for s in said if s)})" if any(said) else ""),
                  caption="; ".join(n for n in notes if n))
    names = [k for k in group_keys(by) if k != "sweep_id"]
    if len(sweeps) != 1:
        names = ["sweep", *names]
    for k in names:
        table.add_column(k)
    structured = any(r.get("structured_n") or r.get("fault_type_n") for r in rows)
    controls = any(r.get("no_fault_n") for r in rows)
    for heading in ("n", "infra", "agent err", "capped", "diagnosis", "mitigation", "E2E", "E2E pass@k", "P(M|D)",
                    "tokens", "cost $", "TTD s", "TTM s", *(("RCA top-1/top-3", "fault type") if structured else ()),
                    *(("false alarms",) if controls else ())):
        table.add_column(heading, justify="right")
    for r in rows:
        def num(v: float | None, fmt: str) -> str:
            return "–" if v is None else format(v, fmt)
        k_seeds = r.get("k")
        table.add_row(
            *[str(r[name]) for name in names],
            # infra: trials given up on infrastructure (N of them by the model provider), then (+N)
            # resets that failed after a result; agent err: in n, the agent's own errors
            str(r["n"]), str(r["infra_failed"]) + (f" ({r['provider_failed']} provider)" if r["provider_failed"] else "")
            + (f" (+{r['reset_failures']} reset)" if r["reset_failures"] else ""),
            str(r["agent_errors"]),
            str(r["cost_capped"]),
            pct(r["diagnosis_rate"]) + ci(r, "diagnosis"),
            pct(r["mitigation_rate"]) + ci(r, "mitigation")
            + (f" of {r['mitigation_n']}" if r["mitigation_n"] != r["n"] else ""),
            pct(r["e2e_rate"]) + ci(r, "e2e"),
            "–" if not k_seeds or k_seeds < 2 or r.get("e2e_pass_at_k") is None
            else f"{pct(r['e2e_pass_at_k'])} (k={k_seeds})",
            pct(r["p_mitigation_given_diagnosis"]),
            num(r["mean_tokens"], ".0f"),
            num(r["mean_cost_usd"], ".4f") + ("*" if r.get("priced") is False else ""),
            num(r["mean_time_to_diagnosis_s"], ".0f"), num(r["mean_time_to_mitigation_s"], ".0f"),
            *((f"{pct(r['rca_top1_rate'])} / {pct(r['rca_top3_rate'])} of {r['structured_n']}",
               f"{pct(r['fault_type_rate'])} of {r['fault_type_n']}") if structured else ()),
            # Wilson's interval: a control's seeds are few, and no bootstrap over problems is kept for it.
            *((f"{pct(r['false_alarm_rate'])}" + ("" if r["false_alarm_lo"] is None else
               f" [{100 * r['false_alarm_lo']:.0f}–{100 * r['false_alarm_hi']:.0f}]") + f" of {r['no_fault_n']}",)
              if controls else ()),
        )
    return table
