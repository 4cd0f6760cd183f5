"""No-fault controls (AIOpsLab's detection task): their definition, the judge's rule (any blame is a
false alarm), and a trial of one run end to end by `farm run` (slow)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from core.records import StructuredDiagnosis
from farm.oracles.judge import PASS_RULE, judge_diagnosis
from farm.problems.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[3]


def test_one_control_per_application_and_one_with_ambient_noise_only() -> None:
    catalog = load_catalog()
    controls = [p for p in catalog.problems if p.no_fault]
    assert {p.app for p in controls} == {p.app for p in catalog.problems if not p.no_fault}
    noisy = [p for p in controls if p.noises]
    assert len(noisy) == 1 and {n.kind for n in noisy[0].noises} >= {"pod-kill", "rolling-update"}
    for p in controls:
        assert p.composition == "none" and not p.faults and not p.mitigation and p.ground_truth.no_fault
        assert "no-fault" in p.tags and not p.sregym_ids


def _write(tmp_path: Path, **changes: object) -> Path:
    problem = {"id": "t-nf", "app": "hotel-reservation", "layer": "application", "composition": "none",
               "description": "nothing wrong", "ground_truth": {"no_fault": True, "mechanism": "nothing injected",
                                                               "symptom": "none"}, **changes}
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({"problems": [problem]}))
    return path


@pytest.mark.parametrize(("changes", "field", "reason"), [
    ({"faults": [{"injector": "pod-kill", "params": {"service": "geo"}}]}, "problem", "injects nothing"),
    ({"mitigation": [{"kubectl": "get pods"}]}, "problem", "nothing to fix"),
    ({"ground_truth": {"component": "geo", "component_kind": "Deployment", "fault_type": "misconfiguration",
                       "mechanism": "m", "details": {"a": "b"}, "symptom": "s"}}, "problem", "no_fault: true"),
    ({"composition": "single"}, "faults", "at least 1 fault"),
])
def test_a_malformed_control_is_one_precise_error(tmp_path: Path, changes: dict, field: str, reason: str) -> None:
    catalog = load_catalog(files=[_write(tmp_path, **changes)])
    assert not catalog.problems and len(catalog.errors) == 1
    assert catalog.errors[0].field == field and reason in str(catalog.errors[0])


def test_a_well_formed_control_loads(tmp_path: Path) -> None:
    (p,) = load_catalog(files=[_write(tmp_path)]).problems
    assert p.no_fault and p.ground_truth.component == "none" and p.ground_truth.fault_type == "no-fault"


NOTHING_WRONG = [
    "Nothing is wrong: all pods are Running and Ready, no restarts, the error rate is 0%, no alerts firing.",
    "No incident. I found no root cause; every service is healthy and latency is normal.",
    "The application is healthy. There are no errors in the logs and no failing pods.",
    "All deployments are available; no faults found.",
]
BLAMES = [
    "The root cause is the recommendation deployment: its pods crash-loop.",
    "geo is misconfigured: its MongoDB address points at the wrong port.",
    "Possibly the memcached-rate service is overloaded, or maybe mongodb-user is slow.",
    "Everything looks fine except the user service, which has a memory leak.",
    "Latency on frontend is elevated due to CPU throttling.",
]


@pytest.mark.parametrize("text", NOTHING_WRONG)
def test_saying_nothing_is_wrong_passes(text: str) -> None:
    truth = load_catalog().get("nf-hotel-reservation").ground_truth
    verdict = judge_diagnosis(text, truth, None)
    assert verdict.passed and verdict.submitted and verdict.composite == 1.0, verdict.answers[0].evidence
    assert verdict.pass_rule == PASS_RULE.id


@pytest.mark.parametrize("text", BLAMES)
def test_blaming_anything_is_a_false_alarm(text: str) -> None:
    truth = load_catalog().get("nf-hotel-reservation").ground_truth
    verdict = judge_diagnosis(text, truth, None)
    assert not verdict.passed and verdict.submitted
    assert verdict.answers[0].evidence.startswith("blames something (a false alarm)")


def test_no_diagnosis_fails_without_an_alarm_and_a_structured_root_cause_blames() -> None:
    truth = load_catalog().get("nf-social-network").ground_truth
    silent = judge_diagnosis(None, truth, None)
    assert not silent.passed and not silent.submitted
    structured = judge_diagnosis("Nothing is wrong.", truth, None,
                                 structured=StructuredDiagnosis(root_causes=["deployment/user-service"]))
    assert not structured.passed
    none_given = judge_diagnosis("Nothing is wrong.", truth, None, structured=StructuredDiagnosis(root_causes=["none"]))
    assert none_given.passed


def test_the_rule_holds_whatever_judge_model_the_sweep_names() -> None:
    """No model is called for a control (a model here would be unreachable): the rule is the same."""
    truth = load_catalog().get("nf-train-ticket").ground_truth
    verdict = judge_diagnosis("The ts-order-service is down.", truth, "openai/never-called",
                              api_base="http://127.0.0.1:9/v1", max_attempts=1)
    assert not verdict.passed and verdict.offline


@pytest.mark.slow
def test_a_control_runs_end_to_end_and_the_leaderboard_counts_its_false_alarm(tmp_path: Path) -> None:
    """`farm run` of the noise-only control with the baseline agent (which always names a root cause):
    the application stays healthy (the mitigation oracle passes), the diagnosis is a false alarm."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "nf", "problems": {"ids": ["nf-hotel-reservation-ambient-noise"]},
                                    "agents": ["baseline"], "limits": {"max_steps": 40, "wall_time_s": 600}}))
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "farm.cli", "run", str(spec), "--workers", "1", "--out", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (row,) = pd.read_csv(out / "leaderboard.csv").to_dict("records")
    assert row["n"] == 1 and row["no_fault_n"] == 1 and row["false_alarm_rate"] == 1.0
    assert row["mitigation_rate"] == 1.0 and row["diagnosis_rate"] == 0.0
    (noise,) = list(out.rglob("noise.json"))
    assert "pod-kill" in noise.read_text()  # its own noise ran, though the sweep did not turn noise on
