"""Hostile agent plugins (FARM_AGENT_PLUGINS=tests.security.agent_plugins), for
tests/security/test_agent_process.py. They are registered the way any third-party agent is, and
each tries what an agent in the worker's process could do:

- `scorer-patcher`: replaces the mitigation oracle's and the diagnosis judge's functions with ones
  that pass everything, then works the incident as the honest `baseline` does;
- `snoop`: looks for what would give the answer away or reach the farm: the project's folders (the
  problem catalog with its ground truth), the farm's modules (oracles, catalog), the worker's
  environment (database URL, provider key) and processes, and its own context's secrets; it
  returns what it found in its transcript;
- `looper`: calls `kubectl get pods` forever, whatever the interface answers.
"""

from __future__ import annotations

import glob
import os
from typing import Any

from core.states import END_AGENT_STOPPED
from farm.agents.base import Agent, AgentContext, AgentResult, agents


def patch_scorers() -> list[str]:
    """What an agent in the worker's process can do to its scores; returns what it patched."""
    patched = []
    try:
        from farm.oracles import diagnosis, mitigation

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
        for module in ("farm.oracles.diagnosis", "farm.problems.catalog", "results.ledger", "farm.trial.run"):
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
        from farm.interface.client import ToolClient

        with ToolClient(ctx.mcp_url, ctx.mcp_token) as tools:
            while True:
                tools.call("kubectl", command="get pods")
