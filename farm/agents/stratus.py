"""`stratus`: a token-frugal specialised SRE agent after the paper's Stratus. A diagnosis sub-agent
works on summarised observability (the interface's summarised mode, and its own condensing of what
still repeats) with read-only tools and a short memory of raw outputs; a mitigation sub-agent starts
from the diagnosis alone, not the investigation's transcript; after every change it makes, the
harness waits, measures health (unhealthy pods, vanished deployments, firing alerts) and rolls the
change back with undo_last when health got worse."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

from farm.agents.agent import Agent, AgentContext, AgentResult, agents
from farm.agents.loop import Session, converse, run_session
from farm.llm.condense import condense
from farm.llm.mcp_client import ToolOutcome

DIAGNOSIS_TOOLS = frozenset({
    "kubectl", "prometheus_query", "prometheus_query_range", "get_alerts", "loki_query", "loki_labels",
    "jaeger_services", "jaeger_operations", "jaeger_traces", "jaeger_dependencies", "submit_diagnosis",
})
MITIGATION_TOOLS = frozenset({"kubectl", "wait", "get_alerts", "prometheus_query", "undo_last", "submit_mitigation"})
READ_VERBS = frozenset({"get", "describe", "logs", "top", "explain", "api-resources", "events", "version"})
MUTATING_VERBS = frozenset({"apply", "create", "delete", "patch", "replace", "scale", "set", "label", "annotate",
                            "autoscale", "expose", "run", "cordon", "uncordon", "drain", "taint", "rollout"})

DIAGNOSIS_PROMPT = """You are the diagnosis sub-agent of an SRE agent. Find the root cause of the incident in \
namespace {ns} with read-only tools (kubectl get/describe/logs, metrics, logs, traces, alerts). Tool output is \
summarised. Distinguish the faulty component from those that only fail downstream, and ignore transient noise. \
When sure, call submit_diagnosis once: the faulty component, the mechanism, the concrete wrong value, the \
components affected downstream, and the user-visible impact."""

MITIGATION_PROMPT = """You are the mitigation sub-agent of an SRE agent. Namespace: {ns}. The diagnosis:
{diagnosis}
Current health: {health}
Fix the root cause with the smallest kubectl change (set env, patch, rollout undo, scale back up...). Never \
delete or scale away the application. After each change the harness checks health and rolls the change back if \
it got worse. When health is restored, call submit_mitigation."""


@dataclass(frozen=True)
class Health:
    unhealthy_pods: int
    missing: int  # deployments seen at the start of mitigation that have no pod any more
    firing_alerts: int
    deployments: frozenset[str]

    @property
    def score(self) -> int:
        return self.unhealthy_pods + self.missing + self.firing_alerts

    def describe(self) -> str:
        return (f"{self.unhealthy_pods} unhealthy pods, {self.missing} deployments without pods, "
                f"{self.firing_alerts} firing alerts")


_POD_SUFFIX = re.compile(r"-[a-z0-9]{6,10}-[a-z0-9]{5}$|-[a-z0-9]{5}$|-\d+$")


def parse_pods(text: str) -> tuple[int, set[str]]:
    """(unhealthy pod count, workload names) from `kubectl get pods` table output."""
    unhealthy, workloads = 0, set()
    for line in text.splitlines()[1:]:
        cols = line.split()
        if len(cols) < 3 or "/" not in cols[1]:
            continue
        name, ready, status = cols[0], cols[1], cols[2]
        workloads.add(_POD_SUFFIX.sub("", name))
        have_s, _, want_s = ready.partition("/")
        have = int(have_s) if have_s.isdigit() else 0
        want = int(want_s) if want_s.isdigit() else 0
        if status != "Completed" and (status != "Running" or have < want):
            unhealthy += 1
    return unhealthy, workloads


def count_firing(text: str) -> int:
    if not text.strip() or text.strip().lower().startswith("no firing"):
        return 0
    m = re.match(r"\s*(\d+) firing alert", text)
    if m:
        return int(m.group(1))
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return text.lower().count("firing")
    alerts: Any = data.get("alerts", data.get("data", [])) if isinstance(data, dict) else data
    if isinstance(alerts, dict):
        alerts = alerts.get("alerts", [])
    if not isinstance(alerts, list):
        return 0
    return sum(1 for a in alerts if not isinstance(a, dict) or a.get("state", "firing") == "firing")


def _verb(command: str) -> str:
    try:
        args = shlex.split(command)
    except ValueError:
        return ""
    if args and args[0] == "kubectl":
        args = args[1:]
    for a in args:
        if not a.startswith("-"):
            return a
    return ""


@agents.register("stratus")
class StratusAgent(Agent):
    """Diagnosis sub-agent, mitigation sub-agent, rollback on regression."""

    tool_mode = "summarised"  # what the lead should build this agent's interface with

    def __init__(self, output_chars: int = 1500, keep_outputs: int = 3, diagnosis_share: float = 0.6,
                 settle_s: float = 30.0) -> None:
        self.output_chars, self.keep_outputs = output_chars, keep_outputs
        self.diagnosis_share, self.settle_s = diagnosis_share, settle_s

    def run(self, ctx: AgentContext) -> AgentResult:
        # The sweep entry's options reach the agent through the context; they override the constructor.
        opts = ctx.options
        self.output_chars = int(opts.get("output_chars", self.output_chars))
        self.keep_outputs = int(opts.get("keep_outputs", self.keep_outputs))
        self.diagnosis_share = float(opts.get("diagnosis_share", self.diagnosis_share))
        self.settle_s = float(opts.get("settle_s", self.settle_s))
        return run_session(ctx, self._body, agent_name="stratus")

    # -- health ----------------------------------------------------------------------------------
    def health(self, s: Session, ns: str, baseline: frozenset[str] | None = None) -> Health:
        pods = s.call_tool("kubectl", {"command": f"get pods -n {ns}"}, agent="harness")
        alerts = s.call_tool("get_alerts", {}, agent="harness")
        unhealthy, workloads = parse_pods(pods.text) if not pods.is_error else (0, set())
        missing = len(baseline - workloads) if baseline is not None else 0
        return Health(unhealthy, missing, count_firing(alerts.text), frozenset(workloads))

    # -- the two sub-agents ----------------------------------------------------------------------
    def _body(self, s: Session) -> None:
        ns = s.ctx.namespace
        diagnosis = self._diagnose(s, ns)
        self._mitigate(s, ns, diagnosis)

    def _diagnose(self, s: Session, ns: str) -> str:
        system = DIAGNOSIS_PROMPT.format(ns=ns)
        task = f"Incident {s.ctx.trial_id}: the application in namespace '{ns}' is unhealthy. Diagnose it."
        messages = [{"role": "system", "content": system}, {"role": "user", "content": task}]
        s.transcript.message("system", system, "diagnosis")
        s.transcript.message("user", task, "diagnosis")

        tools = s.tools.openai_tools(set(DIAGNOSIS_TOOLS))
        budget = max(1, int(s.ctx.limits.max_steps * self.diagnosis_share))
        converse(s, messages, tools, agent="diagnosis", stop_after=frozenset({"submit_diagnosis"}),
                 shape_output=lambda t: condense(t, self.output_chars), keep_outputs=self.keep_outputs,
                 max_steps=budget, refuse=_read_only)
        if s.diagnosis is not None:
            return s.diagnosis
        # The sub-agent stopped (or ran out of its share of steps) without submitting: its last words
        # are the best diagnosis there is.
        last = next((m.get("content") for m in reversed(messages) if m.get("role") == "assistant"
                     and m.get("content")), None)
        text = last or "No root cause identified."
        s.call_tool("submit_diagnosis", {"text": text}, agent="diagnosis")
        return text

    def _mitigate(self, s: Session, ns: str, diagnosis: str) -> None:
        start = self.health(s, ns)
        state = {"health": start}
        system = MITIGATION_PROMPT.format(ns=ns, diagnosis=diagnosis, health=start.describe())
        messages = [{"role": "system", "content": system},
                    {"role": "user", "content": "Mitigate the incident now."}]
        s.transcript.message("system", system, "mitigation")

        def check_change(name: str, args: dict[str, Any], outcome: ToolOutcome, text: str) -> str:
            if name != "kubectl" or outcome.is_error or _verb(str(args.get("command", ""))) not in MUTATING_VERBS:
                return text
            s.call_tool("wait", {"seconds": self.settle_s}, agent="harness")
            before = state["health"]
            after = self.health(s, ns, baseline=start.deployments)
            if after.score > before.score:
                undo = s.call_tool("undo_last", {}, agent="harness")
                s.transcript.event(f"rollback: health got worse ({before.describe()} -> {after.describe()})",
                                   "mitigation", undo=undo.text)
                return (f"{text}\nHEALTH GOT WORSE ({before.describe()} -> {after.describe()}); the harness "
                        f"rolled the change back with undo_last: {undo.text}")
            state["health"] = after
            return f"{text}\nHealth after the change: {after.describe()}"

        tools = s.tools.openai_tools(set(MITIGATION_TOOLS))
        converse(s, messages, tools, agent="mitigation", shape_output=lambda t: condense(t, self.output_chars),
                 on_tool=check_change, keep_outputs=self.keep_outputs)
        if not s.mitigation_submitted:
            end = self.health(s, ns, baseline=start.deployments)
            if end.score < start.score:
                s.call_tool("submit_mitigation", {}, agent="mitigation")


def _read_only(name: str, args: dict[str, Any]) -> str | None:
    """The diagnosis sub-agent's kubectl is read-only: mutating verbs are refused before the call."""
    if name == "kubectl" and _verb(str(args.get("command", ""))) not in READ_VERBS:
        return "error: the diagnosis phase is read-only (get, describe, logs, top, explain)"
    return None
