"""Judging a finished sweep's diagnoses again, without running a trial: each finished trial's
diagnosis is read back from its recording attempt's artifacts (diagnosis.json; the node a
node-level fault landed on from injections.json), judged against the catalog's ground truth by
any judge (offline or a litellm model), and kept as a row of results.models.DiagnosisVerdictRow
keyed by trial, judge and pass rule. The verdict the trial recorded is never touched; judging
again with the same judge and rule replaces that judge's earlier row.

    rescore(engine, sweep_id, judge, api_base=None) -> Rescore
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from core.errors import InputError
from core.records import SubmittedDiagnosis, UnreadableArtifact
from core.states import TrialState
from results.models import Attempt, DiagnosisVerdictRow, Sweep, Trial


@dataclass
class Rescore:
    """What judging a sweep again found: per trial the recorded pass and the new one."""

    sweep_id: str
    judge: str
    pass_rule: str
    judged: list[dict[str, Any]] = field(default_factory=list)  # trial, problem, recorded, passed, judges
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (trial id, why)
    tokens: int = 0
    cost_usd: float = 0.0

    @property
    def changed(self) -> list[dict[str, Any]]:
        return [j for j in self.judged if j["recorded"] is not None and j["recorded"] != j["passed"]]


def _node(injections: Any) -> str | None:
    """The node a node-level fault landed on, as injection recorded it."""
    for inj in injections or []:
        node = (inj.get("saved") or {}).get("node") if isinstance(inj, dict) else None
        if isinstance(node, str):
            return node
    return None


def rescore(engine: Engine, sweep_id: str, judge: str | None, api_base: str | None = None) -> Rescore:
    """Judge every finished trial of `sweep_id` again with `judge` (None: the offline judge) and
    record the verdicts. Raises InputError for an unknown sweep; a trial whose diagnosis cannot be
    read back is skipped and said so, never judged as 'nothing submitted'."""
    from farm.oracles.inventory import app_inventory
    from farm.oracles.judge import PASS_RULE, judge_diagnosis
    from farm.problems.catalog import load_catalog
    from results.report.trials import ArtifactReader

    catalog = load_catalog()
    reader = ArtifactReader()
    out = Rescore(sweep_id=sweep_id, judge=judge or "offline", pass_rule=PASS_RULE.id)
    with Session(engine) as session:
        if session.get(Sweep, sweep_id) is None:
            raise InputError(f"no sweep '{sweep_id}' in the database")
        rows = session.exec(
            select(Trial, Attempt)
            .join(Attempt, (col(Attempt.trial_id) == col(Trial.id)) & (col(Attempt.token) == col(Trial.final_attempt)))
            .where(col(Trial.sweep_id) == sweep_id, col(Trial.state) == TrialState.FINISHED)
            .order_by(col(Trial.id))).all()
    for trial, attempt in rows:
        if not attempt.artifacts_uri:
            out.skipped.append((trial.id, "its recording attempt stored no artifacts"))
            continue
        submitted = reader.record(attempt.artifacts_uri, "diagnosis", SubmittedDiagnosis)
        if submitted is None or isinstance(submitted, UnreadableArtifact):
            why = "no diagnosis.json" if submitted is None else f"diagnosis.json unreadable: {submitted}"
            out.skipped.append((trial.id, why))
            continue
        try:
            problem = catalog.get(trial.problem_id)
        except InputError:
            out.skipped.append((trial.id, f"problem '{trial.problem_id}' is no longer in the catalog"))
            continue
        node = _node(reader.read(attempt.artifacts_uri, "injections"))
        truth = problem.ground_truth.filled(node=node) if node else problem.ground_truth
        if truth.placeholders():
            out.skipped.append((trial.id, "injections.json does not say which node the fault landed on"))
            continue
        verdict = judge_diagnosis(submitted.text, truth, judge, api_base=api_base,
                                  components=app_inventory(problem.app), structured=submitted.structured)
        out.tokens += verdict.tokens_in + verdict.tokens_out
        out.cost_usd += verdict.cost_usd
        row = DiagnosisVerdictRow(
            sweep_id=sweep_id, trial_id=trial.id, attempt_token=attempt.token, judge=verdict.judge,
            offline=verdict.offline, pass_rule=verdict.pass_rule or out.pass_rule, submitted=verdict.submitted,
            passed=verdict.passed, score=verdict.composite, answers={a.id: a.answer for a in verdict.answers},
            tokens_in=verdict.tokens_in, tokens_out=verdict.tokens_out, cost_usd=verdict.cost_usd,
            judged_at=time.time())
        with Session(engine) as session:  # one trial at a time: a judge failing midway keeps what was judged
            session.exec(delete(DiagnosisVerdictRow).where(  # type: ignore[call-overload]
                col(DiagnosisVerdictRow.trial_id) == trial.id, col(DiagnosisVerdictRow.judge) == row.judge,
                col(DiagnosisVerdictRow.pass_rule) == row.pass_rule))
            session.add(row)
            session.commit()
        out.judged.append({"trial": trial.id, "problem": trial.problem_id, "agent": trial.agent,
                           "model": trial.model, "recorded": trial.diagnosis_passed,
                           "recorded_judge": attempt.judge, "recorded_rule": trial.diagnosis_pass_rule,
                           "passed": verdict.passed})
    return out
