"""The diagnosis of a no-fault control (AIOpsLab's detection task): nothing was injected, so the
right answer is that nothing is wrong, and a diagnosis that blames anything (a component, a fault,
a root cause, asserted or hedged over) is a false alarm.

    judge_no_fault(diagnosis, structured) -> DiagnosisVerdict

A submitted diagnosis passes when it blames nothing; an empty one is not submitted (it fails, and
is no false alarm either). That is the judge's PASS_RULE read against a ground truth with no faulty
component: every component is healthy, so blaming any fails L3 and S1, and committing to no root
cause is the right answer rather than a failed L1. The verdict records PASS_RULE's id. The rule is deterministic whichever judge model the sweep names: "did
it blame something" needs no semantic grading against a ground truth, and one rule keeps the
false-alarm rate comparable across sweeps.
"""

from __future__ import annotations

import re

from core.records import ChecklistAnswer, DiagnosisVerdict, StructuredDiagnosis

# Words that say something is broken; a clause that uses one without negating it blames.
_FAULT = re.compile(
    r"(?i)\b(root[- ]cause[sd]?|caused by|due to|because of|culprit|misconfigur\w*|mis-configur\w*|broken|"
    r"crash\w*|oom\w*|out of memory|memory leak|leak\w*|wrong|incorrect|invalid|missing|deleted|removed|"
    r"fail(?:s|ed|ing|ure|ures)?|faulty|fault|bug\w*|outage|down|unreachable|unavailable|refus\w*|"
    r"time[sd]? ?out|timeouts?|exhaust\w*|saturat\w*|throttl\w*|evict\w*|unschedulable|pending|backoff|"
    r"degrad\w*|corrupt\w*|expired|denied|block\w*|stuck|hang\w*|starv\w*|overload\w*|"
    r"not ready|unhealthy|errors?|anomal\w*|incident|problem|issue|"
    # a value said to be other than it should be is a fault without a fault word ('targetPort is 9999
    # instead of 8083; set it back')
    r"instead of|set (?:it |them )?back|revert\w*|roll(?:ed|ing)? (?:it |them |the \w+ )?back|rollback|"
    r"rollout undo|mismatch\w*)\b")
# What, shortly before a fault word in the same clause, says it is absent.
_NEGATION = re.compile(
    r"(?i)\b(no|not|nothing|none|never|without|zero|0|neither|nor|free of|absence of|lack of|rule[sd]? out|"
    r"found no|shows? no|see no|saw no|is no|are no|there is no|there are no)\b|n't\b")
# Idioms that use a negation word to assert ("no doubt the pod is broken"): not a negation.
_AFFIRMING = re.compile(r"(?i)\b(no (?:doubt|question|wonder)|not only|without (?:a |any )?doubt)\b")
# 'There is no other root cause than X', 'no problem but X': the negation singles X out as the cause.
_ONLY = re.compile(r"(?i)\b(?:no|nothing|none)\s+(?:other\s+)?(?:(?:root[- ]cause|cause|culprit|explanation|problem|"
                   r"issue|fault)s?\s+)(?:(?:here|at all|at play)\s+)?(?:other\s+)?(?:than|but|except|besides|apart from)\b|"
                   r"\bnone other than\b")
# Clause boundaries: sentences, semicolons, commas before a new assertion, "but".
_CLAUSE = re.compile(r"(?i)[.;!?\n]+|,\s+|\bbut\b|\bhowever\b|\bexcept\b")
# A root-cause field a structured diagnosis may fill with "nothing".
_NOTHING = re.compile(r"(?i)^\s*(none|nothing|no[- ]fault|n/?a|healthy|-)?\s*$")


def blame(diagnosis: str) -> str | None:
    """The first clause of `diagnosis` that blames something, or None when none does."""
    for sentence in re.split(r"[.;!?\n]+", diagnosis):  # 'no cause but X' spans what _CLAUSE splits at 'but'
        if _ONLY.search(sentence):
            return sentence.strip()
    for clause in _CLAUSE.split(diagnosis):
        for m in _FAULT.finditer(clause):
            before = clause[:m.start()]
            words = _AFFIRMING.sub(" ", " ".join(before.split()[-6:]))
            if not _NEGATION.search(words) and not _negated_after(clause[m.end():]):
                return clause.strip()
    return None


def _negated_after(rest: str) -> bool:
    """"errors: none", "root cause: nothing", "failures were ruled out": the negation follows."""
    return bool(re.match(r"(?i)\s*(?:[:=]\s*(?:none|nothing|0|zero|n/?a)\b|(?:were|was|is|are)?\s*ruled out|"
                         r"(?:rate|count)?\s*(?:of|at|is|was|=|:)?\s*0(?:\.0+)?\s*%?(?!\.?\d))", rest))


def judge_no_fault(diagnosis: str | None, structured: StructuredDiagnosis | None = None) -> DiagnosisVerdict:
    """The verdict on a no-fault control's diagnosis (see the module's docstring)."""
    from farm.oracles.judge import PASS_RULE, QUESTIONS, WEIGHTS

    submitted = bool(diagnosis and diagnosis.strip())
    blamed = blame(diagnosis or "") if submitted else None
    roots = [r for r in (structured.root_causes if structured else []) if not _NOTHING.match(r)]
    if blamed is None and roots:
        blamed = f"structured root causes: {', '.join(roots)}"
    passed = submitted and blamed is None
    evidence = ("no diagnosis submitted" if not submitted else
                f"blames something (a false alarm): {blamed[:200]}" if blamed else "blames nothing: nothing is wrong")
    # One decision answers every checklist question: a false alarm mislocates, mischaracterises and
    # overreaches at once, and a clean answer gets all three dimensions right.
    answers = [ChecklistAnswer(id=q.id, dimension=q.dimension, question=q.text, answer=passed,
                               quote=(diagnosis or "")[:200] if passed else "", evidence=evidence) for q in QUESTIONS]
    score = 1.0 if passed else 0.0
    return DiagnosisVerdict(judge="offline", offline=True, answers=answers, scores={d: score for d in WEIGHTS},
                            composite=score, passed=passed, submitted=submitted, threshold=None,
                            pass_rule=PASS_RULE.id, pass_rule_text=PASS_RULE.text)
