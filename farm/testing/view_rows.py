"""Sweeps for the view's tests, recorded the way real trials are: rows through results.ledger
(claim → record, infra_failure, a lost attempt reaped), artifacts through the artifact store under
`<sweep>/<trial>/attempt-<token>/` with the farm's typed records; and `farm view` started as a
real process on a free loopback port."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from sqlmodel import Session

from core.records import (
    ChecklistAnswer,
    DiagnosisVerdict,
    MitigationVerdict,
    SubmittedDiagnosis,
    ToolCall,
    Verdicts,
)
from core.states import TrialState
from results import ledger
from results.artifact_store import ArtifactStore
from results.keys import TrialKey
from results.ledger import AttemptResult
from results.models import Sweep, Trial

ROOT = Path(__file__).resolve().parents[2]
PROBLEMS = ("hr-geo-image-tag-wrong", "hr-geo-scaled-to-zero", "hr-geo-liveness-probe-wrong-port")
AGENTS = (("baseline", "-"), ("react", "openai/a"))
ODD_COST = 0.11483750000000001  # what float sums leave; the view must read $0.1148
last_pid = 0  # the process id of the last `farm view` started (the bench reads its memory)


@dataclass
class Recorded:
    """What was recorded, so tests recompute every figure from it."""

    trials: dict[str, dict] = field(default_factory=dict)  # trial id -> key parts and result
    infra_failed: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    lost: str = ""  # the trial whose first attempt was lost with its worker


def add_sweep(engine, sweep_id: str, cap: float | None = None) -> None:
    now = time.time()
    with Session(engine) as s:
        s.add(Sweep(id=sweep_id, spec_json=json.dumps({"name": sweep_id, "seeds": 3}), created_at=now,
                    updated_at=now, cost_cap_usd=cap, judge="offline"))
        s.commit()


def add_trial(engine, sweep_id: str, problem: str, agent: str, model: str, seed: int, noise: bool) -> str:
    key = TrialKey(problem, agent, model, seed, noise)
    tid = key.trial_id(sweep_id)
    with Session(engine) as s:
        s.add(Trial(id=tid, sweep_id=sweep_id, app="hotel-reservation", layer="application", composition="single",
                    state=TrialState.PENDING, **key.columns()))
        s.commit()
    return tid


def write_artifacts(store: ArtifactStore, sweep_id: str, tid: str, token: int, d: bool, m: bool,
                    diagnosis: str) -> str:
    prefix = f"{sweep_id}/{tid}/attempt-{token}"
    answers = [ChecklistAnswer(id="L1", dimension="localization", question="Does it name the faulty component?",
                               answer=d, quote="the geo deployment" if d else "", evidence="names geo" if d else "no"),
               ChecklistAnswer(id="C1", dimension="characterization", question="Does it say how the fault breaks it?",
                               answer=d, quote="image tag that does not exist" if d else "", evidence="mechanism")]
    verdicts = Verdicts(diagnosis=DiagnosisVerdict(judge="offline", offline=True, answers=answers, composite=0.9 if d else 0.2,
                                                   passed=d, threshold=None, pass_rule="localized-and-mechanism-v2"),
                        mitigation=MitigationVerdict(passed=m, checks={"pods_ready": m, "requests_succeed": m},
                                                     detail="" if m else "geo pods still not ready"))
    steps = [{"step_id": 1, "source": "system", "message": "You are an SRE."},
             {"step_id": 2, "source": "agent", "message": "Checking the pods.", "model_name": "openai/a",
              "tool_calls": [{"tool_call_id": "c1", "function_name": "kubectl", "arguments": {"command": "get pods"}}],
              "observation": {"results": [{"source_call_id": "c1", "content": "geo-7d9 0/1 ImagePullBackOff"}]}},
             {"step_id": 3, "source": "agent", "message": "Looking at alerts.",
              "tool_calls": [{"tool_call_id": "c2", "function_name": "get_alerts", "arguments": {}}],
              "observation": {"results": [{"source_call_id": "c2", "content": "HighErrorRate frontend"}]}},
             {"step_id": 4, "source": "agent", "message": diagnosis}]
    store.put_json(f"{prefix}/trajectory.atif.json", {"schema_version": "ATIF-v1.2", "session_id": tid, "steps": steps})
    calls = [ToolCall(index=0, name="kubectl", args={"command": "get pods"}, output="geo-7d9 0/1 ImagePullBackOff", tokens=9),
             ToolCall(index=1, name="get_alerts", output="HighErrorRate frontend", tokens=4)]
    store.put_json(f"{prefix}/tool_calls.json", [c.model_dump(mode="json") for c in calls])
    store.put_json(f"{prefix}/diagnosis.json", SubmittedDiagnosis(text=diagnosis, submitted_at=120.0).model_dump(mode="json"))
    store.put_json(f"{prefix}/verdicts.json", verdicts.model_dump(mode="json"))
    store.put_json(f"{prefix}/cluster_snapshot.json.gz", {"pods": {"items": [  # compressed, as a trial writes it
        {"metadata": {"name": "geo-7d9"}, "status": {"phase": "Running" if m else "Pending"}}]}})
    return store.base_uri(prefix)


def record_sweep(engine, store: ArtifactStore, sweep_id: str, seed: int = 3, seeds: int = 3, cap: float = 50.0,
                 leave_pending: int = 0) -> Recorded:
    """PROBLEMS × AGENTS × seeds × noise trials, recorded with seeded outcomes; one infra-failed
    trial, one lost attempt (then recorded) and `leave_pending` trials left to run."""
    rng = random.Random(seed)
    add_sweep(engine, sweep_id, cap)
    out = Recorded()
    ids = []
    for problem in PROBLEMS:
        for agent, model in AGENTS:
            for s in range(seeds):
                for noise in (False, True):
                    ids.append((add_trial(engine, sweep_id, problem, agent, model, s, noise),
                                {"problem": problem, "agent": agent, "model": model, "seed": s, "noise": noise}))
    for n, (tid, parts) in enumerate(ids):
        if n < leave_pending:
            out.pending.append(tid)
            continue
        if n == leave_pending:  # the infrastructure failed this one on its only attempt
            c = ledger.claim(engine, tid, "w1", "sim:sim")
            assert c is not None
            ledger.infra_failure(engine, c, "deploy", "cluster sim-3 down: connection refused", max_attempts=1)
            out.infra_failed.append(tid)
            continue
        if n == leave_pending + 1:  # a worker lost mid-session; the next attempt records
            lost = ledger.claim(engine, tid, "w2", "sim:sim", lease_s=0.01)
            assert lost is not None
            time.sleep(0.05)
            assert tid in ledger.reap(engine)
            out.lost = tid
        d = rng.random() < 0.6
        m = rng.random() < (0.7 if d else 0.2)
        cost = ODD_COST if n == leave_pending + 2 else round(rng.uniform(0.01, 0.3), 6)
        record_one(engine, store, sweep_id, tid, d, m, cost, f"The geo deployment <script>alert({n})</script> runs an "
                   "image tag that does not exist.")
        out.trials[tid] = {**parts, "d": d, "m": m, "cost": cost}
    return out


def record_one(engine, store: ArtifactStore, sweep_id: str, tid: str, d: bool, m: bool, cost: float,
               diagnosis: str) -> None:
    c = ledger.claim(engine, tid, "w1", "sim:sim")
    assert c is not None
    uri = write_artifacts(store, sweep_id, tid, c.token, d, m, diagnosis)
    assert ledger.record(engine, c, AttemptResult(
        end_reason="submitted", diagnosis_submitted=True, diagnosis_passed=d, diagnosis_score=0.9 if d else 0.2,
        judge="offline", judge_offline=True, diagnosis_pass_rule="localized-and-mechanism-v2", mitigation_passed=m,
        tokens_in=12_000, tokens_out=800, cost_usd=cost, steps=4, tool_calls=2, time_to_diagnosis_s=120.0 if d else None,
        time_to_mitigation_s=300.0 if m else None, artifacts_uri=uri))


@contextmanager
def farm_view(db_url: str, *args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`farm view` as a real process on a free loopback port; yields the address it printed."""
    proc = subprocess.Popen([sys.executable, "-m", "farm.cli", "view", "--db", db_url, "--port", "0", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "400", **(env or {})})
    global last_pid
    last_pid = proc.pid
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"(http://\S+)", line)
        assert found, line + proc.stderr.read() if proc.stderr else line
        url = found.group(1)
        deadline = time.time() + 30
        base = url.split("?")[0]
        while True:
            try:
                if httpx.get(base + "healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.time() < deadline, "farm view never answered"
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
