"""Validation of a problem on a cluster, step by step:

deploy → healthy (the mitigation oracle passes) → inject → the symptom is visible through the
agent's own tools (kubectl with the agent's kubeconfig, Prometheus, Loki, Jaeger over HTTP) →
nothing the agent can read reveals the answer (leak check) → the mitigation oracle fails →
non-fixes fail (scaling the faulted workload to zero, deleting it, pausing it with its previous
pods serving, renaming its container, stopping the load generator, reordering every list the
fault sits in (a spare port first in the Services, containers, env and ports reversed), and a
second Service in front of the entry pods with an own load generator flooding it, judged over
the full window: the farm's client figures must not rise above what the same window shows
without it; each done with the agent's own token on a rewound copy of the incident) → the
reference mitigation (kubectl through the agent's checked tool and token; never a farm step) →
the oracle passes → recover leaves the cluster as deployed. A diagnosis-only problem stops after the non-fix step: its mitigation is
not scored. A no-fault control (composition: none) is checked both ways instead: healthy → nothing
injected (its own noise, if any, started) → no symptom (or, with its noise, only the noise shows) →
no leak → the oracle passes untouched → harms fail (the entry workload scaled to zero or deleted,
the load generator stopped) → clean recovery.

Problems of one application share a deployment: it is checkpointed once (emulated cluster) and
restored before each problem (the restore rewinds the cluster's clock, so telemetry runs up to
"now"), or the cluster is reset and deployed again.

What counts, so that a harmless change (an unused env var, an annotation, a scale to the same
count) fails at symptom_visible:
- The symptom compares two windows of equal length: SYMPTOM_SETTLE_S right before the injection
  and SYMPTOM_SETTLE_S right after it, then (only when nothing showed) twice that on both sides.
  A baseline window without telemetry fails `healthy`; a latency change counts only when both
  windows hold MIN_TRACES traces; alerts that fire under normal load (the oracle's
  NON_FAILURE_ALERTS, severity none/info) are never symptoms; an error line is a line that
  reports an error, not an info line or a printed config file that happens to say "fail".
- oracle_fails: the oracle's own fault check ("the root cause is still in place") fails for any
  injected fault, so alone it proves nothing about the oracle's view of the failure. Rule: when
  the symptom includes something the oracle's health checks measure (pods unready, pending or
  crash-looping, fewer ready pods, a failure alert, the client success rate below the problem's
  threshold), the oracle must fail on one of those checks too. Only a latent fault, whose
  evidence is in events, logs, error traces, latency or restarts while clients still succeed and
  pods are up, may fail on the fault check alone: nothing else can tell that it is there.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, cast

import httpx
from pydantic import BaseModel

from clusters.handle import ClusterHandle
from clusters.kube import KINDS, Kube, KubeError
from core.problem import OracleSpec, Problem
from injectors.fault import CHAOS_NAMESPACE
from injectors.objects import quantity

# Words an injected object's name, labels or annotations must never carry.
LEAK_WORDS = ("fault", "chaos", "inject", "farm.io", "sregym", "problem", "ground-truth", "groundtruth")
# Cluster time between injection and looking for the symptom; the baseline is read over a window
# as long, right before the injection.
SYMPTOM_SETTLE_S = 120.0
WARMUP_S = 180.0  # cluster time after deploy, so every signal has history before the baseline
MIN_TRACES = 20  # traces a window needs before its p95 latency means anything
ERROR_LINE = re.compile(r"(?i)(error|panic|fatal|fail|refused|timeout|timed out|exception|denied|unavailable)")
# Lines that carry an error word yet report no error: a line that declares an info/debug level
# (zap, logrus and zerolog JSON, logfmt, leveled text, glog, mongod, .NET console), or a member line
# of a JSON document being printed (an init container's `cat` of a flag file full of "Fail ...").
NOT_AN_ERROR = re.compile(
    r'^\s*"[^"]+"\s*:'
    r'|"(?:level|severity|lvl)"\s*:\s*"(?i:info|debug|trace|notice)"'
    r'|"s"\s*:\s*"(?:I|D\d?)"'
    r'|\blevel=(?i:info|debug|trace|notice)\b'
    r'|^(?:\S+\s+){0,2}\[?(?:INFO|INF|DEBUG|DBG|TRACE|TRC|NOTICE)\b'
    r'|^[ID]\d{4} '
    r'|^(?:info|dbug|trce):')


def is_error_line(line: str) -> bool:
    """A log line an SRE would read as an error report."""
    return bool(ERROR_LINE.search(line)) and not NOT_AN_ERROR.search(line)


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
                 other_namespaces: Iterable[str] = (), kubectl: str | None = None) -> None:
        from farm.interface.kubectl import Kubectl

        self.cluster, self.namespace, self.entrypoint = cluster, namespace, entrypoint
        self.success_query = success_query
        # The application's other namespaces (its operator's): the trial grants the agent the same
        # role there (`-n tidb-admin`), so the view does too.
        self.other_namespaces = list(other_namespaces)
        self.kubeconfig = cluster.agent_kubeconfig(namespace, also=tuple(self.other_namespaces))
        # `kubectl`: the binary the agent's commands run with (None: FARM_KUBECTL, else PATH's).
        self.kubectl = Kubectl(self.kubeconfig, namespace, binary=kubectl,
                               virtual_time=cluster.capabilities.virtual_clock)
        self.http = httpx.Client(timeout=30, trust_env=False)
        self._kube: Any = None

    def close(self) -> None:
        self.kubectl.close()
        self.http.close()

    def run(self, command: str, manifest: str | None = None) -> tuple[int, str]:
        """One kubectl command through the agent tool's own checks (a refusal is an error);
        `manifest` is what a `-f -` reads, as the tool's manifest argument gives it."""
        from farm.interface.kubectl import parse_command

        parsed = parse_command(command, self.namespace, virtual_time=self.cluster.capabilities.virtual_clock,
                               also=tuple(self.other_namespaces))
        result = self.kubectl.run_tokens(parsed.tokens, stdin=manifest if parsed.uses_stdin else None)
        return result.returncode, result.text

    def get_json(self, what: str, fields: dict[str, str] | None = None,
                 namespaces: Iterable[str] = ()) -> list[dict[str, Any]]:
        """Objects of the comma-separated kinds, read with the agent's own token (the same RBAC
        as its kubectl; in-process, so reading costs no kubectl process). Kinds its role cannot
        list are simply absent, as for kubectl. `fields`: a field selector per plural;
        `namespaces`: where to read (the application's own namespace when empty)."""
        plural_to_kind = {k.plural: name for name, k in KINDS.items()}
        out: list[dict[str, Any]] = []
        for plural in what.split(","):
            kind = plural_to_kind.get(plural)
            if kind is None:
                continue
            for namespace in list(namespaces) or [self.namespace]:
                try:
                    for item in self.kube.list(kind, namespace, fields=(fields or {}).get(plural, "")):
                        item.setdefault("kind", kind)
                        out.append(item)
                except KubeError:
                    continue
        return out

    @property
    def kube(self) -> Any:
        if self._kube is None:
            from kubernetes import config
            api = config.new_client_from_config(config_file=str(self.kubeconfig))
            self._kube = Kube(api)
        return self._kube

    def signals(self, since: float) -> dict[str, Any]:
        """What an on-call engineer would look at, reduced to comparable facts."""
        out: dict[str, Any] = {}
        pods = {}
        items = self.get_json("pods,events", fields={"events": "type=Warning"})
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
        out["p95_ms"], out["traces"], errors = self._traces(since)
        out["error_spans"] = errors if errors is not None else self._error_spans(since)
        out["success"] = self._success(since)
        out["cpu"] = self._cpu(since)
        return out

    def _cpu(self, since: float) -> dict[str, float]:
        """Cores each container used since `since` (what `kubectl top` and the cAdvisor metrics show)."""
        window = f"{max(30, int(self.cluster.now() - since))}s"
        query = (f'sum by (pod, container) (rate(container_cpu_usage_seconds_total{{namespace="{self.namespace}",'
                 f'container!="",container!="POD"}}[{window}]))')
        out = {}
        for sample in self._prom_vector(query):
            m = sample.get("metric", {})
            try:
                out[f"{m.get('pod', '?')}/{m.get('container', '?')}"] = float(sample["value"][1])
            except (KeyError, IndexError, ValueError):
                continue
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

    TRACE_LIMIT = 300

    def _traces(self, since: float) -> tuple[float, int, int | None]:
        """From the entry service's traces since `since`: their p95 duration, how many traces it
        rests on (0.0, 0 when none), and how many carry an error on an entry-service span in the
        window, as Jaeger's `tags={"error":"true"}` search counts them (None when the answer was
        cut at the limit, so that only that search can tell)."""
        now = self.cluster.now()
        start_us, end_us = int(since * 1e6), int(now * 1e6)
        try:
            body = self.http.get(self.cluster.endpoints.jaeger + "/api/traces", params={
                "service": self.entrypoint, "start": str(start_us), "end": str(end_us),
                "limit": str(self.TRACE_LIMIT)}).json()
        except (httpx.HTTPError, ValueError):
            return 0.0, 0, 0
        traces = body.get("data") or []
        durations = sorted(max((s.get("duration", 0) for s in t.get("spans", [])), default=0) / 1000.0
                           for t in traces)
        p95 = durations[int(0.95 * (len(durations) - 1))] if durations else 0.0
        if len(traces) >= self.TRACE_LIMIT:
            return p95, len(durations), None
        errors = sum(1 for t in traces if self._error_trace(t, start_us, end_us))
        return p95, len(durations), min(errors, 200)

    def _error_trace(self, trace: dict[str, Any], start_us: int, end_us: int) -> bool:
        processes = trace.get("processes") or {}

        def error(fields: list[dict[str, Any]] | None) -> bool:
            return any(f.get("key") == "error" and f.get("value") in (True, "true") for f in fields or [])

        for span in trace.get("spans") or []:
            process = processes.get(span.get("processID"), {})
            if process.get("serviceName") != self.entrypoint or not start_us <= span.get("startTime", 0) <= end_us:
                continue
            if error(span.get("tags")) or error(process.get("tags")) or any(
                    error(log.get("fields")) for log in span.get("logs") or []):
                return True
        return False

    def _alerts(self) -> list[str]:
        """Failure alerts firing in the application's namespaces: the ones that fire under normal
        load (the oracle's NON_FAILURE_ALERTS, severity none/info) say nothing about a fault."""
        from farm.oracles.mitigation import NON_FAILURE_ALERTS

        try:
            body = self.http.get(self.cluster.endpoints.prometheus + "/api/v1/alerts").json()
            mine = {self.namespace, *self.other_namespaces}
            return sorted({a["labels"].get("alertname", "") for a in body["data"]["alerts"]
                           if a.get("state") == "firing" and a["labels"].get("namespace") in mine
                           and a["labels"].get("alertname") not in NON_FAILURE_ALERTS
                           and a["labels"].get("severity") not in ("none", "info")})
        except (httpx.HTTPError, ValueError, KeyError):
            return []

    def _error_lines(self, since: float) -> int:
        now = self.cluster.now()
        try:
            body = self.http.get(self.cluster.endpoints.loki + "/loki/api/v1/query_range", params={
                "query": f'{{namespace="{self.namespace}"}}', "start": str(int(since * 1e9)),
                "end": str(int(now * 1e9)), "limit": "1000"}).json()
            return sum(1 for stream in body["data"]["result"] for _, line in stream["values"] if is_error_line(line))
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


class Evidence(NamedTuple):
    """One signal that got worse; `oracle_sees` when the mitigation oracle's health checks
    measure it too (pods, failure alerts, clients below the problem's threshold)."""

    text: str
    oracle_sees: bool


CPU_JUMP_CORES = 0.5  # a container's CPU use rising this much (and threefold) is a symptom


def symptom_evidence(before: dict[str, Any], after: dict[str, Any],
                     success_threshold: float = 0.95) -> list[Evidence]:
    """The signals that changed for the worse between two `AgentView.signals` readings taken
    over windows of the same length."""
    from farm.oracles.mitigation import NON_FAILURE_ALERTS

    found = []
    for name, pod in after["pods"].items():
        old = before["pods"].get(name)
        if pod["waiting"]:
            found.append(Evidence(f"pod {name} waiting: {', '.join(pod['waiting'])}", True))
        elif pod["phase"] in ("Pending", "Failed"):
            found.append(Evidence(f"pod {name} {pod['phase']}", True))
        elif not pod["ready"] and (old is None or old["ready"]):
            found.append(Evidence(f"pod {name} not ready", True))
        elif old is not None and pod["restarts"] > old["restarts"]:
            found.append(Evidence(f"pod {name} restarted {pod['restarts'] - old['restarts']}x", False))
    # A pod replaced by a healthy one is a routine rollout; fewer ready pods is not.
    ready_before = sum(1 for p in before["pods"].values() if p["ready"])
    ready_after = sum(1 for p in after["pods"].values() if p["ready"])
    if ready_after < ready_before:
        gone = sorted(set(before["pods"]) - set(after["pods"]))
        found.append(Evidence(f"{ready_before - ready_after} fewer ready pods"
                              + (f" ({', '.join(gone[:3])} gone)" if gone else ""), True))
    new_warnings = sorted(set(after["warnings"]) - set(before["warnings"]))
    if new_warnings:
        found.append(Evidence("warning events: " + ", ".join(new_warnings[:5]), False))
    new_alerts = sorted(set(after["alerts"]) - set(before["alerts"]) - NON_FAILURE_ALERTS)
    if new_alerts:
        found.append(Evidence("firing alerts: " + ", ".join(new_alerts), True))
    if after["error_lines"] > max(5, 2 * before["error_lines"]):
        found.append(Evidence(f"{after['error_lines']} error log lines (was {before['error_lines']})", False))
    if after["error_spans"] > max(2, 2 * before["error_spans"]):
        found.append(Evidence(f"{after['error_spans']} error traces (was {before['error_spans']})", False))
    # Latency only against a baseline that has traces: a change from an empty window is no change.
    p_before, p_after = before.get("p95_ms", 0.0), after.get("p95_ms", 0.0)
    if (min(before.get("traces", 0), after.get("traces", 0)) >= MIN_TRACES and p_before > 0
            and p_after > max(1.5 * p_before, p_before + 20)):
        found.append(Evidence(f"p95 latency {p_after:.0f} ms (was {p_before:.0f} ms)", False))
    # A container burning cores it did not use before (a hot loop, a GC storm): kubectl top shows it.
    for name, cores in sorted((after.get("cpu") or {}).items()):
        was = (before.get("cpu") or {}).get(name)
        if was is not None and cores >= was + CPU_JUMP_CORES and cores >= 3 * was:
            found.append(Evidence(f"container {name} uses {cores:.2f} CPU cores (was {was:.2f})", False))
    s_before, s_after = before.get("success"), after.get("success")
    if s_after is not None and s_after < 0.95 and (s_before is None or s_after < s_before - 0.02):
        found.append(Evidence(f"client success rate {s_after:.2f}"
                              + (f" (was {s_before:.2f})" if s_before is not None else ""),
                              s_after < success_threshold))
    return found


def oracle_blind_to(checks: dict[str, bool], evidence: Iterable[Evidence]) -> list[str]:
    """What the agent saw that the oracle's health checks measure, when none of those checks
    failed (only the fault's own check did): the oracle_fails rule of the module docstring."""
    if any(not ok for name, ok in checks.items() if name != "fault_resolved"):
        return []
    return [e.text for e in evidence if e.oracle_sees]


def symptom_differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The signals that changed for the worse between two `AgentView.signals` readings."""
    return [e.text for e in symptom_evidence(before, after)]


# A word starting with one of LEAK_WORDS' stems, and the LEAK_WORD each stem reports.
_LEAK_STEMS = {w.split(".")[0].replace("-", ""): w for w in reversed(LEAK_WORDS)}
_LEAK_RE = re.compile("(?:^|[^a-z0-9])(" + "|".join(map(re.escape, _LEAK_STEMS)) + ")")


def leak_word(text: str, names: list[str]) -> str | None:
    """The giveaway in `text`, if any: a word starting with a LEAK_WORD ("injected", "chaos-…"; not
    "default"), or a problem id / injector name anywhere in it."""
    low = text.lower()
    hit = _LEAK_RE.search(low)
    if hit:
        return _LEAK_STEMS[hit.group(1)]
    return next((n for n in names if n and n in low), None)


def leaks(view: AgentView, problem: Problem) -> list[str]:
    """Anything the agent's credentials can read that gives the answer away."""
    words = [problem.id.lower(), *(f.injector.lower() for f in problem.faults)]
    found = []
    kinds = ("pods,deployments,statefulsets,services,configmaps,secrets,networkpolicies,resourcequotas,"
             "serviceaccounts,events,replicasets,jobs,cronjobs")
    for obj in view.get_json(kinds, namespaces=(view.namespace, *view.other_namespaces)):
        what = obj.get("kind", "?").lower() + "s"
        meta = obj.get("metadata", {})
        texts = [meta.get("name", ""), *(meta.get("labels") or {}).keys(), *(meta.get("labels") or {}).values(),
                 *((meta.get("annotations") or {}).keys()),
                 # who wrote what (`--show-managed-fields`): the injector's writes must not sign their name
                 *(str(e.get("manager", "")) for e in meta.get("managedFields") or [])]
        for annotation, value in (meta.get("annotations") or {}).items():
            if annotation != "kubectl.kubernetes.io/last-applied-configuration":
                texts.append(str(value))
        if what == "events":
            texts = [obj.get("reason", ""), obj.get("source", {}).get("component", "")]
        for text in texts:
            hit = leak_word(str(text), words)
            if hit:
                found.append(f"{what}/{meta.get('name')}: '{text}' contains '{hit}'")
    # The farm's own namespace must be out of reach: asked with the agent's token (the one its
    # kubectl carries, so the same RBAC answers), without a kubectl process per problem.
    for path in [f"/apis/chaos-mesh.org/v1alpha1/namespaces/{CHAOS_NAMESPACE}/{plural}" for plural in
                 ("networkchaos", "podchaos", "iochaos", "stresschaos", "timechaos", "kernelchaos")] + [
                 f"/api/v1/namespaces/{CHAOS_NAMESPACE}/pods"]:
        try:
            items = view.kube.request("GET", path).get("items") or []
        except KubeError:
            continue  # forbidden (or no such resource): out of reach
        if items:
            found.append(f"the agent can list objects in {CHAOS_NAMESPACE}: "
                         f"{path.rsplit('/', 1)[-1]}/{items[0]['metadata']['name']}")
            break
    return found


# -- non-fixes ---------------------------------------------------------------------------------

# Cluster time a no-fault control's noise gets to settle before the oracle reads it.
NOISE_SETTLE_S = 180.0
NON_FIX_SETTLE_S = 0.0  # the non-fixes fail on checks no waiting changes: no cluster time needed


# The agent's own load generator runs this many times the farm's: summed over the namespace, its
# traffic would lift a failing figure far above FLOOD_LIFT (the farm's own may move less); more
# would overload the application as deployed, and scaling it up costs the emulator minutes per
# problem (tests/security/test_mitigation_attacks.py plays the attack at full size).
FLOOD_REPLICAS = 3
FLOOD_LIFT = 0.05
DIRECT_SUFFIX = "-direct"  # the agent's second Service in front of the entry pods


class NonFix(NamedTuple):
    """Something an agent could do, with its own token, that silences or props up the incident
    without fixing it: the oracle must fail it. `full`: judged by the whole verdict over its
    window (what it games is measured there: the clients' figures), not by the checks that no
    waiting changes; `keeps_fault`: it moves or works around the injected cause without touching
    it, so failing is not enough: the fault's own check must still find the cause right after."""

    name: str
    apply: Callable[[Any], None]  # given the agent's Kube
    full: bool = False
    keeps_fault: bool = False


def non_fixes(injection: Any, app: Any, kube: Any, deployed: dict[str, Any] | None = None) -> list[NonFix]:
    """The non-fixes of one problem, generated from its faulted workload (the first workload a
    lasting fix must survive the restart of, else the workload its ground truth names), the
    objects its faults changed, the entry Service and the application's load generator.
    Leaving the fault in place is the validator's `oracle_fails`. `deployed`: the application's
    desired state as deployed (`desired_state`), where the entry Service's right ports are read."""
    out = _silencing(injection, app, kube)
    reorder = _reordering(injection, app, kube)
    if reorder is not None:
        out.append(reorder)
    out.append(_flood(app, deployed or {}))
    return out


def harms(app: Any, kube: Any) -> list[NonFix]:
    """What an agent could do to a healthy application that its oracle must fail (a no-fault
    control's other way): scale its entry workload to zero, delete it, stop the load generator."""
    kind, obj = kube.workload(app.namespace, app.entrypoint)
    ns, name, lg = app.namespace, app.entrypoint, app.load_generator
    stop_lg = NonFix(f"stop the load generator {lg}",
                     lambda kube: kube.patch(kube.workload(ns, lg)[0], ns, lg, {"spec": {"replicas": 0}}))
    owner = next((o for o in obj["metadata"].get("ownerReferences") or [] if o.get("controller")), None)
    if owner is not None:
        # An operator puts its workload back: the harm is to what the operator reads.
        okind, oname = owner["kind"], owner["name"]
        return [NonFix(f"delete {okind} {oname}", lambda kube: kube.delete(okind, ns, oname)), stop_lg]
    return [NonFix(f"scale {name} to zero", lambda kube: kube.patch(kind, ns, name, {"spec": {"replicas": 0}})),
            NonFix(f"delete {kind.lower()} {name}", lambda kube: kube.delete(kind, ns, name)), stop_lg]


def _silencing(injection: Any, app: Any, kube: Any) -> list[NonFix]:
    """Scaling the faulted workload to zero, deleting it, pausing it with old pods serving,
    renaming its container; stopping the load generator."""
    from core.errors import InjectionError
    from injectors.workload import ContainerMutation

    out: list[NonFix] = []
    targets = injection.restart_targets()
    if not targets:
        component = injection.problem.ground_truth.component
        if re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", component):
            for kind in ("Deployment", "StatefulSet"):
                try:
                    kube.workload(app.namespace, component, kind)
                except (InjectionError, KubeError):
                    continue
                targets = [f"{kind}/{app.namespace}/{component}"]
                break
    if targets:
        kind, ns, name = targets[0].split("/", 2)
        out.append(NonFix(f"scale {name} to zero",
                          lambda kube: kube.patch(kind, ns, name, {"spec": {"replicas": 0}})))
        out.append(NonFix(f"delete {kind.lower()} {name}", lambda kube: kube.delete(kind, ns, name)))
        if kind == "Deployment":
            out.append(NonFix(f"pause {name} with its previous pods serving",
                              lambda kube: _pause_with_old_pods(kube, ns, name)))
        templated = [(inj.saved.get("container_index") or 0) for f, inj in injection.injectors
                     if isinstance(f, ContainerMutation) and inj.saved.get("ref") == targets[0]]
        if templated:
            index = templated[0]
            out.append(NonFix(f"rename {name}'s container",
                              lambda kube: _rename_container(kube, kind, ns, name, index)))
    lg = app.load_generator
    out.append(NonFix(f"stop the load generator {lg}",
                      lambda kube: kube.patch(kube.workload(app.namespace, lg)[0], app.namespace, lg,
                                              {"spec": {"replicas": 0}})))
    return out


def _changed(injection: Any, kinds: tuple[str, ...]) -> list[str]:
    """The objects of those kinds the problem's faults changed or restart, as "Kind/namespace/name"."""
    refs = [str(inj.saved.get("ref", "")) for _, inj in injection.injectors] + list(injection.restart_targets())
    return list(dict.fromkeys(r for r in refs if r.split("/", 1)[0] in kinds))


def _reordering(injection: Any, app: Any, kube: Any) -> NonFix | None:
    """Every list the fault could be looked up in, reordered without changing what runs: a port
    inserted first in the entry Service and each Service the faults changed; the containers of
    each faulted workload reversed, and in each container its env (names kept in their order
    among themselves, so the definition that wins stays the one that wins) and its ports. A
    check that reads by position sees other items; the fault is where it was."""
    services = _changed(injection, ("Service",))
    entry = f"Service/{app.namespace}/{app.entrypoint}"
    if kube.find("Service", app.namespace, app.entrypoint) is not None and entry not in services:
        services.append(entry)
    workloads = _changed(injection, ("Deployment", "StatefulSet"))
    if not services and not workloads:
        return None

    def apply(agent: Any) -> None:
        for ref in services:
            _, ns, name = ref.split("/", 2)
            svc = agent.find("Service", ns, name)
            if svc is None:
                continue
            ports = svc["spec"].get("ports") or []
            taken = {p.get("port") for p in ports}
            spare = next(n for n in range(18080, 65535) if n not in taken)
            for i, p in enumerate(ports):
                p.setdefault("name", f"p{i}")  # a Service of two ports names both
            svc["spec"]["ports"] = [{"name": "zz-spare", "port": spare, "targetPort": spare, "protocol": "TCP"}, *ports]
            svc.pop("status", None)
            agent.replace("Service", ns, svc)
        for ref in workloads:
            kind, ns, name = ref.split("/", 2)
            obj = agent.find(kind, ns, name)
            if obj is None:
                continue
            pod = obj["spec"]["template"]["spec"]
            pod["containers"] = list(reversed(pod.get("containers") or []))
            for c in pod["containers"]:
                if c.get("env"):
                    c["env"] = _reverse_keeping_names(c["env"])
                if c.get("ports"):
                    c["ports"] = list(reversed(c["ports"]))
            obj.pop("status", None)
            agent.replace(kind, ns, obj)

    what = ", ".join(r.split("/", 2)[2] for r in [*services, *workloads])
    return NonFix(f"reorder the lists of {what}", apply, keeps_fault=True)


def _reverse_keeping_names(env: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Env entries in reverse order of their names' first appearance, the entries of one name
    in their own order (the last still wins)."""
    first: dict[Any, int] = {}
    for i, e in enumerate(env):
        first.setdefault(e.get("name"), i)
    return sorted(env, key=lambda e: -first[e.get("name")])


def _flood(app: Any, deployed: dict[str, Any]) -> NonFix:
    """Issue 23's attack: a second Service in front of the entry pods (with the ports as
    deployed, so that it works whatever the fault did to the entry Service) and an own load
    generator against it: the farm's generator copied under another name, same image, pod
    labels and metric names, FLOOD_REPLICAS times over. Judged over the full window: it must
    not lift the client success rate the oracle reads by more than FLOOD_LIFT above the fault's
    own reading, or if it does, above the same window rewound and run without it."""
    entry, lg = app.entrypoint, app.load_generator
    direct = f"{entry}{DIRECT_SUFFIX}"[:63]
    right = deployed.get(f"Service/{entry}") or {}

    def apply(agent: Any) -> None:
        target = entry
        if right.get("ports") and right.get("selector"):
            ports = [{k: p[k] for k in ("name", "port", "targetPort", "protocol") if k in p} for p in right["ports"]]
            agent.create("Service", app.namespace, {"metadata": {"name": direct},
                                                   "spec": {"selector": dict(right["selector"]), "ports": ports}})
            target = direct
        kind, obj = agent.workload(app.namespace, lg)
        clone = json.loads(json.dumps(obj))
        clone.pop("status", None)
        meta = clone["metadata"]
        clone["metadata"] = {"name": f"{lg}-canary"[:63], "labels": dict(meta.get("labels") or {})}
        spec = clone["spec"]
        spec["replicas"] = FLOOD_REPLICAS * int(spec.get("replicas") or 1)
        spec["selector"] = {"matchLabels": {**spec["selector"].get("matchLabels", {}), "track": "canary"}}
        template = spec["template"]
        template.setdefault("metadata", {}).setdefault("labels", {})["track"] = "canary"
        if target != entry:
            pattern = re.compile(rf"(?<![\w.-]){re.escape(entry)}(?![\w-])")
            for c in (template["spec"].get("containers") or []) + (template["spec"].get("initContainers") or []):
                c["command"] = [pattern.sub(target, w) for w in c.get("command") or []] or None
                c["args"] = [pattern.sub(target, w) for w in c.get("args") or []] or None
                for e in c.get("env") or []:
                    if isinstance(e.get("value"), str):
                        e["value"] = pattern.sub(target, e["value"])
                for key in ("command", "args"):
                    if c[key] is None:
                        c.pop(key)
        if kind == "StatefulSet":
            spec["serviceName"] = clone["metadata"]["name"]
        agent.create(kind, app.namespace, clone)

    return NonFix(f"a second Service {direct} and an own {lg} x{FLOOD_REPLICAS} against it", apply, full=True,
                  keeps_fault=True)


def _rename_container(kube: Any, kind: str, namespace: str, name: str, index: int) -> None:
    obj = kube.get(kind, namespace, name)
    container = obj["spec"]["template"]["spec"]["containers"][index]
    container["name"] = container["name"][:50] + "-main"
    obj.pop("status", None)
    kube.replace(kind, namespace, obj)


def _pause_with_old_pods(kube: Any, namespace: str, name: str) -> None:
    """The reverse hole: pause the deployment, delete its newest ReplicaSet and scale the one
    before it up, so that pods of an older template serve while the template stays as it is."""
    deployment = kube.patch("Deployment", namespace, name, {"spec": {"paused": True}})
    uid, replicas = deployment["metadata"]["uid"], int(deployment["spec"].get("replicas") or 1)
    owned = sorted((rs for rs in kube.list("ReplicaSet", namespace)
                    if any(o.get("uid") == uid for o in rs["metadata"].get("ownerReferences") or [])),
                   key=lambda rs: int((rs["metadata"].get("annotations") or {}).get(
                       "deployment.kubernetes.io/revision", "0")))
    if len(owned) >= 2:
        kube.delete("ReplicaSet", namespace, owned[-1]["metadata"]["name"])
        kube.patch("ReplicaSet", namespace, owned[-2]["metadata"]["name"], {"spec": {"replicas": replicas}})


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
    kube = Kube.of(cluster)
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
    kube = Kube.of(cluster)
    api = client.CustomObjectsApi(kube.api)
    out = []
    if kube.find("Namespace", "", CHAOS_NAMESPACE) is not None:
        for plural in ("podchaos", "networkchaos", "iochaos", "stresschaos", "timechaos", "kernelchaos"):
            try:
                items = cast(dict[str, Any], api.list_namespaced_custom_object("chaos-mesh.org", "v1alpha1", CHAOS_NAMESPACE, plural))
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

    def __init__(self, cluster: ClusterHandle, on_step: Callable[[str, StepOutcome], None] | None = None,
                 noise: str = "", kubectl: str | None = None) -> None:
        self.cluster = cluster
        # The kubectl binary the agent's commands (the reference mitigation among them) run with
        # (None: FARM_KUBECTL, else PATH's): clients differ (kubectl >= 1.28's `set resources` also
        # sets init containers, 1.33 creates with protobuf bodies), so it is a choice.
        self.kubectl = kubectl
        self.on_step = on_step
        # A sweep's noise level (injectors.compose.ambient_noises): when set, the noise runs from the
        # injection to the mitigation, so the symptom, leak and oracle checks hold under it too.
        self.noise = noise
        self._checkpoints: dict[str, str] = {}
        self._deployed: dict[str, Any] = {}  # app → desired state right after deploy
        self._healthy: dict[str, tuple[bool, str]] = {}  # app → default oracle verdict on the checkpoint
        # app → the oracle's baseline and the signals of both symptom windows, read on the checkpoint:
        # a restore puts back that very moment, so every problem would read the same.
        self._before: dict[str, tuple[Any, dict[str, Any], dict[str, Any]]] = {}
        self._views: dict[tuple[str, str | None], AgentView] = {}  # (namespace, kubectl binary) → view

    def __enter__(self) -> Validator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for view in self._views.values():
            view.close()
        self._views = {}

    def _view(self, namespace: str, app: Any, kubectl: str | None) -> AgentView:
        # One kubectl home per namespace and binary, so its discovery cache serves every problem.
        key = (namespace, kubectl)
        if key not in self._views:
            self._views[key] = AgentView(self.cluster, namespace, app.entrypoint, app.client_success_query,
                                         app.extra_namespaces, kubectl=kubectl)
        return self._views[key]

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
        from apps.application import load_application
        from farm.deploy import deploy

        app = load_application(problem.app)
        name = f"validate-{problem.app}"
        rewinds = self.cluster.capabilities.checkpoints
        if name in self._checkpoints and rewinds:
            self.cluster.restore(name)
            return app, 0.0
        self.cluster.reset()
        took = deploy(self.cluster, app, namespace)
        self.cluster.advance(WARMUP_S)
        # The agent's account is part of the checkpoint, so restores keep it valid.
        self.cluster.agent_kubeconfig(namespace, also=tuple(app.extra_namespaces))
        self._deployed[problem.app] = desired_state(self.cluster, namespace, app.extra_namespaces)
        # The default oracle's verdict on the deployed app, checked once: every restore returns
        # to exactly this state.
        self._healthy[problem.app] = self._check_healthy(app, problem.model_copy(
            update={"oracle": OracleSpec()}), namespace)
        if rewinds:
            self.cluster.checkpoint(name)
            self._checkpoints[name] = name
        return app, took

    def validate(self, problem: Problem, kubectl: str | None = None) -> ValidationResult:
        """Every step for `problem`; `kubectl`: the binary its reference mitigation runs with this
        time (default: the validator's), so one deployment serves several kubectl versions."""
        from farm.oracles.mitigation import MitigationOracle
        from injectors.compose import NoiseRunner, ProblemInjection, ambient_noises, fault_components

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

        if problem.needs_real_cluster and not self.cluster.capabilities.node_tasks:
            steps.append(StepOutcome(name="deploy", ok=False, skipped=True,
                                     detail="needs a real cluster (a mechanism the emulated cluster lacks)"))
            return result()

        state: dict[str, Any] = {}

        def do_deploy() -> str:
            from apps.application import load_application

            app = load_application(problem.app)
            state["namespace"] = app.namespace
            state["app"], took = self._prepare(problem, app.namespace)
            return f"ready after {took:.0f}s of cluster time" if took else "restored from checkpoint"

        if not step("deploy", do_deploy):
            return result()
        t0 = self.cluster.now()
        ns, app = state["namespace"], state["app"]
        oracle = MitigationOracle(app, problem)
        view = self._view(ns, app, kubectl or self.kubectl)
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
                # On the checkpoint (default oracle), the baseline and the "before" readings are those
                # of the checkpoint itself; otherwise they are read now.
                on_checkpoint = default and f"validate-{problem.app}" in self._checkpoints
                if on_checkpoint and problem.app in self._before:
                    baseline, before, before_long = self._before[problem.app]
                else:
                    baseline = oracle.capture_baseline(self.cluster, ns)
                    # The windows of the symptom's two looks, so that counts compare.
                    before = view.signals(self.cluster.now() - SYMPTOM_SETTLE_S)
                    before_long = view.signals(self.cluster.now() - 2 * SYMPTOM_SETTLE_S)
                    if on_checkpoint:
                        self._before[problem.app] = (baseline, before, before_long)
                if not before["traces"] and before["success"] is None:
                    raise StepFailed(f"no telemetry in the {SYMPTOM_SETTLE_S:.0f} s before injection "
                                     "(no traces, no client success rate): nothing to compare a symptom with")
                state["baseline"] = baseline.model_copy(deep=True)
                state["since"] = self.cluster.now()
                state["before"], state["before_long"] = before, before_long
                return detail

            def inject() -> str:
                records = injection.inject(self.cluster, ns)
                state["active"] = injection.active(self.cluster)
                # A no-fault control's own noises are its incident, run as a trial runs them.
                if self.noise or (problem.no_fault and problem.noises):
                    specs = ambient_noises(problem, self.noise) if self.noise else problem.noises
                    runner = NoiseRunner(specs, seed=0, avoid=fault_components(problem))
                    runner.start(self.cluster, ns)
                    state["noise"] = runner
                self.cluster.advance(SYMPTOM_SETTLE_S)
                if problem.no_fault:
                    return "nothing injected (a no-fault control)" + (" with its own noise" if "noise" in state else "")
                return ", ".join(r.injector for r in records)

            def noise_keeps_fault() -> str:
                """The noise ran through the symptom, leak and oracle checks; it must not have taken
                the fault away (its own check reads as right after the injection)."""
                runner = state.pop("noise")
                active = injection.active(self.cluster)
                runner.stop(self.cluster)
                if active != state["active"]:
                    raise StepFailed(f"under noise at {self.noise} the fault's own checks went from "
                                     f"{state['active']} to {active}")
                fired = Counter(r["injector"].removeprefix("noise:") for r in runner.records()
                                for e in r["saved"]["events"] if e["fired"])
                errors = f"; errors: {'; '.join(runner.errors[:3])}" if runner.errors else ""
                return "noise fired " + ", ".join(f"{k} x{n}" for k, n in sorted(fired.items())) + errors

            def symptom() -> str:
                after = view.signals(state["since"])
                found = symptom_evidence(state["before"], after, oracle.spec.success_rate)
                if not found:
                    # A second look, as an on-call engineer would take: some symptoms need longer to
                    # show (an alert over a 5-minute rate with a `for:`). Both windows double.
                    self.cluster.advance(SYMPTOM_SETTLE_S)
                    after = view.signals(state["since"])
                    found = symptom_evidence(state["before_long"], after, oracle.spec.success_rate)
                if not found:
                    raise StepFailed(f"nothing the agent's tools show changed in the {2 * SYMPTOM_SETTLE_S:.0f} s "
                                     "after the injection")
                state["evidence"] = found
                return "; ".join(e.text for e in found[:4])

            def no_leak() -> str:
                found = leaks(view, problem)
                if found:
                    raise StepFailed("; ".join(found[:5]))
                return "nothing readable by the agent names the fault"

            def oracle_fails() -> str:
                verdict = oracle.evaluate(self.cluster, ns, state["baseline"], injection)
                if verdict.passed:
                    raise StepFailed("the mitigation oracle passes with the fault in place")
                state["success_rate"], state["checks"] = verdict.success_rate, dict(verdict.checks)
                blind = oracle_blind_to(verdict.checks, state.get("evidence", []))
                if blind:
                    raise StepFailed("the oracle fails only on the fault's own check, yet the agent's tools show "
                                     f"what its health checks measure: {'; '.join(blind[:3])}")
                return verdict.detail[:200]

            def non_fixes_fail() -> str:
                if problem.diagnosis_only:
                    return "diagnosis only: the mitigation is not scored"
                if not self.cluster.capabilities.checkpoints:
                    return "not run: this cluster cannot rewind between non-fixes"
                candidates = non_fixes(injection, app, Kube.of(self.cluster), self._deployed.get(problem.app))
                if not candidates:
                    return "none apply"
                mark = "validate-non-fix"
                self.cluster.checkpoint(mark)
                passed = []
                # The clients' figure with the fault in place: traffic of the agent's own must not lift it.
                success_before = state.get("success_rate") or 0.0
                fault_seen = state.get("checks", {}).get("fault_resolved") is False
                try:
                    for i, nf in enumerate(candidates):
                        if i:
                            self.cluster.restore(mark)  # the first starts from the very moment the mark holds
                        nf.apply(view.kube)
                        if NON_FIX_SETTLE_S:
                            self.cluster.advance(NON_FIX_SETTLE_S)
                        # Read at once: over a window a fault may leave by itself (a node's pods evicted).
                        lost = nf.keeps_fault and fault_seen and not any(injection.active(self.cluster))
                        verdict = oracle.evaluate(self.cluster, ns, state["baseline"], injection, fail_fast=not nf.full)
                        if verdict.passed:
                            passed.append(nf.name)
                        elif lost:
                            passed.append(f"{nf.name} (the fault's own check lost the fault)")
                        elif nf.full and (verdict.success_rate or 0.0) > success_before + FLOOD_LIFT:
                            # Higher than with the fault fresh; the same window with no non-fix at all
                            # (the cluster rewound) tells the agent's traffic from what time did alone.
                            self.cluster.restore(mark)
                            alone = oracle.evaluate(self.cluster, ns, state["baseline"], injection).success_rate or 0.0
                            if (verdict.success_rate or 0.0) > alone + FLOOD_LIFT:
                                passed.append(f"{nf.name} (lifted the client success rate to "
                                              f"{verdict.success_rate:.3f}; {alone:.3f} without it)")
                finally:
                    self.cluster.restore(mark)
                if passed:
                    raise StepFailed(f"the oracle passes non-fixes: {'; '.join(passed)}")
                return f"{len(candidates)} fail: " + "; ".join(nf.name for nf in candidates)

            def mitigate() -> str:
                if problem.diagnosis_only:
                    return "diagnosis only: no fix within the agent's scope"
                done = []
                for i, mstep in enumerate(problem.mitigation):
                    if mstep.kubectl is not None:
                        command = injection.fill(mstep.kubectl)
                        code, text = view.run(command, mstep.manifest)
                        if code != 0:
                            raise StepFailed(f"mitigation[{i}] `{command}` failed: {text.strip()[:200]}")
                        done.append(mstep.kubectl.split()[0])
                    elif mstep.recover is not None:
                        raise StepFailed(f"mitigation[{i}] is `recover: {mstep.recover}`, a farm step with the "
                                         "farm's credentials: no agent could take it")
                    if mstep.wait:
                        self.cluster.advance(mstep.wait)
                return ", ".join(done)

            def oracle_passes() -> str:
                if problem.diagnosis_only:
                    return "diagnosis only: the mitigation is not scored"
                verdict = oracle.evaluate(self.cluster, ns, state["baseline"], injection)
                if not verdict.passed:
                    raise StepFailed(f"the oracle still fails after the reference mitigation: {verdict.detail}")
                return f"success rate {verdict.success_rate}"

            def recover() -> str:
                injection.recover(self.cluster)

                def leftovers() -> list[str]:
                    return farm_leftovers(self.cluster) + diff_states(
                        self._deployed.get(problem.app, {}), desired_state(self.cluster, ns, app.extra_namespaces))

                # Clean at once is clean; otherwise finalizers and helper jobs get 30 s to go.
                left = leftovers()
                if left:
                    self.cluster.advance(30)
                    left = leftovers()
                if left:
                    raise StepFailed(f"left behind: {', '.join(left)[:300]}")
                return "cluster as deployed"

            def quiet() -> str:
                """A no-fault control shows nothing an agent could call a symptom; with its own noise,
                it shows the noise (else it would be the plain control again)."""
                after = view.signals(state["since"])
                found = symptom_evidence(state["before"], after, oracle.spec.success_rate)
                if problem.noises and not self.noise:
                    if not found:
                        raise StepFailed("the control's noise left nothing the agent's tools show")
                    return "only the noise shows: " + "; ".join(e.text for e in found[:4])
                if found and not self.noise:
                    raise StepFailed("a no-fault control shows a symptom: " + "; ".join(e.text for e in found[:4]))
                return "nothing the agent's tools show changed" if not found else "only the ambient noise shows"

            def oracle_passes_untouched() -> str:
                if "noise" in state:
                    state.pop("noise").stop(self.cluster)  # as in a trial: the noise stops before the oracles
                    # What the noise replaced comes up meanwhile, as it would while an agent looks
                    # (a train-ticket Java service takes minutes to be ready).
                    self.cluster.advance(NOISE_SETTLE_S)
                verdict = oracle.evaluate(self.cluster, ns, state["baseline"], injection)
                if not verdict.passed:
                    raise StepFailed(f"the oracle fails a healthy application nobody touched: {verdict.detail}")
                return f"success rate {verdict.success_rate}"

            def harms_fail() -> str:
                if not self.cluster.capabilities.checkpoints:
                    return "not run: this cluster cannot rewind between harms"
                mark = "validate-harm"
                self.cluster.checkpoint(mark)
                passed = []
                candidates = harms(app, Kube.of(self.cluster))
                try:
                    for i, harm in enumerate(candidates):
                        if i:
                            self.cluster.restore(mark)
                        harm.apply(view.kube)
                        if oracle.evaluate(self.cluster, ns, state["baseline"], injection, fail_fast=True).passed:
                            passed.append(harm.name)
                finally:
                    self.cluster.restore(mark)
                if passed:
                    raise StepFailed(f"the oracle passes harmful changes to a healthy application: {'; '.join(passed)}")
                return f"{len(candidates)} fail: " + "; ".join(h.name for h in candidates)

            noise_steps = [("noise_keeps_fault", noise_keeps_fault)] if self.noise else []
            steps_of_problem = [("healthy", healthy), ("inject", inject), ("symptom_visible", symptom),
                                ("no_leak", no_leak), ("oracle_fails", oracle_fails), *noise_steps,
                                ("non_fixes", non_fixes_fail), ("mitigation", mitigate),
                                ("oracle_passes", oracle_passes)]
            if problem.no_fault:
                # Both ways for a control: untouched it passes, harmed it fails.
                steps_of_problem = [("healthy", healthy), ("inject", inject), ("no_symptom", quiet),
                                    ("no_leak", no_leak), ("oracle_passes_untouched", oracle_passes_untouched),
                                    ("harms_fail", harms_fail)]
            for name, fn in steps_of_problem:
                if not step(name, fn):
                    break
            step("recover_clean", recover)
        finally:
            if "noise" in state:
                try:
                    state.pop("noise").stop(self.cluster)
                except Exception:  # as below: the next problem starts from a checkpoint or a reset
                    pass
            if injection.injectors:
                try:
                    injection.recover(self.cluster)
                except Exception:  # the next problem starts from a checkpoint or a reset anyway
                    pass
        return result()

    def validate_all(self, problems: Iterable[Problem]) -> list[ValidationResult]:
        ordered = sorted(problems, key=lambda p: (p.app, p.id))
        return [self.validate(p) for p in ordered]
