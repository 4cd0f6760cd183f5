"""A scripted incident session, as an SRE would run it against hotel-reservation: a bad config
change makes /hotels fail; the SRE looks with kubectl (get, describe, logs, top, events, rollout
history, jsonpath and custom columns, explain), deletes a pod (which terminates gracefully),
applies a note server-side and creates a probe deployment, queries PromQL, LogQL (templates,
tail) and Jaeger, rolls the change back and checks that clients recover. Every step is (tool, command, check): the session
is data, so a step is added by adding a record. Works on any cluster handle with the app
deployed; `run_session` runs it with a given kubectl binary and times each step."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NS = "hotel-reservation"
Check = Callable[[Any], bool]


@dataclass(frozen=True)
class Step:
    """One SRE action. `tool` is kubectl (command: its arguments), promql / logql (command: the
    query, instant at the cluster's now), http:<prometheus|loki|jaeger> (command: a GET path with
    its query string), loki-tail (command: a LogQL selector; the check gets the first message),
    or advance (command: seconds of cluster time to let pass, for a virtual-time cluster).
    `stdin` is what a kubectl step reads (a manifest for `-f -`)."""

    tool: str
    command: str
    check: Check
    why: str = ""
    stdin: str | None = None


@dataclass
class StepResult:
    step: Step
    ok: bool
    seconds: float
    detail: str = ""


# -- checks --------------------------------------------------------------------------------------
def has(*needles: str) -> Check:
    """The output contains every needle."""
    return lambda out: isinstance(out, str) and all(n in out for n in needles)


def matches(pattern: str) -> Check:
    rx = re.compile(pattern, re.M)
    return lambda out: isinstance(out, str) and bool(rx.search(out))


def series(pred: Callable[[list[tuple[dict[str, str], float]]], bool]) -> Check:
    """A Prometheus/Loki vector result, as [(labels, value)], satisfies `pred`."""
    def check(out: Any) -> bool:
        if not isinstance(out, dict) or out.get("status") != "success":
            return False
        rows = [(r["metric"], float(r["value"][1])) for r in out["data"]["result"]]
        return pred(rows)
    return check


def streams(pred: Callable[[list[tuple[dict[str, str], list[str]]]], bool]) -> Check:
    """A Loki streams result, as [(stream labels, lines)], satisfies `pred`."""
    def check(out: Any) -> bool:
        if not isinstance(out, dict) or out.get("status") != "success" or out["data"]["resultType"] != "streams":
            return False
        return pred([(s["stream"], [v[1] for v in s["values"]]) for s in out["data"]["result"]])
    return check


def data(pred: Callable[[Any], bool]) -> Check:
    """The JSON body's `data` satisfies `pred`."""
    return lambda out: isinstance(out, dict) and "data" in out and bool(pred(out["data"]))


# -- the session -----------------------------------------------------------------------------------
FRONTEND = "-l io.kompose.service=frontend"

INCIDENT: list[Step] = [
    Step("kubectl", "set env deployment/frontend SEARCH_BACKEND_VERSION=true", has("env updated"),
         "the change that starts the incident"),
    Step("advance", "150", lambda out: True),
]

SESSION: list[Step] = [
    # the first look
    Step("kubectl", "get nodes", matches(r"^\S+\s+Ready\s"), "are the nodes up?"),
    Step("kubectl", "get nodes -o wide", has("INTERNAL-IP", "CONTAINER-RUNTIME")),
    Step("kubectl", "get ns", has(NS, "Active")),
    Step("kubectl", "get pods", matches(r"^frontend-\S+\s+1/1\s+Running")),
    Step("kubectl", "get pods -o wide", has("IP", "NODE")),
    Step("kubectl", "get pods --sort-by=.status.startTime", matches(r"^frontend-")),
    Step("kubectl", "get pods --field-selector=status.phase=Running -o name", matches(r"^pod/search-")),
    Step("kubectl", "get deploy", matches(r"^frontend\s+1/1\s+1\s+1")),
    Step("kubectl", "get deploy -o wide", has("SELECTOR", "io.kompose.service=frontend")),
    Step("kubectl", "get rs", matches(r"^frontend-\S+\s+1\s+1\s+1")),
    Step("kubectl", "get svc", matches(r"^frontend\s+ClusterIP\s")),
    Step("kubectl", "get endpoints frontend", matches(r":5000")),
    Step("kubectl", "get all", has("deployment.apps/frontend", "service/frontend", "pod/frontend-")),
    Step("kubectl", "get cm", has("NAME", "DATA")),
    Step("kubectl", "api-resources --namespaced=true", has("deployments", "apps/v1")),
    Step("kubectl", "version", has("Server Version")),
    # what changed
    Step("kubectl", "get events --sort-by=.lastTimestamp", has("ScalingReplicaSet")),
    Step("kubectl", "get events --field-selector involvedObject.kind=Deployment", has("frontend")),
    Step("kubectl", "rollout history deployment/frontend", matches(r"^REVISION")),
    Step("kubectl", "rollout history deployment/frontend --revision=2", has("SEARCH_BACKEND_VERSION")),
    Step("kubectl", "rollout status deployment/frontend", has("successfully rolled out")),
    Step("kubectl", "describe deployment frontend", has("SEARCH_BACKEND_VERSION:", "true", "NewReplicaSet")),
    Step("kubectl", f"describe pod {FRONTEND}", has("Events:", "hotel-reserv-frontend")),
    Step("kubectl", "get deploy frontend -o jsonpath={.spec.template.spec.containers[0].env[*].name}",
         has("SEARCH_BACKEND_VERSION")),
    Step("kubectl", "get pods -o 'jsonpath={range .items[*]}{.metadata.name}{\"\\t\"}{.status.phase}{\"\\n\"}{end}'",
         matches(r"^frontend-\S+\tRunning$")),
    Step("kubectl", "get pods -o custom-columns=NAME:.metadata.name,RESTARTS:.status.containerStatuses[0].restartCount",
         matches(r"^NAME\s+RESTARTS")),
    Step("kubectl", f"get pods {FRONTEND} -o yaml", has("apiVersion: v1", "kind: Pod", "podIP:")),
    Step("kubectl", "get deploy frontend -o json", lambda out: json.loads(out)["kind"] == "Deployment"),
    # the program's own words
    Step("kubectl", "logs deploy/frontend --tail=20", lambda out: isinstance(out, str) and 0 < len(out.splitlines()) <= 20),
    Step("kubectl", "logs -l io.kompose.service=search --tail=5", has("search")),
    Step("kubectl", "logs deploy/frontend --since=5m --timestamps", matches(r"^\d{4}-\d\d-\d\dT")),
    # resources
    Step("kubectl", "top pods", has("CPU(cores)", "MEMORY(bytes)", "frontend-")),
    Step("kubectl", "top nodes", has("CPU(cores)", "MEMORY(bytes)", "sim-worker")),
    Step("kubectl", "top pod --containers", has("hotel-reserv-frontend")),
    # the API server's semantics: schema, graceful deletion, field ownership, typed creates
    Step("kubectl", "explain deployment.spec.template.spec.containers.livenessProbe",
         has("livenessProbe", "periodSeconds", "failureThreshold"), "what does this field mean?"),
    Step("kubectl", "delete pod -l io.kompose.service=geo --wait=false", matches(r'^pod "geo-\S+" deleted')),
    Step("kubectl", "get pods -l io.kompose.service=geo", matches(r"^geo-\S+\s+\S+\s+Terminating\s")),
    Step("kubectl", "get pods -l io.kompose.service=geo -o jsonpath={.items[*].metadata.deletionGracePeriodSeconds}",
         has("30")),
    Step("advance", "30", lambda out: True),
    Step("kubectl", "get pods -l io.kompose.service=geo",
         lambda out: isinstance(out, str) and "Terminating" not in out and bool(re.search(r"^geo-\S+\s+1/1\s+Running", out, re.M))),
    Step("kubectl", "apply --server-side --field-manager=sre -f -", has("configmap/sre-notes serverside-applied"),
         stdin="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: sre-notes}\ndata: {incident: frontend-500s}\n"),
    Step("kubectl", "get cm sre-notes -o jsonpath={.metadata.managedFields[*].manager}", has("sre")),
    Step("kubectl", "create deployment sre-probe --image=busybox:1.36 -- sleep 3600", has("deployment.apps/sre-probe created")),
    Step("kubectl", "get deploy sre-probe -o jsonpath={.spec.template.spec.containers[0].command}", has("sleep", "3600")),
    Step("kubectl", "delete deployment sre-probe --wait=false", has("deleted")),
    # metrics
    Step("promql", f'sum by (code) (rate(wrk2_requests_total{{namespace="{NS}"}}[1m]))',
         series(lambda rows: any(lab.get("code") == "500" and v > 1 for lab, v in rows)), "clients fail"),
    Step("promql", f'sum by (pod) (rate(search_requests_total{{namespace="{NS}"}}[2m]))',
         series(lambda rows: bool(rows) and all(lab.get("pod", "").startswith("search-") for lab, _ in rows))),
    Step("promql", f'sum by (pod, container) (rate(http_server_request_duration_seconds_count{{namespace="{NS}", '
                   f'http_response_status_code="500"}}[2m]))',
         series(lambda rows: any(lab.get("pod", "").startswith("frontend-") and v > 0 for lab, v in rows))),
    Step("promql", f'histogram_quantile(0.95, sum by (le) (rate(wrk2_request_duration_seconds_bucket{{namespace="{NS}"}}[5m])))',
         series(lambda rows: len(rows) == 1 and rows[0][1] > 0)),
    Step("promql", f'max by (pod) (kube_pod_container_status_restarts_total{{namespace="{NS}"}})',
         series(lambda rows: len(rows) >= 19)),
    Step("promql", f'count by (job) (up{{namespace="{NS}"}})', series(lambda rows: {"frontend", "search"} <= {lab["job"] for lab, _ in rows})),
    Step("promql", 'ALERTS{alertstate="firing"}', series(lambda rows: all(lab.get("alertname") for lab, _ in rows))),
    Step("http:prometheus", "/api/v1/metadata?metric=kube_pod_status_phase",
         data(lambda d: d["kube_pod_status_phase"][0]["help"] == "The pods current phase.")),
    Step("http:prometheus", "/api/v1/targets?state=active",
         data(lambda d: any(t["labels"].get("job") == "search" and t["health"] == "up" for t in d["activeTargets"]))),
    Step("http:prometheus", f"/api/v1/label/pod/values?match[]=search_requests_total{{namespace=\"{NS}\"}}",
         data(lambda d: len(d) >= 1 and all(p.startswith("search-") for p in d))),
    # logs
    Step("logql", f'sum by (container) (count_over_time({{namespace="{NS}"}}[5m]))',
         series(lambda rows: any(lab.get("container") == "hotel-reserv-frontend" for lab, _ in rows))),
    Step("logql", f'{{namespace="{NS}", container="hotel-reserv-search"}} | line_format `{{{{ .pod | trunc 6 }}}} '
                  f'{{{{ __timestamp__ | date "15:04" }}}} {{{{ __line__ | trunc 30 }}}}`',
         streams(lambda ss: bool(ss) and all(re.match(r"^search \d\d:\d\d ", ln) for _, lines in ss for ln in lines))),
    Step("http:loki", "/loki/api/v1/labels", data(lambda d: {"namespace", "pod", "container"} <= set(d))),
    Step("http:loki", "/loki/api/v1/label/container/values", data(lambda d: "hotel-reserv-frontend" in d)),
    Step("loki-tail", f'{{namespace="{NS}", container=~"hotel-reserv-.+"}}',
         lambda msg: bool(msg["streams"]) and all(s["stream"]["container"].startswith("hotel-reserv-")
                                                  for s in msg["streams"])),
    # traces
    Step("http:jaeger", "/api/services", data(lambda d: "frontend" in d and "search" in d)),
    Step("http:jaeger", "/api/services/frontend/operations", data(lambda d: len(d) >= 1)),
    Step("http:jaeger", "/api/traces?service=frontend&limit=20&lookback=10m", data(lambda d: 0 < len(d) <= 20)),
    # the fix
    Step("kubectl", "rollout undo deployment/frontend", has("rolled back")),
    Step("advance", "120", lambda out: True),
    Step("kubectl", "rollout status deployment/frontend", has("successfully rolled out")),
    Step("kubectl", "get deploy frontend -o jsonpath={.spec.template.spec.containers[0].env[*].name}",
         lambda out: isinstance(out, str) and "SEARCH_BACKEND_VERSION" not in out),
    Step("promql", f'sum(rate(wrk2_requests_total{{namespace="{NS}",code="500"}}[1m]))',
         series(lambda rows: rows == [] or rows[0][1] < 1), "clients recovered"),
]


# -- running -------------------------------------------------------------------------------------
class SessionRunner:
    """Runs steps against a cluster handle with one kubectl binary (admin kubeconfig)."""

    def __init__(self, handle: Any, kubectl: str | Path, namespace: str = NS) -> None:
        self.handle, self.kubectl, self.namespace = handle, str(kubectl), namespace

    def run(self, steps: list[Step]) -> list[StepResult]:
        return [self.run_step(s) for s in steps]

    def run_step(self, step: Step) -> StepResult:
        t0 = time.perf_counter()
        try:
            out = self._do(step)
        except Exception as exc:  # a step that errors is a failed step, with the error as detail
            return StepResult(step, False, time.perf_counter() - t0, f"{type(exc).__name__}: {exc}")
        seconds = time.perf_counter() - t0
        try:
            ok = bool(step.check(out))
        except Exception as exc:
            ok, out = False, f"check raised {type(exc).__name__}: {exc}; output: {out}"
        return StepResult(step, ok, seconds, "" if ok else str(out)[:2000])

    def _do(self, step: Step) -> Any:
        tool, cmd = step.tool, step.command
        if tool == "kubectl":
            proc = subprocess.run([self.kubectl, "--kubeconfig", str(self.handle.kubeconfig), "-n", self.namespace,
                                   *shlex.split(cmd)], capture_output=True, text=True, timeout=120, input=step.stdin,
                                  env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "KUBECACHEDIR": "/tmp/.kube-cache-sre"})
            if proc.returncode != 0:
                raise RuntimeError(f"exit {proc.returncode}: {proc.stderr.strip()[:1000]}")
            return proc.stdout
        if tool == "advance":
            self.handle.advance(float(cmd))
            return ""
        if tool == "promql":
            return self._get("prometheus", "/api/v1/query?" + urllib.parse.urlencode({"query": cmd}))
        if tool == "logql":
            return self._logql(cmd)
        if tool.startswith("http:"):
            return self._get(tool[5:], urllib.parse.quote(cmd, safe="/?&=%:,"))
        if tool == "loki-tail":
            return self._tail(cmd)
        raise ValueError(f"unknown tool {tool!r} in step {cmd!r}")

    def _get(self, endpoint: str, path: str) -> Any:
        base = getattr(self.handle.endpoints, endpoint)
        try:
            with urllib.request.urlopen(base + path, timeout=60) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"HTTP {exc.code}: {exc.read()[:500]!r}") from None

    def _logql(self, query: str) -> Any:
        now = self.handle.now()
        params = {"query": query, "start": str(int((now - 600) * 1e9)), "end": str(int(now * 1e9)), "limit": "50"}
        path = "/loki/api/v1/query_range?" + urllib.parse.urlencode(params)
        if not query.lstrip().startswith("{"):  # a metric query: one instant
            path = "/loki/api/v1/query?" + urllib.parse.urlencode({"query": query, "time": str(int(now * 1e9))})
        return self._get("loki", path)

    def _tail(self, selector: str) -> Any:
        import websocket

        url = self.handle.endpoints.loki.replace("http://", "ws://") + "/loki/api/v1/tail?" + urllib.parse.urlencode(
            {"query": selector, "start": str(int((self.handle.now() - 600) * 1e9)), "limit": "10"})
        ws = websocket.create_connection(url, timeout=30)
        try:
            return json.loads(ws.recv())
        finally:
            ws.close()
