"""Issue 23's attacks on the agent's interface, run as an agent runs them: through the MCP client
against a trial's interface on the emulated cluster (real kubectl in its sandbox).

- Writes the interface did not see: `--dry-run=False`, `=0`, `=F` are writes to kubectl; they are
  recorded (with their undo), and refused after submit_mitigation.
- Other namespaces' logs and metrics: a query that rewrites or drops the namespace label reads
  only the session's namespace, whatever it does with the labels afterwards.
- The cluster's own components: tainting every node NoExecute leaves CoreDNS running (the agent's
  role patches worker nodes only), draining reaches no kube-system pod.
- Calls after the session ended are refused and are not steps.
- `delete --raw PATH` (helper adv's pass): it deleted the Deployment it named, recorded with no
  target and no undo (`undo_last` could not bring it back); `--raw` is now for reading only."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from clusters.emulated import SimHandle
from clusters.kube import Kube
from core.states import LIMIT_STEPS
from farm.agents.agent import AgentLimits
from farm.interface import AgentInterface
from farm.interface.client import ToolClient
from farm.pytest_plugin import SimClusters, as_built
from tests.farm.interface.agent_session import agent_session, deployment

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]
NS = "hotel-reservation"
# What the cluster's other namespaces run: none of it may reach the agent.
OTHERS = ("kube-system", "coredns", "kube-proxy", "kindnet", "etcd", "local-path", "kube-apiserver",
          "kube-scheduler", "chaos")


@pytest.fixture(scope="module")
def cluster(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served("hotel-reservation", seed=23, agent=True)


@pytest.fixture()
def session(cluster: SimHandle) -> Iterator[tuple[AgentInterface, ToolClient]]:
    as_built(cluster)
    with agent_session(cluster, trial_id="t-issue23") as opened:
        yield opened


@pytest.mark.parametrize("spelling", ["False", "0", "F", "none"])
def test_a_dry_run_kubectl_reads_as_a_write_is_recorded_and_undone(cluster: SimHandle, spelling: str,
                                                                   session: tuple[AgentInterface, ToolClient]) -> None:
    iface, tools = session
    replicas = deployment(cluster, NS, "geo")["spec"]["replicas"]
    text, is_error = tools.call("kubectl", command=f"scale deployment geo --replicas=0 --dry-run={spelling}")
    assert not is_error, text
    assert deployment(cluster, NS, "geo")["spec"]["replicas"] == 0  # kubectl wrote it
    [mutation] = iface.record.mutations
    assert mutation.command.endswith(f"--dry-run={spelling}") and mutation.undo and mutation.targets == ["deployment/geo"]
    assert not tools.call("undo_last")[1]
    assert deployment(cluster, NS, "geo")["spec"]["replicas"] == replicas


def test_real_dry_runs_write_nothing_and_are_not_recorded(cluster: SimHandle,
                                                          session: tuple[AgentInterface, ToolClient]) -> None:
    iface, tools = session
    replicas = deployment(cluster, NS, "geo")["spec"]["replicas"]
    for spelling in ("client", "server", "True", "1", "T"):
        text, is_error = tools.call("kubectl", command=f"scale deployment geo --replicas=0 --dry-run={spelling}")
        assert not is_error, text
    text, is_error = tools.call("kubectl", command="scale deployment geo --replicas=0 --dry-run=yes")
    assert is_error and "not a dry-run strategy" in text
    assert deployment(cluster, NS, "geo")["spec"]["replicas"] == replicas and iface.record.mutations == []


def test_after_submit_mitigation_a_disguised_write_is_refused_and_not_a_step(
        cluster: SimHandle, session: tuple[AgentInterface, ToolClient]) -> None:
    iface, tools = session
    replicas = deployment(cluster, NS, "geo")["spec"]["replicas"]
    assert not tools.call("submit_mitigation")[1]
    steps = len(iface.record.tool_calls)
    for spelling in ("False", "0", "F", "none", "FALSE", "f"):
        text, is_error = tools.call("kubectl", command=f"scale deployment geo --replicas=0 --dry-run={spelling}")
        assert is_error and "already submitted" in text, text
    assert tools.call("undo_last")[1]
    assert deployment(cluster, NS, "geo")["spec"]["replicas"] == replicas
    assert iface.record.mutations == [] and len(iface.record.tool_calls) == steps
    assert len(iface.record.refused_late) == 7
    # a read after the submission is still answered, and is a step
    assert not tools.call("kubectl", command="get deployment geo")[1]
    assert len(iface.record.tool_calls) == steps + 1


def test_a_raw_delete_is_refused_and_a_raw_read_still_works(cluster: SimHandle,
                                                            session: tuple[AgentInterface, ToolClient]) -> None:
    iface, tools = session
    uid = deployment(cluster, NS, "geo")["metadata"]["uid"]
    text, is_error = tools.call("kubectl", command=f"delete --raw /apis/apps/v1/namespaces/{NS}/deployments/geo")
    assert is_error and "for reading only" in text and "delete TYPE NAME" in text, text
    assert deployment(cluster, NS, "geo")["metadata"]["uid"] == uid and iface.record.mutations == []
    text, is_error = tools.call("kubectl", command=f"get --raw /apis/apps/v1/namespaces/{NS}/deployments/geo")
    assert not is_error and json.loads(text)["metadata"]["uid"] == uid


def test_a_json_manifest_reaches_kubectl(cluster: SimHandle,
                                                                    session: tuple[AgentInterface, ToolClient]) -> None:
    """The MCP SDK parses JSON-looking strings for arguments not annotated plain `str`: a JSON
    manifest sent as text arrives as an object, which the tool writes back as JSON."""
    iface, tools = session
    manifest = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "from-json"}, "data": {"a": "1"}})
    text, is_error = tools.call("kubectl", command="apply -f -", manifest=manifest)
    assert not is_error and "from-json" in text, text
    assert [m.targets for m in iface.record.mutations] == [["configmap/from-json"]]
    assert iface.record.tool_calls[0].args["manifest"] == manifest


LOG_ATTACKS = [
    '{namespace="kube-system"} | drop namespace',
    '{namespace="kube-system"} | label_format namespace="hotel-reservation"',
    '{namespace=~".+"} | label_format namespace="hotel-reservation"',
    '{namespace=~".+"} | drop namespace, pod, container, app',
    '{job=~".+"} | line_format "{{ regexReplaceAll \\"kube-system\\" .namespace \\"x\\" }} {{ .pod }}"',
    '{job="node-journal"}',
    '{job=~"node-.*"} | drop node_name',
    'sum by (pod) (count_over_time({namespace=~".+"} | drop namespace [30m]))',
    'sum by (namespace, pod) (count_over_time({namespace="kube-system"} | label_format namespace="x" [30m]))',
]


@pytest.mark.parametrize("query", LOG_ATTACKS)
def test_log_queries_that_rewrite_the_namespace_read_only_the_incidents(
        session: tuple[AgentInterface, ToolClient], query: str) -> None:
    _, tools = session
    text, is_error = tools.call("loki_query", query=query, minutes=30)
    for other in OTHERS:
        assert other not in text, f"{query} showed {other}: {text[:400]}"


def test_honest_log_queries_still_read_the_incident(session: tuple[AgentInterface, ToolClient]) -> None:
    _, tools = session
    text, is_error = tools.call("loki_query", query='{app=~".+"} | drop namespace', minutes=30)
    assert not is_error and "geo" in text, text[:300]
    labels, is_error = tools.call("loki_labels")
    assert not is_error and "geo" in labels
    for other in OTHERS:
        assert other not in labels, f"loki_labels showed {other}: {labels}"


@pytest.mark.parametrize("query", [
    'label_replace(kube_pod_info{namespace="kube-system"}, "namespace", "hotel-reservation", "", "")',
    'label_replace(kube_pod_info, "namespace", "hotel-reservation", "namespace", ".*")',
    'sum by (pod) (label_replace(kube_pod_info{namespace=~".+"}, "namespace", "", "", ""))',
    'count by (pod) (kube_pod_info) or on() vector(0)',
    'label_join(container_cpu_usage_seconds_total, "namespace", "", "pod")',
])
def test_metric_queries_that_rewrite_the_namespace_read_only_the_incidents(
        session: tuple[AgentInterface, ToolClient], query: str) -> None:
    _, tools = session
    text, is_error = tools.call("prometheus_query", query=query)
    for other in OTHERS:
        assert other not in text, f"{query} showed {other}: {text[:400]}"


def _coredns(cluster: SimHandle) -> list[tuple[str, str]]:
    with cluster.api_client() as api:
        pods = Kube(api).list("Pod", "kube-system", selector="k8s-app=kube-dns")
    return [(p["spec"].get("nodeName", ""), p["status"].get("phase", "")) for p in pods]


def test_tainting_every_node_noexecute_leaves_the_clusters_dns_running(
        cluster: SimHandle, session: tuple[AgentInterface, ToolClient]) -> None:
    iface, tools = session
    text, is_error = tools.call("kubectl", command="taint nodes --all sre=evict:NoExecute")
    assert is_error and "forbidden" in text.lower() and "sim-control-plane" in text, text
    # the workers were tainted before the control plane refused: that change is recorded
    [mutation] = iface.record.mutations
    assert mutation.undo and any(t.startswith("node/sim-worker") for t in mutation.targets), mutation
    assert not tools.call("wait", seconds=120)[1]
    dns = _coredns(cluster)
    assert dns and all(phase == "Running" for _, phase in dns), dns
    assert {node for node, _ in dns} == {"sim-control-plane"}, dns
    text, is_error = tools.call("undo_last")
    assert not is_error, text
    with cluster.api_client() as api:
        tainted = [n["metadata"]["name"] for n in Kube(api).list("Node")
                   if any(t.get("key") == "sre" for t in n["spec"].get("taints") or [])]
    assert tainted == []


@pytest.mark.parametrize(("command", "reason"), [
    ("drain sim-control-plane --ignore-daemonsets --force", "forbidden"),
    ("cordon sim-control-plane", "forbidden"),
    ("taint nodes sim-control-plane x=y:NoSchedule", "forbidden"),
    ("delete pods -n kube-system -l k8s-app=kube-dns", "only reach namespace"),
    ("scale deployment coredns -n kube-system --replicas=0", "only reach namespace"),
])
def test_the_cluster_s_own_components_are_out_of_the_agent_s_role(
        cluster: SimHandle, session: tuple[AgentInterface, ToolClient], command: str, reason: str) -> None:
    iface, tools = session
    text, _ = tools.call("kubectl", command=command)  # kubectl 1.20's cordon exits 0 on a forbidden patch
    assert reason in text.lower(), text
    assert iface.record.mutations == []


def test_draining_every_worker_evicts_no_kube_system_pod(cluster: SimHandle,
                                                         session: tuple[AgentInterface, ToolClient]) -> None:
    _, tools = session
    before = _coredns(cluster)
    with cluster.api_client() as api:
        workers = [n["metadata"]["name"] for n in Kube(api).list("Node") if "worker" in n["metadata"]["name"]]
    assert workers
    for worker in workers:
        tools.call("kubectl", command=f"drain {worker} --ignore-daemonsets --force --delete-emptydir-data")
    assert not tools.call("wait", seconds=60)[1]
    assert _coredns(cluster) == before


def test_calls_after_a_limit_are_refused_and_are_not_steps(cluster: SimHandle) -> None:
    as_built(cluster)
    iface = AgentInterface(cluster, NS, "t-issue23-limit", limits=AgentLimits(max_steps=2))
    url, token = iface.start()
    try:
        with ToolClient(url, token) as tools:
            assert not tools.call("kubectl", command="get pods")[1]
            assert tools.call("kubectl", command="get pods -A")[1]  # refused by the tool: still a step
            for _ in range(5):
                text, is_error = tools.call("kubectl", command="get pods")
                assert is_error and text.startswith(f"session ended: {LIMIT_STEPS}"), text
    finally:
        iface.stop()
    rec = iface.record
    assert rec.end_reason == LIMIT_STEPS and [c.index for c in rec.tool_calls] == [0, 1]
    assert len(rec.refused_late) == 5 and all(c.index == 2 for c in rec.refused_late)
