"""Metastable failures emerge from the emulated cluster's fluid model, one test per catalog problem:
with only the sustaining condition in place the application is healthy; the trigger pushes it into
a bad state; minutes after the trigger is gone the clients still fail, and no better (a loop holds
the state, it is not a slow drain); the problem's reference mitigation brings it back. A control
per mechanism shows the loop needs its condition: the same trigger without it is recovered from."""

from __future__ import annotations

import copy
import shlex
import subprocess
from typing import Any

import httpx
import pytest

from apps import load_application
from clusters.handle import ClusterHandle
from core.problem import Problem
from farm.problems.catalog import load_catalog
from farm.pytest_plugin import SimClusters
from injectors.injector import Injection, faults

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]

APPS = ("hotel-reservation", "astronomy-shop")  # the applications the emulated cluster models
WARMUP_S = 180.0
LATENT_S = 120.0  # the sustaining condition alone, before the trigger
STUCK_MINUTES = 5
METASTABLE = sorted(p.id for p in load_catalog().select(apps=list(APPS)) if p.composition == "metastable")

# What each mechanism leaves for an SRE to see while it holds (PromQL over the last minute, and a bound).
EVIDENCE: dict[str, tuple[str, str, float]] = {
    # every search makes all of its tries: the retries are the load
    "hr-retry-storm-after-spike": ("sum(rate(search_rate_attempts_total[1m])) / sum(rate(search_requests_total[1m]))",
                                   ">", 9.5),
    "hr-retry-storm-after-rate-slowdown": (
        "sum(rate(search_rate_attempts_total[1m])) / sum(rate(search_requests_total[1m]))", ">", 9.5),
    # the queue keeps growing: the second tries bring more than rate serves
    "hr-rate-queue-too-deep": ("delta(rate_queue_depth[1m])", ">", 600.0),
    # the collector keeps rate on its whole 100m quota although it serves less than at normal load
    "hr-gc-thrash-rate": ('sum(rate(container_cpu_usage_seconds_total{namespace="hotel-reservation",'
                          'container="hotel-reserv-rate"}[1m]))', ">", 0.095),
    # the replacement pod is refused, so the service has no pod at all
    "hr-capacity-cut-quota-blocks-recovery": (
        'sum(kube_deployment_status_replicas_ready{namespace="hotel-reservation",deployment="rate"})', "<", 0.5),
    "as-capacity-cut-quota-checkout": (
        'sum(kube_deployment_status_replicas_ready{namespace="astronomy-shop",deployment="checkout"})', "<", 0.5),
}
# The trigger alone, without the loop's condition (or with it made harmless): recovered from.
CONTROLS: dict[str, tuple[int, dict[str, Any]]] = {
    # eight tries bring 480 GetRates/s at normal load, under rate's 500/s: the backlog drains
    "hr-retry-storm-after-spike": (1, {"settings": {"RATE_RPC_MAX_ATTEMPTS": "8", "RATE_RPC_TIMEOUT_MS": "150",
                                                    "RATE_RPC_INITIAL_BACKOFF_MS": "0"}}),
    # 20 ms more per try stays under the 150 ms deadline: nothing is retried
    "hr-retry-storm-after-rate-slowdown": (0, {"latency": "20ms"}),
    # a queue no deeper than what rate serves within search's deadline: late requests are refused, not served late
    "hr-rate-queue-too-deep": (1, {"settings": {"RATE_QUEUE_CAPACITY": "90", "RATE_BACKEND_QPS_LIMIT": "100"}}),
    # the same CPU cut with room for the heap: the backlog drains once the spike is over
    "hr-gc-thrash-rate": (1, {"memory": "1Gi", "soft_limit": None, "gc_percent": "100"}),
}


def success(cluster: ClusterHandle, app: Any, window: float) -> float:
    return scalar(cluster, app.client_success_query.replace("{window}", f"{int(window)}s"))


def scalar(cluster: ClusterHandle, query: str) -> float:
    body = httpx.get(f"{cluster.endpoints.prometheus}/api/v1/query",
                     params={"query": query, "time": str(cluster.now())}, trust_env=False).json()
    result = body["data"]["result"]
    return float(result[0]["value"][1]) if result else float("nan")


def deployed(clusters: SimClusters, app_name: str) -> ClusterHandle:
    """The application on its emulated cluster (one per application, built once), as deployed."""
    return clusters.served(app_name, seed=3, warmup=WARMUP_S)


class Staged:
    """A problem's faults injected one at a time: the sustaining ones first, the triggers later."""

    def __init__(self, problem: Problem, override: tuple[int, dict[str, Any]] | None = None) -> None:
        specs = [copy.deepcopy(f.params) for f in problem.faults]
        if override is not None:
            specs[override[0]].update(override[1])
        self.problem = problem
        self.faults = [faults.create(f.injector, **params) for f, params in zip(problem.faults, specs, strict=True)]
        self.done: dict[int, Injection] = {}

    def inject(self, cluster: ClusterHandle, namespace: str, triggers: bool) -> None:
        for i, fault in enumerate(self.faults):
            if bool(getattr(fault, "trigger", False)) == triggers:
                self.done[i] = fault.inject(cluster, namespace)

    def mitigate(self, cluster: ClusterHandle, namespace: str) -> None:
        for step in self.problem.mitigation:
            if step.kubectl:
                out = subprocess.run(["kubectl", "--kubeconfig", str(cluster.kubeconfig), "-n", namespace,  # type: ignore[attr-defined]
                                      *shlex.split(step.kubectl)], capture_output=True, text=True, check=False)
                assert out.returncode == 0, out.stderr
            elif step.recover is not None:
                self.faults[step.recover].recover(cluster, self.done[step.recover])
            cluster.advance(step.wait or 0)


def trajectory(cluster: ClusterHandle, problem: Problem, override: tuple[int, dict[str, Any]] | None = None,
               fix: bool = True) -> dict[str, Any]:
    app = load_application(problem.app)
    staged = Staged(problem, override)
    staged.inject(cluster, app.namespace, triggers=False)
    cluster.advance(LATENT_S)
    out: dict[str, Any] = {"latent": success(cluster, app, 60)}
    staged.inject(cluster, app.namespace, triggers=True)
    out["during"] = success(cluster, app, 60)  # the last minute of the trigger (a pod kill is over at once)
    stuck = []
    for _ in range(STUCK_MINUTES):
        cluster.advance(60)
        stuck.append(success(cluster, app, 60))
    out["stuck"] = stuck
    if problem.id in EVIDENCE:
        out["evidence"] = scalar(cluster, EVIDENCE[problem.id][0])
    if fix:
        staged.mitigate(cluster, app.namespace)
        cluster.advance(60)
        out["fixed"] = success(cluster, app, 60)
    return out


@pytest.mark.parametrize("problem_id", METASTABLE)
def test_the_failure_outlives_its_trigger_until_the_reference_fix(sim_clusters: SimClusters, problem_id: str) -> None:
    problem = load_catalog().get(problem_id)
    cluster = deployed(sim_clusters, problem.app)
    run = trajectory(cluster, problem)
    threshold = problem.oracle.success_rate
    assert run["latent"] >= 0.99, run  # the condition alone does not break anything: no false collapse
    assert max(run["stuck"]) < threshold, run  # down for minutes after the trigger is gone...
    assert run["stuck"][-1] <= run["stuck"][0] + 0.01, run  # ...and not on its way back
    query, op, bound = EVIDENCE[problem_id]
    assert (run["evidence"] > bound) if op == ">" else (run["evidence"] < bound), (query, run)
    assert run["fixed"] >= 0.99, run


@pytest.mark.parametrize("problem_id", sorted(CONTROLS))
def test_without_its_condition_the_same_trigger_is_recovered_from(sim_clusters: SimClusters, problem_id: str) -> None:
    problem = load_catalog().get(problem_id)
    cluster = deployed(sim_clusters, problem.app)
    run = trajectory(cluster, problem, CONTROLS[problem_id], fix=False)
    assert run["latent"] >= 0.99, run
    assert run["stuck"][-1] >= 0.99, run


def test_the_same_seed_gives_the_same_trajectory(sim_clusters: SimClusters) -> None:
    problem = load_catalog().get("hr-gc-thrash-rate")
    first = trajectory(deployed(sim_clusters, problem.app), problem, fix=False)
    again = trajectory(deployed(sim_clusters, problem.app), problem, fix=False)
    assert first == again


def test_the_go_collector_costs_more_as_the_live_heap_nears_its_soft_limit() -> None:
    from kubesim.apps.goruntime import MiB, go_gc_cpu, go_gc_percent, go_live, go_memlimit, go_rss

    default = {"gogc": go_gc_percent({}), "memlimit": None, "procs": 4}
    assert default["gogc"] == 100 and go_gc_percent({"GC": "off"}) == 0  # tune's Atoi: garbage is 0, not off
    assert go_rss(default, go_live(default, 0, 0)) == 14 * MiB  # the resident set the model always had
    assert go_gc_cpu(default, go_live(default, 60, 0), 0.0008, 1.0) == pytest.approx(0.0)  # GOGC=100 is the baseline
    lazy = {**default, "gogc": 400}
    assert go_rss(lazy, go_live(lazy, 60, 0)) > 1.8 * go_rss(default, go_live(default, 60, 0))  # heap goal 5x live
    assert go_gc_cpu(lazy, go_live(lazy, 60, 0), 0.0008, 1.0) < 0  # a lazy GC collects less often
    capped = {**lazy, "memlimit": go_memlimit("20MiB")}
    costs = [go_gc_cpu(capped, go_live(capped, 60, queued), 0.0008, 0.1) for queued in (0, 64, 128, 192, 256)]
    assert costs == sorted(costs) and costs[-1] > 0.0004 > costs[0]  # a full queue: half a millisecond more a request
    assert go_rss(capped, go_live(capped, 60, 256)) < 24 * MiB  # the soft limit holds the heap: no OOM kill
    assert go_memlimit("off") is None and go_memlimit("1GiB") == 2**30
    with pytest.raises(ValueError):
        go_memlimit("20Mi")  # the runtime throws "malformed GOMEMLIMIT" at start
