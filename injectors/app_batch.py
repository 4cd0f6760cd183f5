"""Faults in the application's batch workloads: a CronJob whose pods never complete."""

from __future__ import annotations

import copy
from typing import Any

from pydantic import Field

from clusters.handle import ClusterHandle
from clusters.kube import Kube, NotFound, Obj
from core.errors import InjectionError
from injectors.fault import Creation, Params
from injectors.injector import Injection, faults
from injectors.jobs import POLL_SECONDS

# SREGym's CronJobSidecarBlocksCompletionMitigationOracle: at most this many active Jobs (a
# schedule boundary may overlap one run with the next), and a fresh Job from the current template
# must succeed within this long.
MAX_ACTIVE_JOBS = 2
PROOF_TIMEOUT_S = 90.0


class CronJobSidecarParams(Params):
    cronjob: str = "audit-log-archiver"
    primary: str = "archiver"  # the container that does the run's work and exits
    sidecar: str = "fluent-bit-sidecar"  # the log shipper beside it, a daemon that never exits
    port: int = Field(24224, gt=0, lt=65536)  # fluent-bit's forward port
    schedule: str = "* * * * *"
    image: str = "busybox:1.36"
    min_jobs: int = Field(2, ge=1)  # inject returns once this many Jobs of the CronJob are active
    accumulate_timeout_s: float = Field(240.0, gt=0)


@faults.register("cronjob-sidecar-blocks-completion")
class CronJobSidecarBlocksCompletion(Creation):
    """A CronJob (every minute) whose pod runs the job's container beside a log-shipper sidecar
    declared as a regular container (SREGym's cronjob_sidecar_blocks_completion): the job's
    container exits 0, the sidecar listens on its port forever, so the pod stays Running, the Job
    stays active at 0/1 completions, and every schedule adds another; the history limits only
    prune finished Jobs. Fixed, as SREGym's oracle requires, only by the native sidecar pattern
    (the sidecar moved to initContainers with restartPolicy Always: the kubelet stops it once the
    job's container exits), on the original schedule, not suspended, with no active deadline,
    the old template's active Jobs cleaned up, and a fresh Job from the current template
    completing. Deleting the CronJob, removing the sidecar or time-bombing the Job does not count."""

    Params = CronJobSidecarParams

    def _pod_spec(self, native: bool) -> Obj:
        primary = {
            "name": self.p.primary, "image": self.p.image,
            "command": ["sh", "-c", "echo archiver: starting audit log archive\n"
                                    "echo archiver: bundling /var/log/audit\n"
                                    "sleep 1\n"
                                    "echo archiver: upload complete\n"],
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "50m", "memory": "32Mi"}},
        }
        # A log forwarder's shape: a daemon bound to the forward port, not a visible sleep loop.
        sidecar = {
            "name": self.p.sidecar, "image": self.p.image,
            "command": ["sh", "-c", f"echo fluent-bit: binding to forward port {self.p.port}\n"
                                    "echo fluent-bit: ready to receive log streams\n"
                                    f"exec nc -lk -p {self.p.port} -e cat\n"],
            "ports": [{"name": "forward", "containerPort": self.p.port, "protocol": "TCP"}],
            "startupProbe": {"tcpSocket": {"port": self.p.port}, "periodSeconds": 1, "failureThreshold": 30},
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "50m", "memory": "32Mi"}},
        }
        if native:
            return {"restartPolicy": "Never", "initContainers": [{**sidecar, "restartPolicy": "Always"}],
                    "containers": [primary]}
        return {"restartPolicy": "Never", "containers": [primary, sidecar]}

    def cronjob_body(self, native: bool = False) -> Obj:
        name = self.p.cronjob
        return {
            "metadata": {"name": name, "labels": {"app.kubernetes.io/name": name, "app.kubernetes.io/component": "audit",
                                                  "app.kubernetes.io/part-of": "compliance"}},
            "spec": {
                "schedule": self.p.schedule, "concurrencyPolicy": "Allow",
                "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
                "jobTemplate": {"spec": {"backoffLimit": 0, "template": {
                    "metadata": {"labels": {"app.kubernetes.io/name": name}},
                    "spec": self._pod_spec(native)}}},
            },
        }

    def objects(self, kube: Kube, namespace: str) -> list[tuple[str, str, Obj]]:
        return [("CronJob", namespace, self.cronjob_body())]

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        """Returns once `min_jobs` Jobs of the CronJob are active (SREGym waits for two)."""
        kube = Kube.of(cluster)
        if kube.find("CronJob", namespace, self.p.cronjob) is not None:
            raise InjectionError(f"{self.name}: a CronJob {self.p.cronjob} already exists in {namespace}")
        injection = super().inject(cluster, namespace)
        waited = 0.0
        while len([j for j in self._jobs(kube, namespace) if (j.get("status") or {}).get("active")]) < self.p.min_jobs:
            if waited >= self.p.accumulate_timeout_s:
                raise InjectionError(f"{self.name}: fewer than {self.p.min_jobs} active Jobs of CronJob "
                                     f"{self.p.cronjob} after {self.p.accumulate_timeout_s:.0f}s")
            cluster.advance(POLL_SECONDS * 5)
            waited += POLL_SECONDS * 5
        return injection

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        """The CronJob gone, and every Job it (or the oracle's proof) left with it."""
        kube = Kube.of(cluster)
        jobs = self._jobs(kube, injection.namespace, proofs=True)
        super().recover(cluster, injection)
        for job in jobs:
            self._delete_job(kube, injection.namespace, job["metadata"]["name"])

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        kube = Kube.of(cluster)
        cj = kube.find("CronJob", injection.namespace, self.p.cronjob)
        return (cj is not None and not self.job_spec_safe(((cj.get("spec") or {}).get("jobTemplate") or {}).get("spec")))\
            or bool(self._stale(kube, injection.namespace))

    def affects(self, cluster: ClusterHandle, injection: Injection) -> bool:
        """SREGym's four checks but the application's health (the farm's oracle reads that): the
        CronJob is there, enabled on its schedule and converted to the native sidecar pattern with
        no active deadline; no active Job of the old template is left, nor more than two in all;
        and a Job made now from the CronJob's template completes within 90 s."""
        kube = Kube.of(cluster)
        ns = injection.namespace
        cj = kube.find("CronJob", ns, self.p.cronjob)
        if cj is None:
            return True
        spec = cj.get("spec") or {}
        if spec.get("suspend") or spec.get("schedule") != self.p.schedule:
            return True
        job_spec = (spec.get("jobTemplate") or {}).get("spec")
        if not self.job_spec_safe(job_spec):
            return True
        if self._stale(kube, ns):
            return True
        if len([j for j in self._jobs(kube, ns) if (j.get("status") or {}).get("active")]) > MAX_ACTIVE_JOBS:
            return True
        return not self._fresh_job_completes(cluster, kube, ns, job_spec or {})

    def job_spec_safe(self, job_spec: Any) -> bool:
        """The native sidecar pattern and no deadline: the job's container among the regular
        containers, the sidecar not, and the sidecar once among the init containers with
        restartPolicy Always."""
        if not isinstance(job_spec, dict) or (job_spec.get("activeDeadlineSeconds") or 0) > 0:
            return False
        pod = (job_spec.get("template") or {}).get("spec") or {}
        if (pod.get("activeDeadlineSeconds") or 0) > 0:
            return False
        regular = [c.get("name") for c in pod.get("containers") or []]
        native = [c for c in pod.get("initContainers") or [] if c.get("name") == self.p.sidecar]
        return (self.p.primary in regular and self.p.sidecar not in regular and len(native) == 1
                and native[0].get("restartPolicy") == "Always")

    def _jobs(self, kube: Kube, namespace: str, proofs: bool = False) -> list[Obj]:
        """The CronJob's Jobs (by owner), and with `proofs` the ones the oracle made."""
        out = []
        for job in kube.list("Job", namespace):
            meta = job.get("metadata") or {}
            owned = any(r.get("kind") == "CronJob" and r.get("name") == self.p.cronjob
                        for r in meta.get("ownerReferences") or [])
            proof = (meta.get("labels") or {}).get("app.kubernetes.io/managed-by") == self.p.cronjob
            if owned or (proofs and proof):
                out.append(job)
        return out

    def _stale(self, kube: Kube, namespace: str) -> list[str]:
        """Active Jobs of the CronJob still on a template that blocks completion."""
        return [j["metadata"]["name"] for j in self._jobs(kube, namespace)
                if (j.get("status") or {}).get("active") and not self.job_spec_safe(j.get("spec"))]

    def _fresh_job_completes(self, cluster: ClusterHandle, kube: Kube, namespace: str, job_spec: Obj) -> bool:
        """A Job made from the template now, not history: old completed Jobs prove nothing about
        the current template (SREGym's behaviour check)."""
        name = f"{self.p.cronjob}-run-{int(cluster.now())}"[:63]
        spec = copy.deepcopy(job_spec)
        # The API server adds the selector and its label to a Job's template: a copy made from a
        # Job (not a CronJob) would carry another Job's, which validation refuses.
        spec.pop("selector", None)
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        for key in [k for k in labels if k in ("controller-uid", "job-name") or k.startswith("batch.kubernetes.io/")]:
            labels.pop(key)
        kube.create("Job", namespace, {"metadata": {"name": name, "labels": {
            "app.kubernetes.io/name": self.p.cronjob, "app.kubernetes.io/managed-by": self.p.cronjob}}, "spec": spec})
        try:
            waited = 0.0
            while waited <= PROOF_TIMEOUT_S:
                status = (kube.find("Job", namespace, name) or {}).get("status") or {}
                if int(status.get("succeeded") or 0) >= 1:
                    return True
                if int(status.get("failed") or 0) >= 1:
                    return False
                cluster.advance(POLL_SECONDS * 2.5)
                waited += POLL_SECONDS * 2.5
            return False
        finally:
            self._delete_job(kube, namespace, name)

    @staticmethod
    def _delete_job(kube: Kube, namespace: str, name: str) -> None:
        # The API's default for a Job keeps its pods (orphan): the pods go with it here.
        try:
            kube.request("DELETE", kube.path("Job", namespace, name), {"propagationPolicy": "Background"})
        except NotFound:
            pass


# -- a rollout strategy that drains every replica before a new one is ready -----------------------
class RollingUpdateParams(Params):
    deployment: str = "custom-service"
    replicas: int = Field(3, ge=1)
    image: str = "python:3.9-slim"
    init_image: str = "busybox:1.36"
    ready_timeout_s: float = Field(180.0, gt=0)


def _scaled(value: Any, replicas: int, round_up: bool) -> int:
    """A rollingUpdate int-or-percent, as the Deployment controller scales it."""
    import math

    if isinstance(value, int):
        return value
    text = str(value)
    if not text.endswith("%"):
        return int(text)
    scaled = replicas * int(text[:-1]) / 100
    return math.ceil(scaled) if round_up else math.floor(scaled)


def strategy_preserves_availability(spec: Obj) -> bool:
    """SREGym's check: a RollingUpdate that keeps at least one replica (maxUnavailable below the
    replica count) and can make progress (maxUnavailable or maxSurge above zero)."""
    replicas = spec.get("replicas", 1)
    if not isinstance(replicas, int) or replicas < 1:
        return False
    strategy = spec.get("strategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return False
    rolling = strategy.get("rollingUpdate") or {}
    try:
        unavailable = _scaled(rolling.get("maxUnavailable", "25%"), replicas, round_up=False)
        surge = _scaled(rolling.get("maxSurge", "25%"), replicas, round_up=True)
    except (TypeError, ValueError):
        return False
    return 0 <= unavailable < replicas and surge >= 0 and (unavailable > 0 or surge > 0)


@faults.register("rolling-update-misconfigured")
class RollingUpdateMisconfigured(Creation):
    """SREGym's rolling_update_misconfigured: a small web Deployment (three replicas of Python's
    http.server) is rolled out healthy, then patched to a RollingUpdate strategy of maxUnavailable
    100% and maxSurge 0% with an init container that sleeps forever, and restarted: the controller
    drains every old replica at once and no new one ever initializes, so the service has no pod.
    Fixed, as SREGym's oracle requires, when the strategy keeps a replica available through a
    rollout, no init container hangs and the rollout is complete at its generation."""

    Params = RollingUpdateParams

    def _body(self) -> Obj:
        labels = {"app": self.p.deployment}
        return {"metadata": {"name": self.p.deployment, "labels": dict(labels)},
                "spec": {"replicas": self.p.replicas, "selector": {"matchLabels": dict(labels)},
                         "template": {"metadata": {"labels": dict(labels)}, "spec": {"containers": [{
                             "name": f"{self.p.deployment}-main", "image": self.p.image,
                             "command": ["python3", "-m", "http.server", "8080"],
                             "ports": [{"containerPort": 8080}]}]}}}}

    def objects(self, kube: Kube, namespace: str) -> list[tuple[str, str, Obj]]:
        return [("Deployment", namespace, self._body())]

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        kube = Kube.of(cluster)
        if kube.find("Deployment", namespace, self.p.deployment) is not None:
            raise InjectionError(f"{self.name}: a Deployment {self.p.deployment} already exists in {namespace}")
        injection = super().inject(cluster, namespace)
        waited = 0.0
        while not self._rolled_out(kube.get("Deployment", namespace, self.p.deployment)):
            if waited >= self.p.ready_timeout_s:
                raise InjectionError(f"{self.name}: {self.p.deployment} not rolled out after {waited:.0f}s")
            cluster.advance(POLL_SECONDS)
            waited += POLL_SECONDS
        init = {"name": "hang-init", "image": self.p.init_image, "imagePullPolicy": "IfNotPresent",
                "command": ["/bin/sh", "-c", "sleep infinity"]}
        # the patch, then `kubectl rollout restart` (its annotation on the template)
        kube.patch("Deployment", namespace, self.p.deployment, {"spec": {
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%", "maxSurge": "0%"}},
            "template": {"metadata": {"annotations": {
                "kubectl.kubernetes.io/restartedAt": cluster_time_rfc3339(cluster.now())}},
                "spec": {"initContainers": [init]}}}})
        cluster.advance(POLL_SECONDS)
        return injection

    @staticmethod
    def _rolled_out(obj: Obj) -> bool:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        replicas = spec.get("replicas", 1)
        return (int(status.get("observedGeneration") or 0) >= int(obj["metadata"].get("generation") or 0)
                and all(int(status.get(k) or 0) == replicas
                        for k in ("updatedReplicas", "readyReplicas", "availableReplicas"))
                and not status.get("unavailableReplicas"))

    def affects(self, cluster: ClusterHandle, injection: Injection) -> bool:
        obj = Kube.of(cluster).find("Deployment", injection.namespace, self.p.deployment)
        if obj is None:
            return True
        spec = obj.get("spec") or {}
        if not strategy_preserves_availability(spec):
            return True
        inits = ((spec.get("template") or {}).get("spec") or {}).get("initContainers") or []
        if any(c.get("name") == "hang-init" or "sleep infinity" in " ".join(map(str, c.get("command") or []))
               for c in inits):
            return True
        return not self._rolled_out(obj)

    def restart_targets(self, injection: Injection) -> list[str]:
        return [f"Deployment/{injection.namespace}/{self.p.deployment}"]


def cluster_time_rfc3339(t: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
