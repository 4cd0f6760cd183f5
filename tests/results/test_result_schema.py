"""The result of an attempt is declared once, in results.ledger.AttemptResult; the Attempt row keeps
every field of it and the Trial row copies a subset for the leaderboards. These tests hold the SQL
models to that declaration: a field added to the result without its column, a column whose type
drifted from the field's, or a result column added to a table behind the result's back fails
here rather than as a silently NULL figure in a report."""

from __future__ import annotations

import json
import time
import types
import typing

from sqlmodel import Session

from core.states import TrialState
from results import ledger
from results.db import engine_for
from results.ledger import ATTEMPT_COLUMNS, TRIAL_COLUMNS, AttemptResult
from results.models import Attempt, Sweep, Trial

# Columns of the rows that are the ledger's bookkeeping, not the attempt's result.
ATTEMPT_BOOKKEEPING = {"id", "trial_id", "token", "worker", "cluster", "state", "phase", "started_at", "ended_at"}
TRIAL_ONLY = {"id", "sweep_id", "key", "problem_id", "app", "layer", "composition", "agent", "model", "seed", "noise",
              "noise_level", "state", "current_attempt", "lease_owner", "lease_expires_at", "infra_attempts",
              "queued_at", "published_at", "publishes", "finished_at", "final_attempt"}
DERIVED = {"e2e_passed"}  # a property of the result, stored for SQL's sake


def _type(model: type, name: str) -> object:
    return typing.get_type_hints(model)[name]


def _is_structured(hint: object) -> bool:
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    return any(typing.get_origin(a) is dict for a in args)


def test_every_result_field_has_its_attempt_column_with_its_type() -> None:
    for name, column in ATTEMPT_COLUMNS.items():
        assert column in Attempt.model_fields, f"AttemptResult.{name} has no Attempt column"
        if column.endswith("_json"):
            assert _is_structured(_type(AttemptResult, name)), name
            assert _type(Attempt, column) == str | None, column
        else:
            assert _type(Attempt, column) == _type(AttemptResult, name), f"Attempt.{column} and AttemptResult.{name}"


def test_the_tables_hold_no_result_column_the_result_does_not_declare() -> None:
    attempt_result = set(Attempt.model_fields) - ATTEMPT_BOOKKEEPING - DERIVED
    assert attempt_result == set(ATTEMPT_COLUMNS.values())
    trial_result = set(Trial.model_fields) - TRIAL_ONLY - DERIVED
    assert trial_result == set(TRIAL_COLUMNS)
    for name in TRIAL_COLUMNS:
        assert _type(Trial, name) == _type(AttemptResult, name), f"Trial.{name} and AttemptResult.{name}"
    assert _type(Trial, "e2e_passed") == _type(Attempt, "e2e_passed") == bool | None


def _full_result() -> AttemptResult:
    """A value for every field of the result, each one different from its default."""
    values = {
        "end_reason": "submitted", "diagnosis_submitted": True, "diagnosis_passed": True, "diagnosis_score": 0.8,
        "diagnosis_scores": {"localization": 1.0}, "judge": "offline", "judge_offline": True,
        "diagnosis_threshold": 0.5, "diagnosis_pass_rule": "rule-v2", "mitigation_passed": False,
        "mitigation_success_rate": 0.4, "mitigation_checks": {"fault_resolved": False}, "tokens_in": 11,
        "tokens_out": 12, "tokens_cached": 3, "cost_usd": 0.25, "judge_cost_usd": 0.01, "steps": 7, "tool_calls": 6,
        "tool_output_tokens": 900, "tool_tokens": {"kubectl": {"calls": 6, "tokens": 900}}, "tool_mode": "raw",
        "time_to_diagnosis_s": 30.0, "time_to_mitigation_s": 55.0, "artifacts_uri": "file:///a", "error": "oops",
        "error_phase": "oracle",
    }
    assert set(values) == set(AttemptResult.model_fields), "give the new field a value here"
    return AttemptResult(**values)


def test_a_recorded_result_reads_back_whole_from_both_rows(db_url) -> None:
    engine = engine_for(db_url)
    now = time.time()
    with Session(engine) as s:
        s.add(Sweep(id="sw", spec_json="{}", created_at=now, updated_at=now))
        s.add(Trial(id="t0", sweep_id="sw", key="p|a|-|0|quiet", problem_id="p", app="a", layer="application",
                    composition="single", agent="a", model="-", seed=0, noise=False, state=TrialState.QUEUED))
        s.commit()
    claim = ledger.claim(engine, "t0", "w0", "sim:sim")
    assert claim is not None
    result = _full_result()
    assert ledger.record(engine, claim, result)
    with Session(engine) as s:
        attempt, trial = s.get(Attempt, claim.attempt_id), s.get(Trial, "t0")
    for name, column in ATTEMPT_COLUMNS.items():
        stored = getattr(attempt, column)
        assert (json.loads(stored) if column.endswith("_json") else stored) == getattr(result, name), name
    for name in TRIAL_COLUMNS:
        assert getattr(trial, name) == getattr(result, name), name
    assert trial.e2e_passed is attempt.e2e_passed is False
