"""The agent interface on the real emulated cluster with hotel-reservation deployed, through a
real MCP client over streamable HTTP and a real kubectl 1.20 process."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from clusters.handle import ClusterHandle
from clusters.emulated import SimHandle
from farm.interface import TOOL_NAMES, AgentInterface
from farm.interface.client import ToolClient
from farm.interface.kubectl import Kubectl
from farm.pytest_plugin import SimClusters, as_built
from tests.farm.interface.agent_session import agent_session, deployment

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]
NS = "hotel-reservation"


@pytest.fixture(scope="module")
def cluster(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served("hotel-reservation", seed=11, agent=True)


@pytest.fixture()
def fresh(cluster: ClusterHandle) -> ClusterHandle:
    as_built(cluster)
    return cluster


def test_every_tool_answers_and_is_recorded(fresh: ClusterHandle) -> None:
    with agent_session(fresh) as (iface, tools):
        assert sorted(t.name for t in tools.tools) == sorted(TOOL_NAMES)
        t0 = fresh.now()
        calls = [
            ("kubectl", {"command": "get pods"}),
            ("prometheus_query", {"query": f'kube_pod_status_phase{{namespace="{NS}",phase="Running"}} == 1'}),
            ("prometheus_query_range", {"query": f'sum(kube_pod_status_ready{{namespace="{NS}",condition="true"}})',
                                        "start": "now-10m", "end": "now", "step": "1m"}),
            ("get_alerts", {}),
            ("loki_query", {"query": f'{{namespace="{NS}"}}', "minutes": 5}),
            ("loki_labels", {}),
            ("jaeger_services", {}),
            ("jaeger_operations", {"service": "frontend"}),
            ("jaeger_traces", {"service": "frontend", "minutes": 5, "limit": 5}),
            ("jaeger_dependencies", {}),
            ("wait", {"seconds": 30}),
            ("submit_diagnosis", {"text": "geo cannot reach its database"}),
            ("submit_mitigation", {}),
        ]
        outputs = {}
        for name, args in calls:
            text, is_error = tools.call(name, **args)
            assert not is_error, f"{name}: {text}"
            outputs[name] = text
        assert "frontend" in outputs["kubectl"] and "Running" in outputs["kubectl"]
        assert NS in outputs["prometheus_query"]
        assert json.loads(outputs["prometheus_query_range"])["resultType"] == "matrix"
        assert outputs["loki_query"].count("\n") >= 1
        assert "frontend" in json.loads(outputs["jaeger_services"])
        assert len(json.loads(outputs["jaeger_traces"])) >= 1
        assert "frontend" in outputs["jaeger_dependencies"]
        assert fresh.now() >= t0 + 30

    rec = iface.record
    assert [c.name for c in rec.tool_calls] == [name for name, _ in calls]
    assert [c.index for c in rec.tool_calls] == list(range(len(calls)))
    for call in rec.tool_calls:
        assert call.error is None and call.tokens > 0 and call.output == outputs[call.name]
        assert call.at >= rec.started_at
    assert rec.tool_calls[0].args == {"command": "get pods", "manifest": None}
    assert rec.diagnosis == "geo cannot reach its database"
    assert rec.diagnosis_at is not None and rec.diagnosis_at >= t0 + 30
    assert rec.mitigation_at is not None and iface.finished.is_set()
    assert rec.tool_tokens == sum(c.tokens for c in rec.tool_calls)


def test_summarised_mode_costs_fewer_tokens(fresh: ClusterHandle) -> None:
    queries = [
        ("loki_query", {"query": f'{{namespace="{NS}"}}', "minutes": 10}),
        ("jaeger_traces", {"service": "frontend", "minutes": 10, "limit": 20}),
        ("prometheus_query_range", {"query": f'kube_pod_status_ready{{namespace="{NS}"}}', "start": "now-10m",
                                    "end": "now", "step": "30s"}),
    ]
    tokens: dict[str, dict[str, int]] = {}
    for mode in ("raw", "summarised"):
        with agent_session(fresh, mode=mode) as (iface, tools):
            for name, args in queries:
                _, is_error = tools.call(name, **args)
                assert not is_error
        tokens[mode] = {c.name: c.tokens for c in iface.record.tool_calls}
    for name, _ in queries:
        assert tokens["summarised"][name] < tokens["raw"][name], (name, tokens)


def test_refused_and_malformed_calls_are_errors_and_recorded(fresh: ClusterHandle) -> None:
    bad = [
        ("kubectl", {"command": "get pods | grep geo"}, "shell operator"),
        ("kubectl", {"command": "get pods -n kube-system"}, "only reach namespace"),
        ("kubectl", {"command": "exec -it frontend -- sh"}, "interactive"),
        ("kubectl", {"command": "get pods --kubeconfig=/etc/kubernetes/admin.conf"}, "cannot be overridden"),
        ("kubectl", {"command": "get pod no-such-pod"}, "NotFound"),
        ("prometheus_query", {"query": "sum(rate(x[5m]"}, "invalid PromQL"),
        ("prometheus_query", {"query": 'up{namespace="chaos-mesh"}'}, "not observable"),
        ("loki_query", {"query": '{namespace="chaos-mesh"}'}, "not observable"),
        ("wait", {"seconds": "soon"}, "valid number"),
        ("wait", {"seconds": -5}, "between"),
        ("kubectl", {}, "command"),
        ("no_such_tool", {}, "Unknown tool"),
    ]
    with agent_session(fresh) as (iface, tools):
        for name, args, reason in bad:
            text, is_error = tools.call(name, **args)
            assert is_error and reason in text, (name, args, text)
        text, is_error = tools.call("kubectl", command="get deployments")
        assert not is_error and "frontend" in text  # the session goes on
    rec = iface.record
    assert len(rec.tool_calls) == len(bad) + 1
    for call, (name, _, reason) in zip(rec.tool_calls, bad, strict=False):
        assert call.name == name and call.error and reason in call.error
    assert rec.tool_calls[-1].error is None


def test_a_tool_that_times_out_returns_an_error_and_the_session_goes_on(fresh: ClusterHandle) -> None:
    iface = AgentInterface(fresh, NS, "t-timeout", tool_timeout_s=0.05)
    url, token = iface.start()
    try:
        with ToolClient(url, token) as tools:
            text, is_error = tools.call("wait", seconds=900)
            assert is_error and "did not finish" in text
            iface.tool_timeout_s = 30.0  # the session goes on; a loaded machine must not time the next call out
            text, is_error = tools.call("submit_diagnosis", text="still here")
            assert not is_error
    finally:
        iface.stop()
    assert iface.record.tool_calls[0].error and iface.record.diagnosis == "still here"


def test_agent_credentials_reach_neither_chaos_resources_nor_other_namespaces(fresh: ClusterHandle) -> None:
    # Straight to kubectl with the agent's kubeconfig, past the interface's own checks: the
    # cluster's RBAC is what refuses.
    kubectl = Kubectl(fresh.agent_kubeconfig(NS), NS)
    try:
        assert kubectl.run_tokens(["get", "pods"]).returncode == 0
        for tokens in (["get", "podchaos"], ["get", "networkchaos", "-n", "chaos-mesh"],
                       ["get", "pods", "-n", "chaos-mesh"], ["get", "secrets", "-n", "kube-system"],
                       ["get", "pods", "--all-namespaces"], ["get", "namespaces"]):
            result = kubectl.run_tokens(tokens)
            assert result.returncode != 0 and "Forbidden" in result.stderr, (tokens, result.text)
    finally:
        kubectl.close()


def test_a_wrong_token_is_refused(fresh: ClusterHandle) -> None:
    iface = AgentInterface(fresh, NS, "t-token")
    url, token = iface.start()
    try:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        headers = {"Accept": "application/json, text/event-stream"}
        for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": token}):
            resp = httpx.post(url, json=body, headers={**headers, **auth})
            assert resp.status_code == 401
        with pytest.raises(BaseException):  # noqa: B017 - the SDK raises an exception group
            with ToolClient(url, "not-" + token):
                pass
        with ToolClient(url, token) as tools:
            assert tools.call("get_alerts")[1] is False
    finally:
        iface.stop()
    assert [c.name for c in iface.record.tool_calls] == ["get_alerts"]


def test_mutations_are_recorded_and_undone(fresh: ClusterHandle) -> None:
    replicas = deployment(fresh, NS, "frontend")["spec"]["replicas"]
    with agent_session(fresh) as (iface, tools):
        assert not tools.call("kubectl", command="scale deployment frontend --replicas=0")[1]
        assert deployment(fresh, NS, "frontend")["spec"]["replicas"] == 0
        assert not tools.call("kubectl", command="set env deployment/geo EXTRA=1")[1]
        assert not tools.call("kubectl", command="get deployments")[1]  # reads are not mutations
        text, is_error = tools.call("undo_last")
        assert not is_error and "set env" in text
        env = deployment(fresh, NS, "geo")["spec"]["template"]["spec"]["containers"][0].get("env") or []
        assert "EXTRA" not in [e["name"] for e in env]
        text, is_error = tools.call("undo_last")
        assert not is_error and "scale" in text
        assert deployment(fresh, NS, "frontend")["spec"]["replicas"] == replicas
        text, is_error = tools.call("undo_last")
        assert is_error and "nothing to undo" in text
        tools.call("submit_mitigation")
        text, is_error = tools.call("kubectl", command="scale deployment frontend --replicas=0")
        assert is_error and "already submitted" in text
    muts = iface.record.mutations
    assert [m.command for m in muts] == ["scale deployment frontend --replicas=0", "set env deployment/geo EXTRA=1"]
    assert all(m.undone and m.undo for m in muts)
    assert muts[0].targets == ["deployment/frontend"] and muts[0].before["deployment/frontend"]["spec"]["replicas"] == replicas
    assert [iface.record.tool_calls[m.call_index].args["command"] for m in muts] == [m.command for m in muts]


def test_exec_is_recorded_as_a_mutation_without_undo(fresh: ClusterHandle) -> None:
    replicas = deployment(fresh, NS, "frontend")["spec"]["replicas"]
    with agent_session(fresh) as (iface, tools):
        pods = {}
        for app in ("mongodb-geo", "frontend"):
            name, is_error = tools.call("kubectl", command=f"get pods -l io.kompose.service={app} "
                                                           "-o jsonpath={.items[0].metadata.name}")
            assert not is_error and name.startswith(app + "-"), name
            pods[app] = name
        mongo = pods["mongodb-geo"]
        assert not tools.call("kubectl", command=f"scale deployment frontend --replicas={replicas + 1}")[1]
        text, is_error = tools.call("kubectl", command=f"exec {mongo} -- mongo geo-db --eval 'db.getName()'")
        assert not is_error and "geo-db" in text, text
        # It ran in the container and failed there: it may have changed something all the same.
        assert tools.call("kubectl", command=f"exec {mongo} -- cat /no/such/file")[1]
        # It never ran (no such pod; no such executable in the image): nothing to record.
        assert tools.call("kubectl", command="exec no-such-pod -- echo hi")[1]
        # (frontend's golang image has coreutils, curl and wget since images ship a userland; not this)
        text, is_error = tools.call("kubectl", command=f"exec {pods['frontend']} -- tcpdump -i any")
        assert is_error and "executable file not found" in text
        text, is_error = tools.call("undo_last")
        assert not is_error and "scale" in text, text
        assert f"'exec {mongo} -- mongo geo-db --eval 'db.getName()'' cannot be undone" in text
        assert deployment(fresh, NS, "frontend")["spec"]["replicas"] == replicas
        text, is_error = tools.call("undo_last")
        assert is_error and "nothing to undo" in text
        tools.call("submit_mitigation")
        text, is_error = tools.call("kubectl", command=f"exec {mongo} -- cat /etc/hosts")
        assert is_error and "already submitted" in text
    muts = iface.record.mutations
    assert [m.command for m in muts] == [f"scale deployment frontend --replicas={replicas + 1}",
                                         f"exec {mongo} -- mongo geo-db --eval 'db.getName()'",
                                         f"exec {mongo} -- cat /no/such/file"]
    assert muts[0].undone and muts[0].undo
    for m in muts[1:]:
        assert m.undo is None and not m.undone and m.before == {} and m.targets == [f"pod/{mongo}"]
        assert m.note and "cannot be undone" in m.note
    assert "exit status 1" in (muts[2].note or "")


def test_no_secret_of_the_farm_reaches_kubectl_or_the_record(fresh: ClusterHandle, monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path) -> None:
    import shutil

    key = "sk-e1testkey0123456789abcdefghij"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    # A database password that no secret-shaped pattern catches: only keeping the farm's
    # environment away from kubectl keeps it out of what the agent sees.
    monkeypatch.setenv("FARM_DATABASE_URL", "postgresql://farm:hunter2hunter2@db/farm")
    # A kubectl that prints its own environment before doing its work, as a debugging wrapper
    # might: whatever the interface hands the process, the agent reads.
    real = shutil.which("kubectl")
    wrapper = tmp_path / "kubectl"
    wrapper.write_text(f'#!/bin/sh\nenv\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    # A wrapper script cannot run in the sandbox (it holds kubectl alone, and the sandbox's empty
    # environment settles the question there): this is the unsandboxed developer opt-out's check.
    monkeypatch.setenv("FARM_UNSAFE_NO_SANDBOX", "1")
    iface = AgentInterface(fresh, NS, "t-secrets", kubectl_binary=str(wrapper))
    url, token = iface.start()
    try:
        with ToolClient(url, token) as tools:
            shown, is_error = tools.call("kubectl", command="get pods")
            assert not is_error and "KUBECONFIG=" in shown and "frontend" in shown  # the environment is shown
            text, _ = tools.call("kubectl", command=f"get pods -l token={key}")
            assert key not in text
            tools.call("submit_diagnosis", text=f"the key is {key}")
    finally:
        iface.stop()
    for name in ("FARM_DATABASE_URL", "hunter2", "OPENAI_API_KEY", key):
        assert name not in shown, name
    dumped = iface.record.model_dump_json()
    assert key not in dumped and "hunter2" not in dumped and "[REDACTED]" in dumped


def _plant_chaos_mesh(cluster: ClusterHandle) -> None:
    """What a real cluster has: Chaos Mesh's own pods in its namespace, scraped and logged."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    api = cluster.api_client()
    try:
        client.CoreV1Api(api).create_namespace({"metadata": {"name": "chaos-mesh"}})
    except ApiException as exc:
        assert exc.status == 409
    labels = {"app.kubernetes.io/name": "chaos-mesh", "app.kubernetes.io/component": "chaos-daemon"}
    client.AppsV1Api(api).create_namespaced_deployment("chaos-mesh", {
        "metadata": {"name": "chaos-daemon", "labels": labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "chaos-daemon", "image": "ghcr.io/chaos-mesh/chaos-daemon:v2.6.3"}]}}},
    })


def test_injection_machinery_is_hidden_from_telemetry(fresh: ClusterHandle) -> None:
    from farm.problems.catalog import load_catalog
    from injectors.compose import ProblemInjection

    _plant_chaos_mesh(fresh)
    injection = ProblemInjection(load_catalog().get("hr-user-pod-failure"))  # a PodChaos in chaos-mesh
    injection.inject(fresh, NS)
    fresh.advance(90)
    # The farm's own view shows the machinery: the test below is not vacuous.
    direct = httpx.get(fresh.endpoints.prometheus + "/api/v1/query",
                       params={"query": "count by (namespace) (kube_pod_info)"}).json()["data"]["result"]
    assert "chaos-mesh" in {r["metric"].get("namespace") for r in direct}
    with agent_session(fresh) as (_, tools):
        outputs = [tools.call(name, **args) for name, args in (
            ("prometheus_query", {"query": "count by (namespace) (kube_pod_info)"}),
            ("prometheus_query", {"query": "kube_pod_info"}),
            ("prometheus_query", {"query": "sum(kube_pod_info)"}),
            ("prometheus_query", {"query": 'kube_pod_info{namespace=~"chaos.+"}'}),
            ("prometheus_query_range", {"query": 'count by (namespace) (kube_pod_info)', "start": "now-5m"}),
            ("loki_query", {"query": '{namespace=~".+"}', "minutes": 5}),
            ("loki_labels", {}),
            ("jaeger_services", {}),
            ("get_alerts", {}),
            ("kubectl", {"command": "get events"}),
            ("kubectl", {"command": "get pods -o wide"}),
        )]
    for text, _ in outputs:
        assert "chaos-mesh" not in text and "chaos-daemon" not in text and "PodChaos" not in text, text[:500]
    assert outputs[3][1] is True  # naming the machinery is refused outright
    visible = {r["metric"].get("namespace") for r in json.loads(outputs[0][0])["result"]}
    assert NS in visible and "chaos-mesh" not in visible
    total = float(json.loads(outputs[2][0])["result"][0]["value"][1])
    assert total < sum(float(r["value"][1]) for r in direct)  # aggregates cannot count it either
    injection.recover(fresh)


def test_an_application_with_an_operator_namespace_reaches_both_and_nothing_else(fresh: ClusterHandle) -> None:
    """An application that also runs in another namespace (an operator's): the agent's account gets
    the same rights there, the interface lets `-n` name it, and every other namespace stays shut."""
    from kubernetes import client

    api = fresh.api_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    core.create_namespace({"metadata": {"name": "hotel-ops"}})
    apps.create_namespaced_deployment("hotel-ops", {
        "metadata": {"name": "operator"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "operator"}},
                 "template": {"metadata": {"labels": {"app": "operator"}},
                              "spec": {"containers": [{"name": "op", "image": "busybox:latest",
                                                       "command": ["sh", "-c", "while true; do sleep 5; done"]}]}}}})
    fresh.advance(30)
    kubectl = Kubectl(fresh.agent_kubeconfig(NS, also=("hotel-ops",)), NS)
    try:
        assert "operator" in kubectl.run_tokens(["get", "deployments", "-n", "hotel-ops"]).text
        assert kubectl.run_tokens(["scale", "deployment/operator", "--replicas=2", "-n", "hotel-ops"]).returncode == 0
        denied = kubectl.run_tokens(["get", "pods", "-n", "kube-system"])
        assert denied.returncode != 0 and "Forbidden" in denied.stderr
    finally:
        kubectl.close()
    iface = AgentInterface(fresh, NS, "t-operator", also_namespaces=("hotel-ops",))
    iface.start()
    try:
        with ToolClient(iface.url, iface.token) as tools:
            text, is_error = tools.call("kubectl", command="get deployment operator -n hotel-ops")
            assert not is_error and "operator" in text
            text, is_error = tools.call("kubectl", command="get pods -n kube-system")
            assert is_error and "hotel-ops" in text and "kube-system" in text
    finally:
        iface.stop()


def test_a_structured_diagnosis_is_recorded_beside_the_text_and_a_wrong_one_refused(fresh: ClusterHandle) -> None:
    iface = AgentInterface(fresh, NS, "t-structured")
    url, token = iface.start()
    try:
        with ToolClient(url, token) as tools:
            text, is_error = tools.call("submit_diagnosis", text="geo's probe port is wrong",
                                        root_causes=["geo-7c9d5b8f4-q8wzt", "mongodb-geo"], fault_type="gc-trash")
            assert is_error and "fault_type 'gc-trash' is not in the taxonomy" in text and "misconfiguration" in text
            assert iface.record.diagnosis is None  # nothing half-recorded
            text, is_error = tools.call("submit_diagnosis", text="geo's probe port is wrong",
                                        root_causes=["geo-7c9d5b8f4-q8wzt"], fault_type="misconfiguration",
                                        affected=["search", "frontend"])
            assert not is_error, text
            _, is_error = tools.call("submit_diagnosis", text="prose alone is still fine")
            assert not is_error
    finally:
        iface.stop()
    assert iface.record.diagnosis == "prose alone is still fine" and iface.record.structured is None
    call = [c for c in iface.record.tool_calls if c.name == "submit_diagnosis"][1]
    assert call.args["root_causes"] == ["geo-7c9d5b8f4-q8wzt"] and call.args["fault_type"] == "misconfiguration"


def test_the_farms_own_reads_match_kubectl_and_start_no_process(fresh: ClusterHandle,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Undo capture reads over the API what `kubectl get -o json` printed, to the key order of the
    recorded JSON, and runs no kubectl process for the kinds the REST reader serves."""
    from farm.interface.kubectl import Target

    kubectl = Kubectl(fresh.agent_kubeconfig(NS), NS, virtual_time=True)
    try:
        pod = json.loads(kubectl.run_tokens(["get", "pods", "-o", "json"]).stdout)["items"][0]["metadata"]
        targets = [Target("deployment", "frontend"), Target("service", "geo"), Target("pod", pod["name"]),
                   Target("deployment", "no-such"), Target("pod", selector=f"io.kompose.service={'geo'}"),
                   Target("configmap", all=True), Target("node", all=True)]
        expected = [kubectl._get_json_kubectl(t) for t in targets]
        started: list[list[str]] = []
        real_run = Kubectl.run_tokens
        monkeypatch.setattr(Kubectl, "run_tokens", lambda self, tokens, stdin=None: started.append(tokens)
                            or real_run(self, tokens, stdin))
        got = [kubectl.get_json(t) for t in targets]
        assert started == []
        assert json.dumps(got) == json.dumps(expected)
        assert got[3] == [("deployment/no-such", None)] and got[4] and got[6]
        # a kind the reader does not serve is still read, by kubectl
        assert kubectl.get_json(Target("horizontalpodautoscaler", "none")) == [("horizontalpodautoscaler/none", None)]
        assert started and started[-1][:2] == ["get", "horizontalpodautoscaler"]
    finally:
        kubectl.close()


def test_undo_restores_a_deleted_service_as_captured(fresh: ClusterHandle) -> None:
    with agent_session(fresh) as (iface, tools):
        before = json.loads(tools.call("kubectl", command="get service geo -o json")[0])
        assert not tools.call("kubectl", command="delete service geo")[1]
        text, is_error = tools.call("undo_last")
        assert not is_error and "create service/geo" in text, text
        after = json.loads(tools.call("kubectl", command="get service geo -o json")[0])
    assert after["spec"]["ports"] == before["spec"]["ports"] and after["spec"]["selector"] == before["spec"]["selector"]
    assert iface.record.mutations[0].before["service/geo"]["metadata"]["name"] == "geo"


def test_a_sessions_first_kubectl_starts_from_the_warm_discovery_cache(fresh: ClusterHandle) -> None:
    """The first session's discovery cache seeds the next session's kubectl home (same cluster,
    same API groups), and its kubectl answers the same; the Go runtime is tuned in the sandbox."""
    from farm.interface import sandbox as sandbox_mod
    from farm.interface import warmcache

    first = Kubectl(fresh.agent_kubeconfig(NS), NS, virtual_time=True)
    try:
        expected = first.run_tokens(["get", "deployments", "-o", "name"])
        assert expected.returncode == 0 and "deployment.apps/frontend" in expected.stdout
        assert first._cache_kept and first._cache_key is not None
    finally:
        first.close()
    second = Kubectl(fresh.agent_kubeconfig(NS), NS, virtual_time=True)
    try:
        cached = Path(second._kubectl_home) / warmcache.CACHE / "discovery"
        assert any(cached.rglob("serverresources.json")), "the new session's home holds no discovery cache"
        assert second.run_tokens(["get", "deployments", "-o", "name"]).stdout == expected.stdout
        if second._sandbox is not None:
            argv = second._sandbox.wrap(["version"])
            assert argv[argv.index("GOGC") + 1] in ("off", "400")
    finally:
        second.close()
    assert sandbox_mod.go_runtime_env("go1.19.8")[:3] == ("--setenv", "GOGC", "off")
    assert sandbox_mod.go_runtime_env("go1.15.15") == ("--setenv", "GOGC", "400")
