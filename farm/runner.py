"""The embedded default behind `farm run`: local worker processes, each owning one emulated
cluster, SQLite as both ledger and queue, a local artifact folder. Nothing to start by hand.

The workers run the very same attempt code as Celery workers (farm/trial/worker.py, farm/owner.py,
results/ledger.py); only the transport differs: they claim the next trial from the database
instead of from a broker. Farm-wide limits that Redis holds for Celery workers (the sweep's cost
ledger, per-model concurrency) are held in files of a folder the parent makes for the run
(farm.llm.limits, FARM_LIMITS_DIR), the cost ledger seeded with what SQL already records, so a
resumed sweep counts what it spent before.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.states import TRIAL_DONE

log = logging.getLogger("farm.runner")

IDLE_POLL_S = 0.5


def shared_spend(sweep_id: str) -> float:
    """The sweep's live cost ledger as this process's LLM clients see it (Redis when the
    environment names a Redis broker, else the run's shared file, else this process's own)."""
    from farm.llm.limits import SweepLedger, redis_url_from

    return SweepLedger(sweep_id, None, redis_url_from({})).spent()


def worker_main(index: int, sweep_id: str, db_url: str, artifacts: str, lease_s: float,
                cluster_ref: str, cluster_options: dict[str, Any], log_file: str,
                limits_dir: str | None = None) -> None:
    """One local worker process: claim, run, reset, until the sweep has nothing left."""
    logging.basicConfig(filename=log_file, level=logging.INFO,
                        format=f"%(asctime)s worker-{index} %(name)s %(levelname)s %(message)s")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    if limits_dir:
        from farm.llm.limits import SHARED_DIR_ENV

        os.environ[SHARED_DIR_ENV] = limits_dir  # before any agent builds its LLM client
    from farm.owner import ClusterOwner
    from farm.trial.worker import begin, run_all
    from results import ledger
    from results.artifact_store import open_store
    from results.db import engine_for

    engine = engine_for(db_url)
    owner = ClusterOwner(f"local-{index}", cluster_ref, engine, open_store(artifacts), lease_s=lease_s,
                         cluster_options=cluster_options)
    try:
        owner.open()
        from farm.spec import catalog

        catalog()  # parsed once per worker, before any lease is taken
        while True:
            if not owner.ready and not owner.try_replace():
                # A cluster that failed its reset and could not be replaced: this worker stops
                # rather than run a trial on a dirty cluster; the others carry on.
                log.error("worker %s stops: %s", owner.name, owner.broken)
                return
            cluster = owner.cluster
            assert cluster is not None  # ready, or just replaced: a clean cluster is open
            claimed = ledger.claim_next(engine, sweep_id, owner.name, cluster.ref, lease_s,
                                        spend=shared_spend)
            if claimed is None:
                if _sweep_settled(engine, sweep_id):
                    return
                time.sleep(IDLE_POLL_S)  # others are running; a retry may come back to the queue
                continue
            run = begin(owner, claimed)
            if run is None:
                continue
            # Every step under the trial's failure policy; the attempt's end resets the cluster
            # (a failed reset replaces it).
            log.info("%s: %s", run.spec.key, run_all(run, owner))
    finally:
        owner.close()


def _sweep_settled(engine: Any, sweep_id: str) -> bool:
    from results.progress import status

    counts = status(engine, sweep_id)
    return all(n == 0 for state, n in counts.items() if state not in TRIAL_DONE)


def run_sweep(sweep_id: str, db_url: str, out_dir: Path, workers: int, lease_s: float = 30.0,
              cluster_ref: str = "sim", cluster_options: dict[str, Any] | None = None,
              progress: Callable[[dict[str, int]], None] | None = None) -> dict[str, int]:
    """Start `workers` local processes and wait until every trial of the sweep is done.
    The parent reaps expired leases, so a crashed local worker's trial runs again."""
    from results import ledger
    from results.db import engine_for
    from results.progress import status

    engine = engine_for(db_url)
    artifacts = os.environ.get("FARM_ARTIFACTS") or str(out_dir / "artifacts")
    log_file = str(out_dir / "workers.log")
    limits_dir = _shared_limits(engine, sweep_id)
    ctx = mp.get_context("spawn")  # a fresh interpreter per worker: no inherited sockets or locks
    procs = [
        ctx.Process(target=worker_main, name=f"farm-local-{i}", daemon=False,
                    args=(i, sweep_id, db_url, artifacts, lease_s, cluster_ref, cluster_options or {}, log_file,
                          limits_dir))
        for i in range(workers)
    ]
    for p in procs:
        p.start()
    try:
        while True:
            counts = status(engine, sweep_id)
            if progress:
                progress(counts)
            alive = [p for p in procs if p.is_alive()]
            if all(n == 0 for state, n in counts.items() if state not in TRIAL_DONE):
                break
            if not alive:
                # Every worker exited with work left: their log says why; requeue and report.
                ledger.reap(engine, now=time.time() + 10 * lease_s)
                raise RuntimeError(f"all local workers exited with trials left; see {log_file}")
            ledger.reap(engine)
            time.sleep(0.5)
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
        if limits_dir:
            shutil.rmtree(limits_dir, ignore_errors=True)
    return status(engine, sweep_id)


def _shared_limits(engine: Any, sweep_id: str) -> str | None:
    """A folder for this run's shared limits, its cost ledger starting at what SQL records as
    spent; None when a Redis broker in the environment holds them instead."""
    from farm.llm.limits import preload_spend, redis_url_from
    from results.ledger import sweep_cost

    if redis_url_from({}):
        return None
    folder = tempfile.mkdtemp(prefix="farm-limits-")
    preload_spend(folder, sweep_id, sweep_cost(engine, sweep_id))
    return folder
