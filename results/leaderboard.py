"""Leaderboards: aggregates computed by SQL over finished trial rows, grouped by agent × model,
layer, noise or problem; 95% Wilson intervals from those counts; CSV that pandas reads.

pass@1 over seeds is the mean success over a group's trials (each seed is one sample).
Never in n, counted apart: infrastructure failures (`infra_failed`), trials the sweep's cost cap
kept from running or cut short (`cost_capped`); clusters that could not be reset after a trial
(`reset_failures`, events: the trial's own result stands and is in n).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from sqlalchemy import Integer, case, cast, func, select
from sqlalchemy.engine import Engine

from farm.states import EVENT_RESET_FAILED, TrialState
from results.models import InfraEvent, Trial

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
    "mitigation_rate", "mitigation_lo", "mitigation_hi", "e2e_rate", "e2e_lo", "e2e_hi",
    "p_mitigation_given_diagnosis", "mean_tokens", "mean_tokens_in", "mean_tokens_out",
    "mean_cost_usd", "total_cost_usd", "mean_time_to_diagnosis_s", "mean_time_to_mitigation_s",
    "offline_judge",
]


def wilson(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float | None, float | None]:
    if n == 0:
        return None, None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _as_int(col: Any) -> Any:
    return func.coalesce(func.sum(cast(col, Integer)), 0)


def compute(engine: Engine, sweep_id: str | None = None, by: str = "agent,model") -> list[dict[str, Any]]:
    if by not in GROUPINGS:
        raise ValueError(f"--by must be one of {', '.join(GROUPINGS)}")
    keys = [getattr(Trial, k) for k in GROUPINGS[by]]
    done = Trial.state == TrialState.FINISHED

    def of_done(col: Any) -> Any:
        # Figures come from finished trials only, whatever an unfinished row may still carry.
        return case((done, col), else_=None)

    both = case((done & Trial.diagnosis_passed & Trial.mitigation_passed, 1), else_=0)
    resets = (
        select(InfraEvent.trial_id.label("trial_id"), func.count().label("resets"))
        .where(InfraEvent.kind == EVENT_RESET_FAILED, InfraEvent.trial_id.is_not(None))
        .group_by(InfraEvent.trial_id)
        .subquery()
    )
    stmt = (
        select(
            *keys,
            func.sum(case((done, 1), else_=0)).label("n"),
            func.sum(case((Trial.state == TrialState.INFRA_FAILED, 1), else_=0)).label("infra_failed"),
            func.sum(case((Trial.state == TrialState.SKIPPED_COST_CAP, 1), else_=0)).label("cost_capped"),
            func.coalesce(func.sum(resets.c.resets), 0).label("reset_failures"),
            _as_int(of_done(Trial.diagnosis_passed)).label("diag"),
            _as_int(of_done(Trial.mitigation_passed)).label("mit"),
            _as_int(of_done(Trial.e2e_passed)).label("e2e"),
            func.coalesce(func.sum(both), 0).label("both"),
            func.avg(of_done(Trial.tokens_in + Trial.tokens_out)).label("mean_tokens"),
            func.avg(of_done(Trial.tokens_in)).label("mean_tokens_in"),
            func.avg(of_done(Trial.tokens_out)).label("mean_tokens_out"),
            func.avg(of_done(Trial.cost_usd)).label("mean_cost_usd"),
            func.coalesce(func.sum(of_done(Trial.cost_usd)), 0).label("total_cost_usd"),
            func.avg(of_done(Trial.time_to_diagnosis_s)).label("ttd"),
            func.avg(of_done(Trial.time_to_mitigation_s)).label("ttm"),
            func.max(cast(of_done(Trial.judge_offline), Integer)).label("offline"),
        )
        .select_from(Trial)
        .outerjoin(resets, resets.c.trial_id == Trial.id)
        .where(Trial.state.in_([TrialState.FINISHED, TrialState.INFRA_FAILED, TrialState.SKIPPED_COST_CAP]))
        .group_by(*keys)
        .order_by(*keys)
    )
    if sweep_id:
        stmt = stmt.where(Trial.sweep_id == sweep_id)
    rows: list[dict[str, Any]] = []
    with engine.connect() as conn:
        for r in conn.execute(stmt).mappings():
            n = int(r["n"] or 0)
            row: dict[str, Any] = {k: r[k] for k in GROUPINGS[by]}
            row["n"], row["infra_failed"] = n, int(r["infra_failed"] or 0)
            row["cost_capped"], row["reset_failures"] = int(r["cost_capped"] or 0), int(r["reset_failures"] or 0)
            for name, count in (("diagnosis", r["diag"]), ("mitigation", r["mit"]), ("e2e", r["e2e"])):
                count = int(count or 0)
                row[f"{name}_rate"] = count / n if n else None
                row[f"{name}_lo"], row[f"{name}_hi"] = wilson(count, n)
            diag = int(r["diag"] or 0)
            row["p_mitigation_given_diagnosis"] = int(r["both"] or 0) / diag if diag else None
            for col, src in (("mean_tokens", "mean_tokens"), ("mean_tokens_in", "mean_tokens_in"),
                             ("mean_tokens_out", "mean_tokens_out"), ("mean_cost_usd", "mean_cost_usd"),
                             ("total_cost_usd", "total_cost_usd"), ("mean_time_to_diagnosis_s", "ttd"),
                             ("mean_time_to_mitigation_s", "ttm")):
                row[col] = None if r[src] is None else float(r[src])
            row["offline_judge"] = bool(r["offline"]) if r["offline"] is not None else None
            rows.append(row)
    return rows


def header(by: str) -> list[str]:
    return list(GROUPINGS[by]) + COLUMNS


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
    table = Table(title="Leaderboard" + (" (diagnosis judged by the offline judge)" if offline else ""))
    for k in GROUPINGS[by]:
        table.add_column(k)
    for col in ("n", "infra", "capped", "diagnosis", "mitigation", "E2E", "P(M|D)", "tokens", "cost $", "TTD s",
                "TTM s"):
        table.add_column(col, justify="right")
    for r in rows:
        def num(v: float | None, fmt: str) -> str:
            return "–" if v is None else format(v, fmt)
        table.add_row(
            *[str(r[k]) for k in GROUPINGS[by]],
            # infra: trials given up on infrastructure, then (+N) resets that failed after a result
            str(r["n"]), str(r["infra_failed"]) + (f" (+{r['reset_failures']} reset)" if r["reset_failures"] else ""),
            str(r["cost_capped"]),
            pct(r["diagnosis_rate"]) + ci(r["diagnosis_lo"], r["diagnosis_hi"]),
            pct(r["mitigation_rate"]) + ci(r["mitigation_lo"], r["mitigation_hi"]),
            pct(r["e2e_rate"]) + ci(r["e2e_lo"], r["e2e_hi"]),
            pct(r["p_mitigation_given_diagnosis"]),
            num(r["mean_tokens"], ".0f"), num(r["mean_cost_usd"], ".4f"),
            num(r["mean_time_to_diagnosis_s"], ".0f"), num(r["mean_time_to_mitigation_s"], ".0f"),
        )
    return table
