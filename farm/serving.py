"""A Celery worker serves the shared claim queue only while it can run a claim: a thread in the
worker process opens its cluster (retrying with backoff, the worker reported unhealthy meanwhile),
subscribes the worker's node to the shared queue once the cluster is open and healthy, and
unsubscribes it while the cluster is lost or sick. The same thread hands back to the queue an
attempt whose chain stopped moving (its next message lost with a flushed broker, a step that died
on a database error), and the attempt in progress when the worker stops."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from results import ledger

log = logging.getLogger("farm.serving")

TICK_S = 1.0
MAX_BACKOFF_S = 60.0


def stall_limit_s(lease_s: float) -> float:
    """How long an attempt may wait for its next step before it is handed back. The steps of a
    chain follow each other within milliseconds; a broker reconnecting takes seconds."""
    return float(os.environ.get("FARM_CHAIN_STALL_S", str(max(30.0, 3 * lease_s))))


class Serving:
    def __init__(self, owner: Any, app: Any, queue: str, nodename: str,
                 resend: Callable[[list[str]], None]) -> None:
        self.owner, self.app, self.queue, self.nodename = owner, app, queue, nodename
        self.resend = resend
        self.subscribed = False
        self.stall_s = stall_limit_s(owner.lease_s)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"serving-{owner.name}", daemon=True)
        self._backoff = 1.0
        self._next_open = 0.0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        run = self.owner.current
        if run is not None:
            self.hand_back(run, "the worker stopped mid-trial (SIGTERM or shutdown); handed back to the queue",
                           reset=False)

    # -- the loop --------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._tick()
            except Exception as exc:  # the loop is the worker's lifeline: log and go on
                log.warning("serving loop: %s", exc)
            self._stop.wait(TICK_S)

    def _tick(self) -> None:
        owner = self.owner
        if owner.cluster is None and not owner.busy and time.monotonic() >= self._next_open:
            self._open()
        want = owner.ready and owner.healthy
        if want != self.subscribed:
            self._subscribe(want)
        run = owner.current
        if run is not None and owner.stalled_for() > self.stall_s:
            self.hand_back(run, f"the chain of this attempt made no progress for {self.stall_s:.0f} s "
                                "(its next message was lost or a step died); handed back to the queue")

    def _open(self) -> None:
        owner, replacing = self.owner, self.owner.broken is not None
        try:
            owner.recycle()  # opens a cluster (closing what is left of a lost one)
            from farm.spec import catalog

            catalog()  # parsed now, not inside the first claim while its lease is ticking
        except Exception as exc:  # no cluster: stay unsubscribed, say so, try again later
            owner.cluster, owner.broken = None, f"cannot open cluster {owner.cluster_ref}: {exc}"
            log.error("%s (retrying in %.0f s)", owner.broken, self._backoff)
            owner.report_unhealthy(f"{owner.broken}; retrying in {self._backoff:.0f} s")
            self._next_open = time.monotonic() + self._backoff
            self._backoff = min(MAX_BACKOFF_S, self._backoff * 2)
            return
        self._backoff = 1.0
        log.info("%s opened cluster %s", owner.name, owner.cluster.ref)
        if replacing:
            from core.states import EVENT_CLUSTER_REPLACED

            try:
                ledger.infra_event(owner.engine, EVENT_CLUSTER_REPLACED, owner.name, owner.cluster_ref,
                                   "a cluster that had been lost was replaced")
            except Exception as exc:  # the record is not worth the cluster
                log.warning("could not record the cluster replacement: %s", exc)

    def _subscribe(self, want: bool) -> None:
        """Ask this worker's consumer (the Celery main process) to start or stop consuming the
        shared queue; it is subscribed only once the consumer replied."""
        control = self.app.control
        call = control.add_consumer if want else control.cancel_consumer
        try:
            replies = call(self.queue, destination=[self.nodename], reply=True, timeout=3.0)
        except Exception as exc:  # the broker is down: asked again at the next tick
            log.warning("cannot %s %s yet: %s", "subscribe to" if want else "unsubscribe from", self.queue, exc)
            return
        if replies:
            self.subscribed = want
            log.info("%s %s %s", self.owner.name, "serves" if want else "stopped serving", self.queue)

    def hand_back(self, run: Any, why: str, reset: bool = True, retry_s: float = 0.0) -> None:
        """Release the attempt's trial to the queue at once and re-send its claim; then reset the
        cluster and free the worker. The next message of the old chain, should it come, finds no
        live run and does nothing."""
        owner = self.owner
        log.warning("%s: %s", run.spec.key, why)
        run.handed_back = True  # a late step of the old chain must not touch it (tasks.trial._live)
        run.lease_lost.set()  # no more heartbeats for it, whatever happens below
        try:
            run._save_artifacts(snapshot=False)
        except Exception as exc:  # what its checkpoints saved stays
            log.warning("artifact save failed for a handed-back attempt: %s", exc)
        deadline = time.monotonic() + retry_s
        while True:
            try:
                if ledger.release(owner.engine, run.claim, why):
                    self.resend([run.spec.trial_id])
                break
            except Exception as exc:  # the database or broker is down
                if time.monotonic() < deadline:
                    time.sleep(1.0)
                    continue
                # The lease lapses without heartbeats and the reaper requeues the trial.
                log.warning("could not hand %s back (%s); its lease will lapse", run.spec.key, exc)
                break
        if reset:
            owner.finish(run)
        else:
            owner.end()
