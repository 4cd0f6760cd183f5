"""Noise: transient, self-recovering disturbances unrelated to the root cause.

Each noise plans its events at `start` from the seeded random source (how many scales with
`intensity`, when is spread over `window_seconds`), then `tick(now)` fires the events that are
due and ends the ones whose time is up. `injectors.compose.NoiseRunner` drives the ticks from
the cluster clock; `stop` ends everything and removes every object a noise created.
"""

from __future__ import annotations

import abc
import datetime as dt
import json
import random
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clusters.handle import ClusterHandle
from clusters.kube import Kube, Obj, api_for
from core.errors import InjectionError
from injectors.fault import CHAOS_API, CHAOS_NAMESPACE, ParamsError, netem_delay, netem_share, neutral_name
from injectors.injector import Injection, Noise, noises
from injectors.objects import Ref
from injectors.workload import RESTARTED_AT


class NoiseParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    targets: list[str] = []  # unrelated workloads to disturb (default: `near`'s neighbours, or any but `avoid`)
    avoid: list[str] = []  # workloads the noise must leave alone (the fault's components)
    window_seconds: float = Field(600.0, gt=0)  # events are spread over this much cluster time
    start_after_seconds: float = Field(5.0, ge=0)
    # The component whose call-graph neighbours the noise disturbs when no targets are given (the
    # trial fills in the fault's), and the application whose call graph says who they are.
    near: str = ""
    app: str = ""
    # The neighbour most of a trial's confounders gather on (NoiseRunner picks one per trial):
    # ambient trouble piles up on one service (a rollout that starts rough, restarts, probe
    # failures, alerts, errors), and that service is the red herring an SRE checks first.
    focus: str = ""


class Event(BaseModel):
    at: float  # cluster time the event starts
    until: float  # cluster time it ends (== at for instant events)
    target: str = ""
    data: dict[str, Any] = {}
    fired: bool = False
    ended: bool = False


class ScheduledNoise(Noise):
    """A noise made of planned events; subclasses say how many, and what one event does."""

    Params: type[NoiseParams] = NoiseParams
    base_events: int = 4  # at intensity 1
    event_seconds: tuple[float, float] = (0.0, 0.0)  # min/max duration of one event
    # Where in the window the events fall (fractions of it): replacements in its first half (a
    # change that recent is what a paged engineer suspects first) and the trouble after them,
    # so restarts pile up on the pods a rollout just brought up.
    phase: tuple[float, float] = (0.0, 1.0)

    p: Any  # the validated params

    def __init__(self, **params: Any) -> None:
        try:
            self.p = self.Params(**params)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise ParamsError(f"noise {type(self).__name__}", ".".join(map(str, err["loc"])), err["msg"]) from None

    @property
    def name(self) -> str:
        for n in noises.names():
            if noises.factory(n) is type(self):
                return n
        return type(self).__name__

    # -- planning ----------------------------------------------------------------------------
    def candidates(self, kube: Kube, namespace: str) -> list[str]:
        if self.p.targets:
            return list(self.p.targets)
        names = sorted(d["metadata"]["name"] for kind in ("Deployment", "StatefulSet") for d in kube.list(kind, namespace))
        avoid = set(self.p.avoid) | ({self.p.near} if self.p.near else set())
        if self.p.near and self.p.app:
            close = [n for n in neighbours(self.p.app, self.p.near) if n in names and n not in avoid]
            if close:
                return close
        return [n for n in names if n not in avoid and not _is_load_generator(n)] or names

    def start(self, cluster: ClusterHandle, namespace: str, rng: random.Random, intensity: float) -> Injection:
        kube = Kube.of(cluster)
        now = cluster.now()
        targets = self.candidates(kube, namespace)
        count = max(1, round(self.base_events * intensity))
        events = []
        for _ in range(count):
            at = now + self.p.start_after_seconds + self.p.window_seconds * rng.uniform(*self.phase)
            lo, hi = self.event_seconds
            events.append(Event(at=at, until=at + rng.uniform(lo, hi), target=self.pick(rng, targets, intensity),
                                data=self.plan(rng, intensity)))
        events.sort(key=lambda e: e.at)
        return Injection(injector=f"noise:{self.name}", params=self.p.model_dump(), namespace=namespace,
                         saved={"events": [e.model_dump() for e in events], "created": []}, injected_at=now)

    def pick(self, rng: random.Random, targets: list[str], intensity: float) -> str:
        """One event's target: the focus, more often the higher the intensity, else any."""
        if self.p.focus in targets and rng.random() < focus_share(intensity):
            return self.p.focus
        return rng.choice(targets)

    def plan(self, rng: random.Random, intensity: float) -> dict[str, Any]:
        """Per-event parameters drawn from the seeded source (severity and such)."""
        return {}

    def boundaries(self, injection: Injection) -> list[float]:
        out = []
        for e in injection.saved["events"]:
            if not e["fired"]:
                out.append(e["at"])
            if not e["ended"]:
                out.append(e["until"])
        return out

    # -- running -----------------------------------------------------------------------------
    def tick(self, cluster: ClusterHandle, injection: Injection, now: float) -> None:
        for raw in injection.saved["events"]:
            event = Event(**raw)
            if not event.fired and event.at <= now:
                self.fire(cluster, injection, event)
                raw["fired"] = True
            if raw["fired"] and not event.ended and event.until <= now:
                self.end(cluster, injection, event)
                raw["ended"] = True

    @abc.abstractmethod
    def fire(self, cluster: ClusterHandle, injection: Injection, event: Event) -> None:
        """Begin one disturbance."""

    def end(self, cluster: ClusterHandle, injection: Injection, event: Event) -> None:
        """End one disturbance (instant events have nothing to end)."""

    def stop(self, cluster: ClusterHandle, injection: Injection) -> None:
        for raw in injection.saved["events"]:
            if raw["fired"] and not raw["ended"]:
                self.end(cluster, injection, Event(**raw))
                raw["ended"] = True
            raw["fired"] = raw["ended"] = True  # events not yet due never fire
        kube = Kube.of(cluster)
        for text in reversed(injection.saved["created"]):
            ref = Ref.parse(text)
            if ref.kind.endswith("Chaos"):
                _delete_chaos(cluster, ref)
            else:
                kube.delete(ref.kind, ref.namespace, ref.name)
        injection.saved["created"] = []


# -- helpers ----------------------------------------------------------------------------------
def neighbours(app: str, component: str) -> list[str]:
    """Who `component` talks to in the application's call graph: its callees, its callers, then
    its callers' other callees (what an SRE looking at the failure sees next to it). Empty for a
    component that is not a workload of the call graph (a node, a config map)."""
    from injectors.topology import topology

    try:
        top = topology(app)
    except (KeyError, FileNotFoundError, ValueError):
        return []
    if component not in top.workloads:
        return []
    role = top.role(component)
    out = role.callee_names() + role.caller_names
    for caller in role.caller_names:
        out += top.role(caller).callee_names()
    return [n for n in dict.fromkeys(out) if n != component and top.role(n).kind != "other"]


def focus_share(intensity: float) -> float:
    """The share of a confounder's events that land on the trial's focus."""
    return min(1.0, 0.4 + 0.6 * intensity)


def _is_load_generator(name: str) -> bool:
    return any(word in name for word in ("wrk", "locust", "load-generator", "loadgenerator", "ycsb"))


def _labels_of(kube: Kube, namespace: str, workload: str) -> dict[str, str]:
    _, obj = kube.workload(namespace, workload)
    return dict(obj["spec"]["selector"].get("matchLabels", {}))


def _create_chaos(cluster: ClusterHandle, injection: Injection, kind: str, name: str, spec: Obj) -> None:
    from kubernetes import client

    kube = Kube.of(cluster)
    kube.ensure_namespace(CHAOS_NAMESPACE)
    body = {"apiVersion": "/".join(CHAOS_API), "kind": kind,
            "metadata": {"name": name, "namespace": CHAOS_NAMESPACE}, "spec": spec}
    try:
        client.CustomObjectsApi(kube.api).create_namespaced_custom_object(
            *CHAOS_API, CHAOS_NAMESPACE, kind.lower(), body)
    except client.ApiException as exc:
        raise InjectionError(f"noise {kind} {name}: {exc.status} {exc.reason}") from exc
    injection.saved["created"].append(str(Ref(kind, CHAOS_NAMESPACE, name)))


def _delete_chaos(cluster: ClusterHandle, ref: Ref) -> None:
    from kubernetes import client

    try:
        client.CustomObjectsApi(api_for(cluster)).delete_namespaced_custom_object(
            *CHAOS_API, ref.namespace, ref.kind.lower(), ref.name)
    except client.ApiException as exc:
        if exc.status != 404:
            raise InjectionError(f"removing noise {ref}: {exc.status} {exc.reason}") from exc


class ChaosBurst(ScheduledNoise):
    """A short Chaos Mesh experiment on one unrelated workload (with its own duration, so even
    a farm that dies mid-trial leaves nothing running)."""

    kind = ""

    def chaos_spec(self, event: Event) -> Obj:
        return {}

    def fire(self, cluster: ClusterHandle, injection: Injection, event: Event) -> None:
        kube = Kube.of(cluster)
        selector = {"namespaces": [injection.namespace],
                    "labelSelectors": _labels_of(kube, injection.namespace, event.target)}
        seconds = max(1, int(event.until - event.at))
        spec = {"mode": "one", "selector": selector, "duration": f"{seconds}s", **self.chaos_spec(event)}
        name = neutral_name(self.name, injection.namespace, str(event.at), prefix="exp-")
        _create_chaos(cluster, injection, self.kind, name, spec)
        event.data["chaos"] = name

    def end(self, cluster: ClusterHandle, injection: Injection, event: Event) -> None:
        name = neutral_name(self.name, injection.namespace, str(event.at), prefix="exp-")
        ref = Ref(self.kind, CHAOS_NAMESPACE, name)
        _delete_chaos(cluster, ref)
        if str(ref) in injection.saved["created"]:
            injection.saved["created"].remove(str(ref))


# -- the noises -------------------------------------------------------------------------------


@noises.register("pod-kill")
class PodKillNoise(ScheduledNoise):
    """Deletes one pod of an unrelated workload; its controller brings a new one up."""

    base_events = 3
    phase = (0.15, 0.35)

    def fire(self, cluster: ClusterHandle, injection: Injection, event: Event) -> None:
        kube = Kube.of(cluster)
        _, obj = kube.workload(injection.namespace, event.target)
        pods = sorted(p["metadata"]["name"] for p in kube.pods_of(injection.namespace, obj))
        if pods:
            kube.delete("Pod", injection.namespace, pods[int(event.data["pick"] * len(pods)) % len(pods)])

    def plan(self, rng: random.Random, intensity: float) -> dict[str, Any]:
        return {"pick": rng.random()}


@noises.register("packet-loss-burst")
class PacketLossBurst(ChaosBurst):
    """A few seconds of packet loss on one unrelated workload."""

    kind = "NetworkChaos"
    event_seconds = (10.0, 30.0)

    def plan(self, rng: random.Random, intensity: float) -> dict[str, Any]:
        return {"loss": int(5 + 25 * intensity * rng.random())}

    def chaos_spec(self, event: Event) -> Obj:
        return {"action": "loss", "direction": "to", **netem_share("loss", event.data["loss"])}


@noises.register("latency-burst")
class LatencyBurst(ChaosBurst):
    """A few seconds of added network latency on one unrelated workload."""

    kind = "NetworkChaos"
    event_seconds = (10.0, 40.0)

    def plan(self, rng: random.Random, intensity: float) -> dict[str, Any]:
        return {"ms": int(20 + 180 * intensity * rng.random())}

    def chaos_spec(self, event: Event) -> Obj:
        return {"action": "delay", "direction": "to", **netem_delay(f"{event.data['ms']}ms", "5ms")}


@noises.register("cpu-spike")
class CpuSpike(ChaosBurst):
    """A short CPU burner inside one unrelated pod."""

    kind = "StressChaos"
    event_seconds = (20.0, 60.0)

    def plan(self, rng: random.Random, intensity: float) -> dict[str, Any]:
        return {"load": int(30 + 60 * intensity * rng.random())}

    def chaos_spec(self, event: Event) -> Obj:
        return {"stressors": {"cpu": {"workers": 1, "load": event.data["load"]}}}


class FlappingParams(NoiseParams):
    cycles: int = Field(4, ge=1)
    on_seconds: float = Field(90.0, gt=0)
    off_seconds: float = Field(90.0, gt=0)


@noises.register("flapping-alert")
class FlappingAlert(ChaosBurst):
    """On/off CPU saturation of one unrelated pod: its CPU-throttling alert fires and clears,
    again and again, for reasons that have nothing to do with the incident."""

    Params = FlappingParams
    kind = "StressChaos"

    def start(self, cluster: ClusterHandle, namespace: str, rng: random.Random, intensity: float) -> Injection:
        kube = Kube.of(cluster)
        now = cluster.now()
        target = rng.choice(self.candidates(kube, namespace))
        at = now + self.p.start_after_seconds + rng.uniform(0, self.p.off_seconds)
        events = []
        for _ in range(max(1, round(self.p.cycles * max(intensity, 0.25)))):
            events.append(Event(at=at, until=at + self.p.on_seconds, target=target, data={"load": 100}))
            at += self.p.on_seconds + self.p.off_seconds
        return Injection(injector=f"noise:{self.name}", params=self.p.model_dump(), namespace=namespace,
                         saved={"events": [e.model_dump() for e in events], "created": []}, injected_at=now)

    def chaos_spec(self, event: Event) -> Obj:
        return {"stressors": {"cpu": {"workers": 2, "load": 100}}}


class LogParams(NoiseParams):
    lines: list[str] = [
        "level=warn msg=\"slow consul health check\" took=1.2s",
        "level=warn msg=\"grpc: addrConn.createTransport failed, retrying\" attempt=1",
        "WARN: memcached connection pool at 80% of max idle connections",
        "level=warn msg=\"jaeger reporter queue full, dropping span\"",
        "WARN deprecated config key 'MaxIdleConns' ignored",
    ]


@noises.register("benign-warning-logs")
class BenignWarningLogs(ScheduledNoise):
    """Warning lines of the kind every healthy service prints now and then, pushed to the log
    store under an unrelated pod's labels."""

    Params = LogParams
    base_events = 12

    def plan(self, rng: random.Random, intensity: float) -> dict[str, Any]:
        return {"line": rng.choice(self.p.lines), "repeat": 1 + int(4 * intensity * rng.random())}

    def fire(self, cluster: ClusterHandle, injection: Injection, event: Event) -> None:
        kube = Kube.of(cluster)
        _, obj = kube.workload(injection.namespace, event.target)
        pods = kube.pods_of(injection.namespace, obj)
        if not pods:
            return
        pod = pods[0]
        container = pod["spec"]["containers"][0]["name"]
        stream = {"namespace": injection.namespace, "pod": pod["metadata"]["name"], "container": container,
                  "app": event.target, "job": f"{injection.namespace}/{event.target}", "stream": "stderr",
                  "node_name": pod["spec"].get("nodeName", "")}
        t_ns = int(cluster.now() * 1e9)
        values = [[str(t_ns + i * 1000), event.data["line"]] for i in range(event.data["repeat"])]
        try:
            resp = httpx.post(f"{cluster.endpoints.loki}/loki/api/v1/push", timeout=10,
                              content=json.dumps({"streams": [{"stream": stream, "values": values}]}),
                              headers={"Content-Type": "application/json"})
        except httpx.HTTPError as exc:
            raise InjectionError(f"pushing noise log lines: {exc}") from exc
        if resp.status_code >= 300:
            raise InjectionError(f"pushing noise log lines: {resp.status_code} {resp.text[:200]}")


class CronParams(NoiseParams):
    job_namespace: str = "ops-batch"
    schedule: str = "*/5 * * * *"
    job_name: str = "nightly-report"


@noises.register("failing-cronjob")
class FailingCronJob(ScheduledNoise):
    """A CronJob in another namespace whose job fails every run (its own alerts and events)."""

    Params = CronParams
    base_events = 1

    def start(self, cluster: ClusterHandle, namespace: str, rng: random.Random, intensity: float) -> Injection:
        now = cluster.now()
        event = Event(at=now, until=now + self.p.window_seconds, target=self.p.job_name)
        return Injection(injector=f"noise:{self.name}", params=self.p.model_dump(), namespace=namespace,
                         saved={"events": [event.model_dump()], "created": []}, injected_at=now)

    def fire(self, cluster: ClusterHandle, injection: Injection, event: Event) -> None:
        kube = Kube.of(cluster)
        if kube.ensure_namespace(self.p.job_namespace):
            injection.saved["created"].append(str(Ref("Namespace", "", self.p.job_namespace)))
        body = {
            "metadata": {"name": self.p.job_name},
            "spec": {
                "schedule": self.p.schedule,
                "successfulJobsHistoryLimit": 1,
                "failedJobsHistoryLimit": 3,
                "jobTemplate": {"spec": {"backoffLimit": 0, "template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "report", "image": "busybox:1.36", "command": [
                        "sh", "-c", "echo 'connecting to reports-db:5432'; echo 'FATAL: could not connect'; exit 1"]}],
                }}}},
            },
        }
        kube.create("CronJob", self.p.job_namespace, body)
        injection.saved["created"].append(str(Ref("CronJob", self.p.job_namespace, self.p.job_name)))

    def stop(self, cluster: ClusterHandle, injection: Injection) -> None:
        kube = Kube.of(cluster)
        for job in kube.list("Job", self.p.job_namespace) if kube.find("Namespace", "", self.p.job_namespace) else []:
            if job["metadata"]["name"].startswith(self.p.job_name):
                kube.delete("Job", self.p.job_namespace, job["metadata"]["name"])
        super().stop(cluster, injection)


@noises.register("rolling-update")
class RollingUpdate(ScheduledNoise):
    """A routine `rollout restart` of an unrelated deployment (new pods, old ones drained).
    The restart annotation stays: putting it back would start a second rollout, and it says
    nothing about the incident."""

    base_events = 1
    phase = (0.15, 0.3)

    def fire(self, cluster: ClusterHandle, injection: Injection, event: Event) -> None:
        kube = Kube.of(cluster)
        kind, _ = kube.workload(injection.namespace, event.target)
        when = dt.datetime.fromtimestamp(cluster.now(), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        kube.patch(kind, injection.namespace, event.target,
                   {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: when}}}}})


# -- confounders: the misleading evidence real ambient activity gives --------------------------


@noises.register("container-restart")
class ContainerRestart(ChaosBurst):
    """A neighbour's container dies again and again (a PodChaos container-kill each time), as in
    an unrelated panic or OOM loop: its kubelet restarts it, the restart count climbs, its last
    state reads Error, BackOff warnings pile up. A kill waits until the container runs again
    (past the kubelet's back-off: none after the first crash, then 10 s, 20 s, ...), so every
    kill counts: two restarts at low intensity, three at medium, and at high a fourth crash whose
    back-off keeps the container in CrashLoopBackOff (its alerts firing) for the first minutes an
    engineer looks. Nothing of it outlasts the noise: stop replaces the pod it crashed."""

    kind = "PodChaos"
    event_seconds = (1.0, 2.0)
    # after the replacements, so the restarts pile up on the pod a rollout just brought up
    phase = (0.35, 0.45)
    give_up_seconds = 60.0  # past the window, a kill still waiting for its container is dropped

    def start(self, cluster: ClusterHandle, namespace: str, rng: random.Random, intensity: float) -> Injection:
        now = cluster.now()
        targets = self.candidates(Kube.of(cluster), namespace)
        # one victim per trial: restarts that pile up on one pod are what an SRE notices
        victim = self.p.focus if self.p.focus in targets else rng.choice(targets)
        at = now + self.p.start_after_seconds + self.p.window_seconds * rng.uniform(*self.phase)
        events = []
        for _ in range(kills(intensity)):
            events.append(Event(at=at, until=at + rng.uniform(*self.event_seconds), target=victim))
            at += rng.uniform(1.0, 3.0)  # the earliest; tick waits for the container to run again
        deadline = now + self.p.start_after_seconds + self.p.window_seconds + self.give_up_seconds
        return Injection(injector=f"noise:{self.name}", params=self.p.model_dump(), namespace=namespace,
                         saved={"events": [e.model_dump() for e in events], "created": [], "deadline": deadline},
                         injected_at=now)

    def tick(self, cluster: ClusterHandle, injection: Injection, now: float) -> None:
        events = injection.saved["events"]
        due = next((i for i, e in enumerate(events) if not e["fired"] and e["at"] <= now), None)
        if due is not None and not self._running(cluster, injection, events[due]["target"]):
            if now >= injection.saved["deadline"]:
                for e in events[due:]:
                    e["fired"] = e["ended"] = True
            else:
                # a kill on a container that is not running would not count: try again in a second,
                # and keep the kills after it as far behind it as planned
                shift = now + 1.0 - events[due]["at"]
                for e in events[due:]:
                    e["at"] += shift
                    e["until"] += shift
        super().tick(cluster, injection, now)

    @staticmethod
    def _running(cluster: ClusterHandle, injection: Injection, workload: str) -> list[str]:
        """The workload's pods whose (first) container runs now: those a kill would crash."""
        kube = Kube.of(cluster)
        _, obj = kube.workload(injection.namespace, workload)
        return [pod["metadata"]["name"] for pod in kube.pods_of(injection.namespace, obj)
                if not pod["metadata"].get("deletionTimestamp")
                and any("running" in (cs.get("state") or {})
                        for cs in ((pod.get("status") or {}).get("containerStatuses") or [])[:1])]

    def fire(self, cluster: ClusterHandle, injection: Injection, event: Event) -> None:
        crashed = injection.saved.setdefault("crashed", [])
        crashed += [p for p in self._running(cluster, injection, event.target) if p not in crashed]
        super().fire(cluster, injection, event)

    def chaos_spec(self, event: Event) -> Obj:
        return {"action": "container-kill"}

    def stop(self, cluster: ClusterHandle, injection: Injection) -> None:
        super().stop(cluster, injection)
        # The kubelet remembers crashes for ten minutes: a victim that crashed once more after the
        # noise (its backend restarted by a fix, or by the oracle) would wait out a back-off the
        # noise ran up, and a back-off may still be running. Replacing the pods it crashed, as an
        # operator would, leaves nothing of the noise for the oracles to read.
        kube = Kube.of(cluster)
        for name in injection.saved.get("crashed", []):
            if kube.find("Pod", injection.namespace, name):
                kube.delete("Pod", injection.namespace, name)
        injection.saved["crashed"] = []


def kills(intensity: float) -> int:
    """How many times container-restart kills its victim: 2 at low intensity, 3 at medium, 4 at
    high (the fourth crash is the one whose back-off is still running a minute later)."""
    return max(1, int(1.5 + 3 * intensity))


@noises.register("error-burst")
class ErrorBurst(ChaosBurst):
    """Heavy packet loss to a neighbour for half a minute or so: its callers' requests fail and
    time out, so error lines, 5xx counters and error spans name a component that is fine."""

    kind = "NetworkChaos"
    base_events = 2
    event_seconds = (30.0, 60.0)

    def plan(self, rng: random.Random, intensity: float) -> dict[str, Any]:
        return {"loss": int(min(95, 40 + 55 * intensity * (0.5 + rng.random() / 2)))}

    def chaos_spec(self, event: Event) -> Obj:
        return {"action": "loss", "direction": "to", **netem_share("loss", event.data["loss"], correlation="25")}


@noises.register("alert-burst")
class AlertBurst(ChaosBurst):
    """Seconds of added latency to a neighbour for a few minutes: its latency alert fires (and
    clears after), on a component the incident has nothing to do with."""

    kind = "NetworkChaos"
    base_events = 1
    event_seconds = (150.0, 240.0)
    # early: the rule's evaluation interval and `for:` take a minute or two, and the alert is
    # meant to be firing when an engineer first looks
    phase = (0.0, 0.2)

    def plan(self, rng: random.Random, intensity: float) -> dict[str, Any]:
        return {"ms": int(1500 + 2500 * intensity * (0.5 + rng.random() / 2))}

    def chaos_spec(self, event: Event) -> Obj:
        return {"action": "delay", "direction": "to", **netem_delay(f"{event.data['ms']}ms", "50ms", correlation="25")}


class EventParams(NoiseParams):
    dns_search_line: str = "svc.cluster.local cluster.local ec2.internal"


@noises.register("warning-events")
class WarningEvents(ScheduledNoise):
    """Warning events on neighbour pods of the kinds healthy clusters are full of: readiness
    probe timeouts during a GC pause (for a container with a readiness probe), the kubelet's DNS
    search-line warning otherwise, each repeated a few times (its count)."""

    Params = EventParams
    base_events = 4
    phase = (0.6, 1.0)  # on the pods a rollout brought up, as after a rough start

    def plan(self, rng: random.Random, intensity: float) -> dict[str, Any]:
        return {"count": 1 + int(4 * intensity * rng.random()), "suffix": f"{rng.getrandbits(64):016x}"}

    def fire(self, cluster: ClusterHandle, injection: Injection, event: Event) -> None:
        kube = Kube.of(cluster)
        _, obj = kube.workload(injection.namespace, event.target)
        pods = sorted(kube.pods_of(injection.namespace, obj), key=lambda p: p["metadata"]["name"])
        if not pods:
            return
        pod = pods[0]
        meta, spec = pod["metadata"], pod["spec"]
        container = spec["containers"][0]
        probe = container.get("readinessProbe") or container.get("livenessProbe")
        ip = (pod.get("status") or {}).get("podIP", "")
        if probe and "httpGet" in probe:
            get = probe["httpGet"]
            kind = "Readiness" if container.get("readinessProbe") else "Liveness"
            reason, message = "Unhealthy", (f'{kind} probe failed: Get "http://{ip}:{get.get("port")}{get.get("path", "/")}": '
                                            "context deadline exceeded (Client.Timeout exceeded while awaiting headers)")
        elif probe and "tcpSocket" in probe:
            reason, message = "Unhealthy", f"Readiness probe failed: dial tcp {ip}:{probe['tcpSocket'].get('port')}: i/o timeout"
        else:
            reason, message = "DNSConfigForming", ("Search Line limits were exceeded, some search paths have been omitted, "
                                                   f"the applied search line is: {injection.namespace}.{self.p.dns_search_line}")
        when = dt.datetime.fromtimestamp(cluster.now(), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        node = spec.get("nodeName", "")
        name = f"{meta['name']}.{event.data['suffix']}"
        body = {"metadata": {"name": name, "namespace": injection.namespace},
                "involvedObject": {"kind": "Pod", "namespace": injection.namespace, "name": meta["name"],
                                   "uid": meta.get("uid", ""), "apiVersion": "v1",
                                   "fieldPath": f"spec.containers{{{container['name']}}}"},
                "reason": reason, "message": message, "type": "Warning", "count": event.data["count"],
                "source": {"component": "kubelet", "host": node}, "reportingComponent": "kubelet",
                "reportingInstance": node, "firstTimestamp": when, "lastTimestamp": when}
        kube.create("Event", injection.namespace, body)
        injection.saved["created"].append(str(Ref("Event", injection.namespace, name)))


# The ambient activity a sweep's `noise: {intensity: ...}` adds to a problem's own noises, each
# aimed at the fault's neighbours and spread over the first minutes after the injection, when
# an SRE (or an agent) first looks: restarts and rollouts of healthy components, error bursts in
# their logs, metrics and traces, warning events, a firing alert.
CONFOUNDERS = ("pod-kill", "rolling-update", "container-restart", "error-burst", "alert-burst", "warning-events")
# Cluster seconds after the injection over which ambient noise fires: an incident is a few
# minutes old when someone first looks, and what happened in those minutes is what they see.
AMBIENT_WINDOW_S = 100.0
NOISE_LEVELS = {"low": 0.25, "medium": 0.5, "high": 1.0}


def level_intensity(level: str | float) -> float:
    """A sweep's intensity (low, medium, high, or a number in [0, 1]) as a number."""
    if isinstance(level, str):
        if level in NOISE_LEVELS:
            return NOISE_LEVELS[level]
        try:
            level = float(level)
        except ValueError:
            raise ValueError(f"intensity must be one of {', '.join(NOISE_LEVELS)} or a number in [0, 1], "
                             f"not '{level}'") from None
    if not 0 <= level <= 1:
        raise ValueError(f"intensity must be in [0, 1], not {level}")
    return float(level)
