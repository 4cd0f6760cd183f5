"""The fault from change metadata alone (issue 23): after each hotel-reservation problem is
injected, what an agent reads with `kubectl get -o json` must not name the faulted component.

- `metadata.generation` appears only on kinds whose kube-apiserver strategy sets it (a Service
  or ConfigMap the injector changed carries none);
- the agent's account is no younger than the application (made with the deploy, not at
  injection, so its creation time does not date the fault);
- the metadata spy (tests/security/metadata_spy.py: generation, managedFields times, creation
  times) names the faulted component no more often than chance.

The last holds because the application's own change history buries the injector's write: its
deployer keeps syncing every object it wrote, at seeded times spread over the trial
(kubesim/controllers/churn.py), so the latest change is anyone's."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from apps import load_application
from clusters.emulated import SimHandle
from farm.problems.catalog import load_catalog
from farm.pytest_plugin import SimClusters, as_built
from injectors.compose import ProblemInjection
from tests.conftest import KUBECTLS
from farm.testing import metadata_spy

pytestmark = [pytest.mark.kubectl, pytest.mark.slow, pytest.mark.timeout(1800)]
APP = "hotel-reservation"
NS = load_application(APP).namespace


@pytest.fixture(scope="module")
def cluster(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served(APP, seed=23, agent=True)


@pytest.fixture(scope="module")
def readings(cluster: SimHandle) -> Iterator[list[tuple[str, str, list[dict]]]]:
    """(problem id, faulted component, the objects the spy read) for every problem of the app."""
    kubeconfig = cluster.agent_kubeconfig(NS)
    kubectl = str(KUBECTLS["1.33"] if Path(KUBECTLS["1.33"]).exists() else KUBECTLS["1.20"])
    out = []
    for problem in sorted(load_catalog().select(apps=[APP]), key=lambda p: p.id):
        as_built(cluster)
        ProblemInjection(problem).inject(cluster, NS)
        cluster.advance(60)
        out.append((problem.id, problem.ground_truth.component, metadata_spy.read_objects(kubectl, kubeconfig, NS)))
    yield out
    as_built(cluster)


def test_no_object_carries_a_generation_its_kind_does_not_have(readings: list[tuple[str, str, list[dict]]]) -> None:
    wrong = [f"{pid}: {o['kind']}/{o['metadata']['name']}" for pid, _, objects in readings for o in objects
             if "generation" in o["metadata"] and o["kind"] not in metadata_spy.WITH_GENERATION]
    assert len(readings) > 50 and not wrong, wrong[:20]


def test_the_agents_account_is_no_younger_than_the_application(readings: list[tuple[str, str, list[dict]]]) -> None:
    accounts = [o for _, _, objects in readings for o in objects
                if o["kind"] == "ServiceAccount" and o["metadata"]["name"] == "sre-agent"]
    assert len(accounts) == len(readings)
    late = [pid for pid, _, objects in readings if metadata_spy.fault_time(objects) is not None]
    assert not late, f"the account's creation time dates the fault in {len(late)} problems: {late[:10]}"


def _no_better_than_chance(readings: list[tuple[str, str, list[dict]]], spy: Callable[..., tuple[str | None, list[str]]],
                           name: str) -> None:
    chance, named_right = 0.0, []
    for pid, truth, objects in readings:
        named, candidates = spy(objects)
        if named == truth:
            named_right.append(pid)
        chance += 1 / max(1, len(candidates))
    hits, n = len(named_right), len(readings)
    # Chance is the better of a uniform pick among the candidates and one fixed answer for every
    # problem (the catalog's most frequent faulted component): a spy that names the same object
    # whatever was injected (the object a seeded schedule wrote last) has read nothing of the fault.
    prior = max(Counter(truth for _, truth, _ in readings).values())
    chance = max(chance, prior)
    assert hits <= chance * 1.5 + 2, (f"the {name} named the faulted component in {hits} of {n} problems "
                                      f"({hits / n:.0%}); chance is {chance / n:.0%}: {named_right}")


def test_the_metadata_spy_does_no_better_than_chance(readings: list[tuple[str, str, list[dict]]]) -> None:
    _no_better_than_chance(readings, metadata_spy.guess, "spy")


@pytest.mark.xfail(strict=True, reason="open: a workload's generation (and its Deployment's revision, its "
                   "ReplicaSets) counts its rollouts, and the fault's is the only one after the deploy: the "
                   "application has no rollout history yet (found by helper h23b's adversarial pass: the spy "
                   "names the faulted component in 35 of 87 problems)")
def test_the_rollout_spy_does_no_better_than_chance(readings: list[tuple[str, str, list[dict]]]) -> None:
    _no_better_than_chance(readings, metadata_spy.guess_by_rollout, "rollout spy")


def test_the_sync_revision_spy_does_no_better_than_chance(readings: list[tuple[str, str, list[dict]]]) -> None:
    """Helper adv2's finding: while the churn controller wrote its sync count, revision <= 1 with a
    write > 60 s after creation was the fault's (38 of 91 problems). The revision is now a digest."""
    _no_better_than_chance(readings, metadata_spy.guess_by_sync_revision, "sync-revision spy")
