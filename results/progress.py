"""Progress of a sweep as `farm sweep status --watch` shows it: trial counts, provider failures
and agent errors apart, rates so far, cost against the cap and an ETA, all read from the rows,
refreshed until the sweep is finished."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Integer, cast, func, select
from sqlalchemy.engine import Engine
from sqlmodel import col

from core.states import TRIAL_DONE, TrialState
from results import leaderboard
from results.models import Sweep, Trial


def status(engine: Engine, sweep_id: str) -> dict[str, int]:
    """Trials of the sweep per state (every state named, zero included)."""
    with engine.connect() as conn:
        if conn.execute(select(col(Sweep.id)).where(col(Sweep.id) == sweep_id)).first() is None:
            raise KeyError(sweep_id)
        rows = conn.execute(
            select(col(Trial.state), func.count()).where(col(Trial.sweep_id) == sweep_id).group_by(col(Trial.state))
        ).all()
    counts = {s.value: 0 for s in TrialState}
    counts.update({state: n for state, n in rows})
    return counts


def snapshot(engine: Engine, sweep_id: str, now: float | None = None) -> dict[str, Any]:
    """Counts per state, rates over the trials finished so far, spend, cap and ETA. The ETA is the
    remaining trials at the pace of this submission (trials done since the sweep was last submitted)."""
    from results.ledger import sweep_cost

    now = time.time() if now is None else now
    counts = status(engine, sweep_id)  # KeyError for an unknown sweep
    with engine.connect() as conn:
        submitted_at, cap = conn.execute(select(col(Sweep.updated_at), col(Sweep.cost_cap_usd))
                                         .where(col(Sweep.id) == sweep_id)).one()
        recent = conn.execute(select(func.count()).where(
            col(Trial.sweep_id) == sweep_id, col(Trial.state).in_(list(TRIAL_DONE)), col(Trial.finished_at) >= submitted_at)).scalar_one()
    total = sum(counts.values())
    done = sum(n for s, n in counts.items() if s in TRIAL_DONE)
    remaining = total - done
    elapsed = max(now - submitted_at, 1e-9)
    eta = remaining / (recent / elapsed) if recent and remaining else (0.0 if not remaining else None)
    with engine.connect() as conn:
        n, *passed = conn.execute(
            select(func.count(), *(func.coalesce(func.sum(cast(column, Integer)), 0) for column in
                                   (col(Trial.diagnosis_passed), col(Trial.mitigation_passed), col(Trial.e2e_passed))))
            .where(col(Trial.sweep_id) == sweep_id, col(Trial.state) == TrialState.FINISHED)).one()
    rates = {}
    for metric, count in zip(("diagnosis", "mitigation", "e2e"), passed, strict=True):
        lo, hi = leaderboard.wilson(int(count), int(n))
        rates[metric] = {"rate": int(count) / n if n else None, "lo": lo, "hi": hi}
    spent = sweep_cost(engine, sweep_id)
    return {"sweep": sweep_id, "counts": counts, "failures": leaderboard.failure_counts(engine, sweep_id),
            "total": total, "done": done, "finished": n,
            "settled": remaining == 0, "rates": rates, "cost_usd": spent, "cost_cap_usd": cap,
            "eta_s": eta, "elapsed_s": now - submitted_at}


def render(snap: dict[str, Any]) -> str:
    def pct(v: float | None) -> str:
        return "–" if v is None else f"{100 * v:.1f}%"

    counts = ", ".join(f"{k} {v}" for k, v in snap["counts"].items() if v)
    lines = [f"sweep {snap['sweep']}: {snap['done']}/{snap['total']} done — {counts}"]
    failed = snap["failures"]
    if failed["provider_failed"] or failed["agent_errors"]:
        lines.append(failures_line(failed))
    r = snap["rates"]
    lines.append(f"so far over {snap['finished']} finished: diagnosis {pct(r['diagnosis']['rate'])}, "
                 f"mitigation {pct(r['mitigation']['rate'])}, E2E {pct(r['e2e']['rate'])}")
    cap = snap["cost_cap_usd"]
    cost = f"cost ${snap['cost_usd']:.4f}" + (f" of a ${cap:.4f} cap ({100 * snap['cost_usd'] / cap:.0f}%)"
                                              if cap else " (no cap)")
    eta = snap["eta_s"]
    if snap["settled"]:
        tail = "finished"
    elif eta is None:
        tail = "ETA: no trial done yet in this submission"
    else:
        tail = f"ETA {_duration(eta)}"
    lines.append(f"{cost}; {tail}")
    return "\n".join(lines)


def failures_line(failed: dict[str, int]) -> str:
    """Provider failures (outside n, a re-run retries them) and agent errors (in n), apart."""
    parts = []
    if failed["provider_failed"]:
        parts.append(f"provider failures {failed['provider_failed']} (not counted; re-run to retry)")
    if failed["agent_errors"]:
        context = f", {failed['context_length']} of them context length" if failed["context_length"] else ""
        parts.append(f"agent errors {failed['agent_errors']} (counted{context})")
    return "; ".join(parts)


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def watch(engine: Engine, sweep_id: str, interval_s: float, show: Callable[[dict[str, Any]], None],
          until_settled: bool = True, max_refreshes: int | None = None,
          sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """Show the progress every `interval_s` until the sweep has nothing pending, queued or running
    (or `max_refreshes`); returns the last snapshot."""
    from results import ledger

    refreshes = 0
    while True:
        ledger.reap(engine)  # as `sweep status` does: trials of lost workers go back to the queue
        snap = snapshot(engine, sweep_id)
        show(snap)
        refreshes += 1
        if (until_settled and snap["settled"]) or (max_refreshes is not None and refreshes >= max_refreshes):
            return snap
        sleep(interval_s)

