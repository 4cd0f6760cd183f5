"""The `baseline` agent: no model. It works the incident the way an on-call engineer without
insight would: unhealthy pods, warning events, broken services, error logs, failing traces, and
what changed last; it names the component with the most evidence, tries the generic mitigations
in order (roll back a changed deployment, revert drift from the declared config, scale back,
restart stuck pods, repair an orphaned service), checks the effect after a wait, undoes what made
things worse, and submits. It sees only what the MCP tools show: the floor every LLM agent is
compared to.

It is greedy the way paged engineers are: the most recent change in the namespace (the newest
pod) is a prime suspect, and it does not check whether that change explains the failure. With no
noise the newest pod is usually the fault's own rollout; with noise it is often a pod that a
routine disturbance replaced, and a subtle fault loses to it, as it would for a person."""

from __future__ import annotations

import json
import random
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from core.errors import LimitReached
from core.secrets import scrub
from core.states import END_AGENT_ERROR, END_AGENT_STOPPED, END_SUBMITTED, LIMIT_STEPS
from farm.agents.agent import Agent, AgentContext, AgentResult, agents

BAD_REASONS = {"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError",
               "CreateContainerError", "OOMKilled", "Error", "RunContainerError", "InvalidImageName"}
_ERROR_WORDS = '(?i)(error|warn|fail|refused|timeout|timed out|panic|fatal|exception|unavailable|denied)'
# Alerts that fire on a healthy system too: the dead man's switch and SREGym's load indicator.
_NOT_FAILURES = ("Watchdog", "InfoInhibitor", "HighRequestRate")
SETTLE_S = 90.0  # cluster time to let a mitigation take effect before judging it
# The newest pod counts as "the latest change" when it came up at least this long after most of
# the application's pods (a rollout or a replacement, not the original deployment).
RECENT_CHANGE_S = 60.0
# The first thing a paged engineer suspects: as much as a failing workload (an unhealthy pod, 3,
# whose deployment is unavailable, 2), so only a louder failure or more evidence outranks it.
LATEST_CHANGE_WEIGHT = 5.0
RECENT_CHANGE_WEIGHT = 1.0  # other pods replaced since the deployment


@dataclass
class Health:
    """What a quick look at the namespace shows; lower `badness` is healthier."""

    unhealthy_pods: dict[str, str] = field(default_factory=dict)  # pod -> reason
    unavailable: dict[str, str] = field(default_factory=dict)  # deployment -> "ready/desired"
    empty_services: list[str] = field(default_factory=list)
    misrouted: dict[str, str] = field(default_factory=dict)  # service -> why its port misses the pods
    unserved: dict[str, int] = field(default_factory=dict)  # deployment with ports but no service -> port
    newcomers: list[str] = field(default_factory=list)  # policies/quotas created after the application

    @property
    def badness(self) -> int:
        return (len(self.unhealthy_pods) + 2 * len(self.unavailable) + 2 * len(self.empty_services)
                + 2 * len(self.misrouted) + 2 * len(self.unserved) + len(self.newcomers))

    @property
    def healthy(self) -> bool:
        return self.badness == 0


class _Session:
    def __init__(self, client: Any, ctx: AgentContext) -> None:
        self.client, self.ctx = client, ctx
        self.steps = 0
        self.transcript: list[dict[str, Any]] = []

    def call(self, name: str, **args: Any) -> tuple[str, bool]:
        # Two steps stay reserved for the submissions, so a long investigation still ends in one.
        budget = self.ctx.limits.max_steps - (0 if name.startswith("submit_") else 2)
        if self.steps >= budget:
            raise LimitReached(LIMIT_STEPS, f"{self.steps} tool calls")
        self.steps += 1
        text, is_error = self.client.call(name, **args)
        self.transcript.append({"role": "tool", "name": name, "args": args, "output": scrub(text[:4000]),
                                "is_error": is_error})
        return text, is_error

    def rows(self, resource: str, fields: list[tuple[str, str]]) -> list[dict[str, Any]]:
        """`kubectl get RESOURCE` narrowed by a jsonpath to the fields the agent reads (whole
        objects would not fit the tool's output limit), rebuilt into the objects' own shape.
        `fields` pairs a dotted key in the rebuilt object with a jsonpath."""
        tab, newline = '{"\\t"}', '{"\\n"}'
        template = "{range .items[*]}" + tab.join("{" + path + "}" for _, path in fields) + newline + "{end}"
        text, err = self.call("kubectl", command=f"get {resource} -o jsonpath='{template}'")
        if err:
            return []
        out = []
        for line in text.splitlines():
            parts = line.split("\t", len(fields) - 1)
            if len(parts) != len(fields) or not parts[0]:
                continue
            obj: dict[str, Any] = {}
            for (key, _), raw in zip(fields, parts, strict=True):
                _set(obj, key, _value(raw))
            out.append(obj)
        return out

    def kube_json(self, command: str) -> dict[str, Any]:
        text, err = self.call("kubectl", command=command)
        if err:
            return {}
        try:
            return json.loads(text)
        except ValueError:
            return {}


def _revision(workload: dict[str, Any]) -> int:
    meta = workload.get("metadata") or {}
    raw = meta.get("revision") or (meta.get("annotations") or {}).get("deployment.kubernetes.io/revision") or 1
    try:
        return int(raw)
    except (TypeError, ValueError):
        return 1


def _value(raw: str) -> Any:
    if raw == "":
        return None
    if raw[0] in "[{":
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _set(obj: dict[str, Any], dotted: str, value: Any) -> None:
    """Set `a.b.0.c` in nested dicts, with numeric parts as one-element lists."""
    parts = dotted.split(".")
    cur: Any = obj
    for part, nxt in zip(parts, parts[1:], strict=False):
        if isinstance(cur, list):
            while len(cur) <= int(part):
                cur.append({})
            cur = cur[int(part)]
            continue
        cur = cur.setdefault(part, [] if nxt.isdigit() else {})
    last = parts[-1]
    if isinstance(cur, list):
        while len(cur) <= int(last):
            cur.append({})
        cur[int(last)] = value
    else:
        cur[last] = value


REVISION = r".metadata.annotations.deployment\.kubernetes\.io/revision"
POD_FIELDS = [("metadata.name", ".metadata.name"), ("status.phase", ".status.phase"),
              ("metadata.creationTimestamp", ".metadata.creationTimestamp"),
              ("metadata.deletionTimestamp", ".metadata.deletionTimestamp"),
              ("metadata.labels", ".metadata.labels"), ("spec.containers.0.ports", ".spec.containers[0].ports"),
              ("status.containerStatuses", ".status.containerStatuses")]
WORKLOAD_FIELDS = [("metadata.name", ".metadata.name"), ("spec.replicas", ".spec.replicas"),
                   ("status.readyReplicas", ".status.readyReplicas"),
                   ("metadata.revision", REVISION),
                   ("metadata.creationTimestamp", ".metadata.creationTimestamp"),
                   ("spec.template.metadata.labels", ".spec.template.metadata.labels"),
                   ("spec.template.spec.containers.0.ports", ".spec.template.spec.containers[0].ports")]
SERVICE_FIELDS = [("metadata.name", ".metadata.name"), ("spec.selector", ".spec.selector"), ("spec.ports", ".spec.ports")]
ENDPOINT_FIELDS = [("metadata.name", ".metadata.name"), ("subsets", ".subsets")]
EVENT_FIELDS = [("involvedObject.kind", ".involvedObject.kind"), ("involvedObject.name", ".involvedObject.name"),
                ("type", ".type"), ("reason", ".reason"), ("count", ".count"), ("message", ".message")]
EXTRA_FIELDS = [("metadata.name", ".metadata.name"), ("kind", ".kind"),
                ("metadata.creationTimestamp", ".metadata.creationTimestamp")]


def _owner(pod: dict[str, Any], deployments: list[str]) -> str:
    name = pod["metadata"]["name"]
    for dep in sorted(deployments, key=len, reverse=True):
        if name.startswith(dep + "-"):
            return dep
    return re.sub(r"(-[a-z0-9]{8,10})?-[a-z0-9]{5}$", "", name)


def _component_of(object_name: str, names: list[str]) -> str:
    """The workload an object belongs to: itself, or the one whose name prefixes it (pods, replica sets)."""
    if object_name in names:
        return object_name
    for name in sorted(names, key=len, reverse=True):
        if object_name.startswith(name + "-"):
            return name
    return object_name


def _service_of(text: str, names: list[str]) -> str | None:
    for name in sorted(names, key=len, reverse=True):
        if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text):
            return name
    return None


class BaselineInvestigator:
    """One incident, start to finish."""

    def __init__(self, session: _Session, rng: random.Random) -> None:
        self.s, self.rng = session, rng
        self.score: defaultdict[str, float] = defaultdict(float)
        self.evidence: dict[str, list[str]] = defaultdict(list)
        self.deployments: dict[str, dict[str, Any]] = {}
        self.statefulsets: dict[str, dict[str, Any]] = {}
        self.pods: list[dict[str, Any]] = []
        self.services: dict[str, dict[str, Any]] = {}
        self.callers: set[str] = set()

    def note(self, component: str, weight: float, text: str) -> None:
        self.score[component] += weight
        if text not in self.evidence[component]:
            self.evidence[component].append(text)

    # -- looking ---------------------------------------------------------------------------
    def look(self) -> Health:
        deps = self.s.rows("deployments", WORKLOAD_FIELDS)
        self.deployments = {d["metadata"]["name"]: d for d in deps}
        sts = self.s.rows("statefulsets", WORKLOAD_FIELDS)
        self.statefulsets = {d["metadata"]["name"]: d for d in sts}
        self.pods = self.s.rows("pods", POD_FIELDS)
        health = Health()
        for pod in self.pods:
            status = pod.get("status") or {}
            name = pod["metadata"]["name"]
            if pod["metadata"].get("deletionTimestamp"):
                continue
            if status.get("phase") == "Pending":
                cond: dict[str, Any] = next(
                    (c for c in status.get("conditions") or [] if c.get("status") == "False"), {})
                health.unhealthy_pods[name] = f"Pending ({cond.get('reason') or 'not scheduled'}: {cond.get('message', '')})"
            for cs in status.get("containerStatuses") or []:
                waiting = (cs.get("state") or {}).get("waiting") or {}
                last = (cs.get("lastState") or {}).get("terminated") or {}
                if waiting.get("reason") in BAD_REASONS:
                    detail = waiting.get("message") or last.get("reason") or ""
                    health.unhealthy_pods[name] = f"{waiting['reason']} {detail}".strip()
                elif not cs.get("ready") and status.get("phase") == "Running":
                    health.unhealthy_pods.setdefault(name, "Running but not ready")
                if last.get("reason") == "OOMKilled":
                    health.unhealthy_pods.setdefault(name, "OOMKilled")
        for name, d in {**self.deployments, **self.statefulsets}.items():
            want = (d.get("spec") or {}).get("replicas")
            want = 1 if want is None else int(want)
            ready = int((d.get("status") or {}).get("readyReplicas") or 0)
            if want == 0 or ready < want:
                health.unavailable[name] = f"{ready}/{want}"
        eps = self.s.rows("endpoints", ENDPOINT_FIELDS)
        svcs = self.s.rows("services", SERVICE_FIELDS)
        self.services = {s["metadata"]["name"]: s for s in svcs}
        for ep in eps:
            name = ep["metadata"]["name"]
            svc = self.services.get(name)
            if not svc or not (svc.get("spec") or {}).get("selector"):
                continue
            ready = sum(len(sub.get("addresses") or []) for sub in ep.get("subsets") or [])
            if ready == 0:
                health.empty_services.append(name)
        for name, svc in self.services.items():
            why = _port_mismatch(svc, self.pods)
            if why:
                health.misrouted[name] = why
        for name, d in self.deployments.items():
            port = _first_port(d)
            labels = (((d.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {}
            selected = any((s.get("spec") or {}).get("selector") and all(
                labels.get(k) == v for k, v in s["spec"]["selector"].items()) for s in self.services.values())
            if port and not selected:
                health.unserved[name] = port
        extra = self.s.rows("networkpolicies,resourcequotas", EXTRA_FIELDS)
        born = sorted(str((d.get("metadata") or {}).get("creationTimestamp") or "") for d in self.deployments.values())
        if born:
            for item in extra:
                meta = item.get("metadata") or {}
                if str(meta.get("creationTimestamp") or "") > born[-1]:
                    health.newcomers.append(f"{item.get('kind', '').lower()}/{meta.get('name')}")
        return health

    def investigate(self) -> Health:
        health = self.look()
        names = sorted(self.deployments) + sorted(self.statefulsets)
        for pod_name, reason in health.unhealthy_pods.items():
            owner = next((p for p in self.pods if p["metadata"]["name"] == pod_name), None)
            comp = _owner(owner, names) if owner else pod_name
            self.note(comp, 3, f"pod {pod_name} is {reason}")
        for dep, ready in health.unavailable.items():
            self.note(dep, 2, f"{dep} has {ready} replicas ready")
            if ready.endswith("/0"):
                self.note(dep, 2, f"{dep} is scaled to zero replicas")
        for svc in health.empty_services:
            comp = svc if svc in names else (_service_of(svc, names) or svc)
            self.note(comp, 3, f"service {svc} has no ready endpoints")
        for svc, why in health.misrouted.items():
            comp = svc if svc in names else (_service_of(svc, names) or svc)
            self.note(comp, 3, f"service {svc} {why}")
        for dep in health.unserved:
            self.note(dep, 2.5, f"no service selects the pods of {dep}, so nothing can reach it")
        for item in health.newcomers:
            self.note(item, 2, f"{item} was created after the application was deployed")
        for name, d in self.deployments.items():
            rev = _revision(d)
            if rev > 1:
                self.note(name, 1.5, f"deployment {name} was changed after it was deployed (revision {rev})")
        self._recent_changes(names)
        for pod in self.pods:
            for cs in (pod.get("status") or {}).get("containerStatuses") or []:
                if int(cs.get("restartCount") or 0) >= 3:
                    comp = _owner(pod, names)
                    self.note(comp, 1, f"pod {pod['metadata']['name']} restarted {cs['restartCount']} times")

        events = self.s.rows("events", EVENT_FIELDS)
        for ev in events:
            if ev.get("type") != "Warning":
                continue
            obj = ev.get("involvedObject") or {}
            comp = _component_of(obj.get("name", "?"), names)
            msg = f"{ev.get('reason')}: {ev.get('message', '')}".strip()
            self.note(comp, 1 + min(int(ev.get("count") or 1), 5) * 0.2, f"event on {obj.get('kind')}/{obj.get('name')}: {msg[:240]}")

        text, err = self.s.call("get_alerts")
        if not err and text != "No firing alerts":
            for line in _alert_lines(text):
                alerted = _service_of(line, names)
                if alerted:
                    self.note(alerted, 1, f"alert: {line[:200]}")

        ns = self.s.ctx.namespace
        text, err = self.s.call("loki_query", query=f'{{namespace="{ns}"}} |~ "{_ERROR_WORDS}"', minutes=15)
        if not err:
            self._read_logs(text, names)

        self._read_traces(names)
        return health

    def _recent_changes(self, names: list[str]) -> None:
        """Pods (re)created well after the bulk of the application: the newest one is the latest
        change in the namespace and gets a paged engineer's first suspicion; other recent ones a
        little. Nothing here asks whether the change can explain the failure."""
        born = []
        for pod in self.pods:
            meta = pod.get("metadata") or {}
            at = _timestamp(meta.get("creationTimestamp"))
            if at is not None and not meta.get("deletionTimestamp"):
                born.append((at, meta["name"], pod))
        if len(born) < 3:
            return
        born.sort(key=lambda b: b[0])
        typical = born[len(born) // 2][0]
        recent = [(at, name, pod) for at, name, pod in born if at - typical >= RECENT_CHANGE_S]
        recent = [(at, name, pod) for at, name, pod in recent if not _is_client(_owner(pod, names))]
        for i, (at, name, pod) in enumerate(reversed(recent)):
            comp = _owner(pod, names)
            minutes = (at - typical) / 60
            if i == 0:
                self.note(comp, LATEST_CHANGE_WEIGHT, f"pod {name} is the most recent change in the namespace: "
                                                      f"created {minutes:.0f} min after most of the application")
            else:
                self.note(comp, RECENT_CHANGE_WEIGHT, f"pod {name} was recreated {minutes:.0f} min after most of "
                                                      "the application")

    def _read_logs(self, text: str, names: list[str]) -> None:
        """Raw lines look like `[time] [labels] line`; summarised ones like `[pod] xN first..last: line`."""
        per: Counter[str] = Counter()
        example: dict[str, str] = {}
        for line in text.splitlines():
            head = line.split("] ", 2)[1] if line.count("] ") >= 2 else line.split("] ", 1)[0]
            comp = _service_of(head, names)
            if not comp or _is_client(comp):
                continue  # the load generator's own complaints are the symptom, not a cause
            counted = re.search(r"\] x(\d+) ", line)
            per[comp] += int(counted.group(1)) if counted else 1
            message = line.split(": ", 1)[1] if counted and ": " in line else line.rsplit("] ", 1)[-1]
            example.setdefault(comp, message[:240])
        for comp, n in per.most_common(4):
            # A service that logs errors about a callee it names is a caller, not the origin.
            callee = _service_of(example[comp].replace(comp, ""), [x for x in names if x != comp])
            if callee:
                self.callers.add(comp)
                self.note(callee, 1.0, f"{comp} logs errors naming {callee}: \"{example[comp]}\"")
                self.note(comp, 0.3, f"{comp} logged {n} error lines, e.g. \"{example[comp]}\"")
            else:
                self.note(comp, min(2.5, 0.5 + n / 10), f"{comp} logged {n} error lines, e.g. \"{example[comp]}\"")

    def _read_traces(self, names: list[str]) -> None:
        text, err = self.s.call("jaeger_services")
        if err:
            return
        try:
            services = json.loads(text)
        except ValueError:
            services = [s.strip() for s in text.split(",")]
        entry = next((s for s in ("frontend", "front-end", "nginx-web-server", "ts-ui-dashboard") if s in services), None)
        if entry is None and services:
            entry = sorted(services)[0]
        if entry is None:
            return
        text, err = self.s.call("jaeger_traces", service=entry, minutes=15, limit=50)
        if err:
            return
        if not text.startswith("["):
            self._read_trace_summary(text, entry, names)
            return
        traces = _json_items(text)
        errors: Counter[str] = Counter()
        depth: dict[str, int] = {}
        for trace in traces:
            processes = trace.get("processes") or {}
            spans = {s["spanID"]: s for s in trace.get("spans") or []}
            for span in spans.values():
                if not _span_error(span):
                    continue
                svc = (span.get("process") or processes.get(span.get("processID", ""), {})).get("serviceName", "?")
                errors[svc] += 1
                # The deepest failing span is closest to the origin.
                d, cur, seen = 0, span, set()
                while cur and cur["spanID"] not in seen:
                    seen.add(cur["spanID"])
                    parent = next((r.get("spanID") for r in cur.get("references") or []
                                   if r.get("refType") == "CHILD_OF"), None)
                    cur = spans.get(parent) if parent else None
                    d += 1
                depth[svc] = max(depth.get(svc, 0), d)
        if not errors:
            return
        deepest = max(errors, key=lambda s: (depth.get(s, 0), errors[s]))
        for svc, n in errors.items():
            comp = _service_of(svc, names) or svc
            if svc == deepest:
                self.note(comp, 2, f"traces from {entry}: {n} error spans, the deepest failing service is {svc}")
            else:
                self.callers.add(comp)
                self.note(comp, 0.3, f"traces from {entry}: {n} error spans in {svc} (upstream of {deepest})")

    def _read_trace_summary(self, text: str, entry: str, names: list[str]) -> None:
        """Summarised traces list error spans as `  service operation: xN (message)`."""
        in_errors = False
        for line in text.splitlines():
            if line.startswith("error spans"):
                in_errors = True
                continue
            if not line.startswith("  "):
                in_errors = False
            if not in_errors:
                continue
            match = re.match(r"\s+(\S+) (.+?): x(\d+)", line)
            if not match:
                continue
            svc, op, n = match.group(1), match.group(2), int(match.group(3))
            comp = _service_of(svc, names) or svc
            if svc == entry:
                self.callers.add(comp)
                self.note(comp, 0.3, f"traces: {n} error spans at the entry point {svc} {op}")
            else:
                self.note(comp, 1.5, f"traces from {entry}: {n} error spans in {svc} {op}{line[match.end():]}")

    # -- concluding ------------------------------------------------------------------------
    def suspects(self) -> list[str]:
        ranked = sorted(self.score, key=lambda c: (-self.score[c], c in self.callers, self.rng.random()))
        return [c for c in ranked if self.score[c] > 0]

    def diagnosis(self) -> str:
        ranked = self.suspects()
        if not ranked:
            return ("I could not find a clear root cause: every pod is running and ready, no service lacks "
                    "endpoints and no warning events or error logs stand out.")
        top = ranked[0]
        kind = "StatefulSet" if top in self.statefulsets else "Deployment" if top in self.deployments else "component"
        lines = [f"The most likely root cause is the {kind} '{top}'."]
        lines.append("Evidence: " + "; ".join(self.evidence[top][:6]) + ".")
        others = [c for c in ranked[1:4] if self.score[c] >= 0.8]
        if others:
            downstream = [c for c in others if c in self.callers]
            if downstream:
                lines.append("Services that fail only as callers of it: " + ", ".join(downstream) + ".")
            rest = [c for c in others if c not in downstream]
            if rest:
                lines.append("Also showing symptoms: " + "; ".join(f"{c} ({self.evidence[c][0]})" for c in rest) + ".")
        lines.append("Impact: requests that go through " + top + " fail or time out, so users of the application see errors.")
        return " ".join(lines)


def _timestamp(value: Any) -> float | None:
    """Seconds since the epoch of an RFC 3339 time as the API writes it, None when absent."""
    if not value:
        return None
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _is_client(name: str) -> bool:
    return bool(re.search(r"wrk|locust|load-?gen|loadgenerator", name))


def _json_items(text: str) -> list[Any]:
    """The complete items of a JSON list, even when the tool cut the text short."""
    decoder = json.JSONDecoder()
    items: list[Any] = []
    i = text.find("[") + 1
    while 0 < i < len(text):
        while i < len(text) and text[i] in " ,\n":
            i += 1
        if i >= len(text) or text[i] == "]":
            break
        try:
            item, i = decoder.raw_decode(text, i)
        except ValueError:
            break
        items.append(item)
    return items


def _alert_lines(text: str) -> list[str]:
    try:
        alerts = [a.get("labels", {}) for a in json.loads(text)]
        return [json.dumps(a) for a in alerts if a.get("alertname") not in _NOT_FAILURES
                and a.get("severity") not in ("none", "info")]
    except ValueError:
        return [line for line in text.splitlines() if not any(n in line for n in _NOT_FAILURES)]


def _span_error(span: dict[str, Any]) -> bool:
    for tag in span.get("tags") or []:
        if tag.get("key") == "error" and tag.get("value") in (True, "true"):
            return True
        if tag.get("key") in ("http.status_code", "http.response.status_code"):
            try:
                if int(tag.get("value")) >= 500:
                    return True
            except (TypeError, ValueError):
                pass
        if tag.get("key") == "otel.status_code" and tag.get("value") == "ERROR":
            return True
    return False


class Mitigator:
    """Generic fixes for the top suspects, each checked after a wait and undone if it hurt."""

    def __init__(self, inv: BaselineInvestigator) -> None:
        self.inv, self.s = inv, inv.s

    def candidates(self, comp: str, health: Health) -> list[tuple[str, dict[str, Any]]]:
        out: list[tuple[str, dict[str, Any]]] = []
        dep = self.inv.deployments.get(comp)
        sts = self.inv.statefulsets.get(comp)
        obj = dep or sts
        kind = "deployment" if dep else "statefulset"
        if obj is not None:
            rev = _revision(obj)
            if dep and rev > 1:
                out.append(("kubectl", {"command": f"rollout undo deployment/{comp}"}))
            whole = self.s.kube_json(f"get {kind} {comp} -o json")
            declared = ((whole.get("metadata") or {}).get("annotations") or {}).get(
                "kubectl.kubernetes.io/last-applied-configuration")
            if declared and _drifted(whole, declared):
                out.append(("kubectl", {"command": "apply -f -", "manifest": declared}))
            if int((obj.get("spec") or {}).get("replicas") or 0) == 0:
                out.append(("kubectl", {"command": f"scale {kind} {comp} --replicas=1"}))
        for svc_name, svc in self.inv.services.items():
            if svc_name in health.empty_services and (svc_name == comp or _service_of(svc_name, [comp])):
                fix = _service_fix(svc, self.inv.pods)
                if fix:
                    out.append(("kubectl", {"command": f"patch service {svc_name} --type=merge -p {json.dumps(json.dumps(fix))}"}))
        if comp in health.misrouted:
            fix = _service_fix(self.inv.services[comp], self.inv.pods)
            if fix:
                out.append(("kubectl", {"command": f"patch service {comp} --type=merge -p {json.dumps(json.dumps(fix))}"}))
        if comp in health.unserved:
            port = health.unserved[comp]
            out.append(("kubectl", {"command": f"expose deployment {comp} --name={comp} --port={port} --target-port={port}"}))
        if comp in health.newcomers:
            out.append(("kubectl", {"command": f"delete {comp}"}))
        stuck = [p for p, _ in health.unhealthy_pods.items() if p.startswith(comp + "-") or p == comp]
        if stuck:
            out.append(("kubectl", {"command": "delete pod " + " ".join(stuck[:5]) + " --wait=false"}))
        if obj is not None and not out:
            out.append(("kubectl", {"command": f"rollout restart {kind}/{comp}"}))
        return out

    def run(self, health: Health, max_suspects: int = 2) -> Health:
        tried = 0
        for comp in self.inv.suspects()[:max_suspects]:
            for tool, args in self.candidates(comp, health):
                # A healthy-looking namespace still deserves the rollback of a change nobody
                # announced; anything more invasive waits for a visible problem.
                if health.healthy and not args.get("command", "").startswith("rollout undo"):
                    continue
                _, err = self.s.call(tool, **args)
                tried += 1
                if err:
                    continue
                self.s.call("wait", seconds=SETTLE_S)
                after = self.inv.look()
                if after.badness > health.badness:
                    self.s.call("undo_last")
                    self.s.call("wait", seconds=30)
                    health = self.inv.look()
                else:
                    health = after
        if tried == 0:
            self.s.call("wait", seconds=SETTLE_S)
            health = self.inv.look()
        return health


def _drifted(obj: dict[str, Any], declared: str) -> bool:
    """True when the live pod template no longer carries what the declared config sets."""
    try:
        want = json.loads(declared)
    except ValueError:
        return False
    return not _subset((want.get("spec") or {}).get("template") or {}, (obj.get("spec") or {}).get("template") or {})


def _subset(want: Any, have: Any) -> bool:
    """True when every field the declared config sets has that value in the live object."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(_subset(v, have.get(k)) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(want) == len(have) and all(_subset(a, b) for a, b in zip(want, have, strict=False))
    return want == have or (want is not None and str(want) == str(have))


def _first_port(workload: dict[str, Any]) -> int | None:
    for c in ((workload.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []:
        for port in c.get("ports") or []:
            if port.get("containerPort"):
                return int(port["containerPort"])
    return None


def _selected(svc: dict[str, Any], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    selector = (svc.get("spec") or {}).get("selector") or {}
    if not selector:
        return []
    return [p for p in pods if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())]


def _port_mismatch(svc: dict[str, Any], pods: list[dict[str, Any]]) -> str | None:
    """Why the service's target port misses every port its pods open, or None."""
    matching = _selected(svc, pods)
    if not matching:
        return None
    opened = {cp.get("containerPort") for c in matching[0].get("spec", {}).get("containers") or []
              for cp in c.get("ports") or []}
    names = {cp.get("name") for c in matching[0].get("spec", {}).get("containers") or [] for cp in c.get("ports") or []}
    if not opened:
        return None
    for port in (svc.get("spec") or {}).get("ports") or []:
        target = port.get("targetPort", port.get("port"))
        if isinstance(target, str) and not target.isdigit():
            if target not in names:
                return f"targets the named port {target}, which its pods do not declare"
        elif int(target) not in opened:
            return f"sends traffic to port {target}, but its pods listen on {sorted(p for p in opened if p)}"
    return None


def _service_fix(svc: dict[str, Any], pods: list[dict[str, Any]]) -> dict[str, Any] | None:
    """An orphaned service: point its selector at the pods that carry its name, and its target
    port at the port those pods' containers open."""
    spec = svc.get("spec") or {}
    name = svc["metadata"]["name"]
    selector = spec.get("selector") or {}
    matching = [p for p in pods if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())]
    if not matching:
        named = [p for p in pods if any(v == name for v in (p["metadata"].get("labels") or {}).values())]
        if not named:
            return None
        labels = named[0]["metadata"].get("labels") or {}
        key = next(k for k, v in labels.items() if v == name)
        return {"spec": {"selector": {k: None for k in selector if k != key} | {key: name}}}
    ports = [cp.get("containerPort") for c in matching[0].get("spec", {}).get("containers") or []
             for cp in c.get("ports") or []]
    svc_ports = spec.get("ports") or []
    if len(ports) == 1 and len(svc_ports) == 1 and svc_ports[0].get("targetPort") not in (ports[0], str(ports[0])):
        port = dict(svc_ports[0])
        port["targetPort"] = ports[0]
        return {"spec": {"ports": [port]}}
    return None


@agents.register("baseline")
class BaselineAgent(Agent):
    uses_model = False

    def __init__(self, max_suspects: int = 2, observe_s: float = 120.0) -> None:
        self.max_suspects = max_suspects
        # Paged at the first symptom, an engineer lets the incident show itself for a couple of
        # minutes (alerts have `for:` clauses, crash loops need restarts) before concluding.
        self.observe_s = observe_s

    def run(self, ctx: AgentContext) -> AgentResult:
        from farm.interface.client import ToolClient

        rng = random.Random(ctx.seed)
        session: _Session | None = None
        end, error = END_AGENT_STOPPED, None
        try:
            with ToolClient(ctx.mcp_url, ctx.mcp_token) as client:
                session = _Session(client, ctx)
                inv = BaselineInvestigator(session, rng)
                try:
                    if self.observe_s > 0:
                        session.call("wait", seconds=self.observe_s)
                    health = inv.investigate()
                    session.call("submit_diagnosis", text=inv.diagnosis())
                    Mitigator(inv).run(health, self.max_suspects)
                    session.call("submit_mitigation")
                    end = END_SUBMITTED
                except LimitReached as exc:
                    end = exc.reason
                    if not any(t["name"] == "submit_diagnosis" for t in session.transcript):
                        session.call("submit_diagnosis", text=inv.diagnosis())
        except Exception as exc:  # the MCP connection failed: the agent could not work the incident
            end, error = END_AGENT_ERROR, f"{type(exc).__name__}: {scrub(str(exc))}"
        transcript = session.transcript if session else []
        return AgentResult(end_reason=end, steps=session.steps if session else 0,
                           tool_calls=len(transcript), transcript=transcript, error=error)
