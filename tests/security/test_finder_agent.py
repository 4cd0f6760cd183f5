"""End to end: a plugin agent that tries to learn which problem it was given (the answer key of
the catalog) runs a whole trial on the emulated cluster. It reads its context and environment,
probes the sandbox's filesystem and /proc through every kubectl flag that reads files, walks
every API path and telemetry source it can reach, and greps everything it was shown for the
catalog's problem ids and a canary planted in the worker's folders. It finds none of them, and
the refusals it got say why."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select

from clusters.base import open_cluster
from core.states import END_SUBMITTED
from farm.agents.base import Agent, AgentContext, AgentResult, agents
from farm.dispatcher import submit
from farm.interface.client import ToolClient
from farm.problems.catalog import load_catalog
from farm.spec import SweepSpec
from farm.trial import run_all, start_run
from results import ledger
from results.artifacts import LocalArtifactStore
from results.db import engine_for
from results.models import Attempt

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]
PROBLEM = "hr-geo-image-tag-wrong"
CANARY = f"CANARY-{secrets.token_hex(8)}"
FOUND: dict[str, Any] = {}

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
    """Tries every way it knows to find its problem id; reports what it found in FOUND."""

    uses_model = False

    def run(self, ctx: AgentContext) -> AgentResult:
        shown: dict[str, str] = {"context": ctx.model_dump_json(), "environment": json.dumps(dict(os.environ))}
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
            ids = [p.id for p in load_catalog().problems]  # the catalog is public; which one is mine?
            everything = "\n".join(shown.values())
            FOUND.update(ids=[i for i in ids if i in everything], canary=CANARY in everything,
                         refused=refused, shown=shown)
            tools.call("submit_diagnosis", text="I could not find out which problem this is")
        return AgentResult(end_reason=END_SUBMITTED, tool_calls=len(PROBES) + 7)


def test_a_finder_agent_learns_nothing_of_its_problem(tmp_path: Path) -> None:
    engine = engine_for(f"sqlite:///{tmp_path / 'farm.sqlite'}")
    store = LocalArtifactStore(tmp_path / "artifacts")
    (tmp_path / "artifacts").mkdir(exist_ok=True)
    (tmp_path / "artifacts" / "canary.txt").write_text(CANARY)
    cluster = open_cluster("sim", seed=5, workdir=tmp_path / "sim")
    (tmp_path / "sim" / "canary.txt").write_text(CANARY)
    try:
        spec = SweepSpec(name="redteam-finder", problems={"ids": [PROBLEM]}, agents=[{"name": "redteam-finder"}],
                         limits={"max_steps": 60, "wall_time_s": 300})
        sub = submit(engine, spec)
        claim = ledger.claim(engine, sub.to_run[0], "redteam-worker", cluster.ref)
        assert claim is not None
        run = start_run(engine, claim, cluster, store)
        assert run is not None
        assert run_all(run) == "recorded", run.events[-3:]
        sandbox = run.interface.record.sandbox
    finally:
        cluster.close()
    assert FOUND, "the finder agent did not run"
    assert FOUND["ids"] == [] and FOUND["canary"] is False, FOUND["ids"]
    assert "get all -o yaml" in FOUND["shown"] and "geo" in FOUND["shown"]["get all -o yaml"]  # it did look
    for command in PROBES[:7]:  # every file, credential and verbosity probe was refused, saying why
        assert "refused" in FOUND["refused"].get(command, ""), command
    assert sandbox == "bwrap"
    with Session(engine) as s:
        attempt = s.exec(select(Attempt)).one()
    assert attempt.diagnosis_submitted and attempt.diagnosis_passed is False
