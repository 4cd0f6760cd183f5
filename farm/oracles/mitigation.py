"""The mitigation oracle: programmatic, on the state the agent left (noise already stopped).

After a window of cluster time it requires, each as a named check:
- the client side: the farm's own load generator's success rate over the window at or above the
  problem's threshold, with real traffic (no requests is a failure, never a pass). Only the pods
  of the generator the farm deployed count (its Deployment by uid, their ReplicaSets and pods by
  owner uid, each pod running the generator's own program): a generator the agent starts, with
  the same image, labels and metric names, adds nothing to the figure;
- the system side: every deployment and statefulset of the baseline (captured after deploy,
  before injection) still there, not scaled below its baseline, ready; the load generator
  untouched (the very object the farm deployed, its template, replicas and the config maps and
  secrets it reads); no crash-looping or pending pods; no firing alert of the application namespace;
- lasting, not propped up: no paused rollout; every workload's rollout complete at its current
  generation (observed generation, every replica updated, no old ReplicaSet still serving pods
  its template would not make); the health checks hold at every sample of the window, not only
  at its end, with no container restarting meanwhile;
- the fault's own check: no injected root cause still affects what runs (each injector's
  `affects`: a pod still under the experiment, the workload still on the faulty node, the
  injected value still in the template, found by what identifies it, never by its place in a
  list or its name alone: a container by its index, name or program, a Service port by its
  number and name); a fix that leaves the injected cause in place fails whatever the metrics
  say; for metastable problems the trigger is replayed and the system must recover by itself;
- surviving a restart: once everything else holds, the oracle restarts the faulted workloads
  itself (a rollout restart with the farm's credentials) and requires the checks to hold again.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable
from typing import Any

import httpx
from pydantic import BaseModel

from apps.application import Application
from clusters.handle import ClusterHandle
from core.problem import Problem
from core.records import MitigationVerdict

BAD_WAITING = {"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError",
               "CreateContainerError", "InvalidImageName", "RunContainerError"}
MIN_REQUEST_RATE = 0.1  # requests per second below which there is "no traffic"
REPLAY_TRIGGER_S = 60.0  # how long a replayed metastable trigger stays in place
# Alerts that say nothing about failure: the dead man's switch, inhibitor helpers, and SREGym's
# load indicator (it fires whenever the load generator runs).
NON_FAILURE_ALERTS = frozenset({"Watchdog", "InfoInhibitor", "HighRequestRate"})
ALERT_GRACE_S = 300.0  # alerts over 5-minute rates may lag a real fix by that much
ALERT_STEP_S = 60.0
WINDOW_SAMPLES = 3  # the health checks are read this many times over the window (the last at its end)
RESTART_SETTLE_S = 15.0  # steps of cluster time a restarted workload gets to roll out, until it has
RESTART_WINDOW_S = 60.0  # then the clients' success is read over this much more
RESTART_MAX_S = 300.0  # the longest a restarted rollout may take

_http: httpx.Client | None = None


def _http_client() -> httpx.Client:
    """One HTTP client for every query: a client per query costs a TLS context each (~50 ms)."""
    global _http
    if _http is None or _http.is_closed:
        _http = httpx.Client(timeout=30, trust_env=False)
    return _http


class Workload(BaseModel):
    kind: str  # Deployment or StatefulSet
    name: str
    replicas: int


class Baseline(BaseModel):
    namespace: str
    captured_at: float
    workloads: list[Workload]
    load_generator: str
    load_generator_template: str | None = None  # hash of its pod template; None when it is absent
    load_generator_replicas: int = 0
    # The generator the farm deployed: its uid (None in baselines recorded before it was kept),
    # and a hash of the config maps and secrets it reads (its script, its target list).
    load_generator_uid: str | None = None
    load_generator_inputs: str | None = None
    request_rate: float | None = None  # client requests per second at capture time, when known
    firing_alerts: list[str] = []  # "alertname{labels}" firing before any fault: not the agent's to clear


def _template_hash(obj: dict[str, Any]) -> str:
    template = (obj.get("spec") or {}).get("template") or {}
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:16]


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _comparable_template(template: dict[str, Any]) -> str:
    """A pod template as the deployment controller compares it: without the hash label it adds,
    and a null field the same as an absent one, as in its Go structs (a template that `rollout
    undo` copied back carries `metadata.creationTimestamp: null`, and it is the same revision)."""
    t = _without_nulls(template)
    labels = (t.get("metadata") or {}).get("labels") or {}
    labels.pop("pod-template-hash", None)
    return json.dumps(t, sort_keys=True)


def _window(seconds: float) -> str:
    return f"{int(math.ceil(seconds))}s"


def scoped(query: str, pods: Iterable[str]) -> str:
    """`query` (its window filled in) with every series selector narrowed to the pods named: the
    client-side figures of the farm's own load generator, not of whatever else in the namespace
    exports the same metric names."""
    names = sorted(set(pods))
    if not names:
        raise ValueError("no load generator pod to read the client side of")
    # Pod names are DNS subdomains ([a-z0-9.-]); a dot is the only character a regex reads specially.
    matcher = 'pod=~"' + "|".join(n.replace(".", "[.]") for n in names) + '"'
    return re.sub(r"\{([^{}]*)\}", lambda m: "{" + matcher + ("," + m.group(1) if m.group(1).strip() else "") + "}",
                  query)


_TOKEN_VOLUME = "kube-api-access-"  # the service account token volume admission adds to every pod


def _program(spec: dict[str, Any]) -> str:
    """What decides where a pod's requests go and what it reports: its containers' programs and
    settings, its name resolution. A pod that only claims the generator's ReplicaSet as its owner
    (ownerReferences are the creator's to write) does not run the generator's own program."""
    def own(items: Any) -> list[Any]:  # the template's own, without the token volume
        return [i for i in items or [] if not str(i.get("name", "")).startswith(_TOKEN_VOLUME)]

    def container(c: dict[str, Any]) -> dict[str, Any]:
        return {k: c.get(k) for k in ("name", "image", "command", "args", "env", "envFrom")} | {
            "volumeMounts": own(c.get("volumeMounts"))}

    return json.dumps(_without_nulls({
        "containers": [container(c) for c in spec.get("containers") or []],
        "initContainers": [container(c) for c in spec.get("initContainers") or []],
        "volumes": own(spec.get("volumes")), "hostAliases": spec.get("hostAliases"),
        "dnsConfig": spec.get("dnsConfig"), "hostNetwork": spec.get("hostNetwork")}), sort_keys=True)


def _inputs(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """The config maps and secrets a pod template reads, as (kind, name)."""
    out: set[tuple[str, str]] = set()
    for v in spec.get("volumes") or []:
        if (v.get("configMap") or {}).get("name"):
            out.add(("ConfigMap", v["configMap"]["name"]))
        if (v.get("secret") or {}).get("secretName"):
            out.add(("Secret", v["secret"]["secretName"]))
        for src in (v.get("projected") or {}).get("sources") or []:
            if (src.get("configMap") or {}).get("name"):
                out.add(("ConfigMap", src["configMap"]["name"]))
            if (src.get("secret") or {}).get("name"):
                out.add(("Secret", src["secret"]["name"]))
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        for e in c.get("env") or []:
            ref = e.get("valueFrom") or {}
            if (ref.get("configMapKeyRef") or {}).get("name"):
                out.add(("ConfigMap", ref["configMapKeyRef"]["name"]))
            if (ref.get("secretKeyRef") or {}).get("name"):
                out.add(("Secret", ref["secretKeyRef"]["name"]))
        for e in c.get("envFrom") or []:
            if (e.get("configMapRef") or {}).get("name"):
                out.add(("ConfigMap", e["configMapRef"]["name"]))
            if (e.get("secretRef") or {}).get("name"):
                out.add(("Secret", e["secretRef"]["name"]))
    return sorted(out)


class MitigationOracle:
    def __init__(self, app: Application, problem: Problem) -> None:
        self.app, self.problem = app, problem
        self.spec = problem.oracle

    # -- cluster access --------------------------------------------------------------------
    # Plain JSON on the handle's shared ApiClient: typed models cost a validation and a
    # serialization per object, and a client per call a TLS context.
    def _workloads(self, cluster: ClusterHandle, namespace: str) -> dict[tuple[str, str], dict[str, Any]]:
        """The application's workloads by (kind, name); those of its other namespaces (an operator's)
        as (kind, "namespace/name"): deleting the operator is no fix either."""
        from clusters.kube import Kube

        kube = Kube.of(cluster)
        out = {(kind, obj["metadata"]["name"]): obj
               for kind in ("Deployment", "StatefulSet") for obj in kube.list(kind, namespace)}
        for ns in self.app.extra_namespaces:
            out.update({(kind, f"{ns}/{obj['metadata']['name']}"): obj
                        for kind in ("Deployment", "StatefulSet") for obj in kube.list(kind, ns)})
        return out

    @staticmethod
    def _pods(cluster: ClusterHandle, namespace: str) -> list[dict[str, Any]]:
        from clusters.kube import Kube

        return Kube.of(cluster).list("Pod", namespace)

    @staticmethod
    def _prometheus(cluster: ClusterHandle, path: str, params: dict[str, Any]) -> Any:
        resp = _http_client().get(cluster.endpoints.prometheus + path, params=params)
        resp.raise_for_status()
        body = resp.json()
        if body.get("status") != "success":
            raise RuntimeError(f"Prometheus query failed: {body.get('error')}")
        return body["data"]

    def _scalar(self, cluster: ClusterHandle, query: str) -> float | None:
        data = self._prometheus(cluster, "/api/v1/query", {"query": query, "time": cluster.now()})
        result = data.get("result")
        if data.get("resultType") == "scalar":
            value = float(result[1])
        elif result:
            value = sum(float(r["value"][1]) for r in result) if len(result) > 1 else float(result[0]["value"][1])
        else:
            return None
        return None if math.isnan(value) else value

    def _rates(self, cluster: ClusterHandle, window: float, baseline: Baseline | None = None
               ) -> tuple[float | None, float | None]:
        """The clients' success rate and request rate over the window, as the farm's own load
        generator reports them (no pod of it: no figures). Its pods as they are now: a name is
        the series' only tie to its pod, and a name freed earlier in the window (a generator pod
        deleted) is anyone's to take, while one held now is the generator's alone."""
        pods = self._load_generator_pods(cluster, baseline)
        if not pods:
            return None, None
        w = _window(window)
        return (self._scalar(cluster, scoped(self.app.client_success_query.replace("{window}", w), pods)),
                self._scalar(cluster, scoped(self.app.client_request_rate_query.replace("{window}", w), pods)))

    def _load_generator(self, cluster: ClusterHandle, baseline: Baseline | None
                        ) -> tuple[str, dict[str, Any]] | None:
        """The load generator the farm deployed: by name, and by uid once the baseline has it (one
        deleted and made again, even from the same manifest, is another generator)."""
        from clusters.kube import Kube

        kube = Kube.of(cluster)
        for kind in ("Deployment", "StatefulSet"):
            obj = kube.find(kind, self.app.namespace, self.app.load_generator)
            if obj is None:
                continue
            if baseline is not None and baseline.load_generator_uid and \
                    obj["metadata"].get("uid") != baseline.load_generator_uid:
                return None
            return kind, obj
        return None

    def _load_generator_pods(self, cluster: ClusterHandle, baseline: Baseline | None) -> set[str]:
        """Names of the pods that are the farm's load generator: owned (by uid) by it, or by a
        ReplicaSet it owns, and running its program."""
        from clusters.kube import Kube

        found = self._load_generator(cluster, baseline)
        if found is None:
            return set()
        kind, lg = found
        kube = Kube.of(cluster)
        ns = self.app.namespace
        owners = {lg["metadata"]["uid"]}
        if kind == "Deployment":
            owners = {rs["metadata"]["uid"] for rs in kube.list("ReplicaSet", ns)
                      if _controller_uid(rs) == lg["metadata"]["uid"]}
        program = _program(((lg.get("spec") or {}).get("template") or {}).get("spec") or {})
        return {p["metadata"]["name"] for p in kube.list("Pod", ns)
                if _controller_uid(p) in owners and _program(p.get("spec") or {}) == program}

    def _inputs_hash(self, cluster: ClusterHandle, lg: dict[str, Any]) -> str:
        from clusters.kube import Kube

        kube = Kube.of(cluster)
        spec = ((lg.get("spec") or {}).get("template") or {}).get("spec") or {}
        read = {f"{kind}/{name}": ((kube.find(kind, self.app.namespace, name) or {}).get("data"))
                for kind, name in _inputs(spec)}
        return hashlib.sha256(json.dumps(read, sort_keys=True).encode()).hexdigest()[:16]

    # -- baseline --------------------------------------------------------------------------
    def capture_baseline(self, cluster: ClusterHandle, namespace: str) -> Baseline:
        workloads = self._workloads(cluster, namespace)
        lg = workloads.get(("Deployment", self.app.load_generator)) or workloads.get(
            ("StatefulSet", self.app.load_generator))
        try:
            rate = self._rates(cluster, self.spec.window_seconds)[1]
        except (httpx.HTTPError, RuntimeError, ValueError, KeyError):
            rate = None  # telemetry may not have a window of data yet right after deploy
        try:
            firing = self._failure_alerts(cluster, namespace, ())
        except (httpx.HTTPError, RuntimeError, ValueError, KeyError):
            firing = []
        return Baseline(
            namespace=namespace,
            captured_at=cluster.now(),
            workloads=[Workload(kind=k, name=n, replicas=int((o.get("spec") or {}).get("replicas", 1) or 0))
                       for (k, n), o in sorted(workloads.items())],
            load_generator=self.app.load_generator,
            load_generator_template=_template_hash(lg) if lg else None,
            load_generator_replicas=int((lg.get("spec") or {}).get("replicas", 1) or 0) if lg else 0,
            load_generator_uid=lg["metadata"].get("uid") if lg else None,
            load_generator_inputs=self._inputs_hash(cluster, lg) if lg else None,
            request_rate=rate,
            firing_alerts=firing,
        )

    # -- verdict ---------------------------------------------------------------------------
    # Checks that no amount of waiting changes (nothing but an actor undoes a deletion, a scale
    # down, a pause or a fault still in the template): `fail_fast` reads them before the window.
    STATIC_CHECKS = frozenset({"workloads_present", "replicas_not_reduced", "load_generator_intact",
                               "no_paused_rollout", "fault_resolved"})

    def evaluate(self, cluster: ClusterHandle, namespace: str, baseline: Baseline,
                 problem_injection: Any, fail_fast: bool = False) -> MitigationVerdict:
        """The verdict after the window. `fail_fast`: when a check that waiting cannot change
        already fails, the verdict is that failure, without the window (validation's non-fixes)."""
        checks: dict[str, bool] = {}
        why: list[str] = []

        def check(name: str, ok: bool, reason: str) -> None:
            checks[name] = ok
            if not ok:
                why.append(reason)

        if fail_fast:
            def static(name: str, ok: bool, reason: str) -> None:
                if name in self.STATIC_CHECKS:
                    check(name, ok, reason)

            # Cheapest first, and stop at the first failure: one is the verdict.
            workloads = self._system_side(cluster, namespace, baseline, static, pods=False)
            if all(checks.values()):
                self._rollouts(cluster, namespace, static, workloads)
            if all(checks.values()):
                active = [bool(a) for a in problem_injection.active(cluster)] if problem_injection is not None else []
                static("fault_resolved", not any(active),
                       f"{sum(active)} of {len(active)} injected root causes still affect the running system")
            if not all(checks.values()):
                return MitigationVerdict(passed=False, success_rate=None, checks=checks, detail="; ".join(why))
            checks.clear()
            why.clear()

        restarts0 = self._restart_counts(cluster, namespace, ready_only=True)
        dips: list[str] = []
        for i in range(WINDOW_SAMPLES):
            cluster.advance(self.spec.window_seconds / WINDOW_SAMPLES)
            if i < WINDOW_SAMPLES - 1:
                sample: dict[str, bool] = {}
                reasons: list[str] = []

                def note(name: str, ok: bool, reason: str, sample: dict[str, bool] = sample,
                         reasons: list[str] = reasons) -> None:
                    sample[name] = ok
                    if not ok:
                        reasons.append(reason)

                self._system_side(cluster, namespace, baseline, note)
                if reasons:
                    dips.append(f"at {int((i + 1) * self.spec.window_seconds / WINDOW_SAMPLES)} s: {reasons[0]}")
        success, rate = self._client_side(cluster, check, baseline)
        self._rollouts(cluster, namespace, check, self._system_side(cluster, namespace, baseline, check))
        # A container healthy when the window opened that restarted during it: a fix that flaps.
        restarted = [f"{pod}/{c} +{n - restarts0[(pod, c)]}" for (pod, c), n in
                     self._restart_counts(cluster, namespace).items() if n > restarts0.get((pod, c), n)]
        check("healthy_throughout", not dips and not restarted,
              "the healthy state did not hold over the window: "
              + "; ".join(dips[:2] + ([f"containers restarted: {', '.join(restarted[:4])}"] if restarted else [])))
        active = [bool(a) for a in problem_injection.active(cluster)] if problem_injection is not None else []
        check("fault_resolved", not any(active),
              f"{sum(active)} of {len(active)} injected root causes still affect the running system")
        # Give lagging alerts their grace only when nothing else failed: the verdict is settled otherwise.
        firing = self._settled_alerts(cluster, namespace, baseline,
                                      grace=ALERT_GRACE_S if all(checks.values()) else 0.0)
        if firing is None:
            check("no_firing_alerts", False, "alerts could not be read")
        else:
            check("no_firing_alerts", not firing, f"alerts firing in {namespace}: {', '.join(sorted(set(firing)))}")
        if self.spec.replay_trigger:
            recovered = self._replay(cluster, namespace, problem_injection, check, baseline)
            check("recovers_after_trigger_replay", recovered,
                  "after the trigger was replayed the system did not recover by itself")
        targets = problem_injection.restart_targets() if hasattr(problem_injection, "restart_targets") else []
        if targets and all(checks.values()):
            broken = self._after_restart(cluster, namespace, baseline, targets, problem_injection)
            check("survives_restart", not broken,
                  f"after the oracle restarted {', '.join(t.split('/', 2)[2] for t in targets)}: {'; '.join(broken[:3])}")
        passed = bool(checks) and all(checks.values())
        return MitigationVerdict(passed=passed, success_rate=success, checks=checks,
                                 detail="; ".join(why) if why else f"all {len(checks)} checks hold")

    def _client_side(self, cluster: ClusterHandle, check: Any, baseline: Baseline) -> tuple[float | None, float | None]:
        try:
            success, rate = self._rates(cluster, self.spec.window_seconds, baseline)
        except (httpx.HTTPError, RuntimeError, ValueError, KeyError) as exc:
            check("traffic", False, f"the client-side metrics could not be read ({exc})")
            check("client_success_rate", False, "no client-side success rate")
            return None, None
        floor = MIN_REQUEST_RATE
        if baseline.request_rate:
            floor = max(floor, 0.5 * baseline.request_rate)
        check("traffic", rate is not None and rate >= floor,
              f"the farm's load generator's request rate {rate if rate is not None else 'none'}/s is below "
              f"{floor:.2g}/s: no traffic is never a pass")
        check("client_success_rate", success is not None and rate is not None and rate > 0
              and success >= self.spec.success_rate,
              f"client success rate {success if success is not None else 'none'} is below "
              f"{self.spec.success_rate} over {_window(self.spec.window_seconds)}")
        return success, rate

    def _system_side(self, cluster: ClusterHandle, namespace: str, baseline: Baseline, check: Any,
                     pods: bool = True) -> dict[tuple[str, str], dict[str, Any]]:
        """The workload and pod checks; returns the workloads it read. `pods=False`: the workload
        checks alone (what fail_fast needs)."""
        now = self._workloads(cluster, namespace)
        missing, reduced, unready = [], [], []
        for w in baseline.workloads:
            obj = now.get((w.kind, w.name))
            if obj is None:
                missing.append(f"{w.kind}/{w.name}")
                continue
            spec, status = obj.get("spec") or {}, obj.get("status") or {}
            replicas = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
            if w.replicas > 0 and replicas < w.replicas:
                reduced.append(f"{w.kind}/{w.name} {replicas}<{w.replicas}")
            ready = int(status.get("readyReplicas") or 0)
            if ready < replicas or (w.kind == "Deployment" and int(status.get("unavailableReplicas") or 0) > 0):
                unready.append(f"{w.kind}/{w.name} {ready}/{replicas} ready")
        check("workloads_present", not missing, f"deleted: {', '.join(missing)}")
        check("replicas_not_reduced", not reduced, f"scaled below the baseline: {', '.join(reduced)}")
        check("workloads_ready", not unready, f"not ready: {', '.join(unready)}")

        lg_key = next(((k, n) for (k, n) in now if n == baseline.load_generator), None)
        lg = now.get(lg_key) if lg_key else None
        intact = baseline.load_generator_template is not None and lg is not None and (
            _template_hash(lg) == baseline.load_generator_template
            and int((lg.get("spec") or {}).get("replicas", 1) or 0) >= max(1, baseline.load_generator_replicas)
            and (baseline.load_generator_uid is None or lg["metadata"].get("uid") == baseline.load_generator_uid)
            and (baseline.load_generator_inputs is None
                 or self._inputs_hash(cluster, lg) == baseline.load_generator_inputs))
        check("load_generator_intact", intact,
              f"the load generator {baseline.load_generator} was removed, re-created, scaled down or changed "
              "(its template, or the config maps and secrets it reads)")
        if not pods:
            return now

        crashing, pending = [], []
        # The application's other namespaces (its operator's) are part of it: a broken operator is not healthy.
        for ns in (namespace, *self.app.extra_namespaces):
            for pod in self._pods(cluster, ns):
                meta, status = pod.get("metadata") or {}, pod.get("status") or {}
                if meta.get("deletionTimestamp"):
                    continue
                name = meta.get("name", "?") if ns == namespace else f"{ns}/{meta.get('name', '?')}"
                if status.get("phase") == "Pending":
                    pending.append(name)
                for cs in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
                    reason = ((cs.get("state") or {}).get("waiting") or {}).get("reason")
                    if reason in BAD_WAITING:
                        crashing.append(f"{name} ({reason})")
        check("no_crashlooping_pods", not crashing, f"failing pods: {', '.join(crashing)}")
        check("no_pending_pods", not pending, f"pending pods: {', '.join(pending)}")
        return now

    @staticmethod
    def _restart_counts(cluster: ClusterHandle, namespace: str, ready_only: bool = False) -> dict[tuple[str, str], int]:
        """Restart counts per (pod, container); `ready_only`: of the containers ready now (a
        container still coming out of a crash-loop back-off restarts once more as it recovers)."""
        out = {}
        for pod in MitigationOracle._pods(cluster, namespace):
            for cs in (pod.get("status") or {}).get("containerStatuses") or []:
                if ready_only and not cs.get("ready"):
                    continue
                out[(pod["metadata"]["name"], cs.get("name", "?"))] = int(cs.get("restartCount") or 0)
        return out

    def _rollouts(self, cluster: ClusterHandle, namespace: str, check: Any,
                  workloads: dict[tuple[str, str], dict[str, Any]] | None = None) -> None:
        """A fix the controllers have finished and will keep: nothing paused, every rollout done at
        the workload's current generation, no old ReplicaSet serving pods of another template
        (pausing a deployment and deleting its new ReplicaSet keeps old pods serving a template
        that no longer exists)."""
        from clusters.kube import Kube

        kube = Kube.of(cluster)
        paused, unfinished, stale = [], [], []
        workloads = workloads if workloads is not None else self._workloads(cluster, namespace)
        replica_sets = [rs for ns in (namespace, *self.app.extra_namespaces) for rs in kube.list("ReplicaSet", ns)]
        for (kind, name), obj in sorted(workloads.items()):
            spec, status, meta = obj.get("spec") or {}, obj.get("status") or {}, obj.get("metadata") or {}
            want = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
            if kind == "Deployment" and spec.get("paused"):
                paused.append(name)
            if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0) or (
                    want > 0 and int(status.get("updatedReplicas") or 0) < want) or (
                    int(status.get("replicas") or 0) > want):
                unfinished.append(f"{kind}/{name}")
            if kind != "Deployment":
                continue
            template = _comparable_template(spec.get("template") or {})
            for rs in replica_sets:
                owners = (rs.get("metadata") or {}).get("ownerReferences") or []
                if not any(o.get("uid") == meta.get("uid") for o in owners):
                    continue
                if int((rs.get("status") or {}).get("replicas") or 0) > 0 and \
                        _comparable_template((rs.get("spec") or {}).get("template") or {}) != template:
                    stale.append(f"{rs['metadata']['name']} (of {name})")
        check("no_paused_rollout", not paused, f"paused rollouts: {', '.join(paused)}")
        check("rollouts_complete", not unfinished and not stale,
              "rollouts not complete at the current generation: "
              + ", ".join(unfinished + [f"old ReplicaSet {s} still serving" for s in stale]))

    def _after_restart(self, cluster: ClusterHandle, namespace: str, baseline: Baseline, targets: list[str],
                       problem_injection: Any) -> list[str]:
        """Restart the faulted workloads as their owners would (a rollout restart, with the farm's
        credentials), let them roll out, and say what no longer holds."""
        import datetime as dt

        from clusters.kube import Kube
        from injectors.workload import restart_patch

        kube = Kube.of(cluster)
        when = dt.datetime.fromtimestamp(cluster.now(), dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        for target in targets:
            kind, ns, name = target.split("/", 2)
            if kube.find(kind, ns, name) is not None:
                kube.patch(kind, ns, name, restart_patch(when))
        # Until the restarted rollouts are done (slow starters take minutes), at most RESTART_MAX_S.
        waited = 0.0
        while True:
            cluster.advance(RESTART_SETTLE_S)
            waited += RESTART_SETTLE_S
            pending: list[str] = []

            def unfinished(name: str, ok: bool, reason: str, pending: list[str] = pending) -> None:
                if not ok:
                    pending.append(name)

            self._rollouts(cluster, namespace, unfinished)
            if not pending or waited >= RESTART_MAX_S:
                break
        broken: list[str] = []

        def note(name: str, ok: bool, reason: str) -> None:
            if not ok:
                broken.append(reason)

        self._system_side(cluster, namespace, baseline, note)
        self._rollouts(cluster, namespace, note)
        if problem_injection is not None and any(problem_injection.active(cluster)):
            broken.append("the fault affects the running system again")
        cluster.advance(RESTART_WINDOW_S)
        try:
            success, rate = self._rates(cluster, RESTART_WINDOW_S, baseline)
        except (httpx.HTTPError, RuntimeError, ValueError, KeyError):
            success = rate = None
        if success is None or rate is None or success < self.spec.success_rate:
            broken.append(f"client success rate {success if success is not None else 'none'}")
        return broken

    def _failure_alerts(self, cluster: ClusterHandle, namespace: str, known: Any) -> list[str]:
        alerts = self._prometheus(cluster, "/api/v1/alerts", {}).get("alerts") or []
        out = []
        for a in alerts:
            labels = a.get("labels") or {}
            if a.get("state") != "firing" or labels.get("namespace") != namespace:
                continue
            if labels.get("alertname") in NON_FAILURE_ALERTS or labels.get("severity") in ("none", "info"):
                continue
            key = labels.get("alertname", "?") + json.dumps({k: v for k, v in sorted(labels.items())
                                                             if k != "alertname"}, separators=(",", ":"))
            if key not in known:
                out.append(key)
        return out

    def _settled_alerts(self, cluster: ClusterHandle, namespace: str, baseline: Baseline,
                        grace: float) -> list[str] | None:
        """Failure alerts of the namespace still firing once their rate windows caught up with the
        state: a real fix clears them within the grace period, a fault keeps them firing."""
        waited = 0.0
        while True:
            try:
                firing = self._failure_alerts(cluster, namespace, set(baseline.firing_alerts))
            except (httpx.HTTPError, RuntimeError, ValueError, KeyError):
                return None
            if not firing or waited >= grace:
                return [f.split("{", 1)[0] for f in firing]
            cluster.advance(ALERT_STEP_S)
            waited += ALERT_STEP_S

    def _replay(self, cluster: ClusterHandle, namespace: str, problem_injection: Any, check: Any,
                baseline: Baseline) -> bool:
        """Replay the metastable trigger for a while, let it go, and require that the system comes
        back by itself within the window: a loop that still sustains itself is not mitigated."""
        if problem_injection is None or not hasattr(problem_injection, "replay_trigger"):
            return False
        problem_injection.replay_trigger(cluster, namespace, REPLAY_TRIGGER_S)
        cluster.advance(self.spec.window_seconds)
        try:
            success, rate = self._rates(cluster, self.spec.window_seconds, baseline)
        except (httpx.HTTPError, RuntimeError, ValueError, KeyError):
            return False
        return success is not None and rate is not None and rate >= MIN_REQUEST_RATE and (
            success >= self.spec.success_rate)


def _controller_uid(obj: dict[str, Any]) -> str | None:
    return next((r.get("uid") for r in (obj.get("metadata") or {}).get("ownerReferences") or []
                 if r.get("controller")), None)
