"""Structured diagnoses judged exactly: top-1 and top-3 root-cause accuracy with pod, container
and claim names resolved to their workload, fault-type accuracy against the catalog's taxonomy,
affected coverage; the text is judged as before and alone decides the pass."""

from __future__ import annotations

import pytest

from core.records import StructuredDiagnosis
from core.errors import InputError
from farm.oracles.judge import judge_diagnosis
from farm.oracles.inventory import app_inventory
from farm.oracles.structured import check_structured, score_structured
from farm.problems.catalog import load_catalog

INV = app_inventory("hotel-reservation")


def _truth(problem: str, **fill: str):  # type: ignore[no-untyped-def]
    return load_catalog().get(problem).ground_truth.filled(**fill)


def test_root_causes_are_matched_as_objects_ranked() -> None:
    probe = _truth("hr-geo-liveness-probe-wrong-port")
    first = score_structured(StructuredDiagnosis(root_causes=["deployment/geo", "mongodb-geo"],
                                                 fault_type="misconfiguration"), probe, INV)
    assert first.top1 and first.top3 and first.fault_type and first.affected is None
    # a pod name with its hashes is its Deployment; second place is top-3, not top-1
    second = score_structured(StructuredDiagnosis(root_causes=["mongodb-geo", "geo-7c9d5b8f4-q8wzt"],
                                                  fault_type="network"), probe, INV)
    assert (second.top1, second.top3, second.fault_type) == (False, True, False)
    claim = score_structured(StructuredDiagnosis(root_causes=["reservation-pvc"]),
                             _truth("hr-mongodb-reservation-io-latency"), INV)
    assert claim.top1 and claim.fault_type is None  # a claim is its workload's
    node = score_structured(StructuredDiagnosis(root_causes=["sim-worker2"], fault_type="fd-exhaustion"),
                            _truth("hr-node-fd-exhaustion-frontend", node="sim-worker2"), INV)
    assert node.top1 and node.fault_type


def test_a_concurrent_truth_needs_every_root_within_the_ranks() -> None:
    problem = next(p for p in load_catalog().problems if p.app == "hotel-reservation" and p.ground_truth.also
                   and "{" not in p.ground_truth.component + p.ground_truth.also[0].component)
    gt = problem.ground_truth
    both = [gt.component, gt.also[0].component]
    assert score_structured(StructuredDiagnosis(root_causes=both), gt, INV).top1
    one = score_structured(StructuredDiagnosis(root_causes=[gt.component, "frontend"]), gt, INV)
    assert one.top1 is False and one.top3 is False


def test_the_taxonomy_and_the_ranks_are_checked() -> None:
    with pytest.raises(InputError, match="fault_type 'oom' is not in the taxonomy"):
        check_structured(StructuredDiagnosis(fault_type="oom"))
    with pytest.raises(InputError, match="at most 3"):
        check_structured(StructuredDiagnosis(root_causes=["a", "b", "c", "d"]))


def test_the_verdict_reports_the_structured_metrics_and_the_text_decides_the_pass() -> None:
    probe = _truth("hr-geo-liveness-probe-wrong-port")
    text = ("The liveness probe added to geo checks TCP 9083 but geo listens on 8083, so the kubelet keeps killing geo; "
            "search fails and /hotels returns 500.")
    right = StructuredDiagnosis(root_causes=["geo"], fault_type="misconfiguration", affected=["search", "frontend"])
    v = judge_diagnosis(text, probe, None, components=INV, structured=right)
    assert v.passed and v.structured is not None and v.structured.top1 and v.structured.affected
    wrong = StructuredDiagnosis(root_causes=["mongodb-geo"], fault_type="disk-io")
    v = judge_diagnosis(text, probe, None, components=INV, structured=wrong)
    assert v.passed and v.structured is not None and not v.structured.top1 and not v.structured.fault_type
    assert judge_diagnosis(text, probe, None, components=INV).structured is None


def test_affected_needs_precision_as_well_as_recall() -> None:
    probe = _truth("hr-mongodb-profile-liveness-legacy-http-port")
    assert probe.affected == ["profile", "frontend"]

    def affected(names: list[str]) -> bool | None:
        return score_structured(StructuredDiagnosis(affected=names), probe, INV).affected
    # a hop beyond the list (search calls profile) is a reading of the chain, not a guess
    assert affected(["profile", "frontend"]) and affected(["profile-6d8f7c9b5-x2kqp", "frontend", "search"])
    assert affected(["profile"]) is False
    # every workload of the application 'covers' any list: that is no answer
    assert affected(sorted(set(INV.values()))) is False
