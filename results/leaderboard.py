"""Leaderboards: aggregates computed by SQL over finished trial rows, grouped by agent × model,
layer, noise or problem; 95% Wilson intervals from those counts; CSV that pandas reads.

pass@1 over seeds is the mean success over a group's trials (each seed is one sample).
Never in n, counted apart: infrastructure failures (`infra_failed`), trials the sweep's cost cap
kept from running or cut short (`cost_capped`); clusters that could not be reset after a trial
(`reset_failures`, events: the trial's own result stands and is in n).
Diagnosis-only problems (no fix an agent could make from its scope) are in n and in the
diagnosis rate, but their mitigation is not scored: `mitigation_n` counts the trials whose
mitigation was, and the mitigation and E2E rates and P(M|D) are over those alone.
A diagnosis passes by the verdict its trial recorded, or, with `judge` given, by that judge's
verdict from `farm judge rescore` (results.models.DiagnosisVerdictRow; a trial it has not judged
counts as not diagnosed, and `unjudged` says how many); `diagnosis_judge` names which.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from sqlalchemy import Integer, case, cast, func, select
from sqlalchemy.engine import Engine
from sqlmodel import col

from core.states import EVENT_RESET_FAILED, TrialState
from results.models import DiagnosisVerdictRow, InfraEvent, Trial

# What `--by` may combine (comma-separated, any subset, in the order given): the name a user
# types -> the trial column it groups on.
GROUP_COLUMNS: dict[str, str] = {
    "agent": "agent", "model": "model", "layer": "layer", "noise": "noise", "problem": "problem_id",
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
    "n", "infra_failed", "cost_capped", "reset_failures", "diagnosis_rate", "diagnosis_lo", "diagnosis_hi",
    "mitigation_n", "mitigation_rate", "mitigation_lo", "mitigation_hi", "e2e_rate", "e2e_lo", "e2e_hi",
    "p_mitigation_given_diagnosis", "mean_tokens", "mean_tokens_in", "mean_tokens_out",
    "mean_cost_usd", "total_cost_usd", "mean_time_to_diagnosis_s", "mean_time_to_mitigation_s",
    "offline_judge", "diagnosis_pass_rule", "diagnosis_judge", "unjudged",
    "structured_n", "rca_top1_rate", "rca_top3_rate", "fault_type_n", "fault_type_rate",
]


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


def compute(engine: Engine, sweep_id: str | None = None, by: str = "agent,model",
            judge: str | None = None) -> list[dict[str, Any]]:
    """The leaderboard rows; with `judge`, diagnoses pass by that judge's rescored verdicts (under
    the current pass rule) instead of the recorded ones."""
    names = group_keys(by)
    keys = [getattr(Trial, k) for k in names]
    done = col(Trial.state) == TrialState.FINISHED

    def of_done(column: Any) -> Any:
        # Figures come from finished trials only, whatever an unfinished row may still carry.
        return case((done, column), else_=None)

    verdicts = None
    passed: Any = col(Trial.diagnosis_passed)
    offline: Any = col(Trial.judge_offline)
    rule: Any = col(Trial.diagnosis_pass_rule)
    if judge is not None:
        from farm.oracles.diagnosis import PASS_RULE

        verdicts = (select(col(DiagnosisVerdictRow.trial_id).label("trial_id"),
                           col(DiagnosisVerdictRow.passed).label("passed"),
                           col(DiagnosisVerdictRow.offline).label("offline"),
                           col(DiagnosisVerdictRow.pass_rule).label("pass_rule"))
                    .where(col(DiagnosisVerdictRow.judge) == judge, col(DiagnosisVerdictRow.pass_rule) == PASS_RULE.id)
                    .subquery())
        passed, offline, rule = verdicts.c.passed, verdicts.c.offline, verdicts.c.pass_rule
    both = case((done & passed & col(Trial.mitigation_passed), 1), else_=0)
    scored = done & col(Trial.mitigation_passed).is_not(None)  # a diagnosis-only trial's mitigation is NULL
    diag_scored = case((scored & passed, 1), else_=0)
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
        )
        .select_from(Trial)
        .outerjoin(resets, resets.c.trial_id == col(Trial.id))
        .where(col(Trial.state).in_([TrialState.FINISHED, TrialState.INFRA_FAILED, TrialState.SKIPPED_COST_CAP]))
        .group_by(*keys)
        .order_by(*keys)
    )
    if verdicts is not None:
        stmt = stmt.outerjoin(verdicts, verdicts.c.trial_id == col(Trial.id))
    if sweep_id:
        stmt = stmt.where(col(Trial.sweep_id) == sweep_id)
    rows: list[dict[str, Any]] = []
    with engine.connect() as conn:
        for r in conn.execute(stmt).mappings():
            n = int(r["n"] or 0)
            row: dict[str, Any] = {k: r[k] for k in names}
            row["n"], row["infra_failed"] = n, int(r["infra_failed"] or 0)
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
            row["diagnosis_judge"] = judge or "recorded"
            sn, fn = int(r["structured_n"] or 0), int(r["fault_type_n"] or 0)
            row["structured_n"], row["fault_type_n"] = sn, fn
            row["rca_top1_rate"] = int(r["top1"] or 0) / sn if sn else None
            row["rca_top3_rate"] = int(r["top3"] or 0) / sn if sn else None
            row["fault_type_rate"] = int(r["fault_type"] or 0) / fn if fn else None
            row["unjudged"] = unjudged if judge else 0
            rows.append(row)
    return rows


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
    return list(group_keys(by)) + COLUMNS


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
    """A rich Table for the terminal."""
    from rich.table import Table

    def pct(v: float | None) -> str:
        return "–" if v is None else f"{100 * v:.1f}%"

    def ci(lo: float | None, hi: float | None) -> str:
        return "" if lo is None or hi is None else f" [{100 * lo:.0f}–{100 * hi:.0f}]"

    offline = any(r.get("offline_judge") for r in rows)
    rules = sorted({str(r["diagnosis_pass_rule"]) for r in rows if r.get("diagnosis_pass_rule")})
    rejudged = sorted({str(r["diagnosis_judge"]) for r in rows if r.get("diagnosis_judge") not in (None, "recorded")})
    unjudged = sum(int(r.get("unjudged") or 0) for r in rows)
    said = [("diagnosis judged again by " + ", ".join(rejudged) + (f", {unjudged} trial(s) it has not judged count "
                                                                   "as not diagnosed" if unjudged else "")
             if rejudged else "diagnosis judged by the offline judge" if offline else "diagnosis verdicts as recorded"),
            ("pass rule " + "; ".join(rules) if rules else "")]
    table = Table(title="Leaderboard" + (f" ({', '.join(s for s in said if s)})" if any(said) else ""))
    names = group_keys(by)
    for k in names:
        table.add_column(k)
    structured = any(r.get("structured_n") or r.get("fault_type_n") for r in rows)
    for heading in ("n", "infra", "capped", "diagnosis", "mitigation", "E2E", "P(M|D)", "tokens", "cost $", "TTD s",
                    "TTM s", *(("RCA top-1/top-3", "fault type") if structured else ())):
        table.add_column(heading, justify="right")
    for r in rows:
        def num(v: float | None, fmt: str) -> str:
            return "–" if v is None else format(v, fmt)
        table.add_row(
            *[str(r[k]) for k in names],
            # infra: trials given up on infrastructure, then (+N) resets that failed after a result
            str(r["n"]), str(r["infra_failed"]) + (f" (+{r['reset_failures']} reset)" if r["reset_failures"] else ""),
            str(r["cost_capped"]),
            pct(r["diagnosis_rate"]) + ci(r["diagnosis_lo"], r["diagnosis_hi"]),
            pct(r["mitigation_rate"]) + ci(r["mitigation_lo"], r["mitigation_hi"])
            + (f" of {r['mitigation_n']}" if r["mitigation_n"] != r["n"] else ""),
            pct(r["e2e_rate"]) + ci(r["e2e_lo"], r["e2e_hi"]),
            pct(r["p_mitigation_given_diagnosis"]),
            num(r["mean_tokens"], ".0f"), num(r["mean_cost_usd"], ".4f"),
            num(r["mean_time_to_diagnosis_s"], ".0f"), num(r["mean_time_to_mitigation_s"], ".0f"),
            *((f"{pct(r['rca_top1_rate'])} / {pct(r['rca_top3_rate'])} of {r['structured_n']}",
               f"{pct(r['fault_type_rate'])} of {r['fault_type_n']}") if structured else ()),
        )
    return table
