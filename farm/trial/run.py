"""One trial attempt's steps: deploy → inject → agent_session → oracle → record, then reset.
A `TrialRun` lives on the worker that owns the cluster, between the steps of its chain; how a
worker drives it and what a failed step means is farm/trial/worker.py.

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
import time
import uuid
from typing import Any, cast

from sqlalchemy.engine import Engine

from clusters.base import ClusterHandle
from core.errors import InfrastructureError, LeaseLost, ProviderError
from core.events import (
    Abandoned,
    AgentCrashed,
    FaultInjected,
    InfrastructureFailed,
    NoiseStarted,
    NoiseStopped,
    PhaseEntered,
    Recorded,
    Superseded,
    TrialEvent,
)
from core.states import END_AGENT_ERROR, END_AGENT_STOPPED, END_CONTEXT_LENGTH, LIMIT_WALL_TIME, AttemptState
from farm.agents.base import AgentContext, AgentResult
from farm.trial.artifacts import AttemptArtifacts
from farm.trial.spec import TrialSpec
from results import ledger
from results.artifacts import ArtifactStore
from results.ledger import AttemptResult, Claim

log = logging.getLogger("farm.trial")

# The steps of the chain, in order: each a method of TrialRun and a Celery task of the same name.
PHASES = ("deploy", "inject", "agent_session", "oracle", "record")


class TrialRun:
    """The live state of one attempt on its worker."""

    def __init__(self, spec: TrialSpec, claim: Claim, cluster: ClusterHandle, engine: Engine,
                 store: ArtifactStore, redis_url: str | None = None) -> None:
        from apps import load_application
        from farm.spec import catalog

        self.spec, self.claim, self.cluster, self.engine, self.store = spec, claim, cluster, engine, store
        self.redis_url = redis_url
        self.problem = catalog().get(spec.problem_id)
        self.app = load_application(self.problem.app)
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
        self.baseline: Any = None
        self.injection: Any = None
        self.noise_runner: Any = None
        self.noise_records: list[dict[str, Any]] = []
        self.injected_at: float | None = None
        self.interface: Any = None
        self.agent_result: AgentResult | None = None
        self.diagnosis: Any = None
        self.mitigation: Any = None
        self.events: list[TrialEvent] = []

    # -- bookkeeping -----------------------------------------------------------------------
    def _event(self, event: TrialEvent) -> None:
        event.cluster_time = self.now()
        self.events.append(event)

    def now(self) -> float | None:
        """The cluster's clock, or None when it cannot be read (best effort in a log)."""
        try:
            return self.cluster.now()
        except Exception:  # the clock is best effort in an event log
            return None

    def _enter(self, phase: str) -> None:
        if self.lease_lost.is_set() or not ledger.holds_lease(self.engine, self.claim):
            raise LeaseLost(f"attempt {self.claim.token} of trial {self.claim.trial_id} no longer holds its lease")
        self.phase = phase
        ledger.set_phase(self.engine, self.claim, phase)
        self._event(PhaseEntered(phase=phase))

    # -- the chain -------------------------------------------------------------------------
    def deploy(self) -> None:
        from farm.deploy import deploy
        from farm.oracles.mitigation import MitigationOracle
        from farm.trial.session import prepare_agent

        self._enter("deploy")
        try:
            prepare_agent(self.spec.agent, dict(self.spec.agent_options), self.spec.limits)  # its start-up overlaps the deploy
        except Exception as exc:  # the session starts one itself, and reports what fails then
            log.warning("could not start the agent's process ahead of its session: %s", exc)
        deploy(self.cluster, self.app, self.namespace, seed=self.spec.seed)
        # The agent's account, roles and token exist from the deploy on, as an on-call team's do:
        # made at injection time they would date the fault (the interface reuses them).
        self.cluster.agent_kubeconfig(self.namespace, also=tuple(self.app.extra_namespaces))
        self.mitigation_oracle = MitigationOracle(self.app, self.problem)
        self.baseline = self.mitigation_oracle.capture_baseline(self.cluster, self.namespace)

    def inject(self) -> None:
        from injectors.compose import NoiseRunner, ProblemInjection, ambient_noises, fault_components

        self._enter("inject")
        self.injection = ProblemInjection(self.problem)
        self.injection.inject(self.cluster, self.namespace)
        self.injected_at = self.cluster.now()
        self._event(FaultInjected(faults=[f.injector for f in self.problem.faults]))
        specs = ambient_noises(self.problem, self.spec.noise_level) if self.spec.noise_level else self.problem.noises
        # A no-fault control's own noises are its incident: they run whether the sweep turns noise on or not.
        if (self.spec.noise or self.problem.no_fault) and specs:
            self.noise_runner = NoiseRunner(specs, self.spec.seed, avoid=fault_components(self.problem))
            self.noise_runner.start(self.cluster, self.namespace)
            self._event(NoiseStarted(kinds=[n.kind for n in specs]))

    def agent_session(self) -> None:
        from farm.interface import AgentInterface
        from farm.interface.server import Mode
        from farm.llm.client import LLMClient
        from farm.llm.proxy import ModelProxy
        from farm.trial.checkpoint import Checkpointer, LLMUsageTap
        from farm.trial.session import model_failure, run_agent_process

        self._enter("agent_session")
        self.usage = LLMUsageTap(self.spec.model, self.spec.agent_options.get("price"))
        # The interface enforces the limits; for the farm's own model agents it reads the usage
        # the worker counted of their litellm calls, never what the agent says it used.
        mode = cast(Mode, self.spec.tool_mode)  # farm.spec's validator let only the two modes through
        self.interface = AgentInterface(self.cluster, self.namespace, self.opaque_id, mode=mode,
                                        also_namespaces=tuple(self.app.extra_namespaces),
                                        limits=self.spec.limits, usage=self.usage.snapshot)
        url, token = self.interface.start()
        options = dict(self.spec.agent_options)
        options.setdefault("sweep_id", self.spec.sweep_id)
        if self.spec.cost_cap_usd is not None:
            options.setdefault("sweep_cost_cap", self.spec.cost_cap_usd)
        if self.spec.concurrency:
            options.setdefault("concurrency", self.spec.concurrency)
        if self.redis_url:
            options.setdefault("redis_url", self.redis_url)
        ctx = AgentContext(trial_id=self.opaque_id, namespace=self.namespace, mcp_url=url, mcp_token=token,
                           model=self.spec.model, limits=self.spec.limits, seed=self.spec.seed,
                           tool_mode=self.spec.tool_mode, options=options)
        # The agent runs in its own sandboxed process; its model calls come back through this
        # session's proxy, to the worker's own client (usage, budgets, the sweep's cap, slots).
        proxy = None
        if self.spec.model is not None:
            # A provider that failed ends the session at once: the attempt is the provider's failure
            # whatever the agent does next (a CLI would spend its wall time retrying).
            proxy = ModelProxy(LLMClient.from_context(ctx), on_limit=self.interface.end,
                               on_provider_failure=lambda exc: self.interface.end(
                                   END_AGENT_STOPPED, f"the model provider failed: {exc}"[:500]),
                               deadline=time.monotonic() + self.spec.limits.wall_time_s)
        tapped = self.spec.model is not None and self.usage.install()
        try:
            endpoint = proxy.start() if proxy is not None else None
            # Checkpoints while the agent works: a worker killed mid-session loses little.
            with Checkpointer(self.checkpoint, lambda: len(self.interface.record.tool_calls)):
                out = run_agent_process(self.spec.agent, ctx, self.interface, endpoint=endpoint)
        finally:
            if proxy is not None:
                proxy.stop()
            if tapped:
                self.usage.remove()
            self.interface.stop()
        failure = model_failure(proxy.failures) if proxy is not None else None
        if failure is not None:
            raise failure  # the provider failed, not the agent
        if out.infrastructure is not None and not self.interface.record.tool_calls:
            # It never reached the interface: the farm's failure, retried. An agent that worked the
            # incident and then claims one is not given a second try at it.
            raise InfrastructureError(f"the agent could not reach the trial: {out.infrastructure}")
        if out.infrastructure is not None:
            out.error = f"the agent reported an infrastructure failure after its calls: {out.infrastructure}"
        if out.result is not None:
            self.agent_result = out.result
        else:
            # The agent returned nothing: what it did is known from the calls the worker saw.
            reason = END_AGENT_ERROR if out.error else (self.interface.record.end_reason or LIMIT_WALL_TIME)
            self.agent_result = self._from_partial(AgentResult(end_reason=reason, error=out.error))
            if out.error:
                self._event(AgentCrashed(trace=(out.trace or out.error)[-4000:]))
        if proxy is not None and proxy.failures:
            last = proxy.failures[-1]
            if self.agent_result.error is None:
                self.agent_result.error = f"model call failed: {type(last).__name__}: {last}"[:2000]
            if getattr(last, "kind", None) == "context_length" and self.agent_result.end_reason == END_AGENT_ERROR:
                # the worker saw why: the agent's conversation outgrew its model's window
                self.agent_result.end_reason = END_CONTEXT_LENGTH
        self._collect_session()
        self._save_partial()

    def _collect_session(self) -> None:
        """The session's figures as the worker saw them: tool calls from its interface (those
        refused after the session ended are no steps), model usage from its own client; the
        agent's answer supplies its end reason (and its usage, for an agent that made no model call)."""
        rec = self.interface.record if self.interface else None
        ar = self.agent_result
        r = self.result
        if ar is not None:
            r.end_reason = ar.end_reason
            r.tokens_in, r.tokens_out, r.tokens_cached = ar.tokens_in, ar.tokens_out, ar.tokens_cached
            r.cost_usd = ar.cost_usd
            if ar.error:
                r.error = ar.error
        usage = self.usage.snapshot() if getattr(self, "usage", None) is not None else {"calls": 0}
        if usage["calls"]:
            r.tokens_in, r.tokens_out, r.tokens_cached = usage["tokens_in"], usage["tokens_out"], usage["tokens_cached"]
            r.cost_usd = usage["cost_usd"]
        if rec is not None and rec.end_reason is not None and rec.mitigation_at is None:
            r.end_reason = rec.end_reason  # the interface's word on why the session ended, not the agent's
        if rec is not None:
            calls = rec.counted_calls()
            r.tool_calls = len(calls)
            r.tool_output_tokens = sum(getattr(c, "tokens", 0) or 0 for c in calls)
            r.tool_tokens = rec.tokens_per_tool(calls)
            r.diagnosis_submitted = rec.diagnosis is not None
            if rec.diagnosis_at is not None and self.injected_at is not None:
                r.time_to_diagnosis_s = max(0.0, rec.diagnosis_at - self.injected_at)
            r.steps = usage["calls"] or r.tool_calls

    def oracle(self) -> None:
        from farm.llm.limits import SweepLedger, redis_url_from
        from farm.oracles.diagnosis import judge_diagnosis
        from farm.oracles.inventory import app_inventory

        self._enter("oracle")
        if self.noise_runner is not None:
            self.noise_runner.stop(self.cluster)  # noise stops before the oracles run
            self.noise_records = self.noise_runner.records()
            self._event(NoiseStopped())
            self.noise_runner = None
        text = self.interface.record.diagnosis if self.interface else None
        # The injected ground truth: node-level faults fill in the node they landed on.
        # An LLM judge spends the sweep's money too: its calls go on the sweep's ledger.
        spend = SweepLedger(self.spec.sweep_id, self.spec.cost_cap_usd,
                            redis_url_from({"redis_url": self.redis_url})) if self.spec.judge else None
        structured = self.interface.record.structured if self.interface else None
        self.diagnosis = judge_diagnosis(text, self.injection.ground_truth(), self.spec.judge, ledger=spend,
                                         components=app_inventory(self.problem.app), structured=structured)
        # A diagnosis-only problem has no fix an agent could make: its mitigation is not scored
        # (NULL, never a failure), and its rows are counted apart in the leaderboard.
        self.mitigation = None if self.problem.diagnosis_only else self.mitigation_oracle.evaluate(
            self.cluster, self.namespace, self.baseline, self.injection)
        r = self.result
        r.diagnosis_passed, r.diagnosis_score = self.diagnosis.passed, self.diagnosis.composite
        r.diagnosis_threshold, r.diagnosis_pass_rule = self.diagnosis.threshold, self.diagnosis.pass_rule
        r.diagnosis_scores, r.judge, r.judge_offline = self.diagnosis.scores, self.diagnosis.judge, self.diagnosis.offline
        r.judge_cost_usd = self.diagnosis.cost_usd
        if self.diagnosis.structured is not None:
            s = self.diagnosis.structured
            r.rca_top1, r.rca_top3, r.fault_type_correct = s.top1, s.top3, s.fault_type
        if self.mitigation is None:
            return
        r.mitigation_passed = self.mitigation.passed
        r.mitigation_success_rate = self.mitigation.success_rate
        r.mitigation_checks = self.mitigation.checks
        rec = self.interface.record if self.interface else None
        if self.mitigation.passed and rec is not None and self.injected_at is not None:
            r.time_to_mitigation_s = time_to_mitigation(rec, self.injected_at)

    def record(self) -> bool:
        self._enter("record")
        self.save_artifacts()
        won = ledger.record(self.engine, self.claim, self.result)
        self._event(Recorded() if won else Superseded())
        return won

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

    def _save_partial(self) -> None:
        try:
            self.save_artifacts(snapshot=False)
            ledger.set_phase(self.engine, self.claim, self.phase, partial=self.result)
        except Exception as exc:  # partial saves are best effort; the final save reports errors
            log.warning("partial artifact save failed: %s", exc)

    # -- checkpoints during the agent session -----------------------------------------------
    def _record_copy(self) -> tuple[list[Any], list[Any]]:
        rec = self.interface.record
        with self.interface._lock:  # the server appends and sorts under it
            return list(rec.tool_calls), list(rec.mutations)

    def _collect_partial(self, calls: list[Any]) -> dict[str, Any]:
        """Fold what the worker has seen of the running session into self.result."""
        rec, usage, r = self.interface.record, self.usage.snapshot(), self.result
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
        return usage

    def checkpoint(self) -> None:
        """Save what the session produced so far to the artifact store and the attempt row."""
        calls, mutations = self._record_copy()
        usage = self._collect_partial(calls)
        self.artifacts.checkpoint(self, calls, mutations, usage)
        ledger.set_phase(self.engine, self.claim, self.phase, partial=self.result)

    def _from_partial(self, result: AgentResult) -> AgentResult:
        """An agent that returned no result (it crashed, or overran its wall time) still gets
        credit and blame for what the worker saw it do: its model usage and conversation."""
        usage = self.usage.snapshot()
        if usage["calls"]:
            result.steps = usage["calls"]
            result.tokens_in, result.tokens_out = usage["tokens_in"], usage["tokens_out"]
            result.tokens_cached, result.cost_usd = usage["tokens_cached"], usage["cost_usd"]
            result.transcript = [{"kind": "note", "text": "the agent returned no transcript; these are the "
                                  "messages of the last model call the worker observed"}, *usage["messages"]]
        return result

    # -- failure paths ---------------------------------------------------------------------
    def fail_infrastructure(self, exc: BaseException) -> str | None:
        phase = getattr(exc, "phase", None) or self.phase
        self.result.error, self.result.error_phase = f"{type(exc).__name__}: {exc}", phase
        self._event(InfrastructureFailed(phase=phase, error=str(exc)))
        try:
            self.save_artifacts(snapshot=True)
        except Exception as save_exc:  # the ledger update below matters more
            log.warning("artifact save failed after infrastructure error: %s", save_exc)
        # A provider that refused the credentials or does not know the model fails every attempt
        # alike until the user changes something: given up at once (a re-run retries it).
        attempts = 1 if isinstance(exc, ProviderError) and not exc.transient else self.spec.max_infra_attempts
        return ledger.infra_failure(self.engine, self.claim, phase, str(exc), attempts, partial=self.result)

    def abandon(self, why: str) -> None:
        self._event(Abandoned(why=why))
        try:
            self.save_artifacts(snapshot=False)
        except Exception as exc:  # nothing more can be done for a zombie
            log.warning("artifact save failed for abandoned attempt: %s", exc)
        ledger.abandon(self.engine, self.claim, AttemptState.SUPERSEDED, why)


def time_to_mitigation(rec: Any, injected_at: float) -> float | None:
    """Cluster seconds from the injection to the agent's submit_mitigation, or, if it never
    submitted, to its last change to the cluster; None if it changed nothing. Never the time the
    oracle read (after its observation window): that measures the oracle, not the agent."""
    at = rec.mitigation_at
    if at is None and rec.mutations:
        at = max(m.at for m in rec.mutations)
    return None if at is None else max(0.0, at - injected_at)


