"""The two oracles: a diagnosis judge (LLM or deterministic offline, a 9-question checklist over
the ground truth) and a programmatic mitigation oracle."""

from farm.oracles.base import ChecklistAnswer, DiagnosisVerdict, MitigationVerdict

__all__ = ["ChecklistAnswer", "DiagnosisVerdict", "MitigationVerdict"]
