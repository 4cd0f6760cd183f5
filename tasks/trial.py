"""The trial chain as Celery tasks. Task bodies are thin: they find the worker's live TrialRun
and run one step of it as every worker does (farm/trial/worker.py: the failure policy, the reset
of an attempt that ended).

`farm.claim_trial` arrives on the shared queue; the worker that takes it claims the lease and
sends `deploy → inject → agent_session → oracle → record` to the queue only it consumes, so every
step touches its own cluster. A worker already busy with a trial hands the claim back to the
shared queue. A step that finds no live run for its attempt (a restarted worker, a stale
message) does nothing: the attempt's lease expires and the reaper requeues the trial.

A worker serves only when it can: `farm worker` starts consuming its own queue alone; the worker
process opens its cluster (retrying with backoff, reported unhealthy meanwhile) and only then
subscribes its node to the shared queue (farm.serving). A chain whose next message never comes
(a broker flushed mid-trial, a database that failed a step) is handed back to the queue, and so is
the trial in progress when the worker is told to stop.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, TypedDict

from celery import Task, chain, signals
from celery.exceptions import Ignore

from tasks.celery_app import app, config, declare_task, receiver
from tasks.config import SHARED_QUEUE, worker_queue

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from farm.owner import ClusterOwner
    from farm.serving import Serving
    from farm.trial.run import TrialRun

log = logging.getLogger("farm.tasks")


class StepRef(TypedDict):
    """The body of every step message: the attempt it is a step of (farm.trial.Claimed)."""

    trial_id: str
    token: int  # the attempt's fencing token
    key: str  # the trial's readable key


OWNER: ClusterOwner | None = None  # of this worker process
RETRY_BUSY_S = 2


def _engine() -> Engine:
    from results.db import default_url, engine_for

    return engine_for(default_url())


def _keys_of(trial_ids: list[str]) -> dict[str, str]:
    """The trial keys of claims re-sent without them (a requeue, the reaper): Flower shows a claim by
    its trial key, never by the trial's opaque id. A database that cannot answer costs only the label."""
    try:
        from sqlmodel import Session, col, select

        from results.models import Trial

        with Session(_engine()) as session:
            return dict(session.exec(select(Trial.id, Trial.key).where(col(Trial.id).in_(trial_ids))).all())
    except Exception as exc:
        log.warning("no trial keys for %d claim(s) to show in Flower: %s", len(trial_ids), exc)
        return {}


def send_claims(trial_ids: list[str], keys: dict[str, str] | None = None, countdown: float = 0) -> None:
    if keys is None or any(tid not in keys for tid in trial_ids):
        keys = {**_keys_of([t for t in trial_ids if t not in (keys or {})]), **(keys or {})}
    # One producer for the whole batch: a connection per message costs milliseconds each.
    with app.producer_or_acquire() as producer:
        for tid in trial_ids:
            label = keys.get(tid, tid)
            claim_trial.apply_async(args=[tid], queue=SHARED_QUEUE, argsrepr=repr(label),
                                    countdown=countdown or None, producer=producer)
    try:
        from results import ledger

        ledger.note_published(_engine(), trial_ids)
    except Exception as exc:  # bookkeeping for `farm sweep status`; the messages are sent
        log.warning("could not stamp %d published claim(s): %s", len(trial_ids), exc)


SERVING: Serving | None = None  # of this worker process


@receiver(signals.worker_process_init)
def _open_cluster(**_: Any) -> None:
    """Each worker process owns exactly one cluster. It is opened in the background (worker
    process init must return within seconds); the shared queue is consumed only once it is open."""
    global OWNER, SERVING
    name, ref = os.environ.get("FARM_WORKER_NAME"), os.environ.get("FARM_WORKER_CLUSTER")
    if not name or not ref:
        return  # not started by `farm worker` (e.g. Flower importing the app)
    from farm.owner import ClusterOwner
    from farm.serving import Serving
    from results.artifact_store import open_store

    store = open_store(config.artifacts, spool_for=name)
    OWNER = ClusterOwner(name, ref, _engine(), store, lease_s=config.lease_s,
                         on_requeue=lambda ids: send_claims(ids))
    SERVING = Serving(OWNER, app, SHARED_QUEUE, os.environ.get("FARM_WORKER_NODENAME", ""),
                      resend=lambda ids: send_claims(ids))
    SERVING.start()


@receiver(signals.worker_process_shutdown)
def _close_cluster(**_: Any) -> None:
    if SERVING is not None:
        SERVING.stop()  # hands back the trial in progress, if any
    if OWNER is not None:
        OWNER.close()
    close = getattr(OWNER.store if OWNER is not None else None, "close", None)
    if close is not None:
        close()  # a last try at uploading spooled artifacts


def _live(ref: StepRef) -> TrialRun:
    """The worker's live run of the attempt a step message names (farm.trial.Claimed, as a dict)."""
    run = OWNER.current if OWNER is not None else None
    if (run is None or run.spec.trial_id != ref["trial_id"] or run.claim.token != ref["token"]
            or run.handed_back):
        log.warning("no live run for %s attempt %s on this worker; leaving it to the reaper",
                    ref.get("key"), ref.get("token"))
        raise Ignore()
    return run


def _spend(sweep_id: str) -> float:
    """The sweep's Redis cost ledger, which LLM clients charge as they go (SQL learns of a
    running session's spend only at its checkpoints)."""
    from farm.llm.limits import SweepLedger

    return SweepLedger(sweep_id, None, config.redis_url).spent() if config.redis_url else 0.0


def _step(ref: StepRef, phase: str) -> str:
    """One phase of the live attempt under the trial's failure policy (farm.trial.worker); an
    attempt that ended was reset by it, and an attempt that failed has the rest of its chain
    dropped (Ignore)."""
    from farm.trial.worker import StepOutcome, step

    run = _live(ref)
    outcome = step(run, phase, OWNER)
    if outcome in (StepOutcome.NEXT, StepOutcome.RECORDED, StepOutcome.SUPERSEDED):
        return str(outcome)
    if outcome is StepOutcome.DATABASE_DOWN:
        # No infrastructure retry is counted; the trial goes back to the queue once it answers.
        if SERVING is None:
            raise RuntimeError(run.database_error)
        SERVING.hand_back(run, run.database_error, retry_s=30)
    elif outcome is StepOutcome.INFRA_RETRY:
        send_claims([ref["trial_id"]], {ref["trial_id"]: ref["key"]}, countdown=5)
    raise Ignore()


def _wait(task: Task) -> Exception:
    """Hands the claim back to the shared queue for later (Flower shows it as RETRY: waiting for a
    free cluster). Celery's retry drops the display arguments, so the trial key is passed on: a
    retried claim would otherwise show only the trial's opaque id."""
    shown = getattr(task.request, "argsrepr", None)
    retry: Exception = task.retry(countdown=RETRY_BUSY_S, queue=SHARED_QUEUE,
                                  **({"argsrepr": shown} if shown else {}))
    return retry


@declare_task(name="farm.claim_trial", bind=True, max_retries=None)
def claim_trial(self: Task, trial_id: str) -> str:
    from sqlalchemy.exc import DBAPIError

    from farm.trial.phases import PHASES
    from farm.trial.worker import begin
    from results import ledger

    if OWNER is None:
        # Not a farm worker process (nothing subscribes one to this queue): never drop the claim.
        log.error("a process that owns no cluster took a claim; handing it back")
        raise _wait(self)
    if OWNER.busy:
        # One trial per cluster: hand the claim back for another worker (or for us, later).
        raise _wait(self)
    if not OWNER.ready:
        # Its cluster failed a reset and is being replaced (farm.serving unsubscribes this
        # worker meanwhile): never run a trial on it, hand the claim back.
        log.error("worker %s takes no trial: %s", OWNER.name, OWNER.broken or "no cluster yet")
        raise _wait(self)
    assert OWNER.cluster is not None  # ready: its cluster is open and clean
    engine = OWNER.engine
    try:
        claimed = ledger.claim(engine, trial_id, OWNER.name, OWNER.cluster.ref, OWNER.lease_s, spend=_spend)
    except DBAPIError as exc:  # the database is restarting: the claim waits, it is not dropped
        log.warning("cannot claim %s now (database): %s", trial_id, exc)
        raise _wait(self) from None
    if claimed is None:
        # Finished, running elsewhere, cancelled or over the sweep's cost cap (then skipped):
        # a duplicate claim is harmless.
        return "skipped"
    run = begin(OWNER, claimed, redis_url=config.redis_url)
    if run is None:
        send_claims([trial_id], countdown=5)  # a no-op if the trial was given up
        return "setup failed"
    attempt = run.claimed
    ref = StepRef(trial_id=attempt.trial_id, token=attempt.token, key=attempt.key)
    label = repr(run.spec.key)
    own = worker_queue(OWNER.name)
    # The trial's declared chain (farm.trial.phases.TRIAL), one task per phase, on this worker's queue.
    first, *rest = (STEP_TASKS[name] for name in PHASES)
    chain(
        first.si(ref).set(queue=own, argsrepr=label),
        *(t.s().set(queue=own, argsrepr=label) for t in rest),
    ).apply_async()
    return f"claimed attempt {claimed.token}"


def _step_task(step: str) -> Task:
    """The chain's task for one step: it runs the step of the attempt `ref` names and hands `ref` on."""

    @declare_task(name=f"farm.{step}")
    def run_step(ref: StepRef) -> StepRef:
        _step(ref, step)
        return ref

    return run_step


deploy = _step_task("deploy")
inject = _step_task("inject")
agent_session = _step_task("agent_session")
oracle = _step_task("oracle")


@declare_task(name="farm.record")
def record(ref: StepRef) -> str:
    return _step(ref, "record")


# The task of each phase of the trial's chain, by the phase's name.
STEP_TASKS = {"deploy": deploy, "inject": inject, "agent_session": agent_session, "oracle": oracle, "record": record}
