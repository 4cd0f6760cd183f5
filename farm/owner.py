"""A worker's side of the farm, shared by Celery workers and the embedded runner: the one cluster
it owns, the attempt it is running, and a heartbeat thread that keeps that attempt's lease,
records the worker's health, and reaps trials whose worker was lost."""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy.engine import Engine

from clusters.base import ClusterHandle, open_cluster
from results import ledger
from results.artifacts import ArtifactStore

log = logging.getLogger("farm.owner")
HEALTH_EVERY = 8  # heartbeats between two cluster health probes


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
        self.current: Any = None  # the TrialRun in progress
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
        if self.cluster is not None:
            try:
                self.cluster.close()
            except Exception as exc:  # the replacement matters, not the old handle
                log.warning("closing %s failed: %s", self.cluster_ref, exc)
            self.cluster = None
        return self.open()

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

    def begin(self, run: Any) -> None:
        with self._lock:
            self.current = run

    def end(self) -> None:
        with self._lock:
            self.current = None

    # -- heartbeat -------------------------------------------------------------------------
    def _check_health(self) -> tuple[bool, str]:
        """The cluster's health now; a probe that raises is itself the verdict."""
        if self.cluster is None:
            return True, ""
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
                ledger.worker_heartbeat(self.engine, self.name, "busy" if run else "idle",
                                        run.spec.trial_id if run else None, healthy, detail)
                if self.reap_enabled and ticks % 2 == 0:
                    requeued = ledger.reap(self.engine)
                    if requeued:
                        log.warning("requeued %d trial(s) of lost workers: %s", len(requeued), requeued)
                    if self.on_requeue:
                        stale = ledger.stale_queued(self.engine, older_than_s=4 * self.lease_s)
                        if stale:
                            log.warning("re-sending claims of %d trial(s) queued too long", len(stale))
                        if requeued or stale:
                            self.on_requeue(requeued + stale)
            except Exception as exc:  # a database blip must not kill the heartbeat
                log.warning("heartbeat failed: %s", exc)
