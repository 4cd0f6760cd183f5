"""Validation of a problem on a cluster, step by step:

deploy → healthy (the mitigation oracle passes) → inject → the symptom is visible through the
agent's own tools (kubectl with the agent's kubeconfig, Prometheus, Loki, Jaeger over HTTP) →
nothing the agent can read reveals the answer (leak check) → the mitigation oracle fails → the
reference mitigation (kubectl through the agent's checked tool, or `recover N`) → the oracle
passes → recover leaves the cluster as deployed.

Problems of one application share a deployment: it is checkpointed once (emulated cluster) and
restored before each problem, or the cluster is reset and deployed again.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable
from typing import Any

import httpx
from pydantic import BaseModel

from clusters.base import ClusterHandle
from farm.problems.model import OracleSpec, Problem
from injectors.fault import CHAOS_NAMESPACE
from injectors.kube import quantity

# Words an injected object's name, labels or annotations must never carry.
LEAK_WORDS = ("fault", "chaos", "inject", "farm.io", "sregym", "problem", "ground-truth", "groundtruth")
SYMPTOM_SETTLE_S = 120.0
WARMUP_S = 180.0  # cluster time after deploy, so every signal has history before the baseline  # cluster time between injection and looking for the symptom
ERROR_LINE = re.compile(r"(?i)(error|panic|fatal|fail|refused|timeout|timed out|exception|denied|unavailable)")


class StepOutcome(BaseModel):
    name: str
    ok: bool
    detail: str = ""
    skipped: bool = False


class ValidationResult(BaseModel):
    id: str
    app: str
    layer: str
    composition: str
    tags: list[str]
    passed: bool
    steps: list[StepOutcome]
    cpu_seconds: float = 0.0
    cluster_seconds: float = 0.0


class StepFailed(Exception):
    pass


# -- what the agent sees ---------------------------------------------------------------------


class AgentView:
    """The agent's tools, used the way an agent would: kubectl with its scoped kubeconfig and
    E1's command checks, and the observability endpoints over HTTP."""

    def __init__(self, cluster: ClusterHandle, namespace: str, entrypoint: str, success_query: str = "",
                 other_namespaces: Iterable[str] = ()) -> None:
        from farm.interface.kubectl import Kubectl

        self.cluster, self.namespace, self.entrypoint = cluster, namespace, entrypoint
        self.success_query = success_query
        # The application's other namespaces (its operator's): the agent's kubectl cannot reach
        # them, but its Prometheus tool reads their pods' state from kube-state-metrics.
        self.other_namespaces = list(other_namespaces)
        self.kubeconfig = cluster.agent_kubeconfig(namespace)
        self.kubectl = Kubectl(self.kubeconfig, namespace, virtual_time=cluster.virtual_time)
        self.http = httpx.Client(timeout=30, trust_env=False)
        self._kube: Any = None

    def close(self) -> None:
        self.kubectl.close()
        self.http.close()

    def run(self, command: str) -> tuple[int, str]:
        """One kubectl command through the agent tool's own checks (a refusal is an error)."""
        from farm.interface.kubectl import parse_command

        parsed = parse_command(command, self.namespace, virtual_time=self.cluster.virtual_time)
        result = self.kubectl.run_tokens(parsed.tokens)
        return result.returncode, result.text

    def get_json(self, what: str) -> list[dict[str, Any]]:
        """Objects of the comma-separated kinds, read with the agent's own token (the same RBAC
        as its kubectl; in-process, so reading costs no kubectl process). Kinds its role cannot
        list are simply absent, as for kubectl."""
        from injectors.kube import KINDS, KubeError

        plural_to_kind = {k.plural: name for name, k in KINDS.items()}
        out: list[dict[str, Any]] = []
        for plural in what.split(","):
            kind = plural_to_kind.get(plural)
            if kind is None:
                continue
            try:
                for item in self.kube.list(kind, self.namespace):
                    item.setdefault("kind", kind)
                    out.append(item)
            except KubeError:
                continue
        return out

    @property
    def kube(self) -> Any:
        if self._kube is None:
            from kubernetes import config

            from injectors.kube import Kube

            api = config.new_client_from_config(config_file=str(self.kubeconfig))
            kube = Kube.__new__(Kube)
            kube.cluster, kube.api = self.cluster, api
            self._kube = kube
        return self._kube

    def signals(self, since: float) -> dict[str, Any]:
        """What an on-call engineer would look at, reduced to comparable facts."""
        out: dict[str, Any] = {}
        pods = {}
        items = self.get_json("pods,events")
        for pod in (i for i in items if i.get("kind") == "Pod"):
            status = pod.get("status", {})
            statuses = status.get("containerStatuses") or []
            waiting = sorted({(c.get("state") or {}).get("waiting", {}).get("reason", "") for c in statuses} - {""})
            pods[pod["metadata"]["name"]] = {
                "phase": status.get("phase"),
                "ready": all(c.get("ready") for c in statuses) if statuses else False,
                "restarts": sum(int(c.get("restartCount", 0)) for c in statuses),
                "waiting": waiting,
            }
        for ns in self.other_namespaces:
            pods.update(self._ksm_pods(ns))
        out["pods"] = pods
        out["warnings"] = sorted({
            f"{e.get('reason')}:{e.get('involvedObject', {}).get('name', '')}"
            for e in items
            if e.get("kind") == "Event" and e.get("type") == "Warning" and _event_time(e) >= since - 1})
        out["alerts"] = self._alerts()
        out["error_lines"] = self._error_lines(since)
        out["error_spans"] = self._error_spans(since)
        out["p95_ms"] = self._p95_ms(since)
        out["success"] = self._success(since)
        return out

    def _prom_vector(self, query: str) -> list[dict[str, Any]]:
        try:
            body = self.http.get(self.cluster.endpoints.prometheus + "/api/v1/query", params={
                "query": query, "time": str(self.cluster.now())}).json()
            return list(body["data"]["result"])
        except (httpx.HTTPError, ValueError, KeyError):
            return []

    def _ksm_pods(self, namespace: str) -> dict[str, Any]:
        """Pods of `namespace` as kube-state-metrics reports them, keyed `namespace/pod`."""
        pods: dict[str, Any] = {}

        def pod(sample: dict[str, Any]) -> dict[str, Any]:
            name = f"{namespace}/{sample['metric'].get('pod', '?')}"
            return pods.setdefault(name, {"phase": None, "ready": False, "restarts": 0, "waiting": []})

        sel = f'namespace="{namespace}"'
        for s in self._prom_vector(f"kube_pod_status_phase{{{sel}}} == 1"):
            pod(s)["phase"] = s["metric"].get("phase")
        for s in self._prom_vector(f'kube_pod_status_ready{{{sel},condition="true"}} == 1'):
            pod(s)["ready"] = True
        for s in self._prom_vector(f"kube_pod_container_status_waiting_reason{{{sel}}} == 1"):
            pod(s)["waiting"] = sorted({*pod(s)["waiting"], s["metric"].get("reason", "")} - {""})
        for s in self._prom_vector(f"kube_pod_container_status_restarts_total{{{sel}}}"):
            pod(s)["restarts"] += int(float(s["value"][1]))
        return pods

    def _success(self, since: float) -> float | None:
        """The client-side success rate since `since`, as the app's own query gives it."""
        if not self.success_query:
            return None
        window = f"{max(30, int(self.cluster.now() - since))}s"
        try:
            body = self.http.get(self.cluster.endpoints.prometheus + "/api/v1/query", params={
                "query": self.success_query.replace("{window}", window), "time": str(self.cluster.now())}).json()
            result = body["data"]["result"]
            return float(result[0]["value"][1]) if result else None
        except (httpx.HTTPError, ValueError, KeyError, IndexError):
            return None

    def _p95_ms(self, since: float) -> float:
        """p95 duration of the entry service's traces since `since` (0 when there are none)."""
        now = self.cluster.now()
        try:
            body = self.http.get(self.cluster.endpoints.jaeger + "/api/traces", params={
                "service": self.entrypoint, "start": str(int(since * 1e6)), "end": str(int(now * 1e6)),
                "limit": "300"}).json()
        except (httpx.HTTPError, ValueError):
            return 0.0
        durations = sorted(max((s.get("duration", 0) for s in t.get("spans", [])), default=0) / 1000.0
                           for t in body.get("data") or [])
        return durations[int(0.95 * (len(durations) - 1))] if durations else 0.0

    def _alerts(self) -> list[str]:
        try:
            body = self.http.get(self.cluster.endpoints.prometheus + "/api/v1/alerts").json()
            mine = {self.namespace, *self.other_namespaces}
            return sorted({a["labels"].get("alertname", "") for a in body["data"]["alerts"]
                           if a.get("state") == "firing" and a["labels"].get("namespace") in mine})
        except (httpx.HTTPError, ValueError, KeyError):
            return []

    def _error_lines(self, since: float) -> int:
        now = self.cluster.now()
        try:
            body = self.http.get(self.cluster.endpoints.loki + "/loki/api/v1/query_range", params={
                "query": f'{{namespace="{self.namespace}"}}', "start": str(int(since * 1e9)),
                "end": str(int(now * 1e9)), "limit": "1000"}).json()
            return sum(1 for stream in body["data"]["result"] for _, line in stream["values"] if ERROR_LINE.search(line))
        except (httpx.HTTPError, ValueError, KeyError):
            return 0

    def _error_spans(self, since: float) -> int:
        now = self.cluster.now()
        try:
            body = self.http.get(self.cluster.endpoints.jaeger + "/api/traces", params={
                "service": self.entrypoint, "start": str(int(since * 1e6)), "end": str(int(now * 1e6)),
                "limit": "200", "tags": json.dumps({"error": "true"})}).json()
            return len(body.get("data") or [])
        except (httpx.HTTPError, ValueError, KeyError):
            return 0


def _event_time(event: dict[str, Any]) -> float:
    import datetime as dt

    stamp = event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp")
    if not stamp:
        return 0.0
    try:
        return dt.datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def symptom_differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The signals that changed for the worse between two `AgentView.signals` readings."""
    found = []
    for name, pod in after["pods"].items():
        old = before["pods"].get(name)
        if pod["waiting"]:
            found.append(f"pod {name} waiting: {', '.join(pod['waiting'])}")
        elif pod["phase"] in ("Pending", "Failed"):
            found.append(f"pod {name} {pod['phase']}")
        elif not pod["ready"] and (old is None or old["ready"]):
            found.append(f"pod {name} not ready")
        elif old is not None and pod["restarts"] > old["restarts"]:
            found.append(f"pod {name} restarted {pod['restarts'] - old['restarts']}x")
    # A pod replaced by a healthy one is a routine rollout; fewer ready pods is not.
    ready_before = sum(1 for p in before["pods"].values() if p["ready"])
    ready_after = sum(1 for p in after["pods"].values() if p["ready"])
    if ready_after < ready_before:
        gone = sorted(set(before["pods"]) - set(after["pods"]))
        found.append(f"{ready_before - ready_after} fewer ready pods" + (f" ({', '.join(gone[:3])} gone)" if gone else ""))
    new_warnings = sorted(set(after["warnings"]) - set(before["warnings"]))
    if new_warnings:
        found.append("warning events: " + ", ".join(new_warnings[:5]))
    new_alerts = sorted(set(after["alerts"]) - set(before["alerts"]))
    if new_alerts:
        found.append("firing alerts: " + ", ".join(new_alerts))
    if after["error_lines"] > max(5, 2 * before["error_lines"]):
        found.append(f"{after['error_lines']} error log lines (was {before['error_lines']})")
    if after["error_spans"] > max(2, 2 * before["error_spans"]):
        found.append(f"{after['error_spans']} error traces (was {before['error_spans']})")
    if after.get("p95_ms", 0) > max(1.5 * before.get("p95_ms", 0), before.get("p95_ms", 0) + 20):
        found.append(f"p95 latency {after['p95_ms']:.0f} ms (was {before.get('p95_ms', 0):.0f} ms)")
    s_before, s_after = before.get("success"), after.get("success")
    if s_after is not None and s_after < 0.95 and (s_before is None or s_after < s_before - 0.02):
        found.append(f"client success rate {s_after:.2f}" + (f" (was {s_before:.2f})" if s_before is not None else ""))
    return found


def leak_word(text: str, names: list[str]) -> str | None:
    """The giveaway in `text`, if any: a word starting with a LEAK_WORD ("injected", "chaos-…"; not
    "default"), or a problem id / injector name anywhere in it."""
    low = text.lower()
    for token in re.split(r"[^a-z0-9]+", low):
        for word in LEAK_WORDS:
            if token.startswith(word.split(".")[0].replace("-", "")) and token:
                return word
    return next((n for n in names if n and n in low), None)


def leaks(view: AgentView, problem: Problem) -> list[str]:
    """Anything the agent's credentials can read that gives the answer away."""
    words = [problem.id.lower(), *(f.injector.lower() for f in problem.faults)]
    found = []
    kinds = ("pods,deployments,statefulsets,services,configmaps,secrets,networkpolicies,resourcequotas,"
             "serviceaccounts,events,replicasets,jobs,cronjobs")
    for obj in view.get_json(kinds):
        what = obj.get("kind", "?").lower() + "s"
        meta = obj.get("metadata", {})
        texts = [meta.get("name", ""), *(meta.get("labels") or {}).keys(), *(meta.get("labels") or {}).values(),
                 *((meta.get("annotations") or {}).keys())]
        for annotation, value in (meta.get("annotations") or {}).items():
            if annotation != "kubectl.kubernetes.io/last-applied-configuration":
                texts.append(str(value))
        if what == "events":
            texts = [obj.get("reason", ""), obj.get("source", {}).get("component", "")]
        for text in texts:
            hit = leak_word(str(text), words)
            if hit:
                found.append(f"{what}/{meta.get('name')}: '{text}' contains '{hit}'")
    # The farm's own namespace must be out of reach.
    from farm.interface.kubectl import Kubectl

    raw = Kubectl(view.kubeconfig, CHAOS_NAMESPACE)
    try:
        result = raw.run_tokens(["get", "networkchaos,podchaos,iochaos,stresschaos,timechaos,kernelchaos,pods",
                                 "-o", "name"])
        if result.stdout.strip():
            found.append(f"the agent can list objects in {CHAOS_NAMESPACE}: {result.stdout.split()[0]}")
    finally:
        raw.close()
    return found


# -- the cluster as deployed -----------------------------------------------------------------


def canonical(value: Any, key: str = "") -> Any:
    """The same object however the server or kubectl spelled it: quantities as numbers, no
    null creation stamps."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "creationTimestamp" and v is None:
                continue
            out[k] = {r: quantity(q) for r, q in v.items()} if k in ("limits", "requests") and isinstance(v, dict) \
                else canonical(v, k)
        return out
    if isinstance(value, list):
        return [canonical(v) for v in value]
    return value


def desired_state(cluster: ClusterHandle, namespace: str, other_namespaces: Iterable[str] = ()) -> dict[str, Any]:
    """What recovery must put back: workload pod templates (minus restart stamps) and
    replicas, services' ports and selectors, config map data, and the extra objects faults add;
    in the application's namespace and its other ones (keyed with theirs)."""
    from injectors.kube import Kube

    kube = Kube(cluster)
    out: dict[str, Any] = {}
    for ns in (namespace, *other_namespaces):
        where = "" if ns == namespace else f"{ns}/"
        for kind in ("Deployment", "StatefulSet"):
            for obj in kube.list(kind, ns):
                template = json.loads(json.dumps(obj["spec"]["template"]))
                (template.get("metadata") or {}).pop("annotations", None)
                out[f"{kind}/{where}{obj['metadata']['name']}"] = {"replicas": obj["spec"].get("replicas"),
                                                                   "template": canonical(template)}
        for obj in kube.list("Service", ns):
            spec = obj["spec"]
            out[f"Service/{where}{obj['metadata']['name']}"] = {"ports": spec.get("ports"),
                                                               "selector": spec.get("selector")}
        for obj in kube.list("ConfigMap", ns):
            out[f"ConfigMap/{where}{obj['metadata']['name']}"] = obj.get("data")
        for kind in ("NetworkPolicy", "ResourceQuota"):
            for obj in kube.list(kind, ns):
                out[f"{kind}/{where}{obj['metadata']['name']}"] = True
    for obj in kube.list("ValidatingWebhookConfiguration"):
        out[f"ValidatingWebhookConfiguration/{obj['metadata']['name']}"] = True
    for obj in kube.list("Node"):
        out[f"Node/{obj['metadata']['name']}"] = obj["spec"].get("taints")
    return out


def farm_leftovers(cluster: ClusterHandle) -> list[str]:
    """Chaos experiments, helper jobs and node faults still present."""
    from kubernetes import client

    from injectors.kube import Kube, KubeError

    kube = Kube(cluster)
    api = client.CustomObjectsApi(kube.api)
    out = []
    if kube.find("Namespace", "", CHAOS_NAMESPACE) is not None:
        for plural in ("podchaos", "networkchaos", "iochaos", "stresschaos", "timechaos", "kernelchaos"):
            try:
                items = api.list_namespaced_custom_object("chaos-mesh.org", "v1alpha1", CHAOS_NAMESPACE, plural)
            except client.ApiException:
                continue
            out += [f"{plural}/{i['metadata']['name']}" for i in items.get("items", [])]
        out += [f"pod/{p['metadata']['name']}" for p in kube.list("Pod", CHAOS_NAMESPACE)]
    try:
        items = kube.request("GET", "/apis/sim.farm.io/v1alpha1/nodefaults").get("items", [])
        out += [f"nodefault/{i['metadata']['name']}" for i in items]
    except KubeError:
        pass
    return out


def diff_states(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    keys = sorted(set(before) | set(after))
    return [k for k in keys if before.get(k) != after.get(k)]


# -- the pipeline ----------------------------------------------------------------------------


class Validator:
    """Validates problems on one cluster, reusing a deployment per application."""

    def __init__(self, cluster: ClusterHandle, on_step: Callable[[str, StepOutcome], None] | None = None) -> None:
        self.cluster = cluster
        self.on_step = on_step
        self._checkpoints: dict[str, str] = {}
        self._deployed: dict[str, Any] = {}  # app → desired state right after deploy
        self._healthy: dict[str, tuple[bool, str]] = {}  # app → default oracle verdict on the checkpoint
        self._views: dict[str, AgentView] = {}

    def __enter__(self) -> Validator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for view in self._views.values():
            view.close()
        self._views = {}

    def _view(self, namespace: str, app: Any) -> AgentView:
        # One kubectl home per namespace, so its discovery cache serves every problem.
        if namespace not in self._views:
            self._views[namespace] = AgentView(self.cluster, namespace, app.entrypoint, app.client_success_query,
                                               app.extra_namespaces)
        return self._views[namespace]

    def _check_healthy(self, app: Any, problem: Problem, namespace: str) -> tuple[bool, str]:
        from farm.oracles.mitigation import MitigationOracle

        # Healthy means the plain checks pass; the trigger replay belongs after a fix.
        plain = problem.model_copy(update={"oracle": problem.oracle.model_copy(update={"replay_trigger": False})})
        oracle = MitigationOracle(app, plain)
        verdict = oracle.evaluate(self.cluster, namespace, oracle.capture_baseline(self.cluster, namespace), None)
        return verdict.passed, (f"success rate {verdict.success_rate}" if verdict.passed else verdict.detail)

    def _prepare(self, problem: Problem, namespace: str) -> tuple[Any, float]:
        """The application deployed and warmed up: restored from a checkpoint (emulated
        cluster) when one exists, else a reset and a fresh deploy."""
        from farm.apps.base import load_application
        from farm.apps.deploy import deploy

        app = load_application(problem.app)
        name = f"validate-{problem.app}"
        restore = getattr(self.cluster, "restore", None)
        if name in self._checkpoints and restore is not None:
            restore(name)
            return app, 0.0
        self.cluster.reset()
        took = deploy(self.cluster, app, namespace)
        self.cluster.advance(WARMUP_S)
        self.cluster.agent_kubeconfig(namespace)  # part of the checkpoint, so restores keep it valid
        self._deployed[problem.app] = desired_state(self.cluster, namespace, app.extra_namespaces)
        # The default oracle's verdict on the deployed app, checked once: every restore returns
        # to exactly this state.
        self._healthy[problem.app] = self._check_healthy(app, problem.model_copy(
            update={"oracle": OracleSpec()}), namespace)
        checkpoint = getattr(self.cluster, "checkpoint", None)
        if checkpoint is not None:
            checkpoint(name)
            self._checkpoints[name] = name
        return app, took

    def validate(self, problem: Problem) -> ValidationResult:
        from farm.oracles.mitigation import MitigationOracle
        from injectors.compose import ProblemInjection

        cpu0, t0 = time.process_time(), None
        steps: list[StepOutcome] = []

        def step(name: str, fn: Callable[[], str]) -> bool:
            try:
                detail = fn() or ""
                outcome = StepOutcome(name=name, ok=True, detail=detail)
            except StepFailed as exc:
                outcome = StepOutcome(name=name, ok=False, detail=str(exc))
            except Exception as exc:  # an error in a step is that step's failure, reported
                outcome = StepOutcome(name=name, ok=False, detail=f"{type(exc).__name__}: {exc}")
            steps.append(outcome)
            if self.on_step:
                self.on_step(problem.id, outcome)
            return outcome.ok

        def result() -> ValidationResult:
            passed = all(s.ok for s in steps) and not any(s.skipped for s in steps)
            return ValidationResult(
                id=problem.id, app=problem.app, layer=problem.layer, composition=problem.composition,
                tags=problem.tags, passed=passed, steps=steps, cpu_seconds=time.process_time() - cpu0,
                cluster_seconds=(self.cluster.now() - t0) if t0 is not None else 0.0)

        if problem.needs_real_cluster and self.cluster.provider == "sim":
            steps.append(StepOutcome(name="deploy", ok=False, skipped=True,
                                     detail="needs a real cluster (a mechanism the emulated cluster lacks)"))
            return result()

        state: dict[str, Any] = {}

        def do_deploy() -> str:
            from farm.apps.base import load_application

            app = load_application(problem.app)
            state["namespace"] = app.namespace
            state["app"], took = self._prepare(problem, app.namespace)
            return f"ready after {took:.0f}s of cluster time" if took else "restored from checkpoint"

        if not step("deploy", do_deploy):
            return result()
        t0 = self.cluster.now()
        ns, app = state["namespace"], state["app"]
        oracle = MitigationOracle(app, problem)
        view = self._view(ns, app)
        injection = ProblemInjection(problem)
        try:
            def healthy() -> str:
                default = problem.oracle.model_dump(exclude={"replay_trigger"}) == OracleSpec().model_dump(
                    exclude={"replay_trigger"})
                if default and problem.app in self._healthy:
                    ok, detail = self._healthy[problem.app]
                    detail = f"{detail} (on the deployed checkpoint)"
                else:
                    ok, detail = self._check_healthy(app, problem, ns)
                if not ok:
                    raise StepFailed(f"the oracle fails before injection: {detail}")
                state["baseline"] = oracle.capture_baseline(self.cluster, ns)
                state["since"] = self.cluster.now()
                state["before"] = view.signals(self.cluster.now() - oracle.spec.window_seconds)
                return detail

            def inject() -> str:
                records = injection.inject(self.cluster, ns)
                self.cluster.advance(SYMPTOM_SETTLE_S)
                return ", ".join(r.injector for r in records)

            def symptom() -> str:
                after = view.signals(state["since"])
                found = symptom_differences(state["before"], after)
                if not found:
                    raise StepFailed("nothing the agent's tools show changed after the injection")
                return "; ".join(found[:4])

            def no_leak() -> str:
                found = leaks(view, problem)
                if found:
                    raise StepFailed("; ".join(found[:5]))
                return "nothing readable by the agent names the fault"

            def oracle_fails() -> str:
                verdict = oracle.evaluate(self.cluster, ns, state["baseline"], injection)
                if verdict.passed:
                    raise StepFailed("the mitigation oracle passes with the fault in place")
                return verdict.detail[:200]

            def mitigate() -> str:
                done = []
                for i, mstep in enumerate(problem.mitigation):
                    if mstep.kubectl is not None:
                        code, text = view.run(mstep.kubectl)
                        if code != 0:
                            raise StepFailed(f"mitigation[{i}] `{mstep.kubectl}` failed: {text.strip()[:200]}")
                        done.append(mstep.kubectl.split()[0])
                    elif mstep.recover is not None:
                        injection.recover_one(self.cluster, mstep.recover)
                        done.append(f"recover {mstep.recover}")
                    if mstep.wait:
                        self.cluster.advance(mstep.wait)
                return ", ".join(done)

            def oracle_passes() -> str:
                verdict = oracle.evaluate(self.cluster, ns, state["baseline"], injection)
                if not verdict.passed:
                    raise StepFailed(f"the oracle still fails after the reference mitigation: {verdict.detail}")
                return f"success rate {verdict.success_rate}"

            def recover() -> str:
                injection.recover(self.cluster)
                self.cluster.advance(30)
                left = farm_leftovers(self.cluster)
                changed = diff_states(self._deployed.get(problem.app, {}),
                                      desired_state(self.cluster, ns, app.extra_namespaces))
                if left or changed:
                    raise StepFailed(f"left behind: {', '.join(left + changed)[:300]}")
                return "cluster as deployed"

            for name, fn in (("healthy", healthy), ("inject", inject), ("symptom_visible", symptom),
                             ("no_leak", no_leak), ("oracle_fails", oracle_fails), ("mitigation", mitigate),
                             ("oracle_passes", oracle_passes)):
                if not step(name, fn):
                    break
            step("recover_clean", recover)
        finally:
            if injection.injectors:
                try:
                    injection.recover(self.cluster)
                except Exception:  # the next problem starts from a checkpoint or a reset anyway
                    pass
        return result()

    def validate_all(self, problems: Iterable[Problem]) -> list[ValidationResult]:
        ordered = sorted(problems, key=lambda p: (p.app, p.id))
        return [self.validate(p) for p in ordered]
