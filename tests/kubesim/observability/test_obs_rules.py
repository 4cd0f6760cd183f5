"""Alerting rules on the cluster clock: pending → firing after `for`, activeAt, resolution,
annotation templates, the /api/v1/alerts and /api/v1/rules shapes, ALERTS series, recording rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubesim.clock import VirtualClock
from kubesim.observability import Observability
from kubesim.observability.prometheus.rules import RuleFileError, RuleManager, expand_template
from kubesim.observability.prometheus.tsdb import TSDB

from .conftest import T0, Client

CRASHING = {"job": "kube-state-metrics", "instance": "10.244.0.9:8080", "namespace": "hotel-reservation",
            "pod": "geo-7d9c6b8f5-x2kqp", "uid": "3f8a", "container": "hotel-reserv-geo", "reason": "CrashLoopBackOff"}


def run(obs: Observability, clock: VirtualClock, until: float, step: float = 30.0, crash_until: float | None = None) -> None:
    """Advance the clock, writing the KSM series every 15 s and evaluating rules every `step`."""
    t = clock.now()
    while t <= until:
        if crash_until is None or t <= crash_until:
            obs.tsdb.append("kube_pod_container_status_waiting_reason", CRASHING, t, 1.0)
        if (t - T0) % step == 0:
            clock.set(t)
            obs.evaluate_rules(t)
        t += 15


def crash_alerts(prom: Client) -> list[dict]:
    status, body = prom.get("/api/v1/alerts")
    assert status == 200 and body["status"] == "success"
    return [a for a in body["data"]["alerts"] if a["labels"]["alertname"] == "KubePodCrashLooping"]


def test_crash_loop_goes_pending_then_firing_after_15_minutes(prom: Client, obs: Observability, clock: VirtualClock) -> None:
    run(obs, clock, T0 + 14 * 60)
    (alert,) = crash_alerts(prom)
    assert alert["state"] == "pending"
    assert alert["activeAt"] == "2026-01-05T09:00:00Z"
    assert alert["value"] == "1e+00"
    assert alert["labels"] == {**CRASHING, "alertname": "KubePodCrashLooping", "severity": "warning"}
    assert alert["annotations"]["summary"] == "Pod is crash looping."
    assert alert["annotations"]["description"] == (
        'Pod hotel-reservation/geo-7d9c6b8f5-x2kqp (hotel-reserv-geo) is in waiting state (reason: "CrashLoopBackOff").')
    assert alert["annotations"]["runbook_url"].endswith("/kubernetes/kubepodcrashlooping")
    run(obs, clock, T0 + 15 * 60)
    (alert,) = crash_alerts(prom)
    assert alert["state"] == "firing"
    assert alert["activeAt"] == "2026-01-05T09:00:00Z"
    # the SREGym rule on the same series fires after its 1m
    _, body = prom.get("/api/v1/alerts")
    names = {(a["labels"]["alertname"], a["state"]) for a in body["data"]["alerts"]}
    assert ("PodStatusError", "firing") in names
    assert ("Watchdog", "firing") in names


def test_alert_resolves_when_the_series_is_gone(prom: Client, obs: Observability, clock: VirtualClock) -> None:
    run(obs, clock, T0 + 16 * 60, crash_until=T0 + 10 * 60)
    # max_over_time[5m] keeps it for 5 minutes, the 5-minute lookback no longer matters
    assert crash_alerts(prom) == []


def test_alerts_series_is_written(prom: Client, obs: Observability, clock: VirtualClock) -> None:
    run(obs, clock, T0 + 15 * 60)
    status, body = prom.get("/api/v1/query", query='ALERTS{alertname="KubePodCrashLooping"}', time=T0 + 15 * 60)
    assert status == 200
    (r,) = body["data"]["result"]
    assert r["metric"]["alertstate"] == "firing" and r["metric"]["pod"] == CRASHING["pod"]
    _, body = prom.get("/api/v1/query", query='ALERTS{alertname="KubePodCrashLooping", alertstate="pending"}',
                       time=T0 + 14 * 60)
    assert len(body["data"]["result"]) == 1


def test_rules_endpoint_shape(prom: Client, obs: Observability, clock: VirtualClock) -> None:
    run(obs, clock, T0 + 60)
    status, body = prom.get("/api/v1/rules")
    assert status == 200
    groups = {g["name"]: g for g in body["data"]["groups"]}
    assert {"kubernetes-apps", "kubernetes-resources", "node-exporter", "app.workloads", "general.rules"} <= set(groups)
    apps = groups["kubernetes-apps"]
    assert apps["interval"] == 30 and apps["lastEvaluation"] == "2026-01-05T09:01:00Z"
    rule = next(r for r in apps["rules"] if r["name"] == "KubePodCrashLooping")
    assert rule["type"] == "alerting" and rule["duration"] == 900 and rule["state"] == "pending"
    assert rule["health"] == "ok" and rule["labels"] == {"severity": "warning"}
    assert rule["query"].startswith("max_over_time(kube_pod_container_status_waiting_reason")
    assert rule["alerts"][0]["state"] == "pending"
    _, only_record = prom.get("/api/v1/rules", type="record")
    assert all(r["type"] == "recording" for g in only_record["data"]["groups"] for r in g["rules"])
    _, named = prom.get("/api/v1/rules", **{"rule_name[]": "KubeQuotaExceeded"})
    assert [r["name"] for g in named["data"]["groups"] for r in g["rules"]] == ["KubeQuotaExceeded"]
    status, bad = prom.get("/api/v1/rules", type="both")
    assert status == 400 and bad["errorType"] == "bad_data"


def test_quota_exceeded_uses_ignoring_matching(prom: Client, obs: Observability, clock: VirtualClock) -> None:
    base = {"job": "kube-state-metrics", "instance": "10.244.0.9:8080", "namespace": "hotel-reservation",
            "resourcequota": "capacity-restraint", "resource": "pods"}
    for i in range(0, 16 * 4 + 1):
        t = T0 + 15 * i
        obs.tsdb.append("kube_resourcequota", {**base, "type": "hard"}, t, 10.0)
        obs.tsdb.append("kube_resourcequota", {**base, "type": "used"}, t, 12.0)
        if i % 2 == 0:
            clock.set(t)
            obs.evaluate_rules(t)
    _, body = prom.get("/api/v1/alerts")
    (alert,) = [a for a in body["data"]["alerts"] if a["labels"]["alertname"] == "KubeQuotaExceeded"]
    assert alert["state"] == "firing"
    assert alert["labels"]["resource"] == "pods" and "type" not in alert["labels"]
    assert alert["value"] == "1.2e+00"
    assert alert["annotations"]["description"] == "Namespace hotel-reservation is using 120% of its pods quota."


def test_recording_rule_feeds_overcommit_alert(obs: Observability, clock: VirtualClock) -> None:
    for node, cpu in (("worker-1", 2.0), ("worker-2", 2.0)):
        obs.tsdb.append("kube_node_status_allocatable", {"job": "kube-state-metrics", "node": node, "resource": "cpu",
                                                         "unit": "core"}, T0, cpu)
    for i in range(3):
        labels = {"job": "kube-state-metrics", "namespace": "ns", "pod": f"p{i}", "container": "c", "resource": "cpu",
                  "unit": "core", "node": "worker-1"}
        obs.tsdb.append("kube_pod_container_resource_requests", labels, T0, 1.0)
        obs.tsdb.append("kube_pod_status_phase", {"job": "kube-state-metrics", "namespace": "ns", "pod": f"p{i}",
                                                  "phase": "Running"}, T0, 1.0)
    obs.evaluate_rules(T0)
    obs.evaluate_rules(T0 + 30)
    rec = obs.rules.groups
    got = [r for g in rec for r in g.rules if r.name == "namespace_cpu:kube_pod_container_resource_requests:sum"]
    assert got and got[0].health == "ok"
    overcommit = [a for a in obs.rules.active_alerts() if a.labels["alertname"] == "KubeCPUOvercommit"]
    # 3 cores requested, 4 allocatable minus the largest node (2) leaves 2: overcommitted by 1
    assert len(overcommit) == 1 and overcommit[0].value == pytest.approx(1.0)


def test_templates() -> None:
    labels = {"namespace": "ns", "pod": "p"}
    assert expand_template("{{ $labels.namespace }}/{{ $labels.pod }}", labels, 1.0) == "ns/p"
    assert expand_template("{{ $value | humanizePercentage }}", labels, 0.256) == "25.6%"
    assert expand_template('{{ printf "%.2f" $value }}%', labels, 3.14159) == "3.14%"
    assert expand_template('{{ "43200" | humanizeDuration }}', labels, 0.0) == "12h 0m 0s"
    assert expand_template("{{ $value | humanize }} bytes", labels, 2_500_000.0) == "2.5M bytes"
    assert expand_template("{{ $value }} pods", labels, 3.0) == "3 pods"


def test_bad_rule_file_names_file_and_rule(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("groups:\n- name: g\n  rules:\n  - alert: Broken\n    expr: sum(\n")
    with pytest.raises(RuleFileError) as err:
        RuleManager(TSDB(), rule_sets=(), extra_files=(bad,))
    assert "bad.yaml" in str(err.value) and "Broken" in str(err.value) and "expr" in str(err.value)
