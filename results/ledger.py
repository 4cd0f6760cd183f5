"""The trial ledger: every state change of a trial row, each one conditional UPDATE, so that
however workers die or race, exactly one attempt writes a trial's final result.

- `claim` takes the lease: the trial goes running, `current_attempt` (the fencing token) goes up
  by one, and an Attempt row is opened. A trial that is not claimable is left alone, so a
  duplicate claim message is harmless.
- `heartbeat` extends the lease only while the attempt still holds it.
- `reap` finds running trials whose lease expired (a lost worker), marks their attempt lost and
  puts the trial back in the queue.
- `record` writes the final result only while the attempt holds the lease; a zombie that lost
  it is marked superseded and writes nothing final.
- Over the sweep's cost cap, `claim` hands out nothing more: the sweep's unstarted trials are
  marked skipped_cost_cap at once.
- The dispatcher's changes: `revive` (a resubmission wants a trial that ended without a result),
  `mark_queued` (its claim is sent), `cancel_sweep`.
No other module writes a trial's or an attempt's state (tests/architecture/test_ledger_owns_states.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from core.secrets import scrub
from core.states import (
    END_AGENT_ERROR,
    LIMIT_SWEEP_COST,
    TRIAL_CLAIMABLE,
    TRIAL_OPEN,
    TRIAL_RESUBMITTABLE,
    AttemptState,
    TrialState,
)
from results.db import execute_dml
from results.models import Attempt, AttemptOutcome, InfraEvent, Sweep, Trial, TrialOutcome, Worker

DEFAULT_LEASE_S = 60.0



@dataclass(frozen=True)
class Claim:
    trial_id: str
    token: int
    attempt_id: int
    worker: str
    cluster: str


class AttemptResult(AttemptOutcome):
    """What an attempt produced; every field optional, so partial results can be saved. Its
    fields are the result columns of results.models (declared there once)."""

    @property
    def e2e_passed(self) -> bool | None:
        if self.diagnosis_passed is None or self.mitigation_passed is None:
            return None
        return bool(self.diagnosis_passed and self.mitigation_passed)

    def attempt_values(self) -> dict[str, Any]:
        """The result as its Attempt row carries it: every field (AttemptOutcome)."""
        return self._values(AttemptOutcome)

    def trial_values(self) -> dict[str, Any]:
        """The result as the trial row copies it for the leaderboards (TrialOutcome)."""
        return self._values(TrialOutcome)

    def _values(self, columns: type[TrialOutcome]) -> dict[str, Any]:
        vals = {name: getattr(self, name) for name in columns.model_fields}
        # Error text can carry a credential a tool echoed; the row keeps it scrubbed and bounded.
        vals["error"] = scrub(self.error)[:4000] if self.error else None
        vals["e2e_passed"] = self.e2e_passed
        return vals


def _open_attempt(session: Session, trial_id: str, token: int, worker: str, cluster: str, now: float) -> Claim:
    attempt = Attempt(trial_id=trial_id, token=token, worker=worker, cluster=cluster, started_at=now)
    session.add(attempt)
    session.flush()
    assert attempt.id is not None
    return Claim(trial_id, token, attempt.id, worker, cluster)


# What a sweep has spent according to a shared live ledger (Redis, or the embedded runner's
# file ledger): it also counts sessions still running, which SQL learns of only at checkpoints.
SpendProbe = Callable[[str], float]


def sweep_cost(engine: Engine, sweep_id: str) -> float:
    """What the sweep's attempts have recorded as spent (agent and judge), every attempt counted:
    a lost or cut attempt's money is spent all the same."""
    spent = func.coalesce(col(Attempt.cost_usd), 0.0) + func.coalesce(col(Attempt.judge_cost_usd), 0.0)
    with Session(engine) as session:
        total = session.execute(
            select(func.coalesce(func.sum(spent), 0.0)).join(Trial, col(Trial.id) == col(Attempt.trial_id))
            .where(col(Trial.sweep_id) == sweep_id)
        ).scalar_one()
    return float(total or 0.0)


def _over_cap(engine: Engine, trial_id: str, spend: SpendProbe | None) -> bool:
    """True when the trial's sweep has a cost cap and has reached it; its unstarted trials are
    then marked skipped_cost_cap in one statement."""
    with Session(engine) as session:
        row = session.execute(
            select(col(Trial.sweep_id), col(Sweep.cost_cap_usd)).join(Sweep, col(Sweep.id) == col(Trial.sweep_id))
            .where(col(Trial.id) == trial_id)
        ).one_or_none()
    if row is None or row[1] is None:
        return False
    sweep_id, cap = row
    # Both figures only ever undercount (SQL misses what running sessions spent since their last
    # checkpoint, a live ledger misses what was spent before it was created), so the larger holds.
    spent = sweep_cost(engine, sweep_id)
    if spend is not None:
        try:
            spent = max(spent, float(spend(sweep_id)))
        except Exception:  # an unreachable live ledger: SQL alone still decides
            pass
    if spent < cap:
        return False
    skip_over_cap(engine, sweep_id, spent, cap)
    return True


def skip_over_cap(engine: Engine, sweep_id: str, spent: float, cap: float) -> int:
    """Mark every trial of the sweep that has not started as skipped_cost_cap."""
    with Session(engine) as session:
        res = execute_dml(session,
            update(Trial).where(col(Trial.sweep_id) == sweep_id, col(Trial.state).in_(list(TRIAL_CLAIMABLE)))
            .values(state=TrialState.SKIPPED_COST_CAP, finished_at=time.time(),
                    error=f"not run: the sweep spent ${spent:.4f} of its ${cap:.4f} cost cap")
        )
        session.commit()
        return int(res.rowcount or 0)


def claim(engine: Engine, trial_id: str, worker: str, cluster: str, lease_s: float = DEFAULT_LEASE_S,
          spend: SpendProbe | None = None) -> Claim | None:
    """Take the lease of a claimable trial, or None (not claimable, cancelled, or its sweep over
    its cost cap). `spend` adds a live ledger's figure to the cap check."""
    if _over_cap(engine, trial_id, spend):
        return None
    now = time.time()
    with Session(engine) as session:
        res = execute_dml(session,
            update(Trial)
            .where(col(Trial.id) == trial_id, col(Trial.state).in_(list(TRIAL_CLAIMABLE)))
            .where(~select(col(Sweep.cancelled)).where(col(Sweep.id) == col(Trial.sweep_id)).scalar_subquery())
            .values(state=TrialState.RUNNING, current_attempt=col(Trial.current_attempt) + 1,
                    lease_owner=worker, lease_expires_at=now + lease_s)
        )
        if res.rowcount != 1:
            session.rollback()
            return None
        token = session.execute(select(col(Trial.current_attempt)).where(col(Trial.id) == trial_id)).scalar_one()
        claimed = _open_attempt(session, trial_id, token, worker, cluster, now)
        session.commit()
        return claimed


def claim_next(engine: Engine, sweep_id: str, worker: str, cluster: str,
               lease_s: float = DEFAULT_LEASE_S, spend: SpendProbe | None = None) -> Claim | None:
    """Embedded mode: the database is the queue. Tries candidates until one claim succeeds."""
    while True:
        with Session(engine) as session:
            candidates = session.execute(
                select(col(Trial.id)).where(col(Trial.sweep_id) == sweep_id, col(Trial.state).in_(list(TRIAL_CLAIMABLE)))
                .order_by(col(Trial.queued_at), col(Trial.id)).limit(8)
            ).scalars().all()
        if not candidates:
            return None
        for trial_id in candidates:
            if got := claim(engine, trial_id, worker, cluster, lease_s, spend):
                return got


def heartbeat(engine: Engine, c: Claim, lease_s: float = DEFAULT_LEASE_S) -> bool:
    with Session(engine) as session:
        res = execute_dml(session,
            update(Trial)
            .where(col(Trial.id) == c.trial_id, col(Trial.current_attempt) == c.token, col(Trial.state) == TrialState.RUNNING)
            .values(lease_expires_at=time.time() + lease_s)
        )
        session.commit()
        return res.rowcount == 1


def holds_lease(engine: Engine, c: Claim) -> bool:
    with Session(engine) as session:
        row = session.execute(
            select(col(Trial.state), col(Trial.current_attempt)).where(col(Trial.id) == c.trial_id)
        ).one_or_none()
    return bool(row and row[0] == TrialState.RUNNING and row[1] == c.token)


def set_phase(engine: Engine, c: Claim, phase: str, partial: AttemptResult | None = None) -> None:
    values: dict[str, Any] = {"phase": phase}
    if partial is not None:
        values.update({k: v for k, v in partial.attempt_values().items() if v is not None})
    with Session(engine) as session:
        session.execute(update(Attempt).where(col(Attempt.id) == c.attempt_id).values(**values))
        session.commit()


def record(engine: Engine, c: Claim, result: AttemptResult) -> bool:
    """Write the final result; False (and the attempt marked superseded) if the lease is gone.
    A session the sweep's cost cap cut short is kept on its attempt (cost_capped) and the trial
    goes skipped_cost_cap rather than finished."""
    now = time.time()
    # The farm, not the agent, stopped a session cut by the sweep's cap: counting it in n would
    # score the agent on a budget it was never given, so it is set apart, and a resubmission
    # (with a higher cap) runs it again.
    capped = result.end_reason == LIMIT_SWEEP_COST
    if capped:
        trial_vals: dict[str, Any] = {"state": TrialState.SKIPPED_COST_CAP, "end_reason": LIMIT_SWEEP_COST,
                                      "error": "session cut by the sweep's cost cap"}
        attempt_state = AttemptState.COST_CAPPED
    else:
        trial_vals = {"state": TrialState.FINISHED, "final_attempt": c.token, **result.trial_values()}
        attempt_state = AttemptState.RECORDED
    with Session(engine) as session:
        res = execute_dml(session,
            update(Trial)
            .where(col(Trial.id) == c.trial_id, col(Trial.current_attempt) == c.token, col(Trial.state) == TrialState.RUNNING)
            .values(finished_at=now, lease_owner=None, lease_expires_at=None, **trial_vals)
        )
        won = res.rowcount == 1
        session.execute(update(Attempt).where(col(Attempt.id) == c.attempt_id).values(**result.attempt_values()))
        if won:
            session.execute(update(Attempt).where(col(Attempt.id) == c.attempt_id)
                            .values(state=attempt_state, ended_at=now, phase="recorded"))
        else:
            # A reaped attempt stays `lost`; one that never was reaped is `superseded`.
            session.execute(update(Attempt).where(col(Attempt.id) == c.attempt_id, col(Attempt.state) == AttemptState.RUNNING)
                            .values(state=AttemptState.SUPERSEDED, ended_at=now))
        session.commit()
        return won


def infra_failure(engine: Engine, c: Claim, phase: str, error: str, max_attempts: int,
                  partial: AttemptResult | None = None) -> str | None:
    """The cluster failed, not the agent. The trial is queued again until `max_attempts`
    infrastructure failures, then it is infra_failed. Returns the trial's new state, or None
    when the attempt had already lost its lease."""
    now = time.time()
    vals = (partial or AttemptResult()).attempt_values()
    vals.update(error=scrub(error)[:4000], error_phase=phase)
    with Session(engine) as session:
        row = session.execute(
            select(col(Trial.infra_attempts)).where(
                col(Trial.id) == c.trial_id, col(Trial.current_attempt) == c.token, col(Trial.state) == TrialState.RUNNING)
        ).one_or_none()
        if row is None:
            session.execute(update(Attempt).where(col(Attempt.id) == c.attempt_id)
                            .values(state=AttemptState.SUPERSEDED, ended_at=now, **vals))
            session.commit()
            return None
        failures = row[0] + 1
        new_state = TrialState.INFRA_FAILED if failures >= max_attempts else TrialState.QUEUED
        extra = {"finished_at": now, "error": scrub(f"{phase}: {error}")[:4000]} if new_state == TrialState.INFRA_FAILED else {}
        session.execute(
            update(Trial).where(col(Trial.id) == c.trial_id, col(Trial.current_attempt) == c.token)
            .values(state=new_state, infra_attempts=failures, lease_owner=None, lease_expires_at=None,
                    queued_at=now, **extra)
        )
        session.execute(update(Attempt).where(col(Attempt.id) == c.attempt_id)
                        .values(state=AttemptState.INFRA_ERROR, ended_at=now, **vals))
        session.commit()
        return new_state


def abandon(engine: Engine, c: Claim, state: str, error: str | None = None) -> None:
    """Close an attempt that will not record (cancelled, lease lost)."""
    with Session(engine) as session:
        session.execute(update(Attempt).where(col(Attempt.id) == c.attempt_id, col(Attempt.state) == AttemptState.RUNNING)
                        .values(state=state, ended_at=time.time(), error=error))
        session.commit()


def reap(engine: Engine, now: float | None = None) -> list[str]:
    """Requeue trials whose lease expired; their open attempt is marked lost."""
    now = time.time() if now is None else now
    requeued: list[str] = []
    with Session(engine) as session:
        expired = session.execute(
            select(col(Trial.id), col(Trial.current_attempt)).where(
                col(Trial.state) == TrialState.RUNNING, col(Trial.lease_expires_at) < now)
        ).all()
    for trial_id, token in expired:
        with Session(engine) as session:
            res = execute_dml(session,
                update(Trial)
                .where(col(Trial.id) == trial_id, col(Trial.current_attempt) == token, col(Trial.state) == TrialState.RUNNING,
                       col(Trial.lease_expires_at) < now)
                .values(state=TrialState.QUEUED, lease_owner=None, lease_expires_at=None, queued_at=now)
            )
            if res.rowcount == 1:
                session.execute(
                    update(Attempt).where(col(Attempt.trial_id) == trial_id, col(Attempt.token) == token,
                                          col(Attempt.state) == AttemptState.RUNNING)
                    .values(state=AttemptState.LOST, ended_at=now,
                            error="worker lost: lease expired without a heartbeat")
                )
                requeued.append(trial_id)
            session.commit()
    return requeued


def stale_queued(engine: Engine, older_than_s: float, limit: int = 500) -> list[str]:
    """Queued trials whose claim message has not been acted on for `older_than_s`: the message
    may sit unacknowledged with a dead worker until the broker's visibility timeout, or be gone
    (a worker that could not run it dropped it, a broker flushed or restarted without its data).
    Each one returned is stamped as queued now, so a caller re-sends its claim once per period; a
    duplicate claim is harmless (the lease takes one). The ledger, not the broker, decides what
    still has to run."""
    now = time.time()
    with Session(engine) as session:
        ids = session.execute(
            select(col(Trial.id)).where(col(Trial.state) == TrialState.QUEUED, col(Trial.queued_at) < now - older_than_s)
            .order_by(col(Trial.queued_at)).limit(limit)
        ).scalars().all()
        if ids:
            session.execute(update(Trial).where(col(Trial.id).in_(ids), col(Trial.state) == TrialState.QUEUED)
                            .values(queued_at=now))
            session.commit()
    return list(ids)


def revive(engine: Engine, trial_ids: list[str]) -> None:
    """A resubmission wants again the trials that ended without a result (infra_failed, cancelled,
    skipped_cost_cap): they go pending with a fresh infrastructure retry budget; their attempts
    stay on record."""
    now = time.time()
    with Session(engine) as session:
        for i in range(0, len(trial_ids), 500):
            session.execute(update(Trial).where(col(Trial.id).in_(trial_ids[i : i + 500]),
                                                col(Trial.state).in_(list(TRIAL_RESUBMITTABLE)))
                            .values(state=TrialState.PENDING, queued_at=now, infra_attempts=0,
                                    finished_at=None, error=None, end_reason=None))
        session.commit()


def rerun_agent_errors(engine: Engine, sweep_id: str) -> list[str]:
    """`farm sweep retry --errors`: the sweep's finished trials whose session ended in the agent's
    own error (agent_error: a crash, or a provider failure recorded as one before the farm told
    them apart) are wanted again. Their result is withdrawn (the row goes pending, its copied
    result cleared); their attempts stay on record. Returns their ids."""
    now = time.time()
    cleared = {name: None for name in TrialOutcome.model_fields} | {"e2e_passed": None}
    with Session(engine) as session:
        ids = list(session.execute(select(col(Trial.id)).where(
            col(Trial.sweep_id) == sweep_id, col(Trial.state) == TrialState.FINISHED,
            col(Trial.end_reason) == END_AGENT_ERROR)).scalars())
        for i in range(0, len(ids), 500):
            session.execute(update(Trial).where(col(Trial.id).in_(ids[i : i + 500]),
                                                col(Trial.state) == TrialState.FINISHED)
                            .values(state=TrialState.PENDING, queued_at=now, infra_attempts=0, finished_at=None,
                                    final_attempt=None, **cleared))
        session.commit()
    return ids


def mark_queued(engine: Engine, trial_ids: list[str]) -> None:
    """Pending trials whose claim is about to be sent to the shared queue."""
    now = time.time()
    with Session(engine) as session:
        for i in range(0, len(trial_ids), 500):
            session.execute(
                update(Trial).where(col(Trial.id).in_(trial_ids[i : i + 500]), col(Trial.state) == TrialState.PENDING)
                .values(state=TrialState.QUEUED, queued_at=now)
            )
        session.commit()


def cancel_sweep(engine: Engine, sweep_id: str) -> int:
    """Mark the sweep cancelled and its trials that have not finished cancelled (a running
    attempt finds its lease refused at its next step); KeyError for an unknown sweep. Returns the
    number of trials cancelled."""
    with Session(engine) as session:
        sweep = session.get(Sweep, sweep_id)
        if sweep is None:
            raise KeyError(sweep_id)
        sweep.cancelled = True
        session.add(sweep)
        res = execute_dml(session,
            update(Trial).where(col(Trial.sweep_id) == sweep_id, col(Trial.state).in_(list(TRIAL_OPEN)))
            .values(state=TrialState.CANCELLED, lease_owner=None, lease_expires_at=None)
        )
        session.commit()
        return int(res.rowcount or 0)


def note_published(engine: Engine, trial_ids: list[str]) -> None:
    """Stamp trials whose claim message was just sent: when, and how many messages so far."""
    now = time.time()
    with Session(engine) as session:
        for i in range(0, len(trial_ids), 500):
            session.execute(update(Trial).where(col(Trial.id).in_(trial_ids[i : i + 500]))
                            .values(published_at=now, publishes=func.coalesce(col(Trial.publishes), 0) + 1))
        session.commit()


@dataclass(frozen=True)
class LongQueued:
    """Trials of a sweep queued for longer than a threshold, and what the farm knows of why."""

    count: int
    oldest_s: float
    never_published: int  # no claim message was ever sent (submitted without a broker)
    republished: int  # the reaper re-sent their claim at least once (a message was lost)
    healthy_workers: int  # workers with a fresh heartbeat and a healthy cluster

    def why(self) -> str:
        if self.never_published:
            return f"{self.never_published} never sent to the broker (resubmit the sweep)"
        if self.healthy_workers == 0:
            return "no healthy worker is serving (see `farm cluster list`)"
        if self.republished:
            return (f"{self.republished} had a claim message lost and re-sent by the reaper; "
                    f"{self.healthy_workers} healthy worker(s) serving")
        return f"waiting their turn on {self.healthy_workers} healthy worker(s)"


def long_queued(engine: Engine, sweep_id: str, older_than_s: float, stale_worker_s: float = 180.0) -> LongQueued:
    now = time.time()
    with Session(engine) as session:
        rows = session.execute(
            select(col(Trial.queued_at), col(Trial.published_at), col(Trial.publishes))
            .where(col(Trial.sweep_id) == sweep_id, col(Trial.state) == TrialState.QUEUED)
        ).all()
        healthy = session.execute(
            select(func.count()).select_from(Worker).where(
                col(Worker.state) != "stopped", col(Worker.cluster_healthy).is_(True), col(Worker.heartbeat_at) > now - stale_worker_s)
        ).scalar_one()
    # The reaper stamps queued_at at each re-send, so a re-sent trial counts as long queued by
    # its re-sends: the reaper only re-sends a trial that waited past its own threshold.
    old = [(q, n or 0) for q, _, n in rows if (n or 0) > 1 or (q is not None and now - q > older_than_s)]
    oldest = max((now - q for q, _ in old if q is not None), default=0.0)
    return LongQueued(count=len(old), oldest_s=round(oldest, 1),
                      never_published=sum(1 for _, n in old if n == 0),
                      republished=sum(1 for _, n in old if n > 1), healthy_workers=int(healthy))


def release(engine: Engine, c: Claim, why: str) -> bool:
    """Hand a held trial back to the queue at once (a worker stopping, a chain whose next message
    never came): its attempt is closed as lost, keeping what it saved, and no infrastructure retry
    is counted. False when the attempt no longer held the lease."""
    now = time.time()
    with Session(engine) as session:
        res = execute_dml(session,
            update(Trial).where(col(Trial.id) == c.trial_id, col(Trial.current_attempt) == c.token,
                                col(Trial.state) == TrialState.RUNNING)
            .values(state=TrialState.QUEUED, lease_owner=None, lease_expires_at=None, queued_at=now)
        )
        session.execute(update(Attempt).where(col(Attempt.id) == c.attempt_id, col(Attempt.state) == AttemptState.RUNNING)
                        .values(state=AttemptState.LOST, ended_at=now, error=scrub(why)[:4000]))
        session.commit()
        return res.rowcount == 1


def infra_event(engine: Engine, kind: str, worker: str, cluster: str, detail: str = "",
                c: Claim | None = None) -> None:
    """Record an infrastructure event apart from any attempt's result (e.g. a failed reset)."""
    sweep_id = None
    if c is not None:
        with Session(engine) as session:
            sweep_id = session.execute(select(col(Trial.sweep_id)).where(col(Trial.id) == c.trial_id)).scalar_one_or_none()
    with Session(engine) as session:
        session.execute(insert(InfraEvent).values(
            kind=kind, at=time.time(), worker=worker, cluster=cluster, detail=scrub(detail)[:4000],
            sweep_id=sweep_id, trial_id=c.trial_id if c else None, attempt_id=c.attempt_id if c else None))
        session.commit()


def register_worker(engine: Engine, name: str, cluster: str, hostname: str, pid: int) -> None:
    now = time.time()
    with Session(engine) as session:
        w = session.get(Worker, name) or Worker(name=name, cluster=cluster, hostname=hostname, pid=pid,
                                               started_at=now, heartbeat_at=now)
        w.cluster, w.hostname, w.pid, w.started_at, w.heartbeat_at, w.state = cluster, hostname, pid, now, now, "idle"
        session.add(w)
        session.commit()


def worker_heartbeat(engine: Engine, name: str, state: str, current_trial: str | None,
                     healthy: bool = True, detail: str = "") -> None:
    with Session(engine) as session:
        session.execute(update(Worker).where(col(Worker.name) == name).values(
            heartbeat_at=time.time(), state=state, current_trial=current_trial,
            cluster_healthy=healthy, detail=detail[:500]))
        session.commit()
