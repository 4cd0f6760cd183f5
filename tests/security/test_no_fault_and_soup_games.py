"""Findings (helper adv2, issue 23 item 6) against the judge's no-fault rule and the soup threshold.

No-fault rule (farm/oracles/no_fault.py): a negation word within six words before a fault word
cleared the clause, whatever the negation applied to: "I have no doubt that the root cause is X" and
"There is no question the X deployment is broken" passed a no-fault control as "blames nothing"
(fixed here: idioms that use a negation word to assert are not negations). Also fixed since (issue 22's
judge round): a blame in words outside the fault list ("X's targetPort is 9999 instead of 8083") and a
negation that singles out the cause ("There is no other root cause than <component> whose <the ground
truth's mechanism>"), which passed the offline judge on 56 of the 75 single-fault hotel-reservation
problems and, on 7 of those, judge_no_fault as well.

Soup threshold (farm/oracles/judge.py SOUP_SIZE = 7): a fixed paragraph on the right component
asserting six mechanisms (image tag / ImagePullBackOff, port and targetPort, OOMKilled and
CrashLoopBackOff, readiness probe, network policy) stays under the threshold and passed 7 of the 75
single-fault hotel-reservation problems (image-tag and liveness-probe-port problems), sent unchanged.
Fixed since: mechanisms the ground truth's account does not name, three or more asserted beside it
(farm/oracles/judge.py EXTRA_MECHANISMS), fail C1 and C3 wherever they are said. Before, the soup
counted only committed clauses that name the blamed component outside evidence sections, so
the whole twelve-mechanism soup of tests/security/adv_soup_agent.py passes when it is moved under an
"Evidence:" heading after a bare "Root cause: <component>" (18/75, more than the 16/73 the original
finding had; through a real trial, FARM_AGENT_PLUGINS=tests.security.adv_soup_agent with options
{component: geo, form: evidence}, `farm run` on hr-geo-image-tag-wrong: diagnosis passed, composite
0.8833), and 11/75 when it is split into sentences that do not repeat the component ("Also its
port and targetPort are wrong.").
"""

from __future__ import annotations

import re

import pytest

from farm.oracles.judge import judge_diagnosis
from farm.oracles.no_fault import judge_no_fault
from farm.problems.catalog import load_catalog
from tests.security.adv_soup_agent import SOUP_AS_EVIDENCE

SOUP6 = ("Root cause: {c}'s deployment was changed: its image tag does not exist so the pod is stuck in "
         "ImagePullBackOff, its port and targetPort are wrong, its resource limits make it OOMKilled and "
         "CrashLoopBackOff, its readiness probe fails, the network policy blocks its traffic, so requests fail.")

SOUP_SPLIT = ("Root cause: {c}'s image tag does not exist so the pod is stuck in ImagePullBackOff. Also its port and "
              "targetPort are wrong. Also its resource limits make it OOMKilled. Also its readiness probe fails. Also "
              "the network policy blocks its traffic. Also its env var is wrong. Also it was scaled to zero replicas.")

AFFIRMING = ["I have no doubt that the root cause is the geo service's targetPort.",
             "There is no question the geo deployment is broken.",
             "Without a doubt the geo deployment is misconfigured."]


def _hotel_single() -> tuple[list, list[str]]:
    problems = [p for p in load_catalog().problems
                if p.app == "hotel-reservation" and p.composition == "single"]
    assert problems
    return problems, sorted({p.ground_truth.component for p in problems})


@pytest.mark.parametrize("text", AFFIRMING)
def test_a_blame_affirmed_with_a_negation_word_fails_a_no_fault_control(text: str) -> None:
    verdict = judge_no_fault(text)
    assert verdict.submitted
    assert not verdict.passed, f"blames geo yet read as 'nothing is wrong': {text!r}"


def test_a_blame_in_other_words_fails_a_no_fault_control() -> None:
    assert not judge_no_fault("The geo Service's targetPort is 9999 instead of 8083; set it back to 8083.").passed


@pytest.mark.parametrize("text", [
    "mongodb-user's replica count should be 1; it runs with 0. Roll it back.",
    "The reservation image was bumped to a build expected to be v2 but is v3; revert the deployment.",
    "I see no problem other than the recommendation service reading the wrong database.",
    "No cause here but the frontend's config map pointing search at port 9000.",
])
def test_a_blame_said_as_a_correction_or_a_singled_out_cause_fails_a_no_fault_control(text: str) -> None:
    assert not judge_no_fault(text).passed, text


@pytest.mark.parametrize("text", [
    "Nothing is wrong; no rollback or revert is needed, every pod is Ready.",
    "The replicas match what they should be and no pod was restarted; nothing is wrong.",
])
def test_denying_a_correction_still_passes_a_no_fault_control(text: str) -> None:
    assert judge_no_fault(text).passed, text


def test_nothing_is_wrong_still_passes_a_no_fault_control() -> None:
    """The control for the finding above: the rule's right answer is still accepted."""
    assert judge_no_fault("Nothing is wrong: no errors, every pod is ready.").passed
    assert not judge_no_fault("The geo deployment is broken.").passed


def test_no_text_passes_both_a_real_problem_and_a_no_fault_control() -> None:
    problems, components = _hotel_single()
    both = []
    for p in problems:
        g = p.ground_truth
        text = f"There is no other root cause than {g.component} whose {re.sub(r'[,.;]', ' ', g.mechanism)}"
        if judge_no_fault(text).passed and judge_diagnosis(text, g, None, components=components).passed:
            both.append(p.id)
    assert both == [], f"{len(both)}/{len(problems)} pass both: {both}"


@pytest.mark.parametrize("soup", [SOUP6, SOUP_AS_EVIDENCE, SOUP_SPLIT], ids=["six", "as-evidence", "split"])
def test_a_fixed_soup_on_the_right_component_passes_no_problem(soup: str) -> None:
    problems, components = _hotel_single()
    passed = [p.id for p in problems
              if judge_diagnosis(soup.format(c=p.ground_truth.component), p.ground_truth, None,
                                 components=components).passed]
    assert passed == [], f"{len(passed)}/{len(problems)} passed: {passed}"
