"""SREGym's registry as data, its cross-reference to the catalog (`farm problems list --sregym`)
and the named suites a sweep spec selects."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from core.errors import SpecError
from farm.problems.catalog import load_catalog
from farm.problems.sregym import SREGYM_TSV, cross_reference, registry, suite_problems
from farm.spec import load_spec, select_problems

ROOT = Path(__file__).resolve().parents[3]


def test_the_registry_is_sregyms_123_ids_and_its_lite_21() -> None:
    reg = registry()
    assert len(reg) == 123 and sum(p.lite for p in reg.values()) == 21
    assert "ba07faf1" in SREGYM_TSV.read_text().split("\n", 2)[1]  # the commit it was read at
    for p in reg.values():
        assert p.app in {"hotel-reservation", "social-network", "astronomy-shop", "train-ticket", "tidb-cluster"}, p
        assert p.note.strip(), p.id  # every id says what the catalog has, or why not


def test_every_id_is_accounted_for_and_the_same_app_ones_are_carried() -> None:
    catalog = load_catalog()
    assert not catalog.errors
    entries = cross_reference(catalog.problems)
    assert [e.sregym.id for e in entries] == list(registry())
    carried = {sid for p in catalog.problems for sid in p.sregym_ids}
    for e in entries:
        # the data's same-app rows are exactly what a catalog problem carries today (the others may
        # gain a problem later: a carried id reads same-app whatever the data says)
        if e.sregym.status == "same-app":
            assert e.problems, f"{e.sregym.id}: same-app in {SREGYM_TSV.name}, but no catalog problem carries it"
        assert e.status == ("same-app" if e.sregym.id in carried else e.sregym.status)
    for p in catalog.problems:
        for sid in p.sregym_ids:
            assert registry()[sid].app == p.app, (p.id, sid)
    assert sum(e.status == "same-app" for e in entries) >= 46


def _problem(**changes: object) -> dict:
    base = yaml.safe_load((ROOT / "farm/problems/catalog/hotel-reservation.yaml").read_text())["problems"][0]
    return {**base, "app": "hotel-reservation", "id": "t-sregym", **changes}


@pytest.mark.parametrize(("ids", "reason"), [
    (["no_such_sregym_problem"], "not a problem of SREGym's registry"),
    (["scale_pod_zero_social_net"], "SREGym runs 'scale_pod_zero_social_net' on social-network, not hotel-reservation"),
    (["wrong_bin_usage", "wrong_bin_usage"], "listed twice"),
])
def test_a_wrong_sregym_id_is_one_precise_error(tmp_path: Path, ids: list[str], reason: str) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({"problems": [_problem(sregym_ids=ids)]}))
    catalog = load_catalog(files=[path])
    assert not catalog.problems and len(catalog.errors) == 1
    err = catalog.errors[0]
    assert err.problem == "t-sregym" and err.field.startswith("sregym_ids") and reason in str(err)


def test_one_sregym_id_reads_as_a_list(tmp_path: Path) -> None:
    """`sregym_id: x` (how a single correspondence is often written) is `sregym_ids: [x]`."""
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({"problems": [_problem(sregym_id="wrong_bin_usage")]}))
    (problem,) = load_catalog(files=[path]).problems
    assert problem.sregym_ids == ["wrong_bin_usage"]


def test_list_sregym_prints_every_id_with_its_problems_or_reason_and_the_totals() -> None:
    run = subprocess.run([sys.executable, "-m", "farm.cli", "problems", "list", "--sregym"], capture_output=True,
                         text=True, cwd=ROOT, check=True)
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 1 + 123 + 1  # header, one per id, totals
    row = next(line for line in lines if line.startswith("wrong_bin_usage "))
    assert "same-app" in row and "hr-profile-wrong-binary" in row
    missing = next(line for line in lines if line.startswith("ingress_misroute "))
    catalog = load_catalog()
    if not any("ingress_misroute" in p.sregym_ids for p in catalog.problems):
        assert "missing" in missing and "Ingress path routed to wrong svc" in missing
    entries = cross_reference(catalog.problems)
    same = sum(e.status == "same-app" for e in entries)
    lite = sum(e.status == "same-app" and e.sregym.lite for e in entries)
    assert lines[-1].startswith(f"same-app {same}/123, SREGym-Lite {lite}/21;")
    as_json = subprocess.run([sys.executable, "-m", "farm.cli", "problems", "list", "--sregym", "--json"],
                             capture_output=True, text=True, cwd=ROOT, check=True).stdout.splitlines()
    objects = [json.loads(line) for line in as_json]
    assert len(objects) == 123 and all(o["problems"] or o["reason"] for o in objects)


def _spec(tmp_path: Path, problems: dict) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "problems": problems, "agents": ["baseline"]}))
    return path


def test_a_suite_selects_the_problems_carrying_its_ids(tmp_path: Path) -> None:
    catalog = load_catalog()
    lite = {sid for sid, p in registry().items() if p.lite}
    selected = select_problems(load_spec(_spec(tmp_path, {"suite": "sregym-lite"})))
    assert selected and {p.id for p in selected} == {p.id for p in catalog.problems if lite & set(p.sregym_ids)}
    assert "hr-admission-webhook-outage" in {p.id for p in selected}  # admission_webhook_outage_hotel_reservation
    everything = select_problems(load_spec(_spec(tmp_path, {"suite": "sregym"})))
    assert {p.id for p in everything} == {p.id for p in catalog.problems if p.sregym_ids}
    assert suite_problems(catalog.problems, "sregym") == everything
    narrowed = select_problems(load_spec(_spec(tmp_path, {"suite": "sregym", "apps": ["tidb-cluster"]})))
    assert narrowed and all(p.app == "tidb-cluster" and p.sregym_ids for p in narrowed)
    assert load_spec(ROOT / "examples" / "sregym-lite.yaml").problems.suite == "sregym-lite"


def test_an_unknown_suite_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as exc:
        load_spec(_spec(tmp_path, {"suite": "sregym-full"}))
    assert exc.value.field == "problems.suite"
    assert "unknown suite 'sregym-full' (known: sregym, sregym-lite)" in str(exc.value)
