"""The structured part of a diagnosis judged exactly: root-cause objects against the ground truth's
root components (a pod, ReplicaSet, container or claim name counts as the workload that owns it;
`deployment/geo` as `geo`), the fault type against the ground truth's, the affected components
against its list (every one named, and not many healthy ones besides). The text is judged apart, as always; these are metrics of their own.

    score_structured(answer, truth, inventory) -> StructuredScore
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from core.errors import InputError
from core.problem import GroundTruth
from core.records import StructuredDiagnosis, StructuredScore
from farm.oracles.claims import POD_SUFFIX
from farm.oracles.vocabulary import FAULT_TYPES

MAX_ROOT_CAUSES = 3


def too_many_healthy(healthy: int, listed_truth: int) -> bool:
    """An affected list that names `healthy` components the ground truth does not list, beside
    `listed_truth` it does: precision matters as well as recall, or naming every component of the
    application would cover any ground truth. A reading of the chain may name a hop or two more
    than the ground truth's list (a caller of a caller), so up to two, or as many as it names
    rightly, are tolerated."""
    return healthy > max(2, listed_truth)


def check_structured(answer: StructuredDiagnosis) -> None:
    """Raises InputError saying which field is wrong: a fault type outside the taxonomy, more than
    three root causes, an empty name."""
    if answer.fault_type is not None and answer.fault_type not in FAULT_TYPES:
        raise InputError(f"fault_type '{answer.fault_type}' is not in the taxonomy: one of "
                         f"{', '.join(sorted(FAULT_TYPES))}")
    if len(answer.root_causes) > MAX_ROOT_CAUSES:
        raise InputError(f"root_causes lists {len(answer.root_causes)} objects; at most {MAX_ROOT_CAUSES}, "
                         "most likely first")
    if any(not n.strip() for n in [*answer.root_causes, *answer.affected]):
        raise InputError("root_causes and affected must not contain empty names")


def object_name(name: str, inventory: Mapping[str, str]) -> str:
    """What a name names: its object without a kind prefix, a pod or ReplicaSet as its workload, a
    container or claim as the workload that owns it."""
    n = name.strip().lower().split("/", 1)[-1]
    if n in inventory:
        return inventory[n]
    for known in sorted(inventory, key=len, reverse=True):
        if re.fullmatch(re.escape(known) + POD_SUFFIX, n):
            return inventory[known]
    return n


def score_structured(answer: StructuredDiagnosis, truth: GroundTruth,
                     inventory: Mapping[str, str] | None = None) -> StructuredScore:
    inv = {k.lower(): v.lower() for k, v in (inventory or {}).items()}
    roots = [truth, *truth.also]
    want = {object_name(r.component, inv) for r in roots}
    given = [object_name(n, inv) for n in answer.root_causes]
    score = StructuredScore()
    if given:
        score.top1 = given[0] in want and (len(want) == 1 or want <= set(given[:len(want)]))
        score.top3 = want <= set(given[:MAX_ROOT_CAUSES])
    if answer.fault_type is not None:
        score.fault_type = answer.fault_type in {r.fault_type for r in roots}
    if answer.affected:
        listed = {object_name(n, inv) for n in answer.affected}
        truth_affected = {object_name(a, inv) for r in roots for a in r.affected}
        healthy = listed - truth_affected - want
        score.affected = truth_affected <= listed and not too_many_healthy(len(healthy), len(truth_affected & listed))
    return score
