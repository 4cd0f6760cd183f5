"""Ambient noise that confounds: a sweep's {intensity: ...} turns into the problem's noises plus the
confounders, aimed at the fault's call-graph neighbours and timed to overlap it; on hotel-reservation
on the emulated cluster (a process, over its real API) they leave the misleading evidence real
ambient activity leaves, never touch the fault's own components, and are gone after stop."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from clusters.kube import Kube
from clusters.emulated import SimHandle
from farm.problems.catalog import load_catalog
from farm.problems.validate import Validator
from farm.pytest_plugin import SimClusters
from farm.spec import SweepSpec, noise_label
from injectors.compose import NoiseRunner, ProblemInjection, ambient_noises, fault_components
from injectors.noise import CONFOUNDERS, neighbours
from tests.kubesim.apptools import NEEDS_KUBECTL, prom

NS = "hotel-reservation"
PROBLEM = "hr-frontend-latent-bug-flag"


def test_neighbours_come_from_the_call_graph() -> None:
    assert neighbours("hotel-reservation", "geo") == ["mongodb-geo", "search", "rate"]
    assert neighbours("hotel-reservation", "mongodb-rate") == ["rate", "memcached-rate"]
    assert neighbours("hotel-reservation", "node/worker-2") == []


def test_noise_leaves_alone_both_ends_of_a_partition() -> None:
    # rate is no root cause, but pods a rollout brings up there would escape the partition
    assert fault_components(load_catalog().get("hr-search-rate-partition")) == ["search", "rate"]
    assert fault_components(load_catalog().get(PROBLEM)) == ["frontend"]


def test_a_level_gives_the_problems_noises_and_the_confounders_at_that_intensity() -> None:
    problem = load_catalog().get(PROBLEM)
    specs = ambient_noises(problem, "high")
    assert [s.kind for s in specs] == [n.kind for n in problem.noises] + list(CONFOUNDERS)
    assert {s.intensity for s in specs} == {1.0}
    confounders = specs[len(problem.noises):]
    assert all(s.params["near"] == "frontend" and s.params["window_seconds"] <= 120 for s in confounders)
    only = ambient_noises(problem, "0.3:error-burst+pod-kill")
    # the problem's own pod-kill at its own targets, and one at the fault's neighbours
    assert [(s.kind, s.intensity, s.params.get("near")) for s in only] == [
        ("pod-kill", 0.3, None), ("error-burst", 0.3, "frontend"), ("pod-kill", 0.3, "frontend")]
    with pytest.raises(ValueError, match="intensity must be one of low, medium, high"):
        ambient_noises(problem, "loud")


def test_the_sweep_spec_takes_intensities_and_keeps_true_and_false_as_they_were() -> None:
    base = {"name": "s", "problems": {"apps": ["hotel-reservation"]}, "agents": ["baseline"]}
    spec = SweepSpec.model_validate({**base, "noise": [False, True, {"intensity": "high"},
                                                       {"intensity": 0.4, "kinds": ["error-burst"]}]})
    assert [noise_label(n) for n in spec.noise] == ["quiet", "noise", "noise@high", "noise@0.4:error-burst"]
    for bad, why in (({"intensity": "loud"}, "intensity must be one of"), ({"intensity": 2}, "must be in [0, 1]"),
                     ({"intensity": "high", "kinds": ["meteor"]}, "unknown noise kind 'meteor'"),
                     ([True, True], "distinct")):
        with pytest.raises(ValidationError) as err:
            SweepSpec.model_validate({**base, "noise": bad})
        assert why in str(err.value)


def _on_the_emulated_cluster(fn):  # type: ignore[no-untyped-def]
    for mark in NEEDS_KUBECTL:
        fn = mark(fn)
    return fn


@pytest.fixture
def hotel(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served("hotel-reservation", seed=3)


@_on_the_emulated_cluster
def test_confounders_leave_misleading_evidence_on_neighbours_and_never_on_the_fault(hotel: object) -> None:
    level = "high"
    problem = load_catalog().get(PROBLEM)
    kube = Kube.of(hotel)  # type: ignore[arg-type]
    before = {p["metadata"]["name"] for p in kube.list("Pod", NS)}
    injection = ProblemInjection(problem)
    injection.inject(hotel, NS)  # type: ignore[arg-type]
    active = injection.active(hotel)  # type: ignore[arg-type]
    runner = NoiseRunner(ambient_noises(problem, level), seed=4, avoid=fault_components(problem))
    runner.start(hotel, NS)  # type: ignore[arg-type]
    try:
        hotel.advance(110)  # type: ignore[attr-defined]
        near = set(neighbours("hotel-reservation", "frontend"))
        confounders = [r for r in runner.records() if r["params"].get("near") == "frontend"]
        assert sorted(r["injector"].removeprefix("noise:") for r in confounders) == sorted(CONFOUNDERS)
        for r in confounders:
            events = r["saved"]["events"]
            assert events and all(e["target"] in near and e["fired"] for e in events), r["injector"]
        # one red herring per trial: every confounder shares the focus, and at high intensity
        # every event lands on it
        focus = {r["params"]["focus"] for r in confounders}
        assert len(focus) == 1 and focus <= near
        assert {e["target"] for r in confounders for e in r["saved"]["events"]} == focus
        assert runner.errors == []
        pods = kube.list("Pod", NS)
        # restarts and rollouts of healthy components
        restarted = {p["metadata"]["name"].rsplit("-", 2)[0] for p in pods
                     if any(cs.get("restartCount", 0) for cs in p["status"].get("containerStatuses") or [])}
        assert restarted & near and "frontend" not in restarted
        renewed = {p["metadata"]["name"].rsplit("-", 2)[0] for p in pods if p["metadata"]["name"] not in before}
        assert renewed & near
        # warning events on them
        warned = {e["involvedObject"]["name"].rsplit("-", 2)[0] for e in kube.list("Event", NS) if e.get("type") == "Warning"}
        assert warned & near
        hotel.advance(120)  # type: ignore[attr-defined]
        # a firing alert on a healthy component
        firing = prom(hotel, 'count by (service_name) (ALERTS{alertstate="firing", alertname=~"HighRequest.*"})')
        assert set(firing) & near, firing
        # the fault is untouched: its own check and its symptom (hotel searches fail) both hold
        assert injection.active(hotel) == active == [True]  # type: ignore[arg-type]
        fails = prom(hotel, f'sum(rate(wrk2_requests_total{{namespace="{NS}",code="500"}}[1m]))')
        assert fails and next(iter(fails.values())) > 1
    finally:
        runner.stop(hotel)  # type: ignore[arg-type]
        injection.recover(hotel)  # type: ignore[arg-type]
    created = [e for e in kube.list("Event", NS) if e["reason"] in ("DNSConfigForming",) or
               (e["reason"] == "Unhealthy" and "Client.Timeout" in e.get("message", ""))]
    assert created == []
    leftover = kube.request("GET", "/apis/chaos-mesh.org/v1alpha1/namespaces/chaos-mesh/networkchaos")
    assert leftover["items"] == []


@pytest.fixture
def fresh(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served(seed=1)


@_on_the_emulated_cluster
def test_validation_under_noise_keeps_the_fault_and_reports_what_fired(fresh: object) -> None:
    with Validator(fresh, noise="high") as validator:  # type: ignore[arg-type]
        result = validator.validate(load_catalog().get("hr-search-rate-rpc-timeout-ms-wrong"))
    steps = {s.name: s for s in result.steps}
    assert result.passed, [(s.name, s.detail) for s in result.steps if not s.ok]
    assert list(steps).index("noise_keeps_fault") == list(steps).index("oracle_fails") + 1
    assert "container-restart x" in steps["noise_keeps_fault"].detail and "errors" not in steps["noise_keeps_fault"].detail


def _crash_looping(kube: Kube, workload: str) -> list[str]:
    _, obj = kube.workload(NS, workload)
    return [p["metadata"]["name"] for p in kube.pods_of(NS, obj) if not p["metadata"].get("deletionTimestamp")
            and any(((cs.get("state") or {}).get("waiting") or {}).get("reason") == "CrashLoopBackOff"
                   for cs in p["status"].get("containerStatuses") or [])]


@_on_the_emulated_cluster
def test_a_trial_that_ends_mid_crash_loop_hands_the_oracle_a_healthy_neighbour(hotel: object) -> None:
    """At high intensity the red herring is still backing off when an engineer first looks; a
    correct fix made right then passes the mitigation oracle all the same, because stopping the
    noise ends the back-off it caused."""
    from apps import load_application
    from farm.oracles.mitigation import MitigationOracle
    from farm.pytest_plugin import as_built

    as_built(hotel)  # type: ignore[arg-type]
    problem = load_catalog().get(PROBLEM)
    oracle = MitigationOracle(load_application(problem.app), problem)
    baseline = oracle.capture_baseline(hotel, NS)  # type: ignore[arg-type]
    kube = Kube.of(hotel)  # type: ignore[arg-type]
    injection = ProblemInjection(problem)
    injection.inject(hotel, NS)  # type: ignore[arg-type]
    runner = NoiseRunner(ambient_noises(problem, "high:container-restart"), seed=4, avoid=fault_components(problem))
    runner.start(hotel, NS)  # type: ignore[arg-type]
    try:
        def kills() -> list[dict]:  # type: ignore[type-arg]
            return next(r for r in runner.records() if r["injector"] == "noise:container-restart")["saved"]["events"]

        victim = kills()[0]["target"]
        assert len(kills()) == 4 and {e["target"] for e in kills()} == {victim} and victim in neighbours(NS, "frontend")
        # right after the last kill: the back-off the oracle would otherwise run into is longest
        looping: list[str] = []
        while not looping and hotel.now() < runner.records()[0]["injected_at"] + 180:  # type: ignore[attr-defined]
            hotel.advance(1)  # type: ignore[attr-defined]
            looping = _crash_looping(kube, victim) if all(e["fired"] for e in kills()) else []
        assert looping, victim
        pod = kube.get("Pod", NS, looping[0])
        assert pod["status"]["containerStatuses"][0]["restartCount"] == 3
        injection.recover(hotel)  # type: ignore[arg-type]  # the correct fix
    finally:
        runner.stop(hotel)  # type: ignore[arg-type]
    assert _crash_looping(kube, victim) == []
    verdict = oracle.evaluate(hotel, NS, baseline, None)  # type: ignore[arg-type]
    assert verdict.passed, verdict.detail


@_on_the_emulated_cluster
def test_the_restarts_it_ran_up_do_not_slow_the_victim_after_a_correct_fix(hotel: object) -> None:
    """At low intensity the victim runs again when the trial stops, but its kubelet remembers the
    crashes: when a correct fix restarts the database it reads, it would crash into a back-off the
    noise ran up and fail the oracle's restart check. Stopping the noise replaces the pods it
    crashed, so the verdict is the one a quiet trial gets."""
    from apps import load_application
    from core.problem import NoiseSpec
    from farm.oracles.mitigation import MitigationOracle
    from farm.pytest_plugin import as_built

    as_built(hotel)  # type: ignore[arg-type]
    problem = load_catalog().get("hr-mongodb-reservation-requests-too-small")
    oracle = MitigationOracle(load_application(problem.app), problem)
    baseline = oracle.capture_baseline(hotel, NS)  # type: ignore[arg-type]
    kube = Kube.of(hotel)  # type: ignore[arg-type]
    injection = ProblemInjection(problem)
    injection.inject(hotel, NS)  # type: ignore[arg-type]
    spec = NoiseSpec(kind="container-restart", intensity=0.25,
                     params={"targets": ["reservation"], "window_seconds": 100, "start_after_seconds": 0})
    runner = NoiseRunner([spec], seed=4, avoid=fault_components(problem))
    runner.start(hotel, NS)  # type: ignore[arg-type]
    try:
        hotel.advance(180)  # type: ignore[attr-defined]
        _, reservation = kube.workload(NS, "reservation")
        counts = [cs["restartCount"] for p in kube.pods_of(NS, reservation) for cs in p["status"]["containerStatuses"]]
        # the noise's two crashes on top of those the fault causes (reservation reads that database)
        assert len(counts) == 1 and counts[0] >= 2 and _crash_looping(kube, "reservation") == []
        # the correct fix; the records stay, for the oracle's fault check and its restart of the database
        records = list(injection.injectors)
        injection.recover(hotel)  # type: ignore[arg-type]
        injection.injectors = records
    finally:
        runner.stop(hotel)  # type: ignore[arg-type]
    verdict = oracle.evaluate(hotel, NS, baseline, injection)  # type: ignore[arg-type]
    assert verdict.passed, verdict.detail
    assert verdict.checks.get("survives_restart") is True
