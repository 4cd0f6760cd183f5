"""Retargeting rewrites the ground truth from the application's structure (the call graph the
emulated cluster walks), and `farm problems mutate --validate` runs the new problem through the
validator and writes nothing when a step fails."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from core.errors import ProblemDefinitionError
from farm.problems.catalog import load_catalog
from farm.problems.mutate import failed_step, mutate, validate_mutation
from injectors.topology import short_op, topology

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def catalog():  # type: ignore[no-untyped-def]
    return load_catalog()


def test_roles_come_from_the_call_graphs() -> None:
    hotel = topology("hotel-reservation")
    rate = hotel.role("rate")
    assert rate.kind == "service" and rate.ops == ["/rate.Rate/GetRates"]
    assert rate.caller_names == ["search"] and rate.upstream == ["search", "frontend"]
    assert rate.callee_names("memcached") == ["memcached-rate"] and rate.callee_names("mongo") == ["mongodb-rate"]
    assert rate.container == "hotel-reserv-rate" and rate.derived["consul"] == "srv-rate"
    assert rate.routes == ["HTTP GET /hotels"]
    profile = hotel.role("profile")
    assert profile.caller_names == ["frontend"] and profile.routes == ["HTTP GET /hotels", "HTTP GET /recommendations"]
    geo_db = hotel.role("mongodb-geo")  # read by geo while it starts only
    assert (geo_db.kind, geo_db.protocol, geo_db.upstream) == ("store", "mongo", ["geo", "search", "frontend"])
    assert hotel.role("frontend").kind == "entry"
    shop = topology("astronomy-shop")
    valkey = shop.role("valkey-cart")
    assert (valkey.kind, valkey.protocol, valkey.caller_names) == ("store", "redis", ["cart"])
    assert shop.role("postgresql").caller_names == ["product-catalog", "product-reviews", "accounting"]
    assert shop.role("cart").upstream[:2] == ["frontend", "checkout"]
    assert short_op("/geo.Geo/Nearby") == "Nearby" and short_op("HTTP GET /hotels") == "/hotels"
    assert short_op("oteldemo.CartService/GetCart") == "GetCart"


def test_moving_a_delay_from_geo_to_rate_names_rates_own_call(catalog) -> None:  # type: ignore[no-untyped-def]
    base = catalog.get("hr-geo-network-delay")
    assert "search's Nearby calls to geo" in base.ground_truth.mechanism
    moved = mutate(base, target="rate")
    gt = moved.ground_truth
    assert moved.faults[0].params["service"] == "rate"
    assert gt.component == "rate" and gt.affected == ["search", "frontend"]
    assert "search's GetRates calls to rate" in gt.mechanism
    assert "Nearby" not in gt.mechanism and "geo" not in gt.mechanism
    # Elsewhere in the graph the caller changes with it, and the routes through the target.
    to_profile = mutate(base, target="profile").ground_truth
    assert to_profile.component == "profile" and to_profile.affected == ["frontend"]
    assert "frontend's GetProfiles calls to profile" in to_profile.mechanism and "search" not in to_profile.mechanism
    assert to_profile.symptom.startswith("hotel searches (/hotels) and recommendations (/recommendations) ")


def test_moving_a_network_policy_to_another_store_restarts_that_stores_caller(catalog) -> None:  # type: ignore[no-untyped-def]
    base = catalog.get("hr-memcached-rate-network-policy-block")
    moved = mutate(base, target="mongodb-geo")
    gt = moved.ground_truth
    assert gt.component == "mongodb-geo" and gt.affected == ["geo", "search", "frontend"]
    assert "mongodb-geo-ingress" in gt.mechanism and "memcached-rate" not in gt.mechanism
    assert [m.kubectl for m in moved.mitigation] == ["delete networkpolicy mongodb-geo-ingress",
                                                     "rollout restart deployment/geo"]
    cache = mutate(base, target="memcached-profile")
    assert cache.ground_truth.affected == ["profile", "frontend"]
    assert cache.mitigation[1].kubectl == "rollout restart deployment/profile"
    assert "recommendations still work" not in cache.ground_truth.symptom  # profile serves both routes


def test_graph_apps_move_store_protocols_and_manifest_values(catalog) -> None:  # type: ignore[no-untyped-def]
    moved = mutate(catalog.get("as-valkey-cart-network-policy"), target="postgresql").ground_truth
    assert moved.component == "postgresql"
    assert "product-catalog's PostgreSQL calls time out" in moved.mechanism and "Redis" not in moved.mechanism
    assert moved.affected[:3] == ["product-catalog", "product-reviews", "accounting"]
    oom = mutate(catalog.get("as-checkout-oom"), target="cart")
    # What a fix restores is the new target's own limit, read from its manifest.
    assert oom.ground_truth.details["expected"] == "memory=160Mi"
    # The container is named too (kubectl >= 1.28 also sets init containers' limits), retargeted as well.
    assert oom.mitigation[0].kubectl == "set resources deployment/cart -c cart --limits=memory=160Mi"


def test_a_fact_without_a_counterpart_refuses_the_retarget(catalog) -> None:  # type: ignore[no-untyped-def]
    # search's deadline on its calls to rate: profile calls no gRPC service at all.
    with pytest.raises(ProblemDefinitionError, match=r"names rate \(profile has no grpc dependency\)"):
        mutate(catalog.get("hr-search-rate-rpc-timeout-ms-wrong"), target="profile")
    with pytest.raises(ProblemDefinitionError, match="no workload 'nowhere'"):
        mutate(catalog.get("hr-geo-network-delay"), target="nowhere")


@pytest.mark.slow
def test_retargeted_problems_validate_on_the_emulated_cluster(catalog) -> None:  # type: ignore[no-untyped-def]
    for pid, target, mechanism in (("hr-geo-network-delay", "rate", "search's GetRates calls to rate"),
                                   ("hr-memcached-rate-network-policy-block", "memcached-profile",
                                    "every connection to memcached-profile is dropped")):
        moved = mutate(catalog.get(pid), target=target)
        assert moved.ground_truth.component == target and mechanism in moved.ground_truth.mechanism
        result = validate_mutation(moved)
        assert result.passed, failed_step(result)


@pytest.mark.slow
def test_mutate_validate_writes_a_passing_problem_and_refuses_a_failing_one(tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "farm.cli.problems", "mutate", *args], capture_output=True,
                              text=True, cwd=ROOT, timeout=600)

    good = tmp_path / "good.yaml"
    done = cli("hr-rate-cpu-throttled", "--target", "geo", "--validate", "--out", str(good))
    assert done.returncode == 0, done.stderr
    assert "validated hr-rate-cpu-throttled--geo" in done.stderr and good.exists()
    (problem,) = load_catalog(files=[good]).problems
    assert problem.ground_truth.component == "geo" and "every Nearby far beyond search's deadline" in \
        problem.ground_truth.mechanism
    # geo reads mongodb-geo only while starting: closing it changes nothing the agent could see.
    bad = tmp_path / "bad.yaml"
    refused = cli("hr-memcached-rate-network-policy-block", "--target", "mongodb-geo", "--validate", "--out", str(bad))
    assert refused.returncode == 1 and not bad.exists()
    assert "fails validation at symptom_visible" in refused.stderr and "nothing written" in refused.stderr
