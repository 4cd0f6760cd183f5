"""What an attempt leaves in the artifact store, as typed records, and the one place that writes
them. Under `<sweep>/<trial>/attempt-<token>/`: attempt (who ran it, how far, its result), events
(core.events), injections, noise, transcript, trajectory.atif, tool_calls, mutations, diagnosis
(what the agent submitted), verdicts (the oracles' word), cluster_snapshot (.json.gz), and while
the session runs, checkpoint. Whatever ends an attempt, what it produced so far is written. The records
results' report reads back are core.records'; the attempt and checkpoint records, which hold
the farm's TrialSpec, are defined here."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from core.events import EVENT_LOG
from core.records import Mutation, SubmittedDiagnosis, ToolCall, Verdicts
from farm.trial.spec import TrialSpec
from results.artifact_store import ArtifactStore
from results.ledger import AttemptResult

if TYPE_CHECKING:
    from farm.interface.server import AgentInterface
    from farm.trial.checkpoint import UsageSnapshot
    from farm.trial.run import TrialRun

log = logging.getLogger("farm.trial")

SNAPSHOT = "cluster_snapshot"  # written compressed: <prefix>/cluster_snapshot.json.gz


class AttemptRecord(BaseModel):
    """attempt.json: the trial it ran, where, how far it got and what it produced."""

    trial: TrialSpec
    attempt: int  # the fencing token
    worker: str
    cluster: str
    phase: str
    agent_trial_id: str  # the opaque id the agent saw
    injected_at: float | None
    result: AttemptResult
    partial: bool = False  # written by a checkpoint of a running session


class Checkpoint(BaseModel):
    """checkpoint.json: the running session's state at its last checkpoint."""

    at: float
    cluster_time: float | None
    phase: str
    result: AttemptResult
    llm: dict[str, Any]  # farm.trial.checkpoint.UsageSnapshot, as saved


class AttemptArtifacts:
    """Writes one attempt's artifacts under its prefix."""

    def __init__(self, store: ArtifactStore, prefix: str) -> None:
        self.store, self.prefix = store, prefix

    def put(self, name: str, obj: Any) -> None:
        if isinstance(obj, BaseModel):
            obj = obj.model_dump(mode="json")
        self.store.put_json(f"{self.prefix}/{name}.json", obj)

    def record_of(self, run: TrialRun, partial: bool = False) -> AttemptRecord:
        c = run.claim
        return AttemptRecord(trial=run.spec, attempt=c.token, worker=c.worker, cluster=c.cluster, phase=run.phase,
                             agent_trial_id=run.opaque_id, injected_at=run.injected_at, result=run.result,
                             partial=partial)

    def _session(self, interface: AgentInterface, calls: list[ToolCall], mutations: list[Mutation]) -> None:
        rec = interface.record
        self.put("tool_calls", [c.model_dump() for c in calls])
        # Calls refused because the session was over: no steps, but what the agent went on trying.
        with interface._lock:
            late = list(rec.refused_late)
        if late:
            self.put("refused_calls", [c.model_dump() for c in late])
        # What the agent changed, with the captured objects an undo would restore: the cluster
        # snapshot shows the end state, this shows how it got there (exec included, undo-less).
        self.put("mutations", [m.model_dump() for m in mutations])
        self.put("diagnosis", SubmittedDiagnosis(text=rec.diagnosis, structured=rec.structured,
                                                 submitted_at=rec.diagnosis_at,
                                                 mitigation_submitted_at=rec.mitigation_at))

    def checkpoint(self, run: TrialRun, calls: list[ToolCall], mutations: list[Mutation],
                   usage: UsageSnapshot) -> None:
        """What a running session produced so far (calls and mutations copied under the
        interface's lock by the caller)."""
        assert run.interface is not None  # a checkpoint is of a running session
        self._session(run.interface, calls, mutations)
        self.put("checkpoint", Checkpoint(at=time.time(), cluster_time=run.now(), phase=run.phase,
                                          result=run.result, llm=dict(usage)))
        self.put("attempt", self.record_of(run, partial=True))

    def save(self, run: TrialRun, snapshot: bool = True) -> None:
        """Everything the attempt has produced; with `snapshot`, the cluster's state too."""
        self.put("attempt", self.record_of(run))
        self.store.put_json(f"{self.prefix}/events.json", EVENT_LOG.dump_python(run.events, mode="json"))
        if run.injection is not None:
            self.put("injections", run.injection.records())
        if run.noise_records:
            self.put("noise", run.noise_records)
        if run.agent_result is not None:
            self.put("transcript", run.agent_result.transcript)
            self._atif(run)
        if run.interface is not None:
            rec = run.interface.record
            self._session(run.interface, rec.tool_calls, rec.mutations)
        if run.diagnosis is not None or run.mitigation is not None:
            self.put("verdicts", Verdicts(diagnosis=run.diagnosis, mitigation=run.mitigation))
        if snapshot:
            key = f"{self.prefix}/{SNAPSHOT}.json.gz"
            try:
                self.store.put_json(key, run.cluster.snapshot(run.namespace))
            except Exception as exc:  # a snapshot must not cost the result
                self.store.put_json(key, {"error": str(exc)})

    def _atif(self, run: TrialRun) -> None:
        """The transcript again in ATIF, for trajectory viewers; derived, so never fatal."""
        from farm.agents.atif import to_atif

        assert run.agent_result is not None
        try:
            traj = to_atif(run.agent_result, session_id=run.opaque_id, agent_name=run.spec.agent,
                           model=run.spec.model)
        except Exception as exc:  # the transcript itself is saved; only the export is lost
            log.warning("ATIF export failed: %s", exc)
            return
        self.put("trajectory.atif", traj)
