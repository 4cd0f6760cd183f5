"""How a worker carries an attempt, the same for a Celery worker (tasks/trial.py, one task per step)
and the embedded runner (farm/runner.py, every step in one call): `begin` sets the claimed trial
up, `step` runs one phase of the declared chain (farm/trial/phases.py, TRIAL) under the one failure
policy below, and an attempt that ended has its cluster reset and its worker freed before `step`
returns.

The failure policy, for every step alike:
- the step succeeded: NEXT (the chain goes on), or after `record`, RECORDED or SUPERSEDED;
- LeaseLost: the attempt is a zombie; it is closed as superseded and writes nothing final;
- the farm's own database failed (DBAPIError): DATABASE_DOWN, nothing counted against the trial's
  infrastructure budget; the caller hands the trial back to the queue;
- anything else is the infrastructure's fault, never the agent's: the attempt records an
  infrastructure error and the trial is queued again (INFRA_RETRY) or given up (INFRA_FAILED).
"""

from __future__ import annotations

import contextlib
import logging
import time
from enum import StrEnum
from typing import TYPE_CHECKING

from sqlalchemy.engine import Engine

from clusters.handle import ClusterHandle
from core.errors import InfrastructureError, LeaseLost
from core.states import TrialState
from farm.trial.handover import Recorded
from farm.trial.phases import PHASES, TRIAL
from farm.trial.run import TrialRun
from farm.trial.spec import load_trial_spec
from results import ledger
from results.artifact_store import ArtifactStore
from results.ledger import Claim

if TYPE_CHECKING:
    from farm.owner import ClusterOwner

log = logging.getLogger("farm.trial")

SETUP_ATTEMPTS = 3  # a trial whose problem or application no longer loads is given up after these


class StepOutcome(StrEnum):
    NEXT = "next"
    RECORDED = "recorded"
    SUPERSEDED = "superseded"
    LEASE_LOST = "lease_lost"
    INFRA_RETRY = "infra_retry"
    INFRA_FAILED = "infra_failed"
    DATABASE_DOWN = "database_down"


def start_run(engine: Engine, claim: Claim, cluster: ClusterHandle, store: ArtifactStore,
              redis_url: str | None = None) -> TrialRun | None:
    """Build the TrialRun for a fresh claim. A trial that cannot even be set up (its problem
    or application no longer loads) is an infrastructure failure of this attempt."""
    try:
        return TrialRun(load_trial_spec(engine, claim.trial_id), claim, cluster, engine, store, redis_url)
    except Exception as exc:  # reported on the attempt; the trial is retried or given up
        log.exception("cannot set up trial %s", claim.trial_id)
        ledger.infra_failure(engine, claim, "setup", f"{type(exc).__name__}: {exc}", max_attempts=SETUP_ATTEMPTS)
        return None


def begin(owner: ClusterOwner, claim: Claim, redis_url: str | None = None) -> TrialRun | None:
    """Set a fresh claim up on `owner` and make it the worker's attempt in progress; None when the
    trial cannot be set up (already recorded as an infrastructure failure of this attempt)."""
    assert owner.cluster is not None  # a worker claims only once its cluster is open
    run = start_run(owner.engine, claim, owner.cluster, owner.store, redis_url)
    if run is None:
        return None
    owner.begin(run)
    # Setting the run up may have taken a while; renew the lease before the first step.
    if not ledger.heartbeat(owner.engine, claim, owner.lease_s):
        run.lease_lost.set()
    return run


def step(run: TrialRun, phase: str, owner: ClusterOwner | None = None) -> StepOutcome:
    """Run one phase of the attempt under the failure policy. On any outcome but NEXT and
    DATABASE_DOWN the attempt is over: the cluster is reset and the worker freed (through
    `owner.finish`, which records a failed reset and replaces the cluster; without an owner,
    `run.reset()`)."""
    with owner.in_step() if owner is not None else contextlib.nullcontext():
        outcome = _guarded(run, phase)
    if outcome not in (StepOutcome.NEXT, StepOutcome.DATABASE_DOWN):
        if owner is not None:
            owner.finish(run)
        else:
            run.reset()
    return outcome


def _guarded(run: TrialRun, phase: str) -> StepOutcome:
    from sqlalchemy.exc import DBAPIError

    try:
        return _policy(run, phase)
    except DBAPIError as exc:
        # The farm's database (restarting, unreachable), not the cluster, failed the step or its
        # failure handling: no infrastructure retry is counted.
        log.warning("the farm database failed during %s of %s: %s", phase, run.spec.key, exc)
        run.database_error = f"the farm database failed during {phase}: {type(exc).__name__}"
        return StepOutcome.DATABASE_DOWN


def _policy(run: TrialRun, phase: str) -> StepOutcome:
    from sqlalchemy.exc import DBAPIError

    try:
        handed = TRIAL.phase(phase).run(run)
        if isinstance(handed, Recorded):  # the chain's end
            return StepOutcome.RECORDED if handed.won else StepOutcome.SUPERSEDED
        return StepOutcome.NEXT
    except DBAPIError:
        raise
    except LeaseLost as exc:
        run.abandon(str(exc))
        return StepOutcome.LEASE_LOST
    except Exception as exc:  # anything unexpected is the farm's fault, not the agent's
        if not isinstance(exc, InfrastructureError):
            log.exception("unexpected error in %s of %s", phase, run.spec.key)
            exc = InfrastructureError(f"{type(exc).__name__}: {exc}")
        state = run.fail_infrastructure(exc)
        if state is None:  # the lease had gone already: another attempt owns the trial
            return StepOutcome.LEASE_LOST
        return StepOutcome.INFRA_FAILED if state == TrialState.INFRA_FAILED else StepOutcome.INFRA_RETRY


def run_all(run: TrialRun, owner: ClusterOwner | None = None) -> StepOutcome:
    """Every step of the attempt in this process (the embedded runner); returns how it ended.
    A database failure hands the trial back to the queue (its attempt closed as lost)."""
    for phase in PHASES:
        outcome = step(run, phase, owner)
        if outcome is StepOutcome.DATABASE_DOWN:
            hand_back(run, run.database_error)
            if owner is not None:
                owner.finish(run)
            else:
                run.reset()
        if outcome is not StepOutcome.NEXT:
            return outcome
    raise AssertionError("record ends every attempt")  # pragma: no cover


def hand_back(run: TrialRun, why: str, retry_s: float = 0.0) -> bool:
    """Release the attempt's trial to the queue at once, keeping what it saved and counting no
    infrastructure retry (retrying for `retry_s` while the database is down). False when it was
    not released: the attempt no longer held the lease, or the database stayed down (the lease
    then lapses without heartbeats and the reaper requeues the trial). The caller resets."""
    run.handed_back = True  # a late step of an old chain must not touch it (tasks.trial._live)
    run.lease_lost.set()  # no more heartbeats for it, whatever happens below
    try:
        run.save_artifacts(snapshot=False)
    except Exception as exc:  # what its checkpoints saved stays
        log.warning("artifact save failed for a handed-back attempt: %s", exc)
    deadline = time.monotonic() + retry_s
    while True:
        try:
            return ledger.release(run.engine, run.claim, why)
        except Exception as exc:  # the database is down
            if time.monotonic() < deadline:
                time.sleep(1.0)
                continue
            log.warning("could not hand %s back (%s); its lease will lapse", run.spec.key, exc)
            return False
