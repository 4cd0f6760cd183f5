"""Pod Security Admission: a namespace's enforce label refuses, at creation, the pods that violate
its level, with the plugin's message, whoever creates them (a ReplicaSet reports FailedCreate);
running pods stay; a compliant template, or a relaxed level, lets the pods back."""

from __future__ import annotations

from core.pod_security import refusal, violations
from kubesim.api.podsecurity import PodSecurityAdmission
from kubesim.cluster import SimCluster
from kubesim.store import Obj
from farm.pytest_plugin import SimClusters

NS = "demo"


def deployment(name: str, **pod_spec: object) -> dict:
    labels = {"app": name}
    spec = {"containers": [{"name": "web", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}], **pod_spec}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": spec}}}


def pods(cluster: SimCluster, app: str) -> list[Obj]:
    return [p for p in cluster.store.list("pods", NS) if p["metadata"]["labels"].get("app") == app]


def label(cluster: SimCluster, level: str | None) -> None:
    def edit(o: Obj) -> None:
        labels = o["metadata"].setdefault("labels", {})
        labels.pop("pod-security.kubernetes.io/enforce", None)
        if level:
            labels["pod-security.kubernetes.io/enforce"] = level
    cluster.store.mutate("namespaces", "", NS, edit)


def test_restricted_refuses_new_pods_that_violate_it_and_leaves_running_ones(sim_clusters: SimClusters) -> None:
    cluster = sim_clusters.in_process(seed=4)
    PodSecurityAdmission(cluster.store).install()  # the API server installs it; the bare model has none
    cluster.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, deployment("web")])
    cluster.advance(20)
    (running,) = pods(cluster, "web")
    label(cluster, "restricted")
    cluster.advance(20)
    assert [p["metadata"]["uid"] for p in pods(cluster, "web")] == [running["metadata"]["uid"]]  # admission only
    cluster.store.delete("pods", NS, running["metadata"]["name"])
    cluster.advance(30)
    assert [p for p in pods(cluster, "web") if not p["metadata"].get("deletionTimestamp")] == []
    failed = [e for e in cluster.store.list("events", NS) if e["reason"] == "FailedCreate"]
    assert failed and failed[-1]["involvedObject"]["kind"] == "ReplicaSet"
    message = failed[-1]["message"]
    assert 'is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "web" ' \
           "must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container \"web\" must " \
           'set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "web" must set ' \
           'securityContext.runAsNonRoot=true), seccompProfile (pod or container "web" must set ' \
           'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")' in message
    # Relaxed to baseline, which the template meets, the ReplicaSet's next attempt succeeds.
    label(cluster, "baseline")
    cluster.advance(60)
    assert [p["status"]["phase"] for p in pods(cluster, "web")] == ["Running"]


def test_the_levels_check_what_the_standard_says() -> None:
    compliant = {"securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
                 "initContainers": [{"name": "init", "securityContext": {"allowPrivilegeEscalation": False,
                                                                         "capabilities": {"drop": ["ALL"]}}}],
                 "containers": [{"name": "app", "securityContext": {"allowPrivilegeEscalation": False,
                                                                    "capabilities": {"drop": ["ALL"]}}}]}
    assert violations(compliant, "restricted") == []
    host = {"hostNetwork": True, "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
            "containers": [{"name": "agent", "ports": [{"containerPort": 9100, "hostPort": 9100}],
                            "securityContext": {"privileged": True, "capabilities": {"add": ["NET_ADMIN", "CHOWN"]}}}]}
    assert violations(host, "baseline") == [
        'non-default capabilities (container "agent" must not include "NET_ADMIN" in securityContext.capabilities.add)',
        "host namespaces (hostNetwork=true)", 'hostPath volumes (volume "root")',
        'hostPort (container "agent" uses hostPort 9100)',
        'privileged (container "agent" must not set securityContext.privileged=true)']
    assert violations(host, "privileged") == []
    assert refusal("p", host, {"pod-security.kubernetes.io/enforce": "baseline",
                               "pod-security.kubernetes.io/enforce-version": "v1.30"}).startswith(
        'pods "p" is forbidden: violates PodSecurity "baseline:v1.30": non-default capabilities')
    assert refusal("p", host, None) is None
