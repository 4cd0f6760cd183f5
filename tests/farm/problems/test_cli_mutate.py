"""`farm problems` list/show/mutate/validate as a real process, and the mutation API."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from core.errors import ProblemDefinitionError
from farm.problems.catalog import load_catalog
from farm.problems.mutate import mutate
from tests.conftest import KUBECTLS

ROOT = Path(__file__).resolve().parents[3]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "farm.cli.problems", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_list_filters_and_prints_json_lines() -> None:
    out = cli("list", "--layer", "hardware", "--app", "hotel-reservation", "--json")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert rows and all(r["layer"] == "hardware" and r["app"] == "hotel-reservation" for r in rows)
    assert set(rows[0]) >= {"id", "app", "layer", "tags"}
    tagged = cli("list", "--tag", "metastable", "--json")
    assert all("metastable" in json.loads(line)["tags"] for line in tagged.stdout.splitlines())
    table = cli("list", "--layer", "operator")
    assert "tidb-version-wrong" in table.stdout and "problems" in table.stderr


def test_show_hides_the_answer_unless_asked() -> None:
    problem = load_catalog().get("hr-frontend-tls-env-wrong")
    hidden = cli("show", problem.id)
    assert hidden.returncode == 0
    assert problem.ground_truth.mechanism[:40] not in hidden.stdout
    assert "ground_truth" not in hidden.stdout and "TLS" not in hidden.stdout and "env-var-wrong" not in hidden.stdout
    shown = cli("show", problem.id, "--answer", "--json")
    data = json.loads(shown.stdout)
    assert data["ground_truth"]["mechanism"] == problem.ground_truth.mechanism
    assert data["faults"][0]["injector"] == "env-var-wrong"
    missing = cli("show", "no-such-problem")
    assert missing.returncode == 2 and "unknown problem" in missing.stderr


def test_mutate_writes_a_valid_problem_file(tmp_path: Path) -> None:
    out_file = tmp_path / "new.yaml"
    done = cli("mutate", "hr-geo-network-delay", "--target", "rate", "--set", "latency=1500ms", "--out", str(out_file))
    assert done.returncode == 0, done.stderr
    catalog = load_catalog(files=[out_file])
    assert catalog.errors == []
    (p,) = catalog.problems
    assert p.faults[0].params == {"service": "rate", "latency": "1500ms"}
    assert p.ground_truth.component == "rate" and p.ground_truth.details["latency"] == "1500ms"
    assert "rate" not in p.ground_truth.affected
    bad = cli("mutate", "hr-geo-network-delay", "--set", "latency=fast")
    assert bad.returncode == 2 and "faults[0].params.latency" in bad.stderr


def test_mutation_api_targets_and_params() -> None:
    catalog = load_catalog()
    base = catalog.get("hr-memcached-rate-network-policy-block")
    moved = mutate(base, target="mongodb-geo")
    assert moved.id == "hr-memcached-rate-network-policy-block--mongodb-geo"
    assert moved.faults[0].params["dependency"] == "mongodb-geo"
    assert moved.mitigation[0].kubectl == "delete networkpolicy mongodb-geo-ingress"
    assert "mongodb-geo-ingress" in moved.ground_truth.mechanism
    # Indexed settings reach one fault of a composed problem.
    meta = catalog.get("hr-retry-storm-after-spike")
    faster = mutate(meta, settings=["0.multiplier=8", "0.duration_seconds=30"], new_id="hr-retry-storm-big-spike")
    assert faster.id == "hr-retry-storm-big-spike"
    assert faster.faults[0].params["multiplier"] == 8 and faster.faults[1] == meta.faults[1]
    with pytest.raises(ProblemDefinitionError, match="no such fault"):
        mutate(meta, settings=["5.multiplier=2"])
    with pytest.raises(ProblemDefinitionError, match="not key=value"):
        mutate(meta, settings=["multiplier"])
    assert yaml.safe_dump(faster.model_dump())  # serialisable like any catalog entry


def test_show_json_says_which_problems_are_scored_for_diagnosis_only() -> None:
    only = cli("show", "hr-disk-full-mongodb-reservation", "--json")
    scored = cli("show", "hr-geo-network-delay", "--json", "--answer")
    assert only.returncode == 0 and scored.returncode == 0, (only.stderr, scored.stderr)
    assert json.loads(only.stdout)["diagnosis_only"] is True
    data = json.loads(scored.stdout)
    assert data["diagnosis_only"] is False
    assert [s["kubectl"] for s in data["mitigation"]] == ["delete pod -l io.kompose.service=geo"]


def test_validate_refuses_a_kubectl_that_is_not_there(tmp_path: Path) -> None:
    out = cli("validate", "as-checkout-oom", "--kubectl", str(tmp_path / "kubectl"))
    said = " ".join(out.stderr.replace("│", " ").split())  # typer boxes and wraps its message
    assert out.returncode == 2 and "Invalid value for '--kubectl'" in said and "does not exist" in said, out.stderr


@pytest.mark.slow
@pytest.mark.kubectl
@pytest.mark.skipif(not KUBECTLS["1.33"].exists(), reason="kubectl 1.33 is installed by ./scripts/setup.sh --dev")
def test_validate_runs_the_mitigation_with_the_kubectl_given() -> None:
    # kubectl >= 1.28's `set resources` without -c also limits init containers: the mitigation names
    # its container, so recovery with 1.33 leaves checkout as deployed.
    out = cli("validate", "as-checkout-oom", "--kubectl", str(KUBECTLS["1.33"]), "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout)
    assert result["passed"] and result["steps"]["recover_clean"] == "ok", result
    assert result["details"]["mitigation"] == "set"
