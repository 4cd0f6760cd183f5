"""The records an attempt leaves in the artifact store that more than one floor reads: the farm
writes them (farm.trial.artifacts), results' report reads them back. Each top-level record carries
the `version` of its shape; a document written before records had one reads as version 1, and a
field added since has a default, so every artifact ever stored stays readable.

diagnosis.json is a SubmittedDiagnosis, verdicts.json a Verdicts (the oracles' DiagnosisVerdict
and MitigationVerdict), tool_calls.json a list of ToolCall, mutations.json a list of Mutation.
Records that hold a floor's own types (the attempt's TrialSpec and result) stay with it, in
farm.trial.artifacts; events are core.events."""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

Dimension = Literal["localization", "characterization", "scope"]


class ChecklistAnswer(BaseModel):
    id: str  # e.g. "L1"
    dimension: Dimension
    question: str
    answer: bool
    quote: str = ""  # a yes: the verbatim span of the diagnosis that supports it
    evidence: str = ""  # why the judge answered so, in one line


class StructuredDiagnosis(BaseModel):
    """The optional structured part of a diagnosis, beside its text: the root-cause objects ranked
    most likely first (at most three), a fault type of the published taxonomy (the catalog's fault
    types, farm.oracles.vocabulary.FAULT_TYPES), and the affected components."""

    root_causes: list[str] = []
    fault_type: str | None = None
    affected: list[str] = []


class StructuredScore(BaseModel):
    """A structured diagnosis judged exactly, as AIOpsLab and ITBench score localization: the true
    root cause first (top-1) or among the first three (top-3; every root of a concurrent fault),
    the fault type, and whether every affected component is listed. None: not given."""

    top1: bool | None = None
    top3: bool | None = None
    fault_type: bool | None = None
    affected: bool | None = None


class DiagnosisVerdict(BaseModel):
    judge: str  # litellm model string, or "offline"
    offline: bool
    answers: list[ChecklistAnswer] = []
    scores: dict[str, float] = {}  # per dimension, in [0, 1]
    composite: float = 0.0
    passed: bool = False
    submitted: bool = True  # False when the agent never submitted a diagnosis
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    threshold: float | None = None  # the composite a pass needed (rules before v2; None: no composite floor)
    pass_rule: str | None = None  # the id of the pass rule this verdict was judged by
    pass_rule_text: str = ""  # that rule in one paragraph
    structured: StructuredScore | None = None  # the structured fields, when the agent gave any


class MitigationVerdict(BaseModel):
    passed: bool
    success_rate: float | None = None  # client side, over the window
    checks: dict[str, bool] = {}  # named checks: each True when it holds
    detail: str = ""  # why it failed, in one or two sentences


class Verdicts(BaseModel):
    """verdicts.json: the oracles' word (mitigation None for a diagnosis-only problem)."""

    version: Literal[1] = 1
    diagnosis: DiagnosisVerdict | None = None
    mitigation: MitigationVerdict | None = None


class SubmittedDiagnosis(BaseModel):
    """diagnosis.json: the agent's own submissions, as the interface recorded them."""

    version: Literal[1] = 1
    text: str | None = None
    structured: StructuredDiagnosis | None = None
    submitted_at: float | None = None
    mitigation_submitted_at: float | None = None


class ToolCall(BaseModel):
    """One tool call of the agent's session (tool_calls.json holds them all, in order)."""

    index: int  # position in the session, from 0
    name: str
    args: dict[str, Any] = {}
    output: str = ""  # exactly what the agent was shown (secrets scrubbed)
    tokens: int = 0  # cl100k_base tokens of `output`
    at: float = 0.0  # cluster time when the call started
    wall_s: float = 0.0  # wall-clock duration of the call
    error: str | None = None  # set when the call failed or was refused; `output` then says why


class Mutation(BaseModel):
    """A state-changing kubectl command, with what is needed to undo it (mutations.json)."""

    call_index: int  # the ToolCall that ran it
    command: str
    at: float
    targets: list[str] = []  # "kind/name" as captured before the change
    undo: str | None = None  # human-readable undo, None where none exists
    undone: bool = False
    note: str | None = None  # why there is no undo, or what else a reader must know
    # The objects as they were before the change ({"kind/name": object or None if absent}).
    before: dict[str, Any] = {}


class UnreadableArtifact(ValueError):
    """A stored document that is not the record its name says (corrupt, or of a newer version)."""


R = TypeVar("R")


def read_artifact(kind: type[R], data: object) -> R:
    """A stored document (parsed JSON) as the record `kind` (a model or e.g. `list[ToolCall]`)."""
    try:
        return TypeAdapter(kind).validate_python(data)
    except ValidationError as exc:
        raise UnreadableArtifact(f"not a {getattr(kind, '__name__', kind)}: {exc.error_count()} problem(s), "
                                 f"first: {exc.errors()[0]['msg']} at {exc.errors()[0]['loc']}") from exc
