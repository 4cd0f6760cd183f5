"""Paired comparison of two sweeps on the trials they share: the same problem, agent, model, seed
and noise, finished in both. Per group (`--by`), for diagnosis, mitigation and E2E: both rates,
their difference (B − A) with a seeded 95% bootstrap interval that resamples problems (a problem's
seeds are not independent pairs: results/stats.py), McNemar's exact test on the discordant pairs,
and pass@k / pass^k of each side over the paired seeds (k: the most every paired problem has)."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from sqlalchemy import Integer, and_, case, cast, func, select
from sqlalchemy.engine import Engine
from sqlmodel import col

from core.states import TrialState
from results.leaderboard import group_keys
from results.models import Trial
from results.stats import cluster_bootstrap, common_k, mean_over_problems

PAIR_ON = ("problem_id", "agent", "model", "seed", "noise")
OUTCOMES = ("diagnosis", "mitigation", "e2e")
COLUMNS = ["metric", "pairs", "rate_a", "rate_b", "diff", "diff_lo", "diff_hi", "a_only", "b_only",
           "mcnemar_p", "k", "pass_at_k_a", "pass_at_k_b", "pass_hat_k_a", "pass_hat_k_b"]
BOOTSTRAP_SAMPLES = 10_000


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value: the discordant pairs against Binomial(b + c, 1/2)."""
    n = a_only + b_only
    if n == 0:
        return 1.0
    k = min(a_only, b_only)
    tail = sum(math.comb(n, i) for i in range(k + 1))
    return min(1.0, 2 * tail / (1 << n))  # exact integers: no underflow for large n


def _outcomes(engine: Engine, sweep_id: str, keys: tuple[str, ...]) -> dict[tuple[Any, ...], dict[str, Any]]:
    cols = [getattr(Trial, c) for c in dict.fromkeys(PAIR_ON + keys)]
    stmt = select(*cols, col(Trial.diagnosis_passed), col(Trial.mitigation_passed), col(Trial.e2e_passed)).where(
        col(Trial.sweep_id) == sweep_id, col(Trial.state) == TrialState.FINISHED)
    out = {}
    with engine.connect() as conn:
        for r in conn.execute(stmt).mappings():
            out[tuple(r[c] for c in PAIR_ON)] = dict(r)
    return out


Pairs = dict[tuple[Any, ...], list[tuple[dict[str, Any], dict[str, Any]]]]


def compare(engine: Engine, sweep_a: str, sweep_b: str, by: str = "agent,model",
            seed: int = 0) -> list[dict[str, Any]]:
    """The paired comparison, counted in SQL: one scan of both sweeps' finished trials grouped on
    PAIR_ON (each pair one row with A's and B's verdicts side by side; no self-join, which a
    planner without statistics runs as a nested loop), then summed per group and problem (a
    problem is the bootstrap's cluster), so one row per group and problem reaches Python whatever
    the sweeps' size. Same rows as _paired_stats on the pairs."""
    keys = group_keys(by)
    in_a, in_b = col(Trial.sweep_id) == sweep_a, col(Trial.sweep_id) == sweep_b
    pair_cols = [col(getattr(Trial, c)) for c in dict.fromkeys(PAIR_ON + keys)]
    sides = []
    for metric in OUTCOMES:
        passed = cast(col(getattr(Trial, f"{metric}_passed")), Integer)
        sides += [func.max(case((in_a, passed))).label(f"a_{metric}"), func.max(case((in_b, passed))).label(f"b_{metric}")]
    pairs = (select(*pair_cols, func.max(case((in_a, 1), else_=0)).label("in_a"),
                    func.max(case((in_b, 1), else_=0)).label("in_b"), *sides)
             .where(col(Trial.sweep_id).in_([sweep_a, sweep_b]), col(Trial.state) == TrialState.FINISHED)
             .group_by(*pair_cols).subquery())
    sums = []
    for metric in OUTCOMES:
        pa, pb = pairs.c[f"a_{metric}"], pairs.c[f"b_{metric}"]
        scored = and_(pa.is_not(None), pb.is_not(None))
        sums += [func.sum(case((scored, 1), else_=0)), func.sum(case((scored, pa), else_=0)),
                 func.sum(case((scored, pb), else_=0)),
                 func.sum(case((and_(scored, pa == 1, pb == 0), 1), else_=0)),
                 func.sum(case((and_(scored, pa == 0, pb == 1), 1), else_=0))]
    group_cols = [pairs.c[k] for k in keys]
    problem = pairs.c["problem_id"]
    stmt = (select(*group_cols, problem, *sums).where(pairs.c.in_a == 1, pairs.c.in_b == 1)
            .group_by(*group_cols, problem))
    per_group: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    with engine.connect() as conn:
        for r in conn.execute(stmt):
            per_group.setdefault(tuple(r[:len(keys)]), []).append(tuple(r[len(keys):]))
    rows = []
    for group, problems in sorted(per_group.items(), key=lambda kv: str(kv[0])):
        # The bootstrap draws clusters by position: in _paired_stats' order (pairs sorted as
        # str(PAIR_ON tuple), whose problem part sorts as this prefix), so both give one interval.
        problems.sort(key=lambda p: f"({p[0]!r}, ")
        for i, metric in enumerate(OUTCOMES):
            cells = [tuple(int(v or 0) for v in p[1 + 5 * i:6 + 5 * i]) for p in problems]
            n = sum(c[0] for c in cells)
            a_pass, b_pass = sum(c[1] for c in cells), sum(c[2] for c in cells)
            a_only, b_only = sum(c[3] for c in cells), sum(c[4] for c in cells)
            lo, hi = cluster_bootstrap([(c[2] - c[1], c[0]) for c in cells], seed, BOOTSTRAP_SAMPLES)
            rows.append({**dict(zip(keys, group, strict=True)), "metric": metric, "pairs": n,
                         "rate_a": a_pass / n if n else None, "rate_b": b_pass / n if n else None,
                         "diff": None if n == 0 else (b_only - a_only) / n, "diff_lo": lo, "diff_hi": hi,
                         "a_only": a_only, "b_only": b_only, "mcnemar_p": mcnemar_exact(a_only, b_only),
                         **_repeated([(c[0], c[1], c[2]) for c in cells])})
    return rows


def _repeated(per_problem: list[tuple[int, int, int]]) -> dict[str, Any]:
    """pass@k and pass^k of each side from each problem's (paired trials, A's passes, B's passes):
    the same seeds on both sides, k the most every problem has (none below 2)."""
    k = common_k([(n, a) for n, a, _ in per_problem])
    out: dict[str, Any] = {"k": k if k > 1 else None}
    for side, i in (("a", 1), ("b", 2)):
        counts = [(cell[0], cell[i]) for cell in per_problem]
        out[f"pass_at_k_{side}"] = mean_over_problems(counts, k, "at") if k > 1 else None
        out[f"pass_hat_k_{side}"] = mean_over_problems(counts, k, "hat") if k > 1 else None
    return out


def noise_effect(engine: Engine, sweep_id: str, by: str = "agent,model", seed: int = 0) -> list[dict[str, Any]]:
    """Within one sweep, each trial without noise (A) against the same problem, agent, model and seed
    with noise (B): is noise lowering the rates?"""
    keys = tuple(k for k in group_keys(by) if k != "noise")
    rows = _outcomes(engine, sweep_id, keys)
    quiet = {k[:-1]: r for k, r in rows.items() if not r["noise"]}  # PAIR_ON ends with noise
    noisy = {k[:-1]: r for k, r in rows.items() if r["noise"]}
    groups: Pairs = {}
    for pair_key in sorted(set(quiet) & set(noisy), key=str):
        groups.setdefault(tuple(quiet[pair_key][k] for k in keys), []).append((quiet[pair_key], noisy[pair_key]))
    return _paired_stats(groups, keys, seed)


def _paired_stats(groups: Pairs, keys: tuple[str, ...], seed: int) -> list[dict[str, Any]]:
    rows = []
    for group, pairs in sorted(groups.items(), key=lambda kv: str(kv[0])):
        for metric in OUTCOMES:
            passed = f"{metric}_passed"
            scored = [(bool(x[passed]), bool(y[passed])) for x, y in pairs if x[passed] is not None and y[passed] is not None]
            n = len(scored)
            a_only = sum(1 for x, y in scored if x and not y)
            b_only = sum(1 for x, y in scored if y and not x)
            rate_a = sum(x for x, _ in scored) / n if n else None
            rate_b = sum(y for _, y in scored) / n if n else None
            # Per problem (the bootstrap's cluster): paired trials, A's passes, B's passes.
            per_problem: dict[Any, list[int]] = {}
            for (x, y) in ((x, y) for x, y in pairs if x[passed] is not None and y[passed] is not None):
                cell = per_problem.setdefault(x["problem_id"], [0, 0, 0])
                cell[0] += 1
                cell[1] += int(bool(x[passed]))
                cell[2] += int(bool(y[passed]))
            lo, hi = cluster_bootstrap([(cb - ca, n_) for n_, ca, cb in per_problem.values()], seed, BOOTSTRAP_SAMPLES)
            repeated = _repeated([(n_, ca, cb) for n_, ca, cb in per_problem.values()])
            rows.append({**dict(zip(keys, group, strict=True)), "metric": metric, "pairs": n,
                         "rate_a": rate_a, "rate_b": rate_b,
                         "diff": None if n == 0 else (b_only - a_only) / n, "diff_lo": lo, "diff_hi": hi,
                         "a_only": a_only, "b_only": b_only, "mcnemar_p": mcnemar_exact(a_only, b_only),
                         **repeated})
    return rows


def header(by: str) -> list[str]:
    return list(group_keys(by)) + COLUMNS


def write_csv(rows: list[dict[str, Any]], by: str, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=header(by))
        writer.writeheader()
        for r in rows:
            writer.writerow({k: ("" if v is None else v) for k, v in r.items()})
    return path


def render(rows: list[dict[str, Any]], by: str, sweep_a: str, sweep_b: str) -> Any:
    from rich.table import Table

    def pct(v: float | None) -> str:
        return "–" if v is None else f"{100 * v:.1f}%"

    table = Table(title=f"Paired comparison: {sweep_b} (B) − {sweep_a} (A), on the trials both finished "
                        "(diagnosis verdicts as recorded)")
    for k in group_keys(by):
        table.add_column(k)
    for c in ("metric", "pairs", "A", "B", "B − A [95% bootstrap over problems]", "A only", "B only", "McNemar p",
              "pass@k A → B", "pass^k A → B"):
        table.add_column(c, justify="right")
    for r in rows:
        diff = "–" if r["diff"] is None else (f"{100 * r['diff']:+.1f} pp [{100 * r['diff_lo']:+.1f}, "
                                              f"{100 * r['diff_hi']:+.1f}]")
        table.add_row(*[str(r[k]) for k in group_keys(by)], r["metric"], str(r["pairs"]), pct(r["rate_a"]),
                      pct(r["rate_b"]), diff, str(r["a_only"]), str(r["b_only"]), f"{r['mcnemar_p']:.4g}",
                      *(("–" if r["k"] is None else f"{pct(r[f'{e}_k_a'])} → {pct(r[f'{e}_k_b'])} (k={r['k']})")
                        for e in ("pass_at", "pass_hat")))
    return table
