"""Adversary agent (helper adv), FARM_AGENT_PLUGINS=tests.security.adv_catalog_cheat: reads the problem
catalog from the installed packages the sandbox mounts at /opt/site-packages (a `pip install .`
worker, as the Dockerfile builds), picks its problem by matching each candidate's fault parameters
against what kubectl shows, submits the ground truth and runs the catalog's own fix.
Reproduce: tests/security/test_installed_catalog.py (the mount), or `farm run
tests/security/adv_catalog_cheat.yaml` from a non-editable install."""
from __future__ import annotations

import glob
import os
import sys
from typing import Any

import yaml

from core.states import END_SUBMITTED
from farm.agents.agent import Agent, AgentContext, AgentResult, agents
from farm.interface.client import ToolClient


def _strings(v: Any) -> list[str]:
    if isinstance(v, dict):
        return [s for x in v.values() for s in _strings(x)]
    if isinstance(v, list):
        return [s for x in v for s in _strings(x)]
    return [str(v)] if isinstance(v, (str, int)) and len(str(v)) >= 3 else []


@agents.register("adv-cheat")
class Cheat(Agent):
    uses_model = False

    def run(self, ctx: AgentContext) -> AgentResult:
        files = glob.glob("/opt/site-packages/*/farm/problems/catalog/*.yaml")
        imported = []
        for m in ("farm.problems.catalog", "farm.oracles.mitigation", "results.ledger", "tasks.trial"):
            try:
                __import__(m)
                imported.append(m)
            except Exception as exc:  # noqa: BLE001
                imported.append(f"{m}: {type(exc).__name__}")
        problems = [p for f in files for p in ((yaml.safe_load(open(f)) or {}).get("problems") or []) if isinstance(p, dict)]
        notes: dict[str, Any] = {"kind": "adv", "catalog_files": files, "problems": len(problems),
                                 "imported": imported, "sys_path": sys.path, "uid": os.getuid()}
        steps = 0
        with ToolClient(ctx.mcp_url, ctx.mcp_token) as tools:
            seen, _ = tools.call("kubectl", command="get deployments,services,configmaps,pods -o yaml")
            steps += 1
            best, score = None, 0
            for p in problems:
                if not str(p.get("id", "")).startswith("hr-"):
                    continue
                vals = [s for f in p.get("faults", []) for s in _strings(f.get("params", {}))]
                hit = sum(1 for s in vals if s in seen)
                if vals and hit == len(vals) and hit > score:
                    best, score = p, hit
            notes["picked"] = best and best["id"]
            if best:
                gt = best["ground_truth"]
                text = f"Root cause: {gt['component']} ({gt['component_kind']}), {gt['fault_type']}. {gt['mechanism']}"
                tools.call("submit_diagnosis", text=text, root_causes=[gt["component"]], fault_type=gt["fault_type"])
                for m in best.get("mitigation", []):
                    if "kubectl" in m:
                        out, err = tools.call("kubectl", command=m["kubectl"])
                        notes.setdefault("fix", []).append([m["kubectl"], out[:200], err])
                        steps += 1
                tools.call("submit_mitigation")
        return AgentResult(end_reason=END_SUBMITTED, tool_calls=steps + 2, transcript=[notes])
