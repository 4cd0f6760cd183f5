# ruff: noqa: F811  (pytest fixtures imported from test_real_support)
"""The observability and chaos stack: values files and alert rules parse, `install_stack` runs
the pinned helm commands (a fake helm that records them) and applies its manifests for real
through a Kubernetes API server, waits for readiness, retries transient helm failures, and skips
what a reused cluster already has."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusters.real import KubeconfigClusterHandle
from clusters.stack import QUERY_SERVICES, RELEASES, install_stack
from clusters.stack.releases import READY_DEPLOYMENTS, REPOSITORIES
from core.errors import ClusterUnavailable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_real_support import ReadyMarker, api_server, fakes_on_path  # noqa: E402,F401


def make_handle(api_server: dict[str, Any], tmp_path: Path) -> KubeconfigClusterHandle:
    return KubeconfigClusterHandle("kind", "stack", api_server["kubeconfig"], workdir=tmp_path, reset_timeout=5,
                                   app_namespaces=set())


def helm_calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_values_are_yaml_and_pin_what_matters() -> None:
    for release in RELEASES:
        assert release.values_file.is_file(), release.values_file
        assert release.repository in REPOSITORIES
        assert release.version[0].isdigit()
    chaos = yaml.safe_load((RELEASES[0].values_file).read_text())
    assert chaos["chaosDaemon"]["runtime"] == "containerd"
    assert chaos["chaosDaemon"]["socketPath"] == "/run/containerd/containerd.sock"
    assert chaos["dashboard"]["create"] is False
    loki = yaml.safe_load(next(r for r in RELEASES if r.name == "loki").values_file.read_text())
    assert loki["deploymentMode"] == "SingleBinary"
    assert loki["loki"]["schemaConfig"]["configs"][0]["schema"] == "v13"
    promtail = yaml.safe_load(next(r for r in RELEASES if r.name == "promtail").values_file.read_text())
    assert promtail["config"]["clients"][0]["url"].startswith("http://loki.observe.svc.cluster.local:3100/")
    prometheus = yaml.safe_load(next(r for r in RELEASES if r.name == "prometheus").values_file.read_text())
    assert prometheus["kube-state-metrics"]["enabled"] and prometheus["prometheus-node-exporter"]["enabled"]
    scrape = yaml.safe_load(prometheus["extraScrapeConfigs"])
    assert scrape[0]["job_name"] == "load-generators"


def test_every_alert_rule_is_valid_promql() -> None:
    import promql_parser

    prometheus = yaml.safe_load(next(r for r in RELEASES if r.name == "prometheus").values_file.read_text())
    groups = prometheus["serverFiles"]["alerting_rules.yml"]["groups"]
    alerts = [rule for group in groups for rule in group["rules"]]
    assert {"KubePodCrashLooping", "PodStatusError", "KubeNodeNotReady", "HighRequestErrorRate"} <= \
        {a["alert"] for a in alerts}
    for alert in alerts:
        promql_parser.parse(alert["expr"])  # raises on a syntax error
        assert alert["labels"]["severity"] in {"critical", "warning", "info"}
        assert alert["annotations"]["summary"]


def test_query_services_are_what_the_stack_deploys() -> None:
    jaeger = [d for d in yaml.safe_load_all((Path("clusters/stack/manifests/jaeger.yaml")).read_text()) if d]
    services = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in jaeger if d["kind"] == "Service"}
    target = QUERY_SERVICES["jaeger"]
    assert target.port in [p["port"] for p in services[(target.namespace, target.service)]["spec"]["ports"]]
    assert QUERY_SERVICES["prometheus"].service == "prometheus-server"  # release "prometheus" of that chart
    assert QUERY_SERVICES["loki"].service == "loki" and QUERY_SERVICES["loki"].port == 3100


def test_install_runs_pinned_helm_applies_manifests_and_waits(api_server: dict[str, Any], tmp_path: Path,
                                                              fakes_on_path: dict[str, Path]) -> None:
    handle = make_handle(api_server, tmp_path)
    with ReadyMarker(handle, READY_DEPLOYMENTS):
        report = install_stack(handle, poll_seconds=0.05, wait_seconds=30)
    assert not report.skipped
    calls = helm_calls(fakes_on_path["helm"])
    repos = {tuple(c[:4]) for c in calls if c[:2] == ["repo", "add"]}
    assert repos == {("repo", "add", name, url) for name, url in REPOSITORIES.items()}
    assert ["repo", "update"] in calls
    installs = [c for c in calls if "upgrade" in c]
    assert [c[c.index("upgrade") + 2] for c in installs] == [r.name for r in RELEASES]
    for call, release in zip(installs, RELEASES, strict=True):
        assert call[:2] == ["--kubeconfig", str(handle.kubeconfig)]
        assert call[call.index("upgrade"):call.index("upgrade") + 4] == ["upgrade", "--install", release.name,
                                                                          release.chart_ref]
        assert call[call.index("--version") + 1] == release.version
        assert call[call.index("--namespace") + 1] == release.namespace
        assert call[call.index("--values") + 1] == str(release.values_file)
        assert "--wait" in call and "--create-namespace" in call
    jaeger = handle.request("GET", "/apis/apps/v1/namespaces/observe/deployments/jaeger")
    assert jaeger["spec"]["template"]["spec"]["containers"][0]["image"] == "jaegertracing/all-in-one:1.57"
    assert handle.request("GET", "/api/v1/namespaces/observe/services/jaeger-out")["spec"]["ports"][0]["port"] == 16686
    marker = handle.request("GET", "/api/v1/namespaces/observe/configmaps/sre-farm-stack")
    assert marker["data"]["fingerprint"] == report.fingerprint
    # A reused cluster: nothing to do, no helm call.
    again = install_stack(handle, poll_seconds=0.05, wait_seconds=30)
    assert again.skipped and len(helm_calls(fakes_on_path["helm"])) == len(calls)
    # The stack survives a reset between trials.
    handle.reset()
    assert handle.request("GET", "/api/v1/namespaces/observe/configmaps/sre-farm-stack")
    handle.close()


def test_install_times_out_naming_what_is_not_ready(api_server: dict[str, Any], tmp_path: Path,
                                                    fakes_on_path: dict[str, Path]) -> None:
    handle = make_handle(api_server, tmp_path)
    from clusters.kube import KubeRest

    KubeRest(handle.api_client()).delete("apps/v1", "Deployment", "jaeger", "observe")  # a fresh cluster's
    with pytest.raises(ClusterUnavailable, match=r"not ready after 0 s: deployment observe/jaeger \(0/1 ready\)"):
        install_stack(handle, force=True, poll_seconds=0.05, wait_seconds=0.2)
    handle.close()


def test_transient_helm_failures_are_retried(api_server: dict[str, Any], tmp_path: Path,
                                             fakes_on_path: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_HELM_FAIL_TIMES", "2")
    monkeypatch.setenv("FAKE_HELM_FAIL_ON", "upgrade")
    handle = make_handle(api_server, tmp_path)
    with ReadyMarker(handle, READY_DEPLOYMENTS):
        install_stack(handle, force=True, poll_seconds=0.05, wait_seconds=30, retry_backoff=0.01)
    installs = [c for c in helm_calls(fakes_on_path["helm"]) if "upgrade" in c]
    assert len(installs) == len(RELEASES) + 2
    assert installs[0] == installs[1] == installs[2]  # chaos-mesh tried three times
    handle.close()


def test_hard_helm_failure_is_a_setup_failure_with_helms_words(api_server: dict[str, Any], tmp_path: Path,
                                                               fakes_on_path: dict[str, Path],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_HELM_FAIL_TIMES", "5")
    monkeypatch.setenv("FAKE_HELM_FAIL_ON", "upgrade")
    monkeypatch.setenv("FAKE_HELM_STDERR", 'Error: INSTALLATION FAILED: chart "chaos-mesh" version "2.7.2" not found')
    handle = make_handle(api_server, tmp_path)
    with pytest.raises(ClusterUnavailable) as err:
        install_stack(handle, force=True, retry_backoff=0.01)
    assert "installing chaos-mesh/chaos-mesh 2.7.2 on kind:stack failed" in str(err.value)
    assert 'chart "chaos-mesh" version "2.7.2" not found' in str(err.value)
    assert err.value.phase == "cluster"
    assert len([c for c in helm_calls(fakes_on_path["helm"]) if "upgrade" in c]) == 1  # not transient: no retry
    handle.close()


def test_missing_helm_says_how_to_install_it(api_server: dict[str, Any], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    handle = make_handle(api_server, tmp_path)
    with pytest.raises(ClusterUnavailable, match=r"'helm' was not found on PATH: install helm 3 \(https://helm.sh"):
        install_stack(handle, force=True)
    handle.close()
