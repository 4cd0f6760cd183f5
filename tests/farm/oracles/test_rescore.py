"""`farm judge rescore`: a finished sweep's diagnoses judged again from their artifacts (a real
database and artifact folder), by the offline judge and by an LLM judge over an OpenAI-compatible
server on loopback, each verdict kept beside the recorded one; the leaderboard reads either."""

from __future__ import annotations

import json
import time
from pathlib import Path

from sqlmodel import Session, select
from typer.testing import CliRunner

from core.records import SubmittedDiagnosis
from core.states import TrialState
from farm.cli.judge import app
from farm.llm.scripted import ScriptedLLM
from farm.oracles.judge import PASS_RULE, QUESTION_IDS
from results import leaderboard
from results.artifact_store import LocalArtifactStore
from results.db import engine_for
from results.models import Attempt, DiagnosisVerdictRow, Sweep, Trial

PROBE = ("Root cause: the liveness probe added to geo checks TCP port 9083 but geo listens on 8083, so the kubelet "
         "kills geo over and over (CrashLoopBackOff); search fails to reach it and /hotels returns 500.")
FD = ("Root cause: fs.file-max on node sim-worker2 was lowered to 2048, so frontend there cannot accept connections "
      "('too many open files') and requests to the site fail intermittently.")
WRONG = "The root cause is a memory leak in the rate service, which is OOMKilled repeatedly."


def _sweep(engine, store: LocalArtifactStore, root: Path) -> None:
    now = time.time()
    trials = [  # id, problem, diagnosis (None: no diagnosis.json), recorded pass, injections, state
        ("t1", "hr-geo-liveness-probe-wrong-port", PROBE, False, [], TrialState.FINISHED),
        ("t2", "hr-node-fd-exhaustion-frontend", FD, True, [{"saved": {"node": "sim-worker2"}}], TrialState.FINISHED),
        ("t3", "hr-geo-liveness-probe-wrong-port", None, False, [], TrialState.FINISHED),
        ("t4", "hr-geo-liveness-probe-wrong-port", WRONG, True, [], TrialState.FINISHED),
        ("t5", "hr-geo-liveness-probe-wrong-port", PROBE, None, [], TrialState.INFRA_FAILED),
    ]
    with Session(engine) as s:
        s.add(Sweep(id="sw", spec_json="{}", created_at=now, updated_at=now))
        s.commit()
        for tid, problem, text, recorded, injections, state in trials:
            prefix = f"sw/{tid}/attempt-1"
            if text is not None:
                store.put_json(f"{prefix}/diagnosis.json", SubmittedDiagnosis(text=text).model_dump(mode="json"))
            store.put_json(f"{prefix}/injections.json", injections)
            s.add(Trial(id=tid, sweep_id="sw", key=tid, problem_id=problem, app="hotel-reservation",
                        layer="application", composition="single", agent="react", model="openai/m", seed=0,
                        noise=False, state=state, final_attempt=1, diagnosis_passed=recorded,
                        diagnosis_pass_rule="localized-and-mechanism-v2", judge_offline=True,
                        mitigation_passed=False))
            s.commit()
            s.add(Attempt(trial_id=tid, token=1, worker="w", cluster="c", state="recorded", started_at=now,
                          judge="offline", artifacts_uri=(root / prefix).as_uri()))
            s.commit()


def _reply(diagnosis: str, yes: set[str]) -> str:
    return json.dumps({"answers": [{"id": q, "answer": "yes" if q in yes else "no",
                                    "quote": diagnosis[:30] if q in yes else "", "reason": "r"} for q in QUESTION_IDS]})


def test_rescore_judges_the_recorded_diagnoses_again_beside_the_recorded_verdicts(db_url, tmp_path) -> None:
    engine = engine_for(db_url)
    root = tmp_path / "artifacts"
    _sweep(engine, LocalArtifactStore(root), root)

    result = CliRunner().invoke(app, ["rescore", "--sweep", "sw", "--db", db_url])
    assert result.exit_code == 0, result.output
    assert "3 finished trial(s) judged again by offline" in result.output
    assert "skipped t3: no diagnosis.json" in result.output and "t5" not in result.output
    # t1 was failed by the judge that recorded it and passes now; t4's wrong diagnosis fails now
    assert "t1 (hr-geo-liveness-probe-wrong-port, react/openai/m): recorded fail, now pass" in result.output
    assert "t4 (hr-geo-liveness-probe-wrong-port, react/openai/m): recorded pass, now fail" in result.output

    CliRunner().invoke(app, ["rescore", "--sweep", "sw", "--db", db_url])  # the same judge again replaces its rows
    everything = sorted(set(QUESTION_IDS) - {"C2"})
    llm_turns = [{"content": _reply(PROBE, set(QUESTION_IDS))}, {"content": _reply(FD, set(everything))},
                 {"content": _reply(WRONG, set())}]
    with ScriptedLLM(llm_turns) as llm:
        result = CliRunner().invoke(app, ["rescore", "--sweep", "sw", "--db", db_url, "--judge",
                                          "openai/judge-model", "--api-base", llm.url])
    assert result.exit_code == 0, result.output
    assert len(llm.requests) == 3 and "judged again by openai/judge-model" in result.output

    with Session(engine) as s:
        rows = s.exec(select(DiagnosisVerdictRow).order_by(DiagnosisVerdictRow.judge, DiagnosisVerdictRow.trial_id)).all()
        recorded = {t.id: t.diagnosis_passed for t in s.exec(select(Trial)).all()}
    got = [(r.judge, r.trial_id, r.passed, r.pass_rule) for r in rows]
    assert got == [("offline", "t1", True, PASS_RULE.id), ("offline", "t2", True, PASS_RULE.id),
                   ("offline", "t4", False, PASS_RULE.id), ("openai/judge-model", "t1", True, PASS_RULE.id),
                   ("openai/judge-model", "t2", True, PASS_RULE.id), ("openai/judge-model", "t4", False, PASS_RULE.id)]
    assert all(r.answers and set(r.answers) == set(QUESTION_IDS) for r in rows)
    assert recorded == {"t1": False, "t2": True, "t3": False, "t4": True, "t5": None}  # never overwritten

    as_recorded = leaderboard.compute(engine, "sw")
    again = leaderboard.compute(engine, "sw", judge="offline", pass_rule=PASS_RULE.id)
    assert as_recorded[0]["diagnosis_rate"] == 2 / 4 and as_recorded[0]["diagnosis_judge"] == "recorded"
    # t3 has no rescored verdict: it counts as not diagnosed, and the row says so
    assert again[0]["diagnosis_rate"] == 2 / 4 and again[0]["unjudged"] == 1
    assert again[0]["diagnosis_judge"] == "offline" and again[0]["diagnosis_pass_rule"] == PASS_RULE.id

    from results.report.build import build_report

    page = Path(build_report(engine, "sw", tmp_path / "report", drill_down=False)).read_text()
    assert "judged again" in page and "openai/judge-model (" + PASS_RULE.id + "): 2 of 3 trial(s) pass" in page


def test_rescore_of_an_unknown_sweep_is_a_clear_error(db_url) -> None:
    engine_for(db_url)
    result = CliRunner().invoke(app, ["rescore", "--sweep", "nope", "--db", db_url])
    assert result.exit_code == 2 and "no sweep 'nope'" in result.output
