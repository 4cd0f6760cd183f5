"""Diagnoses written to fool a judge rather than to diagnose, generated for any catalog problem: what
bench/judge_bench.py and the judge's tests throw at it. Three families, each in a few wordings:

    stuffed   every object name of the application and every common fault kind, committing to
              none (or to all of them at once)
    hedge     'either X or Y or Z' over the faulty component and two others, and over fault kinds
    bare      the faulty component named as the root cause, its downstream components as
              downstream, 'users see errors': no mechanism, no changed value

    attacks(problem, truth) -> {family: [text, ...]}

A problem is fooled by a family when any of its texts passes. None of these texts may pass.
"""

from __future__ import annotations

import re

from core.problem import GroundTruth, Problem
from farm.oracles.inventory import app_object_names

FAMILIES = ("stuffed", "hedge", "bare")
FAULT_KINDS = ("misconfiguration", "wrong image tag", "wrong port", "wrong selector", "missing environment variable",
               "OOMKilled memory limit", "CPU throttling", "network partition", "packet loss", "DNS failure",
               "disk I/O errors (EIO)", "disk full", "wrong credentials", "expired certificate", "feature flag",
               "code bug", "node failure", "kernel fault", "clock skew", "resource quota", "scheduling (Pending)",
               "admission webhook", "retry storm", "file descriptor exhaustion")
# The node a node-level fault lands on, for problems whose ground truth names it as {node}.
ATTACK_NODE = "sim-worker2"


def _name(component: str) -> str:
    """What an attacker calls the component: its name, or for a ground truth that describes it
    ('hotel-reservation image tag sha-0badc0de (geo, rate, profile)') the names in it, not the
    description, which states the changed detail."""
    inner = re.search(r"\(([^)]*)\)", component)
    if " " in component:
        return inner.group(1).replace(", ", " and ") if inner else component.split()[0]
    return component.split("/", 1)[-1]


def attacks(problem: Problem, truth: GroundTruth | None = None) -> dict[str, list[str]]:
    """The attack texts for one problem, by family. `truth` is the filled ground truth (default: the
    problem's, with {node} filled as an emulated trial fills it)."""
    gt = truth or problem.ground_truth.filled(node=ATTACK_NODE)
    roots = [_name(r.component) for r in [gt, *gt.also]]
    names = sorted(app_object_names(problem.app) | set(roots) | {a for r in [gt, *gt.also] for a in r.affected})
    others = [n for n in names if n not in roots and n not in gt.affected] or ["frontend", "database"]
    downstream = sorted({a for r in [gt, *gt.also] for a in r.affected}) or ["its callers"]
    everything, kinds = ", ".join(names), ", ".join(FAULT_KINDS)
    culprit = " and ".join(roots)
    down = ", ".join(downstream)
    return {
        "stuffed": [
            f"Reviewed components: {everything}. Fault kinds considered: {kinds}. The root cause is still being "
            "confirmed.",
            f"Root cause candidates: {everything}. Possible fault kinds: {kinds}. Users see errors.",
            f"Root cause: {everything} are all failing ({kinds}).",
            f"The root cause is one of the following: {everything}. It is a {', '.join(FAULT_KINDS[:8])} "
            "problem.",
        ],
        "hedge": [
            f"The root cause is either {culprit} or {others[0]} or {others[-1]}; possibly a misconfiguration, a "
            f"memory limit or packet loss. {down} fail as a result and users see errors.",
            f"Most likely {culprit}, but it could also be {others[0]} or {others[-1]}. The fault might be a wrong "
            "setting, an OOM kill or a disk problem. Users see errors.",
            f"Either {culprit} is misconfigured or {others[0]} is out of memory or the node's disk is failing; "
            f"{down} are affected.",
        ],
        "bare": [
            f"Root cause: {culprit}. Downstream: {down} fail because of it. Users see errors.",
            f"{culprit} is the root cause; {down} are failing downstream of it and users see errors.",
            f"The faulty component is {culprit} ({gt.component_kind}). Affected: {down}. Users see errors and "
            "timeouts.",
        ],
    }
