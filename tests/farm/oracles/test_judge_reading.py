"""How the offline judge reads a diagnosis, for the causes of disagreement found on held-out set 3
(issue 22's round after it): each text here is written for the test, not taken from a labels file,
and judged against a real catalog problem with its application's inventory."""

from __future__ import annotations

import pytest

from core.records import DiagnosisVerdict
from farm.oracles.judge import judge_diagnosis
from farm.oracles.inventory import app_inventory
from farm.problems.catalog import load_catalog

EC2_NODE = "ip-10-0-3-77.eu-west-1.compute.internal"


def _judge(problem_id: str, text: str, node: str = "sim-worker3") -> DiagnosisVerdict:
    problem = load_catalog().get(problem_id)
    truth = problem.ground_truth.filled(node=node)
    return judge_diagnosis(text, truth, None, components=app_inventory(problem.app))


def _answers(v: DiagnosisVerdict) -> dict[str, bool]:
    return {a.id: a.answer for a in v.answers}


def _failing(v: DiagnosisVerdict) -> list[tuple[str, str]]:
    return [(a.id, a.evidence) for a in v.answers if not a.answer and a.id in ("L1", "L3", "C1", "C3", "S1")]


def test_this_points_to_names_the_conclusion_not_a_target() -> None:
    text = ("The profile container starts and answers health checks, yet it announces itself as srv-geo and "
            "binds 8083. This points to the profile Deployment's container command having been replaced by "
            "`geo`, so the pod runs the geo server, rather than a resource problem in profile.")
    v = _judge("hr-profile-wrong-binary", text)
    assert v.passed, _failing(v)


def test_a_node_goes_by_its_host_name_and_is_no_victim_on_itself() -> None:
    text = ("Root cause: the NIC of ip-10-0-3-77 mangles close to half of the packets it carries; checksum "
            "error counters climb on that node only. frontend's requests that land on pods there are reset.")
    v = _judge("hr-nic-corruption-search-node", text, node=EC2_NODE)
    assert v.passed, _failing(v)
    # the node named by reference inside its own evidence is not made a victim of itself
    text = (f"Node {EC2_NODE}'s network card corrupts about 40% of frames: InCsumErrors climb on that node only. "
            "frontend sees resets from the pods it hosts.")
    v = _judge("hr-nic-corruption-search-node", text, node=EC2_NODE)
    assert _answers(v)["L1"], _failing(v)


def test_an_impact_list_of_every_service_is_no_list_of_candidates() -> None:
    text = ("Root cause: the NetworkPolicy mongodb-reservation-ingress lets no ingress reach the "
            "mongodb-reservation pods, so reservation's queries hang until they time out.\n"
            "Affected: consul, frontend, geo, profile, rate, recommendation, reservation, search, user.")
    v = _judge("hr-mongodb-reservation-network-policy-block", text)
    assert v.passed, _failing(v)


def test_the_namespace_named_as_a_place_is_not_blamed() -> None:
    text = ("Root cause: the ResourceQuota compute-resources in hotel-reservation allows one pod fewer than were "
            "running, so the ReplicaSet cannot replace rate's killed pod (exceeded quota) and search fails.")
    v = _judge("hr-capacity-cut-quota-blocks-recovery", text)
    assert v.passed, _failing(v)


def test_an_unknown_flag_is_the_cause_not_doubt_about_it() -> None:
    text = ("Root cause: the kubelet on sim-worker3 exits at start on an unknown command-line flag and systemd "
            "restarts it forever; the node turns NotReady and ts-auth-service's pod is evicted.")
    v = _judge("tt-kubelet-crash-auth-node", text)
    assert v.passed, _failing(v)
    assert not _judge("tt-kubelet-crash-auth-node", "The root cause is still unknown; sim-worker3 is NotReady.").passed


def test_a_selector_value_and_a_place_are_not_components() -> None:
    text = ("Root cause: mongodb-rate's template pins it with nodeSelector kubernetes.io/hostname=sim-worker7, a "
            "node that does not exist, so its pod stays Pending and rate loses its database.")
    v = _judge("hr-mongodb-rate-node-selector", text)
    assert v.passed, _failing(v)
    text = ("Root cause: sim-worker3's disk returns EIO for every read underneath postgresql's data directory; "
            "product-catalog's queries fail and frontend shows 500s.")
    v = _judge("as-postgresql-latent-sector-errors", text)
    assert _answers(v)["L3"] and _answers(v)["S1"], _failing(v)


def test_a_remedy_with_options_hedges_over_no_fault_type() -> None:
    text = ("Root cause: the validating webhook pod-policy.platform.internal has failurePolicy Fail and its "
            "backend never answers, so pods of rate and user cannot be created. Fix: switch failurePolicy to "
            "Ignore or remove the webhook configuration.")
    v = _judge("hr-correlated-webhook-blocks-two-services", text)
    assert _answers(v)["C3"], _failing(v)


def test_quoted_admission_output_claims_no_fault_type() -> None:
    text = ("Root cause: mongodb-reservation's CPU request was lowered to 1m, under the LimitRange's 10m "
            "minimum, so every new pod is refused: `pods is forbidden: minimum cpu usage per Container is 10m, "
            "but request is 1m`. reservation then crash-loops.")
    v = _judge("hr-mongodb-reservation-requests-too-small", text)
    assert _answers(v)["C3"], _failing(v)


@pytest.mark.parametrize("text", [
    "rate is broken in several ways at once: its CPU limit is 10m, its image tag was bumped to a broken build, "
    "its readiness probe hits the wrong port and a network policy drops its traffic.",
    "Root cause: rate.\nEvidence: CPU limit 10m; the liveness probe targets a closed port; the Service selector "
    "matches nothing; replicas were set to zero.",
])
def test_extra_mechanisms_beside_the_right_one_fail_the_mechanism(text: str) -> None:
    v = _judge("hr-rate-cpu-throttled", text)
    assert not _answers(v)["C1"] and not _answers(v)["C3"] and not v.passed


def test_a_causal_chain_with_its_evidence_is_no_soup() -> None:
    text = ("Root cause: rate's CPU limit is 10m, so CFS throttles it and each GetRates takes seconds; search's "
            "deadline expires and frontend returns 500.\nEvidence: container_cpu_cfs_throttled_periods_total near "
            "100%; the pod is Running with no restarts; no OOMKilled events.")
    v = _judge("hr-rate-cpu-throttled", text)
    assert v.passed, _failing(v)


def test_two_extra_faults_listed_side_by_side_are_a_soup_but_a_chain_of_symptoms_is_not() -> None:
    soup = ("mongodb-rate is in a bad state: its nodeSelector names sim-worker9, its image tag was bumped to a "
            "missing build, and its readiness probe points at the wrong port.")
    v = _judge("hr-mongodb-rate-node-selector", soup)
    assert not _answers(v)["C3"] and not v.passed
    chain = ("Root cause: mongodb-rate's nodeSelector names sim-worker9, which no node has. Its pod stays Pending, "
             "rate cannot reach its database, and frontend returns 500 on /hotels.")
    v = _judge("hr-mongodb-rate-node-selector", chain)
    assert v.passed, _failing(v)


def test_the_value_a_setting_should_have_is_not_the_mechanism() -> None:
    text = "Root cause: rate. Its container must get cpu=1000m to keep up with search."
    v = _judge("hr-rate-cpu-throttled", text)
    assert not _answers(v)["C1"], _failing(v)
    v = _judge("hr-rate-cpu-throttled", "Root cause: rate's CPU limit was cut to cpu=10m (it should be cpu=1000m); "
                                        "CFS throttling makes GetRates miss search's deadline.")
    assert v.passed, _failing(v)


def test_a_symptom_word_beside_the_faults_own_kind_is_its_symptom() -> None:
    text = (f"Root cause: node {EC2_NODE}'s NIC loses about half of its packets: retransmits spike and frontend's "
            "requests on that node time out.")
    v = _judge("hr-nic-corruption-search-node", text, node=EC2_NODE)
    assert _answers(v)["C3"], _failing(v)


def test_output_quoted_across_a_clause_break_claims_no_fault_type() -> None:
    text = ("Root cause: mongodb-reservation's CPU request is 1m (was 100m), below the LimitRange minimum.\n"
            "- `kubectl describe rs mongodb-reservation-7c5d9`: `FailedCreate: pods \"mongodb-reservation-7c5d9-\" is forbidden: minimum cpu usage "
            "per Container is 10m; request is 1m`\nreservation crash-loops without its database.")
    v = _judge("hr-mongodb-reservation-requests-too-small", text)
    assert _answers(v)["C3"], _failing(v)


def test_what_rather_than_clears_ends_at_the_colon_that_explains() -> None:
    text = ("Every /hotels request fails in under a millisecond with no span to search, which points to frontend "
            "rather than to a backend: frontend's SEARCH_BACKEND_VERSION switch is set to true, turning on a latent "
            "code path that returns 500.")
    v = _judge("hr-frontend-latent-bug-flag", text)
    assert _answers(v)["L1"], _failing(v)
