"""One trial attempt's live state on the worker that owns its cluster: what it runs (spec,
claim, cluster, problem, application), what its phases handed over last (farm/trial/handover.py),
what it started that a reset must undo, and what it has produced so far for its artifacts and its
attempt row. The phases themselves, and the chain that orders them, are farm/trial/phases.py; how a
worker drives them and what a failed step means, farm/trial/worker.py.

Every step first checks that the attempt still holds its lease (LeaseLost otherwise: a zombie
stops without writing). Deploy, inject and oracle failures, and a model provider failing the agent
(core.errors.ProviderError, phase `provider`), are infrastructure errors: the trial is retried
elsewhere and never counted against the agent. A reset that fails after `record` leaves
the result standing (farm/owner.py records it and replaces the cluster). Whatever ends an attempt,
what it produced so far is written to the artifact store, and a running session is checkpointed.
"""

from __future__ import annotations

import logging
import threading
import uuid
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Engine

from apps.application import Application
from clusters.handle import ClusterHandle
from core.errors import LeaseLost, ProviderError
from core.events import Abandoned, InfrastructureFailed, PhaseEntered, TrialEvent
from core.problem import Problem
from core.records import DiagnosisVerdict, MitigationVerdict, Mutation, ToolCall
from core.states import AttemptState
from farm.agents.agent import AgentResult
from farm.trial.artifacts import AttemptArtifacts
from farm.trial.handover import Claimed, Handover
from farm.trial.spec import TrialSpec
from results import ledger
from results.artifact_store import ArtifactStore
from results.ledger import AttemptResult, Claim

if TYPE_CHECKING:  # loaded by the phase that starts them
    from farm.interface.record import SessionRecord
    from farm.interface.server import AgentInterface
    from farm.trial.checkpoint import LLMUsageTap, UsageSnapshot
    from injectors.compose import NoiseRunner, ProblemInjection

log = logging.getLogger("farm.trial")


class TrialRun:
    """The live state of one attempt on its worker."""

    def __init__(self, spec: TrialSpec, claim: Claim, cluster: ClusterHandle, engine: Engine,
                 store: ArtifactStore, redis_url: str | None = None) -> None:
        from apps import load_application
        from farm.spec import catalog

        self.spec, self.claim, self.cluster, self.engine, self.store = spec, claim, cluster, engine, store
        self.redis_url = redis_url
        self.problem: Problem = catalog().get(spec.problem_id)
        self.app: Application = load_application(self.problem.app)
        self.namespace = self.app.namespace
        self.opaque_id = uuid.uuid4().hex[:16]  # what the agent sees; never the problem id
        self.prefix = f"{spec.sweep_id}/{spec.trial_id}/attempt-{claim.token}"
        self.artifacts = AttemptArtifacts(store, self.prefix)
        self.result = AttemptResult(artifacts_uri=store.base_uri(self.prefix), tool_mode=spec.tool_mode)
        root = getattr(store, "root", None)  # a local store's folder: scrubbed from what the agent sees
        if root is not None:
            from core.secrets import hide_path

            hide_path(root)
        self.lease_lost = threading.Event()
        self.handed_back = False  # released to the queue: a late step of its old chain does nothing
        self.database_error = ""  # why the last step met a failed farm database, if it did
        self.phase = "claimed"
        # What the last phase handed over: the next phase's input (farm.trial.phases.Phase.run).
        self.handed: Handover = Claimed(trial_id=spec.trial_id, token=claim.token, key=spec.key)
        # What the phases started, registered before they start it: a reset undoes it whatever failed.
        self.injection: ProblemInjection | None = None
        self.noise_runner: NoiseRunner | None = None
        self.interface: AgentInterface | None = None
        self.usage: LLMUsageTap | None = None
        # What the attempt produced so far, for its artifacts (a failed phase's part included).
        self.injected_at: float | None = None
        self.noise_records: list[dict[str, Any]] = []
        self.agent_result: AgentResult | None = None
        self.diagnosis: DiagnosisVerdict | None = None
        self.mitigation: MitigationVerdict | None = None
        self.events: list[TrialEvent] = []

    @property
    def claimed(self) -> Claimed:
        """The attempt as a Celery step message names it."""
        return Claimed(trial_id=self.spec.trial_id, token=self.claim.token, key=self.spec.key)

    # -- bookkeeping -----------------------------------------------------------------------
    def event(self, event: TrialEvent) -> None:
        event.cluster_time = self.now()
        self.events.append(event)

    def now(self) -> float | None:
        """The cluster's clock, or None when it cannot be read (best effort in a log)."""
        try:
            return self.cluster.now()
        except Exception:  # the clock is best effort in an event log
            return None

    def enter(self, phase: str) -> None:
        """Start `phase`, if the attempt still holds its lease (LeaseLost otherwise)."""
        if self.lease_lost.is_set() or not ledger.holds_lease(self.engine, self.claim):
            raise LeaseLost(f"attempt {self.claim.token} of trial {self.claim.trial_id} no longer holds its lease")
        self.phase = phase
        ledger.set_phase(self.engine, self.claim, phase)
        self.event(PhaseEntered(phase=phase))

    def reset(self) -> None:
        """Leave the cluster clean for the next trial, whatever happened before."""
        from core.errors import ResetError

        if self.noise_runner is not None:
            try:
                self.noise_runner.stop(self.cluster)
            except Exception as exc:  # reset below removes what stop could not
                log.warning("noise stop failed during reset: %s", exc)
        if self.injection is not None:
            try:
                self.injection.recover(self.cluster)
            except Exception as exc:  # reset below removes what recover could not
                log.warning("recover failed during reset: %s", exc)
        if self.interface is not None:
            self.interface.stop()
        try:
            self.cluster.reset()
        except ResetError:
            raise
        except Exception as exc:
            raise ResetError(f"reset of {self.cluster.ref} failed: {exc}") from exc

    # -- artifacts -------------------------------------------------------------------------
    def save_artifacts(self, snapshot: bool = True) -> None:
        self.artifacts.save(self, snapshot=snapshot)

    def save_partial(self) -> None:
        """What the attempt produced so far, to its artifacts and its row; best effort."""
        try:
            self.save_artifacts(snapshot=False)
            ledger.set_phase(self.engine, self.claim, self.phase, partial=self.result)
        except Exception as exc:  # partial saves are best effort; the final save reports errors
            log.warning("partial artifact save failed: %s", exc)

    # -- checkpoints during the agent session -----------------------------------------------
    def _collect_partial(self, rec: SessionRecord, usage: UsageSnapshot, calls: list[ToolCall]) -> None:
        """Fold what the worker has seen of the running session into self.result."""
        r = self.result
        calls = rec.counted_calls(calls)
        r.tool_calls = len(calls)
        r.tool_output_tokens = sum(c.tokens or 0 for c in calls)
        r.tool_tokens = rec.tokens_per_tool(calls)
        r.diagnosis_submitted = rec.diagnosis is not None
        if rec.diagnosis_at is not None and self.injected_at is not None:
            r.time_to_diagnosis_s = max(0.0, rec.diagnosis_at - self.injected_at)
        r.steps = usage["calls"] or len(calls)
        if usage["calls"]:
            r.tokens_in, r.tokens_out, r.tokens_cached = usage["tokens_in"], usage["tokens_out"], usage["tokens_cached"]
            r.cost_usd = usage["cost_usd"]

    def checkpoint(self) -> None:
        """Save what the session produced so far to the artifact store and the attempt row."""
        interface, tap = self.interface, self.usage
        if interface is None or tap is None:  # no session running: nothing to checkpoint
            return
        with interface._lock:  # the server appends and sorts under it
            calls: list[ToolCall] = list(interface.record.tool_calls)
            mutations: list[Mutation] = list(interface.record.mutations)
        usage = tap.snapshot()
        self._collect_partial(interface.record, usage, calls)
        self.artifacts.checkpoint(self, calls, mutations, usage)
        ledger.set_phase(self.engine, self.claim, self.phase, partial=self.result)

    # -- failure paths ---------------------------------------------------------------------
    def fail_infrastructure(self, exc: BaseException) -> str | None:
        phase = getattr(exc, "phase", None) or self.phase
        self.result.error, self.result.error_phase = f"{type(exc).__name__}: {exc}", phase
        self.event(InfrastructureFailed(phase=phase, error=str(exc)))
        try:
            self.save_artifacts(snapshot=True)
        except Exception as save_exc:  # the ledger update below matters more
            log.warning("artifact save failed after infrastructure error: %s", save_exc)
        # A provider that refused the credentials or does not know the model fails every attempt
        # alike until the user changes something: given up at once (a re-run retries it).
        attempts = 1 if isinstance(exc, ProviderError) and not exc.transient else self.spec.max_infra_attempts
        return ledger.infra_failure(self.engine, self.claim, phase, str(exc), attempts, partial=self.result)

    def abandon(self, why: str) -> None:
        self.event(Abandoned(why=why))
        try:
            self.save_artifacts(snapshot=False)
        except Exception as exc:  # nothing more can be done for a zombie
            log.warning("artifact save failed for abandoned attempt: %s", exc)
        ledger.abandon(self.engine, self.claim, AttemptState.SUPERSEDED, why)


def time_to_mitigation(rec: SessionRecord, injected_at: float) -> float | None:
    """Cluster seconds from the injection to the agent's submit_mitigation, or, if it never
    submitted, to its last change to the cluster; None if it changed nothing. Never the time the
    oracle read (after its observation window): that measures the oracle, not the agent."""
    at = rec.mitigation_at
    if at is None and rec.mutations:
        at = max(m.at for m in rec.mutations)
    return None if at is None else max(0.0, at - injected_at)


