"""A worker's side of the farm, shared by Celery workers and the embedded runner: the one cluster
it owns, the attempt it is running, the reset after each trial (a cluster that cannot be reset is
replaced before the worker takes another trial), and a heartbeat thread that keeps that attempt's
lease, records the worker's health, and reaps trials whose worker was lost."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Engine

from clusters.handle import ClusterHandle, open_cluster
from core.states import EVENT_CLUSTER_LOST, EVENT_CLUSTER_REPLACED, EVENT_RESET_FAILED
from results import ledger
from results.artifact_store import ArtifactStore

if TYPE_CHECKING:
    from farm.trial.run import TrialRun

log = logging.getLogger("farm.owner")
HEALTH_EVERY = 8  # heartbeats between two cluster health probes
# Seconds between two attempts to replace a cluster that could not be replaced: opening a real
# cluster can take minutes, and a claim that cannot run is handed back meanwhile.
REPLACE_EVERY_S = 60.0


def republish_after_s(lease_s: float) -> float:
    """How long a trial may stay queued with no claim acted on before the reaper re-sends its
    claim (FARM_REPUBLISH_S): a lost message costs this much; a re-send that was not needed costs
    one duplicate message, which the lease turns away."""
    return float(os.environ.get("FARM_REPUBLISH_S", str(4 * lease_s)))


class ClusterOwner:
    def __init__(self, name: str, cluster_ref: str, engine: Engine, store: ArtifactStore,
                 lease_s: float = ledger.DEFAULT_LEASE_S, cluster_options: dict[str, Any] | None = None,
                 on_requeue: Callable[[list[str]], None] | None = None, reap: bool = True,
                 health_every: int = HEALTH_EVERY) -> None:
        self.name, self.cluster_ref = name, cluster_ref
        self.engine, self.store, self.lease_s = engine, store, lease_s
        self.cluster_options = cluster_options or {}
        self.on_requeue = on_requeue
        self.reap_enabled = reap
        self.health_every = max(1, health_every)
        self.cluster: ClusterHandle | None = None
        self.current: TrialRun | None = None  # the attempt in progress
        # Why the worker has no usable cluster (a reset failed and no replacement opened), or None.
        self.broken: str | None = None
        self._last_replace = 0.0
        # The last health probe's verdict, and when the attempt in progress last moved: a step
        # began or ended (farm.serving hands back a chain that stopped moving).
        self.healthy, self.health_detail = True, ""
        self.progress_at = time.monotonic()
        self.steps_running = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def open(self) -> ClusterHandle:
        if self.cluster is None:
            self.cluster = open_cluster(self.cluster_ref, **self.cluster_options)
        ledger.register_worker(self.engine, self.name, self.cluster.ref, socket.gethostname(), os.getpid())
        if self._thread is None:
            self._thread = threading.Thread(target=self._beat, name=f"heartbeat-{self.name}", daemon=True)
            self._thread.start()
        return self.cluster

    def recycle(self) -> ClusterHandle:
        """A cluster that could not be reset is replaced rather than reused dirty."""
        self._last_replace = time.monotonic()
        if self.cluster is not None:
            try:
                self.cluster.close()
            except Exception as exc:  # the replacement matters, not the old handle
                log.warning("closing %s failed: %s", self.cluster_ref, exc)
            self.cluster = None
        handle = self.open()
        self.broken = None
        return handle

    @property
    def ready(self) -> bool:
        """True when the worker has a clean cluster and may take a trial."""
        return self.cluster is not None and self.broken is None

    def try_replace(self) -> bool:
        """For a worker left without a cluster: try to open a new one, at most every
        REPLACE_EVERY_S. True when the worker is ready again."""
        if self.ready:
            return True
        if time.monotonic() - self._last_replace < REPLACE_EVERY_S:
            return False
        try:
            self.recycle()
        except Exception as exc:  # still no cluster: the worker keeps refusing trials
            self.broken = f"no cluster: {exc}"
            log.error("replacing the cluster of %s failed again: %s", self.name, exc)
            return False
        ledger.infra_event(self.engine, EVENT_CLUSTER_REPLACED, self.name, self.cluster_ref,
                           "a cluster that had been lost was replaced")
        return True

    def finish(self, run: TrialRun) -> None:
        """Reset the cluster after a trial, whatever happened, and free the worker.

        A failed reset is an infrastructure event, not the trial's failure: reset runs after
        `record`, so the agent's work is done and judged on a cluster that was clean when the
        trial began; throwing that result away and running the trial again would spend the
        agent's budget twice for nothing. What the failure does endanger is the *next* trial,
        which would start with this one's fault or leftovers still planted and be scored against
        an agent that did nothing wrong. So: the event is recorded in SQL (apart from results,
        shown by `farm sweep status` and the leaderboard), and the dirty cluster is replaced
        before the worker takes another trial; if no replacement opens, the worker stops taking
        trials until one does (its heartbeat reports the cluster unhealthy)."""
        try:
            run.reset()
        except Exception as exc:  # ResetError or anything else: the cluster's state is unknown
            self._reset_failed(run, exc)
        finally:
            self.end()

    def _reset_failed(self, run: Any, exc: Exception) -> None:
        ref = self.cluster.ref if self.cluster is not None else self.cluster_ref
        log.error("reset failed after %s, replacing the cluster: %s", run.spec.key, exc)
        try:
            ledger.infra_event(self.engine, EVENT_RESET_FAILED, self.name, ref, str(exc), run.claim)
        except Exception as db_exc:  # the replacement below matters more than the record
            log.warning("could not record the failed reset: %s", db_exc)
        try:
            self.recycle()
        except Exception as open_exc:  # no clean cluster: refuse trials rather than run them dirty
            self.cluster, self.broken = None, f"reset failed and no replacement opened: {open_exc}"
            log.error("%s: %s", self.name, self.broken)
            kind, detail = EVENT_CLUSTER_LOST, self.broken
        else:
            kind, detail = EVENT_CLUSTER_REPLACED, f"replaced after a failed reset (now {self.cluster_ref})"
        try:
            ledger.infra_event(self.engine, kind, self.name, ref, detail, run.claim)
        except Exception as db_exc:  # logged above already
            log.warning("could not record the cluster replacement: %s", db_exc)

    def close(self) -> None:
        self._stop.set()
        try:
            ledger.worker_heartbeat(self.engine, self.name, "stopped", None)
        except Exception as exc:  # shutting down; the row simply goes stale
            log.debug("final worker heartbeat failed: %s", exc)
        if self.cluster is not None:
            self.cluster.close()
            self.cluster = None

    @property
    def busy(self) -> bool:
        return self.current is not None

    def begin(self, run: TrialRun) -> None:
        with self._lock:
            self.current = run
            self.progress_at = time.monotonic()

    @contextlib.contextmanager
    def in_step(self) -> Iterator[None]:
        """Around one step of the chain: while a step runs, the attempt is moving."""
        with self._lock:
            self.steps_running += 1
            self.progress_at = time.monotonic()
        try:
            yield
        finally:
            with self._lock:
                self.steps_running -= 1
                self.progress_at = time.monotonic()

    def stalled_for(self) -> float:
        """Seconds the attempt in progress has waited for its next step (0 while a step runs)."""
        with self._lock:
            if self.current is None or self.steps_running:
                return 0.0
            return time.monotonic() - self.progress_at

    def report_unhealthy(self, detail: str) -> None:
        """A worker without a cluster says so in its row (`farm cluster list`), registered or not."""
        try:
            ledger.register_worker(self.engine, self.name, self.cluster_ref, socket.gethostname(), os.getpid())
            ledger.worker_heartbeat(self.engine, self.name, "opening", None, healthy=False, detail=detail)
        except Exception as exc:  # the database may be what is down
            log.warning("could not report %s unhealthy: %s", self.name, exc)

    def end(self) -> None:
        with self._lock:
            self.current = None

    # -- heartbeat -------------------------------------------------------------------------
    def _check_health(self) -> tuple[bool, str]:
        """The cluster's health now; a probe that raises is itself the verdict."""
        if self.cluster is None:
            return (False, self.broken) if self.broken else (True, "")
        try:
            h = self.cluster.health()
        except Exception as exc:  # a health probe must never kill the heartbeat
            return False, f"health check failed: {exc}"
        return h.ok, h.detail

    def _beat(self) -> None:
        interval = max(0.2, self.lease_s / 4)
        ticks = 0
        # The last verdict is carried between probes: every heartbeat row says what the last
        # probe found, so `farm cluster list` never reports a sick cluster healthy in between.
        healthy, detail = True, ""
        while not self._stop.wait(interval):
            ticks += 1
            with self._lock:
                run = self.current
            try:
                if run is not None and not run.lease_lost.is_set():
                    if not ledger.heartbeat(self.engine, run.claim, self.lease_s):
                        run.lease_lost.set()
                # Probed on the first beat, then every `health_every` beats: on a sick cluster a
                # probe can take its whole timeout, and the lease must not lapse behind it.
                if (ticks - 1) % self.health_every == 0:
                    healthy, detail = self._check_health()
                    self.healthy, self.health_detail = healthy, detail
                ledger.worker_heartbeat(self.engine, self.name, "busy" if run else "idle",
                                        run.spec.trial_id if run else None, healthy, detail)
                if self.reap_enabled and ticks % 2 == 0:
                    requeued = ledger.reap(self.engine)
                    if requeued:
                        log.warning("requeued %d trial(s) of lost workers: %s", len(requeued), requeued)
                    if self.on_requeue:
                        stale = ledger.stale_queued(self.engine, older_than_s=republish_after_s(self.lease_s))
                        if stale:
                            log.warning("re-sending claims of %d trial(s) queued too long", len(stale))
                        if requeued or stale:
                            self.on_requeue(requeued + stale)
            except Exception as exc:  # a database blip must not kill the heartbeat
                log.warning("heartbeat failed: %s", exc)
