"""The trial chain as Celery tasks. Task bodies are thin: they find the worker's live TrialRun
and call the library (farm/trial.py).

`farm.claim_trial` arrives on the shared queue; the worker that takes it claims the lease and
sends `deploy → inject → agent_session → oracle → record` to the queue only it consumes, so every
step touches its own cluster. A worker already busy with a trial hands the claim back to the
shared queue. A step that finds no live run for its attempt (a restarted worker, a stale
message) does nothing: the attempt's lease expires and the reaper requeues the trial.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from celery import Task, chain, signals
from celery.exceptions import Ignore

from farm.errors import InfrastructureError, LeaseLost
from tasks.celery_app import app, config
from tasks.config import SHARED_QUEUE, worker_queue

log = logging.getLogger("farm.tasks")

OWNER: Any = None  # farm.owner.ClusterOwner of this worker process
RETRY_BUSY_S = 2


def _engine() -> Any:
    from results.db import default_url, engine_for

    return engine_for(default_url())


def send_claims(trial_ids: list[str], keys: dict[str, str] | None = None, countdown: float = 0) -> None:
    # One producer for the whole batch: a connection per message costs milliseconds each.
    with app.producer_or_acquire() as producer:
        for tid in trial_ids:
            label = (keys or {}).get(tid, tid)
            claim_trial.apply_async(args=[tid], queue=SHARED_QUEUE, argsrepr=repr(label),
                                    countdown=countdown or None, producer=producer)


@signals.worker_process_init.connect
def _open_cluster(**_: Any) -> None:
    """Each worker process owns exactly one cluster, opened when the process starts."""
    global OWNER
    name, ref = os.environ.get("FARM_WORKER_NAME"), os.environ.get("FARM_WORKER_CLUSTER")
    if not name or not ref:
        return  # not started by `farm worker` (e.g. Flower importing the app)
    from farm.owner import ClusterOwner
    from results.artifacts import open_store

    OWNER = ClusterOwner(name, ref, _engine(), open_store(config.artifacts), lease_s=config.lease_s,
                         on_requeue=lambda ids: send_claims(ids))
    OWNER.open()
    # Parse the catalog now, not inside the first claim while its lease is ticking.
    from farm.spec import catalog

    catalog()


@signals.worker_process_shutdown.connect
def _close_cluster(**_: Any) -> None:
    if OWNER is not None:
        OWNER.close()


def _ref(run: Any) -> dict[str, Any]:
    return {"trial_id": run.spec.trial_id, "token": run.claim.token, "key": run.spec.key}


def _live(ref: dict[str, Any]) -> Any:
    run = OWNER.current if OWNER is not None else None
    if run is None or run.spec.trial_id != ref["trial_id"] or run.claim.token != ref["token"]:
        log.warning("no live run for %s attempt %s on this worker; leaving it to the reaper",
                    ref.get("key"), ref.get("token"))
        raise Ignore()
    return run


def _finish(run: Any) -> None:
    """Reset the cluster and free the worker, whatever happened (a failed reset is recorded and
    the cluster replaced before this worker takes another trial: farm.owner.ClusterOwner.finish)."""
    OWNER.finish(run)


def _spend(sweep_id: str) -> float:
    """The sweep's Redis cost ledger, which LLM clients charge as they go (SQL learns of a
    running session's spend only at its checkpoints)."""
    from farm.llm.limits import SweepLedger

    return SweepLedger(sweep_id, None, config.redis_url).spent() if config.redis_url else 0.0


def _step(ref: dict[str, Any], method: str) -> dict[str, Any]:
    run = _live(ref)
    try:
        getattr(run, method)()
    except LeaseLost as exc:
        run.abandon(str(exc))
        _finish(run)
        raise Ignore() from None
    except Exception as exc:
        err = exc if isinstance(exc, InfrastructureError) else InfrastructureError(f"{type(exc).__name__}: {exc}")
        if not isinstance(exc, InfrastructureError):
            log.exception("unexpected error in %s of %s", method, ref["key"])
        new_state = run.fail_infrastructure(err)
        _finish(run)
        if new_state == "queued":
            send_claims([ref["trial_id"]], {ref["trial_id"]: ref["key"]}, countdown=5)
        raise Ignore() from None
    return ref


@app.task(name="farm.claim_trial", bind=True, max_retries=None)
def claim_trial(self: Task, trial_id: str) -> str:
    from farm.trial import start_run
    from results import ledger

    if OWNER is None:
        raise RuntimeError("this worker owns no cluster; start it with `farm worker --cluster ...`")
    if OWNER.busy:
        # One trial per cluster: hand the claim back for another worker (or for us, later).
        raise self.retry(countdown=RETRY_BUSY_S, queue=SHARED_QUEUE)
    if not OWNER.ready and not OWNER.try_replace():
        # Its cluster failed a reset and no replacement opened: never run a trial on it.
        log.error("worker %s takes no trial: %s", OWNER.name, OWNER.broken)
        raise self.retry(countdown=RETRY_BUSY_S, queue=SHARED_QUEUE)
    engine = OWNER.engine
    claimed = ledger.claim(engine, trial_id, OWNER.name, OWNER.cluster.ref, OWNER.lease_s, spend=_spend)
    if claimed is None:
        # Finished, running elsewhere, cancelled or over the sweep's cost cap (then skipped):
        # a duplicate claim is harmless.
        return "skipped"
    run = start_run(engine, claimed, OWNER.cluster, OWNER.store, redis_url=config.redis_url)
    if run is None:
        send_claims([trial_id], countdown=5)  # a no-op if the trial was given up
        return "setup failed"
    OWNER.begin(run)
    # Setting the run up may have taken a while; renew the lease before the chain starts.
    if not ledger.heartbeat(engine, claimed, OWNER.lease_s):
        run.lease_lost.set()
    ref = _ref(run)
    label = repr(run.spec.key)
    own = worker_queue(OWNER.name)
    chain(
        deploy.si(ref).set(queue=own, argsrepr=label),
        inject.s().set(queue=own, argsrepr=label),
        agent_session.s().set(queue=own, argsrepr=label),
        oracle.s().set(queue=own, argsrepr=label),
        record.s().set(queue=own, argsrepr=label),
    ).apply_async()
    return f"claimed attempt {claimed.token}"


@app.task(name="farm.deploy")
def deploy(ref: dict[str, Any]) -> dict[str, Any]:
    return _step(ref, "deploy")


@app.task(name="farm.inject")
def inject(ref: dict[str, Any]) -> dict[str, Any]:
    return _step(ref, "inject")


@app.task(name="farm.agent_session")
def agent_session(ref: dict[str, Any]) -> dict[str, Any]:
    return _step(ref, "agent_session")


@app.task(name="farm.oracle")
def oracle(ref: dict[str, Any]) -> dict[str, Any]:
    return _step(ref, "oracle_step")


@app.task(name="farm.record")
def record(ref: dict[str, Any]) -> str:
    run = _live(ref)
    try:
        _step(ref, "record")
        return "recorded"
    finally:
        if OWNER.current is run:
            _finish(run)
