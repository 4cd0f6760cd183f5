"""The result of an attempt is declared once, in results.models (TrialOutcome: what the trial row
copies; AttemptOutcome: what only the attempt keeps); the tables and results.ledger.AttemptResult
inherit it. These tests hold the database to its schema version (a field moved between bases must
not drop or retype a column) and check that rows written in the old layout read back the same."""

from __future__ import annotations

import json
import time
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session

from core.states import TrialState
from results import ledger
from results.db import SCHEMA_VERSION, engine_for, ensure_schema
from results.ledger import AttemptResult
from results.models import Attempt, AttemptOutcome, AttemptRow, Sweep, Trial, TrialOutcome, TrialRow

_V, _B, _I, _F = "VARCHAR", "BOOLEAN", "INTEGER", "DOUBLE PRECISION"
_RESULT = {
    "end_reason": (_V, True), "diagnosis_submitted": (_B, True), "diagnosis_passed": (_B, True),
    "diagnosis_score": (_F, True), "diagnosis_threshold": (_F, True), "diagnosis_pass_rule": (_V, True),
    "mitigation_passed": (_B, True), "e2e_passed": (_B, True), "judge_offline": (_B, True), "tokens_in": (_I, True),
    "tokens_out": (_I, True), "cost_usd": (_F, True), "steps": (_I, True), "tool_calls": (_I, True),
    "time_to_diagnosis_s": (_F, True), "time_to_mitigation_s": (_F, True), "error": (_V, True),
}
# Schema version 3 as PostgreSQL held it before the result was declared once (main at 14f53fb,
# read with sqlalchemy.inspect). Column order aside, only a deliberate change may alter it: one
# that bumps results.db.SCHEMA_VERSION and writes the new version's schema here.
SCHEMA_V3: dict[str, dict[str, Any]] = {
    "attempt": {
        "columns": {
            "id": (_I, False), "trial_id": (_V, False), "token": (_I, False), "worker": (_V, False),
            "cluster": (_V, False), "state": (_V, False), "phase": (_V, False), "started_at": (_F, False),
            "ended_at": (_F, True), **_RESULT, "diagnosis_scores_json": (_V, True), "judge": (_V, True),
            "mitigation_success_rate": (_F, True), "mitigation_checks_json": (_V, True), "tokens_cached": (_I, True),
            "judge_cost_usd": (_F, True), "tool_output_tokens": (_I, True), "tool_tokens_json": (_V, True),
            "tool_mode": (_V, True), "artifacts_uri": (_V, True), "error_phase": (_V, True),
        },
        "primary_key": ("id",),
        "indexes": [(("state",), False), (("trial_id",), False)],
        "foreign_keys": [(("trial_id",), "trial", ("id",))],
    },
    "farm_schema": {
        "columns": {"id": (_I, False), "version": (_I, False), "updated_at": (_F, False)},
        "primary_key": ("id",), "indexes": [], "foreign_keys": [],
    },
    "infraevent": {
        "columns": {"id": (_I, False), "kind": (_V, False), "at": (_F, False), "sweep_id": (_V, True),
                    "trial_id": (_V, True), "attempt_id": (_I, True), "worker": (_V, False), "cluster": (_V, False),
                    "detail": (_V, False)},
        "primary_key": ("id",),
        "indexes": [(("kind",), False), (("sweep_id",), False), (("trial_id",), False)],
        "foreign_keys": [],
    },
    "sweep": {
        "columns": {"id": (_V, False), "spec_json": (_V, False), "created_at": (_F, False), "updated_at": (_F, False),
                    "cancelled": (_B, False), "cost_cap_usd": (_F, True), "judge": (_V, True)},
        "primary_key": ("id",), "indexes": [], "foreign_keys": [],
    },
    "trial": {
        "columns": {
            "id": (_V, False), "sweep_id": (_V, False), "key": (_V, False), "problem_id": (_V, False),
            "app": (_V, False), "layer": (_V, False), "composition": (_V, False), "agent": (_V, False),
            "model": (_V, False), "seed": (_I, False), "noise": (_B, False), "noise_level": (_V, True),
            "state": (_V, False), "current_attempt": (_I, False), "lease_owner": (_V, True),
            "lease_expires_at": (_F, True), "infra_attempts": (_I, False), "queued_at": (_F, True),
            "published_at": (_F, True), "publishes": (_I, True), "finished_at": (_F, True),
            "final_attempt": (_I, True), **_RESULT,
        },
        "primary_key": ("id",),
        "indexes": [(("lease_expires_at",), False), (("problem_id",), False), (("state",), False),
                    (("sweep_id",), False)],
        "foreign_keys": [(("sweep_id",), "sweep", ("id",))],
    },
    "worker": {
        "columns": {"name": (_V, False), "cluster": (_V, False), "hostname": (_V, False), "pid": (_I, False),
                    "started_at": (_F, False), "heartbeat_at": (_F, False), "state": (_V, False),
                    "current_trial": (_V, True), "cluster_healthy": (_B, False), "detail": (_V, False)},
        "primary_key": ("name",), "indexes": [], "foreign_keys": [],
    },
}


# Version 4 adds the diagnosis verdicts of `farm judge rescore`, one per trial, judge and pass rule,
# and the structured diagnosis's exact scores on attempts and trials.
_STRUCTURED = {"rca_top1": (_B, True), "rca_top3": (_B, True), "fault_type_correct": (_B, True)}
SCHEMA_V4: dict[str, dict[str, Any]] = {
    **SCHEMA_V3,
    "attempt": SCHEMA_V3["attempt"] | {"columns": SCHEMA_V3["attempt"]["columns"] | _STRUCTURED},
    "trial": SCHEMA_V3["trial"] | {"columns": SCHEMA_V3["trial"]["columns"] | _STRUCTURED},
    "diagnosis_verdict": {
        "columns": {
            "id": (_I, False), "sweep_id": (_V, False), "trial_id": (_V, False), "attempt_token": (_I, False),
            "judge": (_V, False), "offline": (_B, False), "pass_rule": (_V, False), "submitted": (_B, False),
            "passed": (_B, False), "score": (_F, False), "answers_json": (_V, True), "tokens_in": (_I, False),
            "tokens_out": (_I, False), "cost_usd": (_F, False), "judged_at": (_F, False),
        },
        "primary_key": ("id",),
        "indexes": [(("sweep_id",), False), (("trial_id",), False), (("trial_id", "judge", "pass_rule"), True)],
        "foreign_keys": [(("sweep_id",), "sweep", ("id",)), (("trial_id",), "trial", ("id",))],
    },
}


def _schema(engine: sa.engine.Engine) -> dict[str, dict[str, Any]]:
    insp = sa.inspect(engine)
    return {
        table: {
            "columns": {c["name"]: (str(c["type"]), c["nullable"]) for c in insp.get_columns(table)},
            "primary_key": tuple(insp.get_pk_constraint(table)["constrained_columns"]),
            "indexes": sorted((tuple(i["column_names"]), bool(i["unique"])) for i in insp.get_indexes(table)),
            "foreign_keys": sorted((tuple(f["constrained_columns"]), f["referred_table"], tuple(f["referred_columns"]))
                                   for f in insp.get_foreign_keys(table)),
        }
        for table in sorted(insp.get_table_names())
    }


def test_postgres_gets_the_schema_of_its_version(pg_url) -> None:
    assert SCHEMA_VERSION == 4, "write the new version's schema here"
    engine = engine_for(pg_url)
    ensure_schema(engine)
    assert _schema(engine) == SCHEMA_V4


def test_the_result_is_the_outcome_columns_and_nothing_else() -> None:
    assert set(AttemptResult.model_fields) == set(AttemptOutcome.model_fields)
    assert set(TrialOutcome.model_fields) < set(AttemptOutcome.model_fields)
    # A table is its row's columns (first, as an export lists them), the outcome, and e2e_passed.
    for table, row, outcome in ((Trial, TrialRow, TrialOutcome), (Attempt, AttemptRow, AttemptOutcome)):
        assert list(table.model_fields) == [*row.model_fields, *outcome.model_fields, "e2e_passed"]


def _full_result() -> AttemptResult:
    """A value for every field of the result, each one different from its default."""
    values = {
        "end_reason": "submitted", "diagnosis_submitted": True, "diagnosis_passed": True, "diagnosis_score": 0.8,
        "diagnosis_scores": {"localization": 1.0}, "judge": "offline", "judge_offline": True,
        "diagnosis_threshold": 0.5, "diagnosis_pass_rule": "rule-v2", "mitigation_passed": False,
        "rca_top1": False, "rca_top3": True, "fault_type_correct": True,
        "mitigation_success_rate": 0.4, "mitigation_checks": {"fault_resolved": False}, "tokens_in": 11,
        "tokens_out": 12, "tokens_cached": 3, "cost_usd": 0.25, "judge_cost_usd": 0.01, "steps": 7, "tool_calls": 6,
        "tool_output_tokens": 900, "tool_tokens": {"kubectl": {"calls": 6, "tokens": 900}}, "tool_mode": "raw",
        "time_to_diagnosis_s": 30.0, "time_to_mitigation_s": 55.0, "artifacts_uri": "file:///a", "error": "oops",
        "error_phase": "oracle",
    }
    assert set(values) == set(AttemptResult.model_fields), "give the new field a value here"
    return AttemptResult(**values)


def _trial(engine: sa.engine.Engine) -> None:
    now = time.time()
    with Session(engine) as s:
        s.add(Sweep(id="sw", spec_json="{}", created_at=now, updated_at=now))
        s.add(Trial(id="t0", sweep_id="sw", key="p|a|-|0|quiet", problem_id="p", app="a", layer="application",
                    composition="single", agent="a", model="-", seed=0, noise=False, state=TrialState.QUEUED))
        s.commit()


def test_a_recorded_result_reads_back_whole_from_both_rows(db_url) -> None:
    engine = engine_for(db_url)
    _trial(engine)
    claim = ledger.claim(engine, "t0", "w0", "sim:sim")
    assert claim is not None
    result = _full_result()
    assert ledger.record(engine, claim, result)
    with Session(engine) as s:
        attempt, trial = s.get(Attempt, claim.attempt_id), s.get(Trial, "t0")
    for name in AttemptOutcome.model_fields:
        assert getattr(attempt, name) == getattr(result, name), name
    for name in TrialOutcome.model_fields:
        assert getattr(trial, name) == getattr(result, name), name
    assert trial.e2e_passed is attempt.e2e_passed is False
    # Structured fields are stored as the sorted JSON text the `<name>_json` columns always held.
    with engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT diagnosis_scores_json, mitigation_checks_json, tool_tokens_json "
                                      "FROM attempt")).one()
    assert list(stored) == [json.dumps(v, sort_keys=True)
                            for v in (result.diagnosis_scores, result.mitigation_checks, result.tool_tokens)]


def test_an_attempt_row_in_the_old_layout_reads_the_same(db_url) -> None:
    """A row as the code before the merge wrote it (structured fields as JSON text, by column name)."""
    engine = engine_for(db_url)
    _trial(engine)
    with engine.begin() as conn:
        conn.execute(sa.text(
            "INSERT INTO attempt (trial_id, token, worker, cluster, state, phase, started_at, diagnosis_passed, "
            "diagnosis_scores_json, mitigation_checks_json, tool_tokens_json, tokens_in, error) VALUES "
            "('t0', 1, 'w0', 'sim:sim', 'recorded', 'recorded', 1.0, true, :scores, :checks, :tools, 40, 'boom')"),
            {"scores": '{"localization": 1.0, "mechanism": 0.5}', "checks": '{"fault_resolved": true}',
             "tools": '{"kubectl": {"calls": 2, "tokens": 80}}'})
    with Session(engine) as s:
        attempt = s.exec(sa.select(Attempt)).scalar_one()
    assert attempt.diagnosis_scores == {"localization": 1.0, "mechanism": 0.5}
    assert attempt.mitigation_checks == {"fault_resolved": True}
    assert attempt.tool_tokens == {"kubectl": {"calls": 2, "tokens": 80}}
    assert (attempt.diagnosis_passed, attempt.tokens_in, attempt.error, attempt.judge) == (True, 40, "boom", None)
