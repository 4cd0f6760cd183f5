"""The trial pipeline in one process (farm/trial/: TrialRun and run_all, farm/owner.py
ClusterOwner), on an emulated cluster whose API server or reset fails on purpose
(tests/tasks/plugins.py) and with a probe agent on a scripted LLM server:

- deploy and inject failures are infrastructure errors: retried up to max_infra_attempts, then
  infra_failed, never in n; a resubmission runs an infra_failed trial again;
- a failed reset leaves the recorded result standing, is recorded as an infrastructure event and
  the cluster is replaced before another trial (or the worker refuses trials);
- a session that crashes, overruns its wall time or hits a limit keeps what it produced, and a
  running session is checkpointed to the artifact store and the attempt row;
- time to diagnosis and to mitigation are the agent's own submissions, counted from the injection.
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import closing
from pathlib import Path
from types import SimpleNamespace

import pytest
from sqlmodel import Session, select

from core.events import Abandoned, PhaseEntered, read_events
from core.states import (
    END_AGENT_ERROR,
    EVENT_CLUSTER_LOST,
    EVENT_CLUSTER_REPLACED,
    EVENT_RESET_FAILED,
    LIMIT_STEPS,
    LIMIT_WALL_TIME,
    AttemptState,
    TrialState,
)
from farm import dispatcher
from farm.owner import ClusterOwner
from farm.spec import SweepSpec
from farm.trial import PHASES, StepOutcome, begin, run_all, step, time_to_mitigation
from farm.trial.artifacts import AttemptRecord, SubmittedDiagnosis
from results import leaderboard, ledger
from results.artifact_store import LocalArtifactStore
from results.db import engine_for
from results.models import Attempt, InfraEvent, Trial
from tests.tasks import plugins

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PROBLEM = "hr-frontend-service-targetport-wrong"  # its fault changes a Service: what `inject` refuses
PRICE = {"input_cost_per_token": 1e-4, "output_cost_per_token": 2e-4}


def _spec(name: str, agent: object = "baseline", **extra: object) -> SweepSpec:
    data = {"name": name, "problems": {"ids": [PROBLEM]}, "agents": [agent], "seeds": 1,
            "limits": {"wall_time_s": 120}, **extra}
    return SweepSpec.model_validate(data)


@pytest.fixture(autouse=True)
def _probe_agent(monkeypatch):
    monkeypatch.setenv("FARM_AGENT_PLUGINS", "tests.fakes.probe_agent")  # loaded in the agent's process only


@pytest.fixture()
def engine(sqlite_url):
    return engine_for(sqlite_url)


@pytest.fixture()
def store(tmp_path):
    return LocalArtifactStore(tmp_path / "artifacts")


def _owner(engine, store, faults: str) -> ClusterOwner:
    plugins.set_faults(faults)
    owner = ClusterOwner("w-test", "faulty:trialrun", engine, store, lease_s=30, reap=False)
    owner.open()
    return owner


def _attempt_once(engine, owner: ClusterOwner, sweep: str) -> str | None:
    """Claim the sweep's next trial and run it as a worker does: every step, the end resetting the cluster."""
    claimed = ledger.claim_next(engine, sweep, owner.name, owner.cluster.ref, owner.lease_s)
    if claimed is None:
        return None
    run = begin(owner, claimed)
    assert run is not None
    return run_all(run, owner)


def _rows(engine, sweep: str) -> tuple[list[Trial], list[Attempt]]:
    with Session(engine) as s:
        trials = list(s.exec(select(Trial).where(Trial.sweep_id == sweep)))
        attempts = list(s.exec(select(Attempt).join(Trial, Trial.id == Attempt.trial_id)
                               .where(Trial.sweep_id == sweep).order_by(Attempt.token)))
    return trials, attempts


def _docs(attempt: Attempt) -> dict[str, object]:
    folder = Path(attempt.artifacts_uri.removeprefix("file://"))
    return {p.stem: json.loads(p.read_text()) for p in folder.glob("*.json")}


def test_deploy_failures_retry_then_infra_failed_and_resubmission_runs_it_again(engine, store):
    with closing(_owner(engine, store, "deploy:2")) as owner:
        spec = _spec("deploy-fails", max_infra_attempts=2)
        dispatcher.submit(engine, spec)
        assert _attempt_once(engine, owner, "deploy-fails") == "infra_retry"
        assert _attempt_once(engine, owner, "deploy-fails") == "infra_failed"
        assert _attempt_once(engine, owner, "deploy-fails") is None  # given up: nothing to claim
        (trial,), attempts = _rows(engine, "deploy-fails")
        assert trial.state == TrialState.INFRA_FAILED and trial.infra_attempts == 2
        assert trial.diagnosis_passed is None and trial.end_reason is None  # no agent result at all
        assert [a.state for a in attempts] == [AttemptState.INFRA_ERROR] * 2
        assert all(a.error_phase == "deploy" and "refuses this deploy request" in a.error for a in attempts)
        (row,) = leaderboard.compute(engine, "deploy-fails")
        assert (row["n"], row["infra_failed"], row["diagnosis_rate"]) == (0, 1, None)
        assert dispatcher.infra_summary(engine, "deploy-fails")["infra_errors"] == {"deploy": 2}

        # infra_failed is not finished: resubmitting wants it again, with a fresh retry budget,
        # and the cluster (its two failures spent) now deploys.
        again = dispatcher.submit(engine, spec)
        assert (again.done, again.to_run) == (0, [trial.id])
        assert _attempt_once(engine, owner, "deploy-fails") == "recorded"
        (trial,), attempts = _rows(engine, "deploy-fails")
        assert trial.state == TrialState.FINISHED and trial.final_attempt == 3
        assert [a.state for a in attempts] == [AttemptState.INFRA_ERROR] * 2 + [AttemptState.RECORDED]
        (row,) = leaderboard.compute(engine, "deploy-fails")
        assert (row["n"], row["infra_failed"]) == (1, 0)


def test_a_step_that_finds_its_lease_gone_writes_nothing_and_frees_the_worker(engine, store):
    """The failure policy every worker applies (farm.trial.worker.step): a zombie, its trial
    reaped while it ran, stops at its next step, records nothing and resets its cluster."""
    with closing(_owner(engine, store, "")) as owner:
        dispatcher.submit(engine, _spec("zombie"))
        claimed = ledger.claim_next(engine, "zombie", owner.name, owner.cluster.ref, owner.lease_s)
        assert claimed is not None
        run = begin(owner, claimed)
        assert run is not None and owner.busy
        assert step(run, "deploy", owner) is StepOutcome.NEXT
        assert ledger.reap(engine, now=time.time() + 3600) == [claimed.trial_id]  # presumed lost
        assert step(run, "inject", owner) is StepOutcome.LEASE_LOST
        assert not owner.busy and owner.ready  # reset, free for the next trial
        assert isinstance(run.events[-1], Abandoned) and run.injection is None  # inject never ran
        (trial,), (attempt,) = _rows(engine, "zombie")
        assert trial.state == TrialState.QUEUED and trial.final_attempt is None
        assert attempt.state == AttemptState.LOST and attempt.phase == "deploy"
        # The next claim runs it whole.
        assert _attempt_once(engine, owner, "zombie") == StepOutcome.RECORDED


def test_a_step_before_the_one_it_follows_fails_the_attempt_and_touches_no_cluster(engine, store):
    """Each phase takes what the one before it handed over (farm.trial.phases.TRIAL): a step that
    arrives before its input exists (a chain's message out of order) is the farm's failure, retried,
    and it neither injects nor records anything."""
    with closing(_owner(engine, store, "")) as owner:
        dispatcher.submit(engine, _spec("out-of-order"))
        claimed = ledger.claim_next(engine, "out-of-order", owner.name, owner.cluster.ref, owner.lease_s)
        assert claimed is not None
        run = begin(owner, claimed)
        assert run is not None
        assert step(run, "inject", owner) is StepOutcome.INFRA_RETRY
        assert not owner.busy and owner.ready and run.injection is None
        (trial,), (attempt,) = _rows(engine, "out-of-order")
        assert trial.state == TrialState.QUEUED and trial.final_attempt is None
        # The farm's own failure, not the phase's (as any unexpected error): entered, then refused.
        assert attempt.state == AttemptState.INFRA_ERROR and attempt.phase == "inject"
        assert attempt.error_phase == "infrastructure"
        assert "inject takes Deployed, but the attempt holds Claimed" in attempt.error
        # The next claim runs it whole, in order.
        assert _attempt_once(engine, owner, "out-of-order") == StepOutcome.RECORDED


def test_inject_failure_is_retried_and_never_counted_against_the_agent(engine, store):
    with closing(_owner(engine, store, "inject:1")) as owner:
        dispatcher.submit(engine, _spec("inject-fails", max_infra_attempts=3))
        assert _attempt_once(engine, owner, "inject-fails") == "infra_retry"
        assert _attempt_once(engine, owner, "inject-fails") == "recorded"
        (trial,), (failed, recorded) = _rows(engine, "inject-fails")
        assert failed.state == AttemptState.INFRA_ERROR and failed.error_phase == "inject"
        assert "refuses this inject request" in failed.error
        assert failed.diagnosis_passed is None and failed.end_reason is None  # the agent never ran
        assert recorded.state == AttemptState.RECORDED and trial.state == TrialState.FINISHED
        assert trial.infra_attempts == 1
        (row,) = leaderboard.compute(engine, "inject-fails")
        assert (row["n"], row["infra_failed"]) == (1, 0)


def test_failed_reset_keeps_the_result_records_an_event_and_replaces_the_cluster(engine, store):
    with closing(_owner(engine, store, "reset:1")) as owner:
        dispatcher.submit(engine, _spec("reset-fails", seeds=2))
        first = owner.cluster
        assert _attempt_once(engine, owner, "reset-fails") == "recorded"
        assert owner.ready and owner.cluster is not first  # replaced before the next trial
        assert _attempt_once(engine, owner, "reset-fails") == "recorded"
        trials, attempts = _rows(engine, "reset-fails")
        assert all(t.state == TrialState.FINISHED for t in trials)
        assert all(a.state == AttemptState.RECORDED for a in attempts)
        with Session(engine) as s:
            events = list(s.exec(select(InfraEvent).order_by(InfraEvent.id)))
        assert [e.kind for e in events] == [EVENT_RESET_FAILED, EVENT_CLUSTER_REPLACED]
        assert events[0].attempt_id == attempts[0].id and events[0].sweep_id == "reset-fails"
        assert "reset refused" in events[0].detail
        assert dispatcher.infra_summary(engine, "reset-fails")["infra_events"] == {
            EVENT_RESET_FAILED: 1, EVENT_CLUSTER_REPLACED: 1}
        (row,) = leaderboard.compute(engine, "reset-fails")
        assert (row["n"], row["infra_failed"], row["reset_failures"]) == (2, 0, 1)


def test_worker_without_a_clean_cluster_takes_no_trial(engine, store, monkeypatch):
    with closing(_owner(engine, store, "reset:1,reopen:1")) as owner:
        dispatcher.submit(engine, _spec("reset-lost", seeds=2))
        assert _attempt_once(engine, owner, "reset-lost") == "recorded"
        assert not owner.ready and owner.cluster is None and "no replacement" in owner.broken
        assert owner._check_health() == (False, owner.broken)
        assert not owner.try_replace()  # too soon after the last try: still refusing trials
        with Session(engine) as s:
            kinds = [e.kind for e in s.exec(select(InfraEvent).order_by(InfraEvent.id))]
        assert kinds == [EVENT_RESET_FAILED, EVENT_CLUSTER_LOST]
        monkeypatch.setattr("farm.owner.REPLACE_EVERY_S", 0.0)
        assert owner.try_replace() and owner.ready  # the plan's one refusal is spent
        assert _attempt_once(engine, owner, "reset-lost") == "recorded"


# -- what a session produced, however it ended --------------------------------------------------

@pytest.fixture()
def llm():
    from farm.llm.scripted import ScriptedLLM

    with ScriptedLLM([{"content": "looking"}], repeat_last=True) as server:
        yield server


def _probe(llm, **options: object) -> dict[str, object]:
    return {"name": "probe", "options": {"api_base": llm.url, "price": PRICE, **options}}


def _single(engine, store, spec: SweepSpec) -> tuple[Trial, Attempt, dict[str, object]]:
    with closing(_owner(engine, store, "")) as owner:
        dispatcher.submit(engine, spec)
        _attempt_once(engine, owner, spec.name)
    (trial,), (attempt,) = _rows(engine, spec.name)
    return trial, attempt, _docs(attempt)


def test_crashed_agent_keeps_its_tool_calls_tokens_and_cost(engine, store, llm):
    spec = _spec("probe-crash", _probe(llm, rounds=3, end="raise"), models=["openai/scripted-model"])
    trial, attempt, docs = _single(engine, store, spec)
    assert trial.state == TrialState.FINISHED and trial.end_reason == END_AGENT_ERROR
    assert "crashed on purpose" in trial.error
    assert attempt.tool_calls == 3 and attempt.steps == 3
    assert attempt.tokens_in > 0 and attempt.tokens_out > 0 and attempt.cost_usd > 0
    assert len(docs["tool_calls"]) == 3 and all(c["name"] == "kubectl" for c in docs["tool_calls"])
    assert any("round 2" in str(m.get("content")) for m in docs["transcript"])  # the last conversation


def test_agent_past_its_wall_time_keeps_what_it_did(engine, store, llm, monkeypatch):
    spec = _spec("probe-hang", _probe(llm, rounds=2, end="hang", hang_s=60), models=["openai/scripted-model"],
                 limits={"wall_time_s": 4})
    trial, attempt, docs = _single(engine, store, spec)
    assert trial.end_reason == LIMIT_WALL_TIME
    assert attempt.tool_calls == 2 and attempt.steps == 2 and attempt.tokens_in > 0 and attempt.cost_usd > 0
    assert len(docs["tool_calls"]) == 2 and docs["transcript"]


def test_agent_that_hits_its_step_limit_keeps_its_transcript(engine, store):
    from farm.llm.scripted import ScriptedLLM

    turn = {"tool_calls": [{"name": "kubectl", "arguments": {"command": "get pods"}}]}
    with ScriptedLLM([turn], repeat_last=True) as server:
        spec = _spec("react-steps", {"name": "react", "options": {"api_base": server.url, "price": PRICE}},
                     models=["openai/scripted-model"], limits={"wall_time_s": 120, "max_steps": 2})
        trial, attempt, docs = _single(engine, store, spec)
    assert trial.end_reason == LIMIT_STEPS and attempt.steps == 2
    assert attempt.tool_calls == 2 and attempt.tokens_in > 0 and attempt.cost_usd > 0
    assert len(docs["tool_calls"]) == 2 and len(docs["transcript"]) >= 4


def test_running_session_is_checkpointed(engine, store, llm, monkeypatch):
    monkeypatch.setattr("farm.trial.checkpoint.CHECKPOINT_S", 0.5)
    spec = _spec("probe-slow", _probe(llm, rounds=3, pause_s=1.5), models=["openai/scripted-model"])
    seen: list[Attempt] = []

    def watch() -> None:
        deadline = time.time() + 300
        while time.time() < deadline and not seen:
            with Session(engine) as s:
                a = s.exec(select(Attempt).where(Attempt.state == AttemptState.RUNNING,
                                                 Attempt.tool_calls >= 1)).first()
            if a is not None:
                seen.append(a)
            time.sleep(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    trial, attempt, docs = _single(engine, store, spec)
    watcher.join(timeout=5)
    assert seen, "no checkpoint reached the attempt row while the session ran"
    mid = seen[0]
    assert mid.phase == "agent_session" and 1 <= mid.tool_calls < 3
    assert mid.tokens_in > 0 and mid.cost_usd > 0 and mid.artifacts_uri == attempt.artifacts_uri
    assert docs["checkpoint"]["llm"]["calls"] >= 1 and docs["checkpoint"]["result"]["tool_calls"] >= 1
    assert attempt.tool_calls == 3 and trial.state == TrialState.FINISHED


# -- time to diagnosis and to mitigation ----------------------------------------------------------

def test_times_to_diagnosis_and_mitigation_are_the_agents_own(engine, store):
    trial, attempt, docs = _single(engine, store, _spec("times"))
    # The artifacts read back as the typed records the worker wrote.
    record = AttemptRecord.model_validate(docs["attempt"])
    sub = SubmittedDiagnosis.model_validate(docs["diagnosis"])
    events = read_events(docs["events"])
    phases = {e.phase: e for e in events if isinstance(e, PhaseEntered)}
    # The log is saved as `record` begins, before the ledger's verdict on it.
    assert list(phases) == list(PHASES) and events[-1] is phases["record"]
    assert record.result.tool_calls == attempt.tool_calls and not record.partial
    injected = record.injected_at
    assert injected is not None and sub.submitted_at is not None and sub.mitigation_submitted_at is not None
    assert trial.mitigation_passed, "the baseline mitigates this problem"
    assert trial.time_to_diagnosis_s == pytest.approx(sub.submitted_at - injected)
    assert trial.time_to_mitigation_s == pytest.approx(sub.mitigation_submitted_at - injected)
    # The agent's submission, not when the oracle read (after its observation window).
    oracle_at, recorded_at = phases["oracle"].cluster_time, phases["record"].cluster_time
    assert oracle_at is not None and recorded_at is not None
    assert trial.time_to_mitigation_s <= oracle_at - injected < recorded_at - injected
    assert 0 < trial.time_to_diagnosis_s <= trial.time_to_mitigation_s


def test_time_to_mitigation_without_a_submission():
    mut = [SimpleNamespace(at=130.0), SimpleNamespace(at=160.0)]
    assert time_to_mitigation(SimpleNamespace(mitigation_at=150.0, mutations=mut), 100.0) == 50.0
    assert time_to_mitigation(SimpleNamespace(mitigation_at=None, mutations=mut), 100.0) == 60.0
    assert time_to_mitigation(SimpleNamespace(mitigation_at=None, mutations=[]), 100.0) is None


def test_a_diagnosis_only_problem_is_scored_for_its_diagnosis_alone(engine, store):
    """No fix is within the agent's scope: the oracle does not run, the mitigation is NULL (never a
    failure), and so is E2E; the diagnosis is judged as for any problem."""
    spec = SweepSpec.model_validate({"name": "dx-only", "problems": {"ids": ["hr-disk-full-mongodb-reservation"]},
                                     "agents": ["baseline"], "seeds": 1, "limits": {"wall_time_s": 120}})
    trial, attempt, docs = _single(engine, store, spec)
    assert trial.state == TrialState.FINISHED
    assert trial.diagnosis_passed is not None
    assert trial.mitigation_passed is None and trial.e2e_passed is None
    assert attempt.mitigation_passed is None and attempt.mitigation_checks is None
