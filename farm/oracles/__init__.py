"""The two oracles of a trial: judge.py, the diagnosis oracle (an LLM or the deterministic offline
judge answering a 9-question checklist over the ground truth; `farm judge` measures its agreement
with human labels), and mitigation.py, the programmatic mitigation oracle. claims.py is the offline judge's reading of what a diagnosis
asserts; attacks.py generates diagnoses written to fool a judge."""

from core.records import ChecklistAnswer, DiagnosisVerdict, MitigationVerdict

__all__ = ["ChecklistAnswer", "DiagnosisVerdict", "MitigationVerdict"]
