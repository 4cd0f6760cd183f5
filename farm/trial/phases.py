"""A trial's phases as functions from what the last phase handed over to what this one hands on
(farm/trial/handover.py), and the chain that composes them, declared once:

    deploy:        Claimed  -> Deployed
    inject:        Deployed -> Injected
    agent_session: Injected -> Session
    oracle:        Session  -> Judged
    record:        Judged   -> Recorded

`Chain.then` accepts only a phase whose input is the chain's output so far, so the type checker
follows a trial from claim to record. A worker runs one phase at a time (`Phase.run`: the lease
check, the phase, the handover kept on the live TrialRun); the Celery chain sends one task per
phase, in the same order, and the embedded runner runs them in one call (farm/trial/worker.py).

A phase registers what it starts (the injection, the noise, the interface) on the TrialRun
before starting it, so that a phase failing half-way still has its cluster reset and its
artifacts saved.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from core.errors import InfrastructureError
from core.events import AgentCrashed, FaultInjected, NoiseStarted, NoiseStopped
from core.events import Recorded as RecordedEvent
from core.events import Superseded as SupersededEvent
from core.states import END_AGENT_ERROR, END_AGENT_STOPPED, END_CONTEXT_LENGTH, LIMIT_WALL_TIME
from farm.agents.agent import AgentContext, AgentResult
from farm.trial.handover import Claimed, Deployed, Handover, Injected, Judged, Recorded, Session
from farm.trial.run import TrialRun, time_to_mitigation
from results import ledger

if TYPE_CHECKING:
    from farm.interface.server import AgentInterface
    from farm.trial.checkpoint import UsageSnapshot

log = logging.getLogger("farm.trial")

In = TypeVar("In", bound=Handover)
Out = TypeVar("Out", bound=Handover)
Next = TypeVar("Next", bound=Handover)


@dataclass(frozen=True)
class Phase(Generic[In, Out]):
    """One step of the chain: its name (the Celery task's, the attempt row's phase), the types it
    takes and gives, and its body."""

    name: str
    takes: type[In]
    gives: type[Out]
    body: Callable[[TrialRun, In], Out]

    def run(self, run: TrialRun) -> Out:
        """Run the phase on the attempt: after the lease check, on what the last phase handed
        over; what it gives is kept on the run for the next."""
        run.enter(self.name)  # LeaseLost when the attempt is a zombie
        handed = run.handed
        if not isinstance(handed, self.takes):
            raise InfrastructureError(f"{self.name} takes {self.takes.__name__}, but the attempt holds "
                                      f"{type(handed).__name__}: its steps arrived out of order")
        out = self.body(run, handed)
        run.handed = out
        return out


class Chain(Generic[In, Out]):
    """Phases composed in order, each taking what the one before it gives (as a Celery chain of
    signatures, checked before it runs)."""

    def __init__(self, phases: tuple[Phase[Any, Any], ...]) -> None:
        # The chain's own types are In and Out; a tuple cannot name each element's, `then` checked them.
        self.phases = phases

    @staticmethod
    def of(first: Phase[In, Out]) -> Chain[In, Out]:
        return Chain((first,))

    def then(self, phase: Phase[Out, Next]) -> Chain[In, Next]:
        return Chain((*self.phases, phase))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.phases)

    def phase(self, name: str) -> Phase[Any, Any]:
        for p in self.phases:
            if p.name == name:
                return p
        raise KeyError(f"no phase {name!r} in the chain {' -> '.join(self.names)}")


# -- the phases ----------------------------------------------------------------------------------
def deploy(run: TrialRun, claimed: Claimed) -> Deployed:
    from farm.deploy import deploy as deploy_app
    from farm.oracles.mitigation import MitigationOracle
    from farm.trial.session import prepare_agent

    try:
        prepare_agent(run.spec.agent, dict(run.spec.agent_options), run.spec.limits)  # its start-up overlaps the deploy
    except Exception as exc:  # the session starts one itself, and reports what fails then
        log.warning("could not start the agent's process ahead of its session: %s", exc)
    deploy_app(run.cluster, run.app, run.namespace)
    # The agent's account, roles and token exist from the deploy on, as an on-call team's do:
    # made at injection time they would date the fault (the interface reuses them).
    run.cluster.agent_kubeconfig(run.namespace, also=tuple(run.app.extra_namespaces))
    oracle = MitigationOracle(run.app, run.problem)
    return Deployed(claimed, oracle, oracle.capture_baseline(run.cluster, run.namespace))


def inject(run: TrialRun, deployed: Deployed) -> Injected:
    from injectors.compose import NoiseRunner, ProblemInjection, ambient_noises, fault_components

    injection = run.injection = ProblemInjection(run.problem)  # recovered by reset, even half-injected
    injection.inject(run.cluster, run.namespace)
    injected_at = run.injected_at = run.cluster.now()
    run.event(FaultInjected(faults=[f.injector for f in run.problem.faults]))
    specs = ambient_noises(run.problem, run.spec.noise_level) if run.spec.noise_level else run.problem.noises
    # A no-fault control's own noises are its incident: they run whether the sweep turns noise on or not.
    noise = None
    if (run.spec.noise or run.problem.no_fault) and specs:
        noise = run.noise_runner = NoiseRunner(specs, run.spec.seed, avoid=fault_components(run.problem))
        noise.start(run.cluster, run.namespace)
        run.event(NoiseStarted(kinds=[n.kind for n in specs]))
    return Injected(deployed, injection, injected_at, noise)


def agent_session(run: TrialRun, injected: Injected) -> Session:
    from farm.interface import AgentInterface
    from farm.interface.server import Mode
    from farm.llm.client import LLMClient
    from farm.llm.proxy import ModelProxy
    from farm.trial.checkpoint import Checkpointer, LLMUsageTap
    from farm.trial.session import model_failure, run_agent_process

    spec = run.spec
    usage = run.usage = LLMUsageTap(spec.model, spec.agent_options.get("price"))
    # The interface enforces the limits; for the farm's own model agents it reads the usage
    # the worker counted of their litellm calls, never what the agent says it used.
    mode = cast(Mode, spec.tool_mode)  # farm.spec's validator let only the two modes through
    interface = run.interface = AgentInterface(run.cluster, run.namespace, run.opaque_id, mode=mode,
                                               also_namespaces=tuple(run.app.extra_namespaces),
                                               limits=spec.limits, usage=usage.snapshot)
    url, token = interface.start()
    options = dict(spec.agent_options)
    options.setdefault("sweep_id", spec.sweep_id)
    if spec.cost_cap_usd is not None:
        options.setdefault("sweep_cost_cap", spec.cost_cap_usd)
    if spec.concurrency:
        options.setdefault("concurrency", spec.concurrency)
    if run.redis_url:
        options.setdefault("redis_url", run.redis_url)
    ctx = AgentContext(trial_id=run.opaque_id, namespace=run.namespace, mcp_url=url, mcp_token=token,
                       model=spec.model, limits=spec.limits, seed=spec.seed,
                       tool_mode=spec.tool_mode, options=options)
    # The agent runs in its own sandboxed process; its model calls come back through this
    # session's proxy, to the worker's own client (usage, budgets, the sweep's cap, slots).
    proxy = None
    if spec.model is not None:
        # A provider that failed ends the session at once: the attempt is the provider's failure
        # whatever the agent does next (a CLI would spend its wall time retrying).
        proxy = ModelProxy(LLMClient.from_context(ctx), on_limit=interface.end,
                           on_provider_failure=lambda exc: interface.end(
                               END_AGENT_STOPPED, f"the model provider failed: {exc}"[:500]),
                           deadline=time.monotonic() + spec.limits.wall_time_s)
    tapped = spec.model is not None and usage.install()
    try:
        endpoint = proxy.start() if proxy is not None else None
        # Checkpoints while the agent works: a worker killed mid-session loses little.
        with Checkpointer(run.checkpoint, lambda: len(interface.record.tool_calls)):
            out = run_agent_process(spec.agent, ctx, interface, endpoint=endpoint)
    finally:
        if proxy is not None:
            proxy.stop()
        if tapped:
            usage.remove()
        interface.stop()
    failure = model_failure(proxy.failures) if proxy is not None else None
    if failure is not None:
        raise failure  # the provider failed, not the agent
    if out.infrastructure is not None and not interface.record.tool_calls:
        # It never reached the interface: the farm's failure, retried. An agent that worked the
        # incident and then claims one is not given a second try at it.
        raise InfrastructureError(f"the agent could not reach the trial: {out.infrastructure}")
    if out.infrastructure is not None:
        out.error = f"the agent reported an infrastructure failure after its calls: {out.infrastructure}"
    if out.result is not None:
        result = out.result
    else:
        # The agent returned nothing: what it did is known from the calls the worker saw.
        reason = END_AGENT_ERROR if out.error else (interface.record.end_reason or LIMIT_WALL_TIME)
        result = _from_partial(run, AgentResult(end_reason=reason, error=out.error))
        if out.error:
            run.event(AgentCrashed(trace=(out.trace or out.error)[-4000:]))
    if proxy is not None and proxy.failures:
        last = proxy.failures[-1]
        if result.error is None:
            result.error = f"model call failed: {type(last).__name__}: {last}"[:2000]
        if getattr(last, "kind", None) == "context_length" and result.end_reason == END_AGENT_ERROR:
            # the worker saw why: the agent's conversation outgrew its model's window
            result.end_reason = END_CONTEXT_LENGTH
    run.agent_result = result
    _collect_session(run, injected, interface, result, usage.snapshot())
    run.save_partial()
    return Session(injected, interface, result)


def _collect_session(run: TrialRun, injected: Injected, interface: AgentInterface, agent: AgentResult,
                     usage: UsageSnapshot) -> None:
    """The session's figures as the worker saw them: tool calls from its interface (those
    refused after the session ended are no steps), model usage from its own client; the
    agent's answer supplies its end reason (and its usage, for an agent that made no model call)."""
    rec = interface.record
    r = run.result
    r.end_reason = agent.end_reason
    r.tokens_in, r.tokens_out, r.tokens_cached = agent.tokens_in, agent.tokens_out, agent.tokens_cached
    r.cost_usd = agent.cost_usd
    if agent.error:
        r.error = agent.error
    if usage["calls"]:
        r.tokens_in, r.tokens_out, r.tokens_cached = usage["tokens_in"], usage["tokens_out"], usage["tokens_cached"]
        r.cost_usd = usage["cost_usd"]
    if rec.end_reason is not None and rec.mitigation_at is None:
        r.end_reason = rec.end_reason  # the interface's word on why the session ended, not the agent's
    calls = rec.counted_calls()
    r.tool_calls = len(calls)
    r.tool_output_tokens = sum(c.tokens or 0 for c in calls)
    r.tool_tokens = rec.tokens_per_tool(calls)
    r.diagnosis_submitted = rec.diagnosis is not None
    if rec.diagnosis_at is not None:
        r.time_to_diagnosis_s = max(0.0, rec.diagnosis_at - injected.injected_at)
    r.steps = usage["calls"] or r.tool_calls


def _from_partial(run: TrialRun, result: AgentResult) -> AgentResult:
    """An agent that returned no result (it crashed, or overran its wall time) still gets
    credit and blame for what the worker saw it do: its model usage and conversation."""
    assert run.usage is not None  # the session installed it before the agent started
    usage = run.usage.snapshot()
    if usage["calls"]:
        result.steps = usage["calls"]
        result.tokens_in, result.tokens_out = usage["tokens_in"], usage["tokens_out"]
        result.tokens_cached, result.cost_usd = usage["tokens_cached"], usage["cost_usd"]
        result.transcript = [{"kind": "note", "text": "the agent returned no transcript; these are the "
                              "messages of the last model call the worker observed"}, *usage["messages"]]
    return result


def oracle(run: TrialRun, session: Session) -> Judged:
    from farm.llm.limits import SweepLedger, redis_url_from
    from farm.oracles.inventory import app_inventory
    from farm.oracles.judge import judge_diagnosis

    injected = session.injected
    if run.noise_runner is not None:
        run.noise_runner.stop(run.cluster)  # noise stops before the oracles run
        run.noise_records = run.noise_runner.records()
        run.event(NoiseStopped())
        run.noise_runner = None
    rec = session.interface.record
    # The injected ground truth: node-level faults fill in the node they landed on.
    # An LLM judge spends the sweep's money too: its calls go on the sweep's ledger.
    spend = SweepLedger(run.spec.sweep_id, run.spec.cost_cap_usd,
                        redis_url_from({"redis_url": run.redis_url})) if run.spec.judge else None
    diagnosis = run.diagnosis = judge_diagnosis(
        rec.diagnosis, injected.injection.ground_truth(), run.spec.judge, ledger=spend,
        components=app_inventory(run.problem.app), structured=rec.structured)
    # A diagnosis-only problem has no fix an agent could make: its mitigation is not scored
    # (NULL, never a failure), and its rows are counted apart in the leaderboard.
    deployed = injected.deployed
    mitigation = run.mitigation = None if run.problem.diagnosis_only else deployed.oracle.evaluate(
        run.cluster, run.namespace, deployed.baseline, injected.injection)
    r = run.result
    r.diagnosis_passed, r.diagnosis_score = diagnosis.passed, diagnosis.composite
    r.diagnosis_threshold, r.diagnosis_pass_rule = diagnosis.threshold, diagnosis.pass_rule
    r.diagnosis_scores, r.judge, r.judge_offline = diagnosis.scores, diagnosis.judge, diagnosis.offline
    r.judge_cost_usd = diagnosis.cost_usd
    if diagnosis.structured is not None:
        s = diagnosis.structured
        r.rca_top1, r.rca_top3, r.fault_type_correct = s.top1, s.top3, s.fault_type
    if mitigation is not None:
        r.mitigation_passed = mitigation.passed
        r.mitigation_success_rate = mitigation.success_rate
        r.mitigation_checks = mitigation.checks
        if mitigation.passed:
            r.time_to_mitigation_s = time_to_mitigation(rec, injected.injected_at)
    return Judged(session, diagnosis, mitigation)


def record(run: TrialRun, judged: Judged) -> Recorded:
    run.save_artifacts()
    won = ledger.record(run.engine, run.claim, run.result)
    run.event(RecordedEvent() if won else SupersededEvent())
    return Recorded(judged, won)


DEPLOY = Phase("deploy", Claimed, Deployed, deploy)
INJECT = Phase("inject", Deployed, Injected, inject)
AGENT_SESSION = Phase("agent_session", Injected, Session, agent_session)
ORACLE = Phase("oracle", Session, Judged, oracle)
RECORD = Phase("record", Judged, Recorded, record)

# The trial, from the claim to the record: the one order the embedded runner and the Celery chain follow.
TRIAL: Chain[Claimed, Recorded] = Chain.of(DEPLOY).then(INJECT).then(AGENT_SESSION).then(ORACLE).then(RECORD)
PHASES = TRIAL.names
