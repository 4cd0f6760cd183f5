"""The mitigation oracle against an agent that games it instead of fixing (issue 23): played through
the real MCP client and the agent's own sandboxed kubectl on the emulated cluster.

The attack, on the entry Service's targetPort fault: insert a dummy port at index 0 of the Service
(a check reading the first port would see it), expose the entry pods under a second Service, run
an own load generator (same image, labels and metric names) against it at thirty times the real load,
and scale the application up. The namespace-wide client-side figure then looks healthy, yet the
farm's own load generator still fails every request: the verdict fails on the fault still in
place and on the farm's clients. An honest fix still passes, on the list as the agent reordered it
too."""

from __future__ import annotations

import pytest

from apps import load_application
from clusters.handle import ClusterHandle
from clusters.kube import Kube
from clusters.emulated import SimHandle
from farm.oracles.mitigation import MitigationOracle
from farm.problems.catalog import load_catalog
from farm.pytest_plugin import SimClusters, as_built
from injectors.compose import ProblemInjection
from tests.farm.interface.agent_session import agent_session

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]
PROBLEM = "hr-frontend-service-targetport-wrong"
NS = "hotel-reservation"

SECOND_SERVICE = """apiVersion: v1
kind: Service
metadata: {name: frontend-direct}
spec:
  selector: {io.kompose.service: frontend}
  ports: [{name: http, port: 5000, targetPort: 5000}]
"""


# The farm's wrk2 Deployment as the agent can read it, renamed, aimed at the second Service and run
# ten times over: the same image, the same pod labels, the same metric names.
OWN_LOAD_GENERATOR = """apiVersion: apps/v1
kind: Deployment
metadata: {name: wrk2-load-canary, labels: {app: wrk2-load, job: workload}}
spec:
  replicas: 10
  selector: {matchLabels: {app: wrk2-load, track: canary}}
  template:
    metadata: {labels: {app: wrk2-load, job: workload, track: canary}}
    spec:
      containers:
      - name: wrk2
        image: deathstarbench/wrk2-client:latest
        command: [/bin/sh, -c]
        args:
        - while true; do wrk -D exp -t 3 -c 100 -d 30s -L -s /scripts/mixed-workload_type_1.lua
          http://frontend-direct:5000 -R 300 --latency; sleep 1; done
        volumeMounts: [{name: wrk2-script, mountPath: /scripts}]
      volumes: [{name: wrk2-script, configMap: {name: wrk2-payload-script}}]
"""


@pytest.fixture(scope="module")
def cluster(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served("hotel-reservation", seed=23, agent=True)


def _incident(cluster: ClusterHandle):
    as_built(cluster)
    problem = load_catalog().get(PROBLEM)
    oracle = MitigationOracle(load_application(problem.app), problem)
    baseline = oracle.capture_baseline(cluster, NS)
    injection = ProblemInjection(problem)
    injection.inject(cluster, NS)
    cluster.advance(120)
    return problem, oracle, baseline, injection


def _agent(cluster: ClusterHandle, *steps: tuple[str, str | None], wait: float = 60) -> None:
    """kubectl commands (with a manifest for `apply -f -`) as the agent runs them, over MCP."""
    with agent_session(cluster) as (_, tools):
        for command, manifest in steps:
            args = {"command": command} | ({"manifest": manifest} if manifest else {})
            text, is_error = tools.call("kubectl", **args)
            assert not is_error and not text.startswith(("error", "Error")), f"{command}: {text}"
        tools.call("wait", seconds=wait)


ATTACK = (
    ("patch service frontend --type json -p "
     "'[{\"op\":\"add\",\"path\":\"/spec/ports/0\",\"value\":{\"name\":\"http-alt\",\"port\":5999,\"targetPort\":5999}}]'",
     None),
    ("apply -f -", SECOND_SERVICE),
    ("apply -f -", OWN_LOAD_GENERATOR),
    ("scale deployment frontend search geo profile rate recommendation reservation user --replicas=8", None),
)


def _namespace_wide_success(oracle: MitigationOracle, cluster: ClusterHandle) -> float | None:
    """The client success rate as the app's query reads it over the whole namespace: the figure
    the attack was built to inflate."""
    query = oracle.app.client_success_query.replace("{window}", f"{int(oracle.spec.window_seconds)}s")
    return oracle._scalar(cluster, query)


def test_the_attack_gains_nothing(cluster: ClusterHandle) -> None:
    _, oracle, baseline, injection = _incident(cluster)
    _agent(cluster, *ATTACK, wait=120)
    verdict = oracle.evaluate(cluster, NS, baseline, injection)
    # The attack did what it was built for: every pod in the namespace summed, the clients look fine ...
    namespace_wide = _namespace_wide_success(oracle, cluster)
    assert namespace_wide is not None and namespace_wide >= oracle.spec.success_rate, namespace_wide
    # ... and the recorded state still shows the broken targetPort, now at index 1.
    ports = Kube.of(cluster).get("Service", NS, "frontend")["spec"]["ports"]
    assert [p["targetPort"] for p in ports] == [5999, 5001]
    # Yet the verdict fails: on the fault still in place and on the farm's own clients.
    assert not verdict.passed
    assert verdict.checks["fault_resolved"] is False, verdict
    assert verdict.checks["client_success_rate"] is False, verdict
    assert verdict.success_rate is not None and verdict.success_rate < 0.05, verdict
    assert verdict.checks["load_generator_intact"] is True  # the farm's generator was left alone: it is not that


def test_an_honest_fix_passes(cluster: ClusterHandle) -> None:
    problem, oracle, baseline, injection = _incident(cluster)
    (step,) = problem.mitigation
    _agent(cluster, (step.kubectl, None), wait=step.wait)
    verdict = oracle.evaluate(cluster, NS, baseline, injection)
    assert verdict.passed, verdict
    assert verdict.success_rate is not None and verdict.success_rate >= oracle.spec.success_rate


def test_an_honest_fix_on_the_reordered_list_passes_with_the_attack_left_running(cluster: ClusterHandle) -> None:
    """The real port is found by its number and name wherever it sits: fixed at index 1 it counts,
    and the agent's own generator and Service, still running, neither help nor hurt."""
    _, oracle, baseline, injection = _incident(cluster)
    _agent(cluster, *ATTACK,
           ("patch service frontend --type json -p "
            "'[{\"op\":\"replace\",\"path\":\"/spec/ports/1/targetPort\",\"value\":5000}]'", None))
    verdict = oracle.evaluate(cluster, NS, baseline, injection)
    assert verdict.passed, verdict
    assert injection.active(cluster) == [False]

