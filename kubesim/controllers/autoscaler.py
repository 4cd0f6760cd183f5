"""The horizontal pod autoscaler controller (autoscaling/v1, CPU utilization), as
kube-controller-manager runs it every 15 s: it reads the target's scale, the CPU usage of the
target's running pods from the resource metrics API (metrics-server's view of cAdvisor), divides by
the pods' CPU requests, and scales by `ceil(replicas * utilization / target)` outside a 10%
tolerance, within min/max, scaling down only after a 5-minute stabilization window. A pod whose
container has no CPU request (neither set nor defaulted from a limit) makes utilization
uncomputable: the controller records FailedGetResourceMetric and FailedComputeMetricsReplicas
with the real wording, the HPA's ScalingActive condition turns False and its target shows
`<unknown>`, and it never scales."""

from __future__ import annotations

import json
import math
from typing import Any, Protocol

from kubesim.controllers.common import is_active
from kubesim.quantity import parse_quantity
from kubesim.store import Obj, StoreError, match_labels
from kubesim.view import ControlPlane

SYNC = 15.0  # --horizontal-pod-autoscaler-sync-period
TOLERANCE = 0.1
DOWNSCALE_WINDOW = 300.0
CONDITIONS = "autoscaling.alpha.kubernetes.io/conditions"  # where autoscaling/v1 keeps v2's conditions
MANAGER = "kube-controller-manager"
_KINDS = {"Deployment": "deployments.apps", "StatefulSet": "statefulsets.apps", "ReplicaSet": "replicasets.apps"}


class MetricError(Exception):
    pass


class ResourceMetricsAPI(Protocol):
    """The resource metrics API (metrics.k8s.io) as the HPA reads it; the API floor serves it
    (kubesim.api.metrics.ResourceMetrics), a client's view of it is all the controller needs."""

    def pods(self, namespace: str | None, name: str | None, label_filter: Any) -> list[Obj]: ...


class HorizontalPodAutoscalerController:
    def __init__(self, cp: ControlPlane, metrics: ResourceMetricsAPI) -> None:
        self.store, self.clock, self.events, self.wake_at = cp.store, cp.clock, cp.events, cp.wake_at
        self.metrics = metrics
        self.next_sync: dict[str, float] = {}
        self.recommendations: dict[str, list[tuple[float, int]]] = {}

    def __call__(self, now: float) -> None:
        for hpa in self.store.scan("horizontalpodautoscalers.autoscaling"):
            uid = hpa["metadata"]["uid"]
            if now < self.next_sync.get(uid, -1.0):
                continue
            self.next_sync[uid] = now + SYNC
            self.wake_at(now + SYNC)
            self._sync(hpa, now)

    def _sync(self, hpa: Obj, now: float) -> None:
        ns = hpa["metadata"]["namespace"]
        spec = hpa.get("spec") or {}
        ref = spec.get("scaleTargetRef") or {}
        key = _KINDS.get(ref.get("kind", ""))
        target = self.store.try_get(key, ns, ref.get("name", "")) if key else None
        stamp = self.clock.rfc3339(now)
        if target is None:
            message = f'{(ref.get("kind") or "").lower()}s/scale.{"apps"} "{ref.get("name")}" not found'
            self.events.record(hpa, "Warning", "FailedGetScale", message, "horizontal-pod-autoscaler")
            self._status(hpa, None, None, [("AbleToScale", "False", "FailedGetScale",
                                            f"the HPA controller was unable to get the target's current scale: {message}")],
                         stamp)
            return
        replicas = int((target.get("spec") or {}).get("replicas", 1))
        able = ("AbleToScale", "True", "SucceededGetScale", "the HPA controller was able to get the target's current scale")
        if replicas == 0:  # scaled to zero by hand: autoscaling is off until someone scales it up
            self._status(hpa, replicas, None, [able, ("ScalingActive", "False", "ScalingDisabled",
                                                     "scaling is disabled since the replica count of the target is zero")],
                         stamp)
            return
        try:
            utilization = self._utilization(ns, target)
        except MetricError as exc:
            detail = f"failed to get cpu utilization: {exc}"
            self.events.record(hpa, "Warning", "FailedGetResourceMetric", detail, "horizontal-pod-autoscaler")
            self.events.record(hpa, "Warning", "FailedComputeMetricsReplicas",
                               f"invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric "
                               f"value: {detail}", "horizontal-pod-autoscaler")
            self._status(hpa, replicas, None, [able, ("ScalingActive", "False", "FailedGetResourceMetric",
                                                     f"the HPA was unable to compute the replica count: {detail}")], stamp)
            return
        goal = int(spec.get("targetCPUUtilizationPercentage") or 80)
        ratio = utilization / goal
        desired = replicas if abs(ratio - 1.0) <= TOLERANCE else math.ceil(replicas * ratio)
        uid = hpa["metadata"]["uid"]
        window = [(t, r) for t, r in self.recommendations.get(uid, []) if t > now - DOWNSCALE_WINDOW] + [(now, desired)]
        self.recommendations[uid] = window
        if desired < replicas:  # scale down to the highest recommendation of the window only
            desired = max(r for _, r in window)
        low, high = int(spec.get("minReplicas") or 1), int(spec.get("maxReplicas") or 1)
        limited = desired > high or desired < low
        desired = min(max(desired, low), high)
        conditions = [able, ("ScalingActive", "True", "ValidMetricFound",
                             "the HPA was able to successfully calculate a replica count from cpu resource utilization "
                             "(percentage of request)"),
                      ("ScalingLimited", "True" if limited else "False", "TooManyReplicas" if limited and desired == high
                       else "TooFewReplicas" if limited else "DesiredWithinRange",
                       "the desired replica count is more than the maximum replica count" if limited and desired == high
                       else "the desired replica count is less than the minimum replica count" if limited
                       else "the desired count is within the acceptable range")]
        if desired != replicas:
            def scale(o: Obj) -> None:
                o["spec"]["replicas"] = desired
            try:
                self.store.mutate(key, ns, target["metadata"]["name"], scale, manager=MANAGER)  # type: ignore[arg-type]
            except StoreError:
                return
            direction = "above" if desired > replicas else "below"
            self.events.record(hpa, "Normal", "SuccessfulRescale",
                               f"New size: {desired}; reason: cpu resource utilization (percentage of request) {direction} "
                               "target", "horizontal-pod-autoscaler")
            hpa_status_time = stamp
        else:
            hpa_status_time = None
        self._status(hpa, desired, int(round(utilization)), conditions, stamp, rescaled=hpa_status_time)

    def _utilization(self, ns: str, target: Obj) -> float:
        """Percent of the pods' CPU requests they use, over the running pods with metrics."""
        selector = ((target.get("spec") or {}).get("selector") or {})
        pods = [p for p in self.store.scan("pods", ns) if is_active(p)
                and match_labels(selector, p["metadata"].get("labels"))]
        usage = {m["metadata"]["name"]: m for m in self.metrics.pods(ns, None, lambda p: True)}
        requested = used = 0.0
        for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
            for c in (pod.get("spec") or {}).get("containers") or []:
                resources = c.get("resources") or {}
                request = (resources.get("requests") or {}).get("cpu", (resources.get("limits") or {}).get("cpu"))
                if request is None:
                    raise MetricError(f"missing request for cpu in container {c.get('name')} of Pod "
                                      f"{pod['metadata']['name']}")
            metric = usage.get(pod["metadata"]["name"])
            if (pod.get("status") or {}).get("phase") != "Running" or metric is None:
                continue
            for c in (pod.get("spec") or {}).get("containers") or []:
                resources = c.get("resources") or {}
                requested += parse_quantity((resources.get("requests") or {}).get("cpu", (resources.get("limits") or {}).get("cpu")))
            used += sum(parse_quantity(m["usage"]["cpu"]) for m in metric["containers"])
        if requested <= 0:
            raise MetricError("unable to get metrics for resource cpu: no metrics returned from resource metrics API")
        return 100.0 * used / requested

    def _status(self, hpa: Obj, replicas: int | None, utilization: int | None,
                conditions: list[tuple[str, str, str, str]], stamp: str, rescaled: str | None = None) -> None:
        old = json.loads((hpa["metadata"].get("annotations") or {}).get(CONDITIONS, "[]") or "[]")
        since = {c.get("type"): c for c in old}
        text = json.dumps([{"type": t, "status": s, "lastTransitionTime":
                            since[t]["lastTransitionTime"] if t in since and since[t].get("status") == s else stamp,
                            "reason": r, "message": m} for t, s, r, m in conditions])

        def put(o: Obj) -> None:
            o["metadata"].setdefault("annotations", {})[CONDITIONS] = text

        def put_status(o: Obj) -> None:
            st: dict[str, Any] = dict(o.get("status") or {})
            if replicas is not None:
                st["currentReplicas"] = replicas
                st["desiredReplicas"] = replicas
            if utilization is None:
                st.pop("currentCPUUtilizationPercentage", None)
            else:
                st["currentCPUUtilizationPercentage"] = utilization
            if rescaled:
                st["lastScaleTime"] = rescaled
            o["status"] = st
        ns, name = hpa["metadata"]["namespace"], hpa["metadata"]["name"]
        wanted = {"status": dict(hpa.get("status") or {})}
        put_status(wanted)
        try:
            if (hpa["metadata"].get("annotations") or {}).get(CONDITIONS) != text:
                self.store.mutate("horizontalpodautoscalers.autoscaling", ns, name, put, manager=MANAGER)
            if wanted["status"] != (hpa.get("status") or {}):  # an unchanged status is not written again
                self.store.mutate("horizontalpodautoscalers.autoscaling", ns, name, put_status, subresource="status",
                                  manager=MANAGER)
        except StoreError:
            return
