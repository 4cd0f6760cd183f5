"""Test plugins (loaded through FARM_PLUGINS=tests.tasks.plugins), for the farm's failure paths:

- cluster provider `faulty`: an emulated cluster whose API server refuses what a fault plan names
  (FARM_TEST_CLUSTER_FAULTS or the `faults` option, e.g. "deploy:2,inject:1,reset:1": each kind
  fails its first N times in this process; a kind without a count always fails):
  `deploy` refuses creating Deployments, `inject` refuses changing Services (the fault of
  hr-frontend-service-targetport-wrong), `reset` makes the reset fail, `reopen` makes opening a
  replacement cluster fail (the first cluster of a process always opens), `open` makes any
  opening fail, the first included (a worker that cannot get a cluster);
- agent `probe`: makes model calls (through the farm's LLM client, on a scripted server named by
  its `api_base` option) and MCP tool calls for `rounds` rounds, then returns, raises or hangs
  (`end` option), so tests can see what a session produced whatever ended it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from clusters.base import ClusterProvider, providers
from core.errors import ClusterUnavailable, LimitReached, ResetError
from core.states import END_AGENT_STOPPED, END_SUBMITTED
from farm.agents.base import Agent, AgentContext, AgentResult, agents

FAULTS_ENV = "FARM_TEST_CLUSTER_FAULTS"
_lock = threading.Lock()
_budget: dict[str, int | None] | None = None  # kind -> failures left (None: always), per process
_opened = 0


def set_faults(spec: str) -> None:
    """Replace this process's fault plan (in-process tests); resets the count of opened clusters."""
    global _budget, _opened
    with _lock:
        _budget, _opened = {}, 0
        for item in filter(None, spec.split(",")):
            kind, _, count = item.strip().partition(":")
            _budget[kind] = int(count) if count else None


def _plan(spec: str | None) -> None:
    """The plan comes from the `faults` option, else the environment, once per process."""
    if spec is not None:
        if _budget is None:
            set_faults(spec)
    elif _budget is None:
        set_faults(os.environ.get(FAULTS_ENV, ""))


def _take(kind: str) -> bool:
    """True when this occurrence of `kind` must fail (and the budget is spent by one)."""
    with _lock:
        plan = _budget or {}
        if kind not in plan:
            return False
        left = plan[kind]
        if left is None:
            return True
        if left <= 0:
            return False
        plan[kind] = left - 1
        return True


def _refusal(method: str, url: str) -> str | None:
    path = url.split("?", 1)[0]
    if method == "POST" and path.endswith("/deployments") and "/apis/apps/v1/" in path:
        return "deploy"
    if method in ("PUT", "PATCH") and "/api/v1/namespaces/" in path and "/services/" in path:
        return "inject"
    return None


def _faulty_class(base: type) -> type:
    class FaultyHandle(base):  # type: ignore[misc, valid-type]
        """The emulated cluster, with an API server that refuses what the fault plan names."""

        def api_client(self) -> Any:
            from kubernetes.client.exceptions import ApiException

            client = super().api_client()
            call_api = client.call_api

            def refusing(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
                kind = _refusal(method.upper(), url)
                if kind and _take(kind):
                    exc = ApiException(status=503, reason="Service Unavailable")
                    exc.body = json.dumps({"kind": "Status", "status": "Failure", "code": 503,
                                           "message": f"test cluster refuses this {kind} request"})
                    raise exc
                return call_api(method, url, *args, **kwargs)

            client.call_api = refusing
            return client

        def reset(self) -> None:
            if _take("reset"):
                raise ResetError(f"test cluster {self.name}: reset refused by the fault plan")
            super().reset()

    return FaultyHandle


@providers.register("faulty")
class FaultyProvider(ClusterProvider):
    def open(self, name: str, faults: str | None = None, **options: Any) -> Any:
        global _opened
        from clusters.sim.provider import SimProvider

        _plan(faults)
        with _lock:
            _opened += 1
            first = _opened == 1
        if _take("open"):
            raise ClusterUnavailable(f"test cluster {name}: it does not open (fault plan)")
        if not first and _take("reopen"):
            raise ClusterUnavailable(f"test cluster {name}: no replacement opens (fault plan)")
        handle = SimProvider().open(name, **options)
        handle.__class__ = _faulty_class(type(handle))
        return handle


@agents.register("probe")
class Probe(Agent):
    """Model calls and tool calls in rounds, then an ending chosen by the test."""

    uses_model = True

    def run(self, ctx: AgentContext) -> AgentResult:
        from farm.llm.client import LLMClient
        from farm.llm.mcp_client import MCPToolbox

        opts = ctx.options
        client = LLMClient.from_context(ctx) if opts.get("api_base") else None
        calls = 0
        reason = END_SUBMITTED if opts.get("diagnose") else END_AGENT_STOPPED
        with MCPToolbox(ctx.mcp_url, ctx.mcp_token) as tools:
            try:
                for i in range(int(opts.get("rounds", 2))):
                    if client is not None:
                        client.complete([{"role": "user", "content": f"round {i}: what is wrong with the cluster?"}])
                    tools.call("kubectl", {"command": "get pods"})
                    calls += 1
                    time.sleep(float(opts.get("pause_s", 0)))
            except LimitReached as exc:  # as the farm's own agents do: the limit is the ending
                reason = exc.reason
            if opts.get("diagnose"):
                tools.call("submit_diagnosis", {"text": str(opts["diagnose"])})
                calls += 1
            end = opts.get("end", "return")
            if end == "raise":
                raise RuntimeError("the probe agent crashed on purpose")
            if end == "hang":
                time.sleep(float(opts.get("hang_s", 3600)))
        t = client.totals if client is not None else None
        return AgentResult(end_reason=reason,
                           steps=t.calls if t else calls, tool_calls=calls,
                           tokens_in=t.tokens_in if t else 0, tokens_out=t.tokens_out if t else 0,
                           cost_usd=t.cost_usd if t else 0.0,
                           transcript=[{"kind": "note", "text": f"probe made {calls} tool calls"}])
