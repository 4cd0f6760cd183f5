"""SQL tables: sweeps, trials (one row per problem × agent × model × seed × noise, carrying the
final result once one attempt recorded it), attempts (every try, including lost ones), diagnosis
verdicts of a finished sweep judged again, workers, and infrastructure events that are not an
attempt's result (a cluster that could not be reset)."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import UniqueConstraint
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator
from sqlmodel import AutoString, Field, SQLModel

from core.states import AttemptState, TrialState


class Sweep(SQLModel, table=True):
    id: str = Field(primary_key=True)  # the spec's name
    spec_json: str
    created_at: float
    updated_at: float
    cancelled: bool = False
    cost_cap_usd: float | None = None
    judge: str | None = None


class JSONText(TypeDecorator[Any]):
    """A structured value kept as JSON text (keys sorted, so equal values store equal text)."""

    impl = AutoString
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else json.dumps(value, sort_keys=True)

    def process_result_value(self, value: str | None, dialect: Dialect) -> Any:
        return None if value is None else json.loads(value)


def _json_field(column: str) -> Any:
    """A structured result field, stored as JSON text in `column` (the `<name>_json` the tables
    have always used)."""
    return Field(default=None, sa_type=JSONText, sa_column_kwargs={"name": column})


class TrialRow(SQLModel):
    """What makes a trial and its place in the queue: its key, state and lease."""

    id: str = Field(primary_key=True)  # stable: hash of sweep id and key (results.keys.TrialKey)
    sweep_id: str = Field(index=True, foreign_key="sweep.id")
    key: str  # problem|agent|model|seed|noise
    problem_id: str = Field(index=True)
    app: str
    layer: str
    composition: str
    agent: str
    model: str  # "-" for agents that use no model
    seed: int
    noise: bool
    noise_level: str | None = None  # the sweep's {intensity: ...} (farm.spec.NoiseLevel.label); NULL for true/false
    state: str = Field(default=TrialState.PENDING, index=True)
    # Lease and fencing: `current_attempt` is the fencing token of the attempt that may write.
    current_attempt: int = 0
    lease_owner: str | None = None
    lease_expires_at: float | None = Field(default=None, index=True)
    infra_attempts: int = 0
    queued_at: float | None = None
    # When a claim message for this trial was last sent to the broker, and how many were sent:
    # the reaper re-sends one for a trial left queued with no message acted on.
    published_at: float | None = None
    publishes: int | None = None
    finished_at: float | None = None
    final_attempt: int | None = None  # the fencing token of the attempt whose result the row copied


class AttemptRow(SQLModel):
    """Which try of which trial, by whom, and how far it got."""

    id: int | None = Field(default=None, primary_key=True)
    trial_id: str = Field(index=True, foreign_key="trial.id")
    token: int  # the fencing token this attempt was given
    worker: str
    cluster: str
    state: str = Field(default=AttemptState.RUNNING, index=True)
    phase: str = "claimed"  # the last phase the attempt reached
    started_at: float
    ended_at: float | None = None


# The result of an attempt, declared once. TrialOutcome is what the trial row copies from its
# recording attempt so leaderboards scan one table; AttemptOutcome adds what only the attempt
# keeps. Trial and Attempt inherit the columns; results.ledger.AttemptResult inherits the fields.
# Adding a field to either base adds the column and the result field at once (and, with the
# SCHEMA_VERSION bump results/db.py asks for, the column to existing databases).
class TrialOutcome(SQLModel):
    diagnosis_submitted: bool | None = None
    diagnosis_passed: bool | None = None
    diagnosis_score: float | None = None
    # The pass threshold the judge applied; NULL on rows recorded before it was stored, and under
    # pass rules with no composite floor (localized-and-mechanism-v2 and later).
    diagnosis_threshold: float | None = None
    diagnosis_pass_rule: str | None = None  # the id of the pass rule the judge applied; NULL before v2
    # The structured diagnosis judged exactly (farm.oracles.structured); NULL when not given.
    rca_top1: bool | None = None
    rca_top3: bool | None = None
    fault_type_correct: bool | None = None
    mitigation_passed: bool | None = None
    judge_offline: bool | None = None
    end_reason: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    steps: int | None = None
    tool_calls: int | None = None
    time_to_diagnosis_s: float | None = None
    time_to_mitigation_s: float | None = None
    error: str | None = None


class AttemptOutcome(TrialOutcome):
    diagnosis_scores: dict[str, float] | None = _json_field("diagnosis_scores_json")
    judge: str | None = None
    mitigation_success_rate: float | None = None
    mitigation_checks: dict[str, bool] | None = _json_field("mitigation_checks_json")
    tokens_cached: int | None = None
    judge_cost_usd: float | None = None
    tool_output_tokens: int | None = None
    # {tool name: {"calls": n, "tokens": t}}: which tools fill the agent's context; NULL on older rows.
    tool_tokens: dict[str, dict[str, int]] | None = _json_field("tool_tokens_json")
    tool_mode: str | None = None  # "raw" or "summarised": how tool outputs reached the agent
    artifacts_uri: str | None = None
    error_phase: str | None = None


# The row base is named last so its columns come first in the table (pydantic takes the fields
# of the last base first): exports and `SELECT *` read key, then result.
class Trial(TrialOutcome, TrialRow, table=True):
    e2e_passed: bool | None = None  # AttemptResult.e2e_passed, stored for SQL's sake


class Attempt(AttemptOutcome, AttemptRow, table=True):
    e2e_passed: bool | None = None  # AttemptResult.e2e_passed, stored for SQL's sake


class DiagnosisVerdictRow(SQLModel, table=True):
    """A finished trial's diagnosis judged again (`farm judge rescore`): one row per trial, judge and
    pass rule, beside the verdict the trial recorded, which is never overwritten. Judging again with
    the same judge and rule replaces that row."""

    __tablename__ = "diagnosis_verdict"
    __table_args__ = (UniqueConstraint("trial_id", "judge", "pass_rule"),)

    id: int | None = Field(default=None, primary_key=True)
    sweep_id: str = Field(index=True, foreign_key="sweep.id")
    trial_id: str = Field(index=True, foreign_key="trial.id")
    attempt_token: int  # the recording attempt whose diagnosis was judged
    judge: str  # a litellm model, or "offline"
    offline: bool
    pass_rule: str
    submitted: bool
    passed: bool
    score: float  # the composite
    answers: dict[str, bool] | None = _json_field("answers_json")
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    judged_at: float


class Worker(SQLModel, table=True):
    name: str = Field(primary_key=True)
    cluster: str
    hostname: str
    pid: int
    started_at: float
    heartbeat_at: float
    state: str = "idle"  # idle, busy, stopped
    current_trial: str | None = None
    cluster_healthy: bool = True
    detail: str = ""


class InfraEvent(SQLModel, table=True):
    """Something the infrastructure did wrong that is no attempt's result: a reset that failed after
    a trial was recorded, the replacement of that cluster. Reported apart, never against an agent."""

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(index=True)  # core.states EVENT_*
    at: float
    sweep_id: str | None = Field(default=None, index=True)
    trial_id: str | None = Field(default=None, index=True)
    attempt_id: int | None = None
    worker: str
    cluster: str
    detail: str = ""
