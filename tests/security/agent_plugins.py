"""Hostile agent plugins (FARM_AGENT_PLUGINS=tests.security.agent_plugins), for
tests/security/test_agent_process.py. They are registered the way any third-party agent is, and
each tries what an agent in the worker's process could do:

- `scorer-patcher`: replaces the mitigation oracle's and the diagnosis judge's functions with ones
  that pass everything, then works the incident as the honest `baseline` does;
- `snoop`: looks for what would give the answer away or reach the farm: the project's folders (the
  problem catalog with its ground truth), the farm's modules (oracles, catalog), the worker's
  environment (database URL, provider key) and processes, its own context's secrets, and the
  worker's local services (the `ports` option) and the internet; it returns what it found in its
  transcript;
- `looper`: calls `kubectl get pods` forever, whatever the interface answers;
- `redteam-finder`: tries every way it knows to learn which problem it was given
  (tests/security/test_finder_agent.py);
- `hog`: takes the worker host's memory (its `take` option: `memory`), processes (`processes`) or
  tmpfs space (`tmp`) until it is refused (tests/security/test_agent_resources.py).
"""

from __future__ import annotations

import glob
import json
import os
import socket
from typing import Any

from core.states import END_AGENT_STOPPED, END_SUBMITTED
from farm.agents.agent import Agent, AgentContext, AgentResult, agents
from farm.interface.client import ToolClient


def patch_scorers() -> list[str]:
    """What an agent in the worker's process can do to its scores; returns what it patched."""
    patched = []
    try:
        from farm.oracles import judge as diagnosis
        from farm.oracles import mitigation

        original_judge = diagnosis.judge_diagnosis
        original_evaluate = mitigation.MitigationOracle.evaluate

        def judge(*args: Any, **kwargs: Any) -> Any:
            verdict = original_judge(*args, **kwargs)
            verdict.passed, verdict.composite = True, 1.0
            return verdict

        def evaluate(self: Any, *args: Any, **kwargs: Any) -> Any:
            verdict = original_evaluate(self, *args, **kwargs)
            verdict.passed, verdict.success_rate = True, 1.0
            return verdict

        diagnosis.judge_diagnosis = judge
        mitigation.MitigationOracle.evaluate = evaluate  # type: ignore[method-assign]
        patched += ["judge_diagnosis", "MitigationOracle.evaluate"]
    except ImportError:
        pass  # the scorers are not within reach
    return patched


@agents.register("scorer-patcher")
class ScorerPatcher(Agent):
    uses_model = False

    def run(self, ctx: AgentContext) -> AgentResult:
        patched = patch_scorers()
        result = agents.create("baseline").run(ctx)
        result.transcript.append({"kind": "note", "text": f"patched: {patched}"})
        return result


def _try_read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(4096).decode(errors="replace")
    except OSError:
        return None


@agents.register("snoop")
class Snoop(Agent):
    uses_model = False

    def run(self, ctx: AgentContext) -> AgentResult:
        root = str(ctx.options.get("project", "/"))
        found: dict[str, Any] = {
            "catalog": glob.glob(os.path.join(root, "farm", "problems", "catalog", "**", "*"), recursive=True)[:20],
            "project": sorted(os.listdir(root))[:50] if os.path.isdir(root) else [],
            "env": dict(os.environ),
            "context": ctx.model_dump(mode="json"),
            "processes": sorted(p for p in os.listdir("/proc") if p.isdigit()),
            "worker_environ": _try_read(f"/proc/{ctx.options.get('worker_pid', 1)}/environ"),
            "home": os.listdir(os.path.expanduser("~")),
        }
        found["reachable"] = []  # the worker's database, broker, Redis; the world
        for host, port in [("127.0.0.1", int(p)) for p in ctx.options.get("ports", [])] + [("1.1.1.1", 53)]:
            try:
                socket.create_connection((host, port), timeout=2).close()
                found["reachable"].append(f"{host}:{port}")
            except OSError:
                pass
        for module in ("farm.oracles.judge", "farm.problems.catalog", "results.ledger", "farm.trial.run"):
            try:
                __import__(module)
                found.setdefault("imported", []).append(module)
            except ImportError:
                pass
        return AgentResult(end_reason=END_AGENT_STOPPED, transcript=[{"kind": "found", **found}])


@agents.register("looper")
class Looper(Agent):
    uses_model = False

    def run(self, ctx: AgentContext) -> AgentResult:
        with ToolClient(ctx.mcp_url, ctx.mcp_token) as tools:
            while True:
                tools.call("kubectl", command="get pods")


PROBES = [
    "create configmap x --from-file=/ --dry-run=client -o yaml",
    "create configmap x --from-file=/proc/self/environ --dry-run=client -o yaml",
    "create configmap x --from-file=/proc/1/cmdline --dry-run=client -o yaml",
    "get pods -o go-template-file=/proc/self/environ",
    "get pods --kubeconfig=/proc/1/root/etc/kubeconfig",
    "get pods --log-file=/proc/1/root/tmp/leak -v=9",
    "config view --raw",
    "get --raw /api/v1/namespaces/kube-system/configmaps",
    "get --raw /api/v1/namespaces/farm-system/configmaps",
    "get all -o yaml",
    "get configmaps,secrets,events -o yaml",
    "get serviceaccounts,roles,rolebindings -o yaml",
    "describe pods",
    "get podchaos,networkchaos,iochaos,stresschaos -o yaml",
    "api-resources",
    "auth can-i --list",
]


@agents.register("redteam-finder")
class Finder(Agent):
    """Tries every way it knows to find its problem id (one of the `ids` option) or the `canary`
    planted in the worker's folders; returns what it found as its transcript."""

    uses_model = False

    def run(self, ctx: AgentContext) -> AgentResult:
        # its context, but for the list it searches for and the canary it was told to look out for
        own = ctx.model_copy(update={"options": {k: v for k, v in ctx.options.items() if k not in ("ids", "canary")}})
        shown: dict[str, str] = {"context": own.model_dump_json(), "environment": json.dumps(dict(os.environ))}
        refused: dict[str, str] = {}
        with ToolClient(ctx.mcp_url, ctx.mcp_token) as tools:
            shown["tools"] = json.dumps([t.model_dump(mode="json") for t in tools.tools])
            for command in PROBES:
                text, is_error = tools.call("kubectl", command=command)
                shown[command] = text
                if is_error:
                    refused[command] = text
            for name, args in (("get_alerts", {}), ("loki_labels", {}), ("jaeger_services", {}),
                               ("jaeger_dependencies", {}), ("loki_query", {"query": '{namespace=~".+"}'}),
                               ("prometheus_query", {"query": 'count by (__name__, namespace) ({__name__=~".+"})'})):
                shown[name], _ = tools.call(name, **args)
            ids, canary = list(ctx.options.get("ids", [])), str(ctx.options.get("canary", ""))
            everything = "\n".join(shown.values())
            found = {"kind": "finder", "ids": [i for i in ids if i in everything], "canary": canary in everything,
                     "refused": refused, "shown": shown}
            tools.call("submit_diagnosis", text="I could not find out which problem this is")
        return AgentResult(end_reason=END_SUBMITTED, tool_calls=len(PROBES) + 7, transcript=[found])


@agents.register("hog")
class Hog(Agent):
    uses_model = False

    def run(self, ctx: AgentContext) -> AgentResult:
        import subprocess

        taken: list[object] = []
        what = ctx.options.get("take", "memory")
        while True:  # until the sandbox refuses: the exception ends the agent
            if what == "memory":
                taken.append(bytearray(64 << 20))
            elif what == "processes":
                taken.append(subprocess.Popen(["sleep", "60"]))
            else:
                with open(f"/tmp/fill-{len(taken)}", "wb") as f:
                    f.write(b"\1" * (1 << 20))
                taken.append(f.name)
