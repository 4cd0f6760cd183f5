"""The mitigation oracle on the real emulated cluster: a real fix passes; silencing the incident by
scaling the application to zero, deleting it or stopping the load generator never does."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from apps import load_application
from clusters.handle import ClusterHandle
from clusters.emulated import SimHandle
from farm.oracles.mitigation import MitigationOracle
from farm.problems.catalog import load_catalog
from farm.pytest_plugin import SimClusters, as_built
from injectors.compose import ProblemInjection
from tests.farm.interface.agent_session import agent_session

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]
PROBLEM = "hr-memcached-rate-selector-wrong"  # rate loses its cache: clients see errors


@pytest.fixture(scope="module")
def cluster(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served("hotel-reservation", seed=5, agent=True)


@pytest.fixture()
def incident(cluster: ClusterHandle) -> Iterator[tuple[ClusterHandle, MitigationOracle, object, ProblemInjection]]:
    """Deployed, baseline captured, the fault injected and left to bite for two minutes."""
    _, _, oracle, baseline, injection = _incident(cluster, PROBLEM)
    yield cluster, oracle, baseline, injection


def _run(cluster: ClusterHandle, *commands: str) -> None:
    with agent_session(cluster) as (_, tools):
        for command in commands:
            text, is_error = tools.call("kubectl", command=command)
            assert not is_error and not text.startswith(("error", "Error")), f"{command}: {text}"
        tools.call("wait", seconds=60)


def test_the_baseline_lists_every_workload_and_the_load_generator(incident) -> None:
    _, oracle, baseline, _ = incident
    names = {w.name for w in baseline.workloads}
    assert set(load_application("hotel-reservation").services) <= names
    assert baseline.load_generator in names and baseline.load_generator_template
    assert all(w.replicas >= 1 for w in baseline.workloads)


def test_doing_nothing_fails_on_the_fault_and_the_clients(incident) -> None:
    cluster, oracle, baseline, injection = incident
    verdict = oracle.evaluate(cluster, "hotel-reservation", baseline, injection)
    assert not verdict.passed
    assert verdict.checks["fault_resolved"] is False
    assert verdict.checks["client_success_rate"] is False
    assert verdict.success_rate is not None and verdict.success_rate < 0.95
    assert "still affect the running system" in verdict.detail


def test_the_reference_fix_passes(incident) -> None:
    cluster, oracle, baseline, injection = incident
    problem = load_catalog().get(PROBLEM)
    with agent_session(cluster) as (_, tools):
        for step in problem.mitigation:
            if step.kubectl:
                text, is_error = tools.call("kubectl", command=step.kubectl)
                assert not is_error, text
            elif step.recover is not None:
                injection.recover_one(cluster, step.recover)
            if step.wait:
                tools.call("wait", seconds=step.wait)
    verdict = oracle.evaluate(cluster, "hotel-reservation", baseline, injection)
    assert verdict.passed, verdict
    assert all(verdict.checks.values()) and verdict.success_rate >= 0.95


@pytest.mark.parametrize(
    ("commands", "failed_check"),
    [
        (("scale deployment rate --replicas=0",), "replicas_not_reduced"),
        (("scale deployment frontend --replicas=0",), "replicas_not_reduced"),
        (("delete deployment memcached-rate",), "workloads_present"),
        (("delete deployment rate",), "workloads_present"),
        (("patch service memcached-rate -p '{\"spec\":{\"selector\":{\"io.kompose.service\":\"memcached-rate\"}}}'",
          "scale deployment frontend --replicas=0"), "replicas_not_reduced"),
    ],
    ids=["scale-victim-to-zero", "scale-entrypoint-to-zero", "delete-culprit", "delete-victim",
         "fix-then-silence-entrypoint"],
)
def test_silencing_the_application_is_never_a_fix(incident, commands, failed_check) -> None:
    cluster, oracle, baseline, injection = incident
    _run(cluster, *commands)
    verdict = oracle.evaluate(cluster, "hotel-reservation", baseline, injection)
    assert not verdict.passed
    assert verdict.checks[failed_check] is False, verdict


def test_stopping_the_load_generator_is_never_a_fix(incident) -> None:
    cluster, oracle, baseline, injection = incident
    _run(cluster, "patch service memcached-rate -p '{\"spec\":{\"selector\":{\"io.kompose.service\":\"memcached-rate\"}}}'")
    from kubernetes import client

    api = cluster.api_client()  # the agent cannot touch it; the farm's own credentials can
    client.AppsV1Api(api).patch_namespaced_deployment(
        baseline.load_generator, "hotel-reservation", {"spec": {"replicas": 0}})
    verdict = oracle.evaluate(cluster, "hotel-reservation", baseline, injection)
    assert not verdict.passed
    assert verdict.checks["load_generator_intact"] is False and verdict.checks["traffic"] is False


def test_a_metastable_problem_replays_its_trigger_after_the_fix(cluster: ClusterHandle) -> None:
    problem, ns, oracle, baseline, injection = _metastable_incident(cluster, "hr-retry-storm-after-spike")
    lg_before = cluster.now()
    with agent_session(cluster) as (_, tools):
        for step in problem.mitigation:
            assert step.kubectl
            assert not tools.call("kubectl", command=step.kubectl)[1]
            if step.wait:
                tools.call("wait", seconds=step.wait)
    verdict = oracle.evaluate(cluster, ns, baseline, injection)
    assert verdict.passed, verdict
    assert verdict.checks["recovers_after_trigger_replay"] is True
    # The replay (a load spike) ran and was taken back: the load generator is as the baseline had it.
    assert cluster.now() > lg_before + problem.oracle.window_seconds * 2
    assert verdict.checks["load_generator_intact"]


def _metastable_incident(cluster: ClusterHandle, problem_id: str):
    incident = _incident(cluster, problem_id)
    problem = incident[0]
    assert problem.composition == "metastable" and problem.oracle.replay_trigger
    return incident


def test_a_metastable_fix_that_leaves_the_sustaining_condition_fails_the_replay(cluster: ClusterHandle) -> None:
    """A quota one pod under use; rate's pod was killed and its replacement refused. Lifting the
    quota until rate is back and then putting it back removes the symptom and the trigger's effect,
    but not the condition that sustains the failure: the next pod loss takes rate down again."""
    from kubernetes import client

    _, ns, oracle, baseline, injection = _metastable_incident(cluster, "hr-capacity-cut-quota-blocks-recovery")
    core = client.CoreV1Api(cluster.api_client())
    (quota,) = core.list_namespaced_resource_quota(ns).items
    hard = dict(quota.spec.hard)
    core.patch_namespaced_resource_quota(quota.metadata.name, ns, {"spec": {"hard": {"pods": "100"}}})
    cluster.advance(60)
    core.patch_namespaced_resource_quota(quota.metadata.name, ns, {"spec": {"hard": hard}})
    cluster.advance(120)
    verdict = oracle.evaluate(cluster, ns, baseline, injection)
    assert not verdict.passed
    # Right now the application looks healthy: only the replay shows what is left. (Alerts over
    # 5-minute rates may still lag: the oracle gives them grace only when everything else holds.)
    for healthy in ("client_success_rate", "traffic", "workloads_ready", "no_crashlooping_pods", "no_pending_pods"):
        assert verdict.checks[healthy] is True, (healthy, verdict)
    assert verdict.checks["recovers_after_trigger_replay"] is False
    assert "did not recover by itself" in verdict.detail


def test_the_reference_fix_of_the_capacity_cut_survives_the_replay(cluster: ClusterHandle) -> None:
    """The control for the test above: the same replay after the real fix (the agent raising the
    quota with its own credentials) is recovered from."""
    problem, ns, oracle, baseline, injection = _metastable_incident(cluster, "hr-capacity-cut-quota-blocks-recovery")
    with agent_session(cluster) as (_, tools):
        for step in problem.mitigation:
            assert step.kubectl is not None
            text, is_error = tools.call("kubectl", command=step.kubectl)
            assert not is_error, text
            tools.call("wait", seconds=step.wait or 0)
    verdict = oracle.evaluate(cluster, ns, baseline, injection)
    assert verdict.passed, verdict
    assert verdict.checks["recovers_after_trigger_replay"] is True


def test_a_retry_storm_whose_retry_settings_remain_fails_the_replay(cluster: ClusterHandle) -> None:
    _, ns, oracle, baseline, injection = _metastable_incident(cluster, "hr-retry-storm-after-spike")
    # The non-fix: the spike is over by itself; search keeps retrying 10 times with no backoff.
    with agent_session(cluster) as (_, tools):
        assert not tools.call("kubectl", command="rollout restart deployment/rate")[1]
        tools.call("wait", seconds=180)
    verdict = oracle.evaluate(cluster, ns, baseline, injection)
    assert verdict.checks["recovers_after_trigger_replay"] is False, verdict


def _incident(cluster: ClusterHandle, problem_id: str):
    as_built(cluster)
    problem = load_catalog().get(problem_id)
    app = load_application(problem.app)
    oracle = MitigationOracle(app, problem)
    baseline = oracle.capture_baseline(cluster, app.namespace)
    injection = ProblemInjection(problem)
    injection.inject(cluster, app.namespace)
    cluster.advance(120)
    return problem, app.namespace, oracle, baseline, injection


def test_old_pods_propped_up_under_a_paused_renamed_template_fail(cluster: ClusterHandle) -> None:
    """The reverse hole: pause the faulty deployment, rename its container (so that a check by
    container name finds nothing), delete the new ReplicaSet: the old pods keep serving while
    the bad value stays in the template. Every part of it is caught."""
    from clusters.kube import Kube

    _, ns, oracle, baseline, injection = _incident(cluster, "hr-geo-image-tag-wrong")
    _run(cluster, "rollout pause deployment/geo",
         "patch deployment geo --type json -p "
         "'[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/name\",\"value\":\"geo-main\"}]'")
    kube = Kube.of(cluster)
    geo = kube.get("Deployment", ns, "geo")
    image = geo["spec"]["template"]["spec"]["containers"][0]["image"]
    bad = [rs["metadata"]["name"] for rs in kube.list("ReplicaSet", ns)
           if rs["spec"]["template"]["spec"]["containers"][0]["image"] == image
           and any(o.get("uid") == geo["metadata"]["uid"] for o in rs["metadata"].get("ownerReferences") or [])]
    assert bad, "the faulty rollout made a ReplicaSet"
    _run(cluster, *(f"delete replicaset {name}" for name in bad))
    verdict = oracle.evaluate(cluster, ns, baseline, injection)
    assert not verdict.passed, verdict
    assert verdict.checks["fault_resolved"] is False, verdict  # found by the container's index
    assert verdict.checks["no_paused_rollout"] is False, verdict
    assert verdict.checks["rollouts_complete"] is False, verdict


def test_a_renamed_container_keeps_the_fault_in_the_template(cluster: ClusterHandle) -> None:
    """Without pausing: the renamed container still carries the bad image at its index."""
    _, ns, oracle, baseline, injection = _incident(cluster, "hr-geo-image-tag-wrong")
    _run(cluster, "patch deployment geo --type json -p "
         "'[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/name\",\"value\":\"geo-main\"}]'")
    assert injection.active(cluster) == [True]


def test_a_pod_replaced_after_the_experiment_started_is_out_of_it(cluster: ClusterHandle) -> None:
    """Chaos Mesh selects its pods when the experiment starts: replacing geo's pod ends a network
    delay on it, with the experiment (which the agent cannot see) still there, and the fix
    passes; doing nothing does not."""
    _, ns, oracle, baseline, injection = _incident(cluster, "hr-geo-network-delay")
    assert injection.active(cluster) == [True]
    (chaos,) = [inj for _, inj in injection.injectors]
    _run(cluster, "delete pod -l io.kompose.service=geo")
    assert injection.active(cluster) == [False]
    injector, record = injection.injectors[0]
    assert injector.is_active(cluster, record), "the experiment itself stays"
    verdict = oracle.evaluate(cluster, ns, baseline, injection)
    assert verdict.passed, verdict
    assert verdict.checks["survives_restart"] is True
    assert chaos.saved["pods_at_start"]


def test_a_node_fault_is_resolved_only_by_moving_the_workload_off_the_node(cluster: ClusterHandle) -> None:
    """Deleting the pod alone may land it on the same node again; the oracle's own restart after
    the window then shows a workload that can go back there. Cordoning first makes it stick."""
    _, ns, oracle, baseline, injection = _incident(cluster, "hr-nic-loss-frontend-node")
    (record,) = [inj for _, inj in injection.injectors]
    node = record.saved["node"]
    assert injection.active(cluster) == [True]
    _run(cluster, f"cordon {node}", "delete pod -l io.kompose.service=frontend")
    assert injection.active(cluster) == [False]
    verdict = oracle.evaluate(cluster, ns, baseline, injection)
    assert verdict.checks["fault_resolved"] is True, verdict
    assert verdict.checks.get("survives_restart") is not False, verdict
