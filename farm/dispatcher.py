"""The dispatcher: expands a sweep spec into trial rows with a stable key
(problem, agent, model, seed, noise) and says which of them still need to run.

Submitting the same sweep again inserts only the trials it does not have and returns, as work,
the trials not yet finished: a sweep can always be resumed. Trials that ended without a result
(infra_failed, cancelled, skipped_cost_cap) are wanted again, with a fresh infrastructure retry
budget. Agents that use no model run once per problem × seed (their model column is "-").
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from core.problem import Problem
from core.states import TRIAL_RESUBMITTABLE, TrialState
from farm.agenthost.known import agent_info
from farm.spec import NoiseLevel, SweepSpec, select_problems
from results import ledger
from results.keys import NO_MODEL, TrialKey
from results.models import Attempt, InfraEvent, Sweep, Trial


def expand(spec: SweepSpec, problems: list[Problem]) -> Iterator[tuple[TrialKey, Problem]]:
    """Every trial of the sweep. Keys name agents and models by their labels (an agent's variant,
    a model listed with other settings); `pairs`, when given, keeps only those agent × model pairs."""
    pairs = None if spec.pairs is None else {(p.agent, p.model) for p in spec.pairs}
    for problem in problems:
        for entry in spec.agents:
            uses_model = agent_info(entry.name).uses_model
            models = [m.key_name for m in spec.models] if uses_model else [NO_MODEL]
            for model in models:
                if pairs is not None and uses_model and (entry.key_name, model) not in pairs:
                    continue
                for seed in spec.seeds:
                    for noise in spec.noise:
                        level = noise.label if isinstance(noise, NoiseLevel) else ""
                        yield TrialKey(problem.id, entry.key_name, model, seed, noise is not False, level), problem


@dataclass
class Submission:
    sweep_id: str
    total: int  # trials in the sweep
    created: int  # rows inserted by this submission
    to_run: list[str]  # trial ids not yet done, in a stable order
    done: int


def submit(engine: Engine, spec: SweepSpec, problems: list[Problem] | None = None,
           batch: int = 2000) -> Submission:
    problems = select_problems(spec) if problems is None else problems
    now = time.time()
    sweep_id = spec.name
    spec_json = spec.model_dump_json()
    with Session(engine) as session:
        sweep = session.get(Sweep, sweep_id)
        if sweep is None:
            sweep = Sweep(id=sweep_id, spec_json=spec_json, created_at=now, updated_at=now,
                          cost_cap_usd=spec.cost_cap_usd, judge=spec.judge)
        else:
            # A resubmission may widen the sweep; the spec on record is the latest one.
            sweep.spec_json, sweep.updated_at, sweep.cancelled = spec_json, now, False
            sweep.cost_cap_usd, sweep.judge = spec.cost_cap_usd, spec.judge
        session.add(sweep)
        session.commit()

    wanted = [(key, key.trial_id(sweep_id), prob) for key, prob in expand(spec, problems)]
    with Session(engine) as session:
        existing = {
            tid: state
            for tid, state in session.execute(select(col(Trial.id), col(Trial.state)).where(col(Trial.sweep_id) == sweep_id))
        }
    new_rows = [
        {"id": tid, "sweep_id": sweep_id, **key.columns(), "app": prob.app, "layer": prob.layer,
         "composition": prob.composition, "state": TrialState.PENDING, "queued_at": now,
         "current_attempt": 0, "infra_attempts": 0}
        for key, tid, prob in wanted if tid not in existing
    ]
    # Core bulk inserts: ORM objects cost more than the database itself at 10,000 trials.
    for i in range(0, len(new_rows), batch):
        with Session(engine) as session:
            session.execute(insert(Trial), new_rows[i : i + batch])
            session.commit()
    # A trial that ended without a result is wanted again: the cluster may work now, the cap may
    # have been raised. Its infrastructure retry budget starts over; its attempts stay on record.
    wanted_ids = [tid for _, tid, _ in wanted]
    revive = [tid for tid in wanted_ids if existing.get(tid) in TRIAL_RESUBMITTABLE]
    if revive:
        ledger.revive(engine, revive)
    to_run = [tid for tid in wanted_ids if existing.get(tid) != TrialState.FINISHED]
    done = len(wanted_ids) - len(to_run)
    return Submission(sweep_id, len(wanted_ids), len(new_rows), to_run, done)


def mark_queued(engine: Engine, trial_ids: list[str]) -> None:
    ledger.mark_queued(engine, trial_ids)


def cancel(engine: Engine, sweep_id: str) -> int:
    """Cancel what has not run; running attempts notice at their next step (their lease is
    refused) and record nothing. Returns the number of trials cancelled."""
    return ledger.cancel_sweep(engine, sweep_id)


def infra_summary(engine: Engine, sweep_id: str) -> dict[str, Any]:
    """What went wrong with the infrastructure in this sweep, apart from the trials' states:
    attempts that ended in an infrastructure error (by phase), infrastructure events (by kind),
    and what the sweep has spent against its cost cap."""
    from sqlalchemy import func

    from core.states import AttemptState
    from results.ledger import sweep_cost

    with Session(engine) as session:
        sweep = session.get(Sweep, sweep_id)
        if sweep is None:
            raise KeyError(sweep_id)
        by_phase = session.execute(
            select(col(Attempt.error_phase), func.count()).join(Trial, col(Trial.id) == col(Attempt.trial_id))
            .where(col(Trial.sweep_id) == sweep_id, col(Attempt.state) == AttemptState.INFRA_ERROR)
            .group_by(col(Attempt.error_phase))
        ).all()
        events = session.execute(
            select(col(InfraEvent.kind), func.count()).where(col(InfraEvent.sweep_id) == sweep_id).group_by(col(InfraEvent.kind))
        ).all()
        cap = sweep.cost_cap_usd
    return {
        "infra_errors": {str(phase or "unknown"): int(n) for phase, n in by_phase},
        "infra_events": {str(kind): int(n) for kind, n in events},
        "cost_usd": round(sweep_cost(engine, sweep_id), 6),
        "cost_cap_usd": cap,
    }


def spec_of(engine: Engine, sweep_id: str) -> SweepSpec:
    with Session(engine) as session:
        sweep = session.get(Sweep, sweep_id)
        if sweep is None:
            raise KeyError(sweep_id)
        return SweepSpec.model_validate(json.loads(sweep.spec_json))
