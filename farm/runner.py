"""The embedded default behind `farm run`: local worker processes, each owning one emulated
cluster, SQLite as both ledger and queue, a local artifact folder. Nothing to start by hand.

The workers run the very same attempt code as Celery workers (farm/trial.py, farm/owner.py,
results/ledger.py); only the transport differs: they claim the next trial from the database
instead of from a broker.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from farm.states import TRIAL_DONE

log = logging.getLogger("farm.runner")

IDLE_POLL_S = 0.5


def worker_main(index: int, sweep_id: str, db_url: str, artifacts: str, lease_s: float,
                cluster_ref: str, cluster_options: dict[str, Any], log_file: str) -> None:
    """One local worker process: claim, run, reset, until the sweep has nothing left."""
    logging.basicConfig(filename=log_file, level=logging.INFO,
                        format=f"%(asctime)s worker-{index} %(name)s %(levelname)s %(message)s")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from farm.errors import ResetError
    from farm.owner import ClusterOwner
    from farm.trial import run_all, start_run
    from results import ledger
    from results.artifacts import open_store
    from results.db import engine_for

    engine = engine_for(db_url)
    owner = ClusterOwner(f"local-{index}", cluster_ref, engine, open_store(artifacts), lease_s=lease_s,
                         cluster_options=cluster_options)
    try:
        owner.open()
        from farm.spec import catalog

        catalog()  # parsed once per worker, before any lease is taken
        while True:
            claimed = ledger.claim_next(engine, sweep_id, owner.name, owner.cluster.ref, lease_s)
            if claimed is None:
                if _sweep_settled(engine, sweep_id):
                    return
                time.sleep(IDLE_POLL_S)  # others are running; a retry may come back to the queue
                continue
            run = start_run(engine, claimed, owner.cluster, owner.store)
            if run is None:
                continue
            owner.begin(run)
            try:
                outcome = run_all(run)
                log.info("%s: %s", run.spec.key, outcome)
            except ResetError as exc:
                log.error("reset failed, replacing the cluster: %s", exc)
                owner.recycle()
            finally:
                owner.end()
    finally:
        owner.close()


def _sweep_settled(engine: Any, sweep_id: str) -> bool:
    from farm.dispatcher import status

    counts = status(engine, sweep_id)
    return all(n == 0 for state, n in counts.items() if state not in TRIAL_DONE)


def run_sweep(sweep_id: str, db_url: str, out_dir: Path, workers: int, lease_s: float = 30.0,
              cluster_ref: str = "sim", cluster_options: dict[str, Any] | None = None,
              progress: Callable[[dict[str, int]], None] | None = None) -> dict[str, int]:
    """Start `workers` local processes and wait until every trial of the sweep is done.
    The parent reaps expired leases, so a crashed local worker's trial runs again."""
    from farm.dispatcher import status
    from results import ledger
    from results.db import engine_for

    engine = engine_for(db_url)
    artifacts = os.environ.get("FARM_ARTIFACTS") or str(out_dir / "artifacts")
    log_file = str(out_dir / "workers.log")
    ctx = mp.get_context("spawn")  # a fresh interpreter per worker: no inherited sockets or locks
    procs = [
        ctx.Process(target=worker_main, name=f"farm-local-{i}", daemon=False,
                    args=(i, sweep_id, db_url, artifacts, lease_s, cluster_ref, cluster_options or {}, log_file))
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
    return status(engine, sweep_id)
