"""Verdicts of the two oracles, as recorded per attempt."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

Dimension = Literal["localization", "characterization", "scope"]


class ChecklistAnswer(BaseModel):
    id: str  # e.g. "L1"
    dimension: Dimension
    question: str
    answer: bool
    quote: str = ""  # a yes: the verbatim span of the diagnosis that supports it
    evidence: str = ""  # why the judge answered so, in one line


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


class MitigationVerdict(BaseModel):
    passed: bool
    success_rate: float | None = None  # client side, over the window
    checks: dict[str, bool] = {}  # named checks: each True when it holds
    detail: str = ""  # why it failed, in one or two sentences
