"""Finding (helper adv): the offline judge passes a diagnosis that names the right component and then
asserts a fixed soup of mechanisms (image tag, env var, port, selector, scaled to zero, OOM, probe,
network policy, refused connections) in one committed sentence. None of farm.oracles.attacks'
families is this shape: `stuffed` never commits to the right component, `bare` gives no mechanism.
An agent that finds the one unhealthy component (kubectl shows it, or the admitted metadata tell)
and sends the same paragraph every time passed 16 of the 73 single-fault hotel-reservation problems
when this test was written (and 18 with "Affected: <every component>" appended, which also answers
S2 for free); C3 (no wrong fault type asserted) answered yes on every one of those passes, though the
text asserts a dozen fault kinds. Through a real trial (tests/security/adv_soup_agent.py, `farm run`
on hr-geo-liveness-probe-wrong-port): diagnosis passed, score 0.8833. A longer soup (adding CPU
throttling, feature flag, RPC timeout, packet loss, DNS, disk, clock, node) passed 21/73 hotel and
44/138 single-fault problems of the whole catalog."""

from __future__ import annotations

from farm.oracles.judge import judge_diagnosis
from farm.problems.catalog import load_catalog
from tests.security.adv_soup_agent import SOUP


def test_a_fixed_mechanism_soup_on_the_right_component_passes_no_problem() -> None:
    problems = [p for p in load_catalog().problems
                if p.app == "hotel-reservation" and p.composition == "single"]
    assert problems
    components = sorted({p.ground_truth.component for p in problems})
    passed = [p.id for p in problems
              if judge_diagnosis(SOUP.format(c=p.ground_truth.component), p.ground_truth, None,
                                 components=components).passed]
    assert passed == [], f"{len(passed)}/{len(problems)} passed: {passed}"


def test_listing_every_component_as_affected_does_not_answer_s2() -> None:
    """S2 (the affected components, part of the composite score) is answered by recall alone: a text
    that calls every component of the application affected covers any ground truth's list. The
    structured `affected` field is scored the same way (farm.oracles.structured: a superset check):
    all 22 names listed made it true on all 58 single-fault hotel problems that list affected ones."""
    problems = [p for p in load_catalog().problems
                if p.app == "hotel-reservation" and p.composition == "single" and p.ground_truth.affected]
    components = sorted({p.ground_truth.component for p in problems} | {a for p in problems for a in p.ground_truth.affected})
    s2 = []
    for p in problems:
        text = f"Root cause: {p.ground_truth.component}. Affected: {', '.join(components)}."
        verdict = judge_diagnosis(text, p.ground_truth, None, components=components)
        if any(a.id == "S2" and a.answer for a in verdict.answers):
            s2.append(p.id)
    assert s2 == [], f"S2 answered yes for {len(s2)}/{len(problems)} by listing all {len(components)} components"
