"""The offline judge's knowledge of a problem: every fault type of the catalog has a vocabulary,
the inventory maps what a diagnosis quotes (containers, claims, pods) to the component that owns
it, and the failure classes of issue 22 are read as an SRE reads them, in both directions."""

from __future__ import annotations

import json
from pathlib import Path

from core.problem import GroundTruth
from farm.cli.judge import agreement, load_labels
from farm.oracles.judge import judge_diagnosis
from farm.oracles.inventory import app_inventory
from farm.oracles.vocabulary import FAULT_TYPES, KINDS, fault_type, kinds_in, settings_in
from farm.problems.catalog import load_catalog

FAILURE_CLASSES = Path(__file__).with_name("diagnosis_labels_failure_classes.jsonl")


def test_every_catalog_fault_type_has_a_vocabulary() -> None:
    # A no-fault control has no fault to describe: the no-fault rule judges it (farm/oracles/no_fault.py).
    used = {gt.fault_type for p in load_catalog().problems if not p.no_fault
            for gt in [p.ground_truth, *p.ground_truth.also]}
    assert used <= set(FAULT_TYPES), sorted(used - set(FAULT_TYPES))
    for name, ft in FAULT_TYPES.items():
        assert ft.core and ft.allowed <= set(KINDS), name


def test_kinds_are_read_by_meaning_not_by_a_stray_keyword() -> None:
    assert "admission" not in kinds_in("rate's admission queue is full")  # a queue, not a webhook
    assert "overload" in kinds_in("rate's admission queue is full")
    assert "cpu-speed" in kinds_in("the cpus run slow on that node")
    assert "fd" in kinds_in("the node's file-descriptor limit is 2048")
    assert "state-loss" in kinds_in("consul came back empty after the restart")
    assert "gc" in kinds_in("the go garbage collector runs back to back")
    assert "scheduling" in kinds_in("a required podAntiAffinity keeps it pending")
    assert kinds_in("requests are served from the statefulset") == set()  # 'state' only as a word
    reader_truth = load_catalog().get("hr-mongodb-rate-node-selector").ground_truth
    text = ("Root cause: mongodb-rate is Pending: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
            "3 node(s) didn't match Pod's node affinity/selector; its template has `nodeSelector: "
            "kubernetes.io/hostname: sim-worker9`, which no node carries, so rate fails.")
    v = judge_diagnosis(text, reader_truth, None, components=app_inventory("hotel-reservation"))
    # a label key is no fault word ('role' is no RBAC), a YAML 'key: value' is the truth's key=value
    assert {a.id: a.answer for a in v.answers}["C3"] and {a.id: a.answer for a in v.answers}["C2"]
    assert fault_type("disk-io-latency") is FAULT_TYPES["disk-io"] and fault_type("weird") is None


def test_the_inventory_maps_containers_and_claims_to_their_workload() -> None:
    inv = app_inventory("hotel-reservation")
    assert inv["geo-pvc"] == "mongodb-geo" and inv["hotel-reserv-geo-mongo"] == "mongodb-geo"
    assert inv["hotel-reserv-geo"] == "geo" and inv["geo"] == "geo" and inv["frontend"] == "frontend"
    assert "webhook" not in app_inventory("astronomy-shop")  # a one-word container name is no name


def test_a_quoted_claim_or_pod_name_blames_no_new_component() -> None:
    truth = load_catalog().get("hr-mongodb-reservation-io-latency").ground_truth
    text = ("Root cause: I/O on mongodb-reservation's /data/db (claim reservation-pvc, pod mongodb-reservation-"
            "6b8f9d7c5-xkqzt) is delayed by about 1 s per operation, so reservation's calls time out.")
    v = judge_diagnosis(text, truth, None, components=app_inventory("hotel-reservation"))
    assert v.passed, [(a.id, a.evidence) for a in v.answers if not a.answer]


def test_a_wrong_mechanism_sharing_the_truths_words_fails_c1() -> None:
    truth = GroundTruth(component="rate", component_kind="Deployment", fault_type="gc-thrash",
                        mechanism="rate's GOMEMLIMIT of 20MiB is below its live heap at the memory limit of 24Mi, so "
                                  "the Go garbage collector runs back to back and rate cannot keep up.",
                        details={"GOMEMLIMIT": "20MiB"}, affected=["search"], symptom="searches fail")
    oom = "Root cause: rate's memory limit is too low, so rate is OOMKilled at the limit and search fails."
    gc = "Root cause: rate's garbage collector runs back to back at its memory limit, so it cannot keep up and search fails."
    assert {a.id: a.answer for a in judge_diagnosis(oom, truth, None).answers}["C1"] is False
    assert judge_diagnosis(gc, truth, None).passed


def test_another_setting_of_the_right_object_is_another_mechanism() -> None:
    truth = GroundTruth(component="cache", component_kind="Service", fault_type="misconfiguration",
                        mechanism="The cache Service's selector app=caches matches no pod, so it has no endpoints and "
                                  "api's cache calls fail.",
                        details={"field": "spec.selector", "value": "caches"}, affected=["api"], symptom="errors")
    port = ("Root cause: the cache Service is misconfigured: its targetPort does not match the port the cache "
            "listens on, so it has no working endpoints and api's cache calls fail.")
    selector = "Root cause: the cache Service's selector matches no pod, so it has no endpoints and api's calls fail."
    assert {a.id: a.answer for a in judge_diagnosis(port, truth, None).answers}["C1"] is False
    assert judge_diagnosis(selector, truth, None).passed
    assert settings_in("podselector app=x, 1 replicaset, the pause image") == {"image"}
    assert settings_in("its env var tls is set, but no certificate is mounted") == {"env", "certificate"}


def test_a_json_diagnosis_names_its_root_cause_by_its_field() -> None:
    truth = load_catalog().get("hr-mongodb-profile-network-policy-block").ground_truth
    answer = {"root_cause": {"component": "mongodb-profile-ingress", "kind": "NetworkPolicy", "fault_type": "network"},
              "mechanism": "NetworkPolicy mongodb-profile-ingress selects the mongodb-profile pods with ingress []: "
                           "every connection to mongodb-profile is dropped and profile's queries time out",
              "affected": ["profile", "frontend"], "user_impact": "/hotels returns HTTP 500"}
    inventory = app_inventory("hotel-reservation")
    assert judge_diagnosis(json.dumps(answer), truth, None, components=inventory).passed
    wrong = answer | {"root_cause": {"component": "profile", "kind": "Deployment", "fault_type": "network"}}
    assert not judge_diagnosis(json.dumps(wrong), truth, None, components=inventory).passed


def test_an_item_under_a_root_causes_heading_blames_what_it_starts_with() -> None:
    truth = load_catalog().get("hr-concurrent-user-zero-and-reservation-db-image").ground_truth
    text = ("Root causes:\n1. user Deployment scaled to 0 replicas, so CheckUser has no server; logins fail.\n"
            "2. mongodb-reservation is in ImagePullBackOff: image mongo:4.4.66 does not exist.\n")
    extra = text + "3. consul's catalog is stale: frontend's resolver returns an old endpoint, which breaks reservations.\n"
    inventory = app_inventory("hotel-reservation")
    assert judge_diagnosis(text, truth, None, components=inventory).passed
    v = judge_diagnosis(extra, truth, None, components=inventory)
    assert not {a.id: a.answer for a in v.answers}["L3"] and not v.passed


def test_the_failure_classes_are_judged_as_labelled() -> None:
    rows = load_labels(FAILURE_CLASSES)
    assert {r.label for r in rows} == {True, False} and len(rows) >= 20
    result = agreement(FAILURE_CLASSES, None)
    wrong = [(line["id"], line["evidence"]) for line in result["lines"]
             if line["label"] != line["judge"] or line["evidence"]]
    assert not wrong, json.dumps(wrong, indent=1)
