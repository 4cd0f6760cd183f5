"""The horizontal pod autoscaler: with CPU requests it reads utilization from the resource metrics
API and reports it; a container without a CPU request makes utilization uncomputable
(FailedGetResourceMetric, ScalingActive False, `<unknown>` target) and it never scales."""

from __future__ import annotations

import json

from kubesim.cluster import SimCluster
from kubesim.controllers.autoscaler import CONDITIONS
from kubesim.store import Obj
from farm.pytest_plugin import SimClusters

NS = "demo"


def deployment(name: str, resources: dict) -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                "containers": [{"name": "web", "image": "nginx:1.25", "ports": [{"containerPort": 80}],
                                "resources": resources}]}}}}


def hpa(name: str) -> dict:
    return {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name, "namespace": NS},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                     "minReplicas": 1, "maxReplicas": 5, "targetCPUUtilizationPercentage": 60}}


def conditions(cluster: SimCluster, name: str) -> dict[str, Obj]:
    h = cluster.store.get("horizontalpodautoscalers.autoscaling", NS, name)
    return {c["type"]: c for c in json.loads(h["metadata"]["annotations"][CONDITIONS])}


def test_cpu_utilization_needs_a_cpu_request(sim_clusters: SimClusters) -> None:
    cluster = sim_clusters.in_process(seed=4)
    cluster.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
                   deployment("sized", {"requests": {"cpu": "100m"}}), hpa("sized"),
                   deployment("unsized", {"requests": {"memory": "64Mi"}}), hpa("unsized")])
    cluster.advance(180)
    unsized = conditions(cluster, "unsized")["ScalingActive"]
    (pod,) = [p for p in cluster.store.list("pods", NS) if p["metadata"]["labels"]["app"] == "unsized"]
    detail = f"failed to get cpu utilization: missing request for cpu in container web of Pod {pod['metadata']['name']}"
    assert (unsized["status"], unsized["reason"]) == ("False", "FailedGetResourceMetric")
    assert unsized["message"] == f"the HPA was unable to compute the replica count: {detail}"
    events = {(e["reason"], e["message"]) for e in cluster.store.list("events", NS)
              if e["involvedObject"]["name"] == "unsized" and e["involvedObject"]["kind"] == "HorizontalPodAutoscaler"}
    assert ("FailedGetResourceMetric", detail) in events
    assert "currentCPUUtilizationPercentage" not in cluster.store.get("horizontalpodautoscalers.autoscaling", NS, "unsized")["status"]
    sized = conditions(cluster, "sized")["ScalingActive"]
    assert (sized["status"], sized["reason"]) == ("True", "ValidMetricFound")
    status = cluster.store.get("horizontalpodautoscalers.autoscaling", NS, "sized")["status"]
    assert status["currentReplicas"] == 1 and 0 <= status["currentCPUUtilizationPercentage"] < 60
