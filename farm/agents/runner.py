"""The agent's own process: `python -m farm.agents.runner` reads {"agent": name, "context":
AgentContext} on stdin, runs that agent and writes {"result": AgentResult} (or {"error", "trace"},
or {"infrastructure_error"}) as one JSON line on stdout. `--describe` writes every agent it knows
with what the worker needs to schedule it ({name: {"uses_model", "tool_mode"}}).

The worker starts it in the agent sandbox ahead of the session (it imports what agents need, then
waits for its request) (farm/agents/sandbox.py): only this process ever imports
an agent plugin (the modules named in FARM_AGENT_PLUGINS). What it writes is the agent's word, not
the farm's record: the worker keeps what its interface and model proxy saw."""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from typing import Any, TextIO

PLUGINS_ENV = "FARM_AGENT_PLUGINS"
RELAY_ENV = "FARM_AGENT_RELAY"  # the folder of the sockets to its endpoints, when it has no network


def load_plugins() -> None:
    for module in filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(","))):
        importlib.import_module(module)


def describe() -> dict[str, dict[str, Any]]:
    from farm.agents.agent import agents

    return {name: {"uses_model": bool(getattr(agents.factory(name), "uses_model", True)),
                   "tool_mode": str(getattr(agents.factory(name), "tool_mode", "raw"))} for name in agents.names()}


def preload() -> None:
    """Import what every agent needs before the session is known: the worker starts this process
    ahead of its session (farm/agenthost/process.py), so the session waits for none of it."""
    from farm.agents.agent import agents

    agents.names()  # the built-in agents (and through them the MCP client and the LLM loop)
    import farm.agents.loop  # noqa: F401
    import farm.interface.client  # noqa: F401

    if os.environ.get(RELAY_ENV):
        from farm.agents.loopback import start

        start()


def run(request: dict[str, Any]) -> dict[str, Any]:
    from core.errors import InfrastructureError
    from farm.agents.agent import AgentContext, agents

    try:
        ctx = AgentContext.model_validate(request["context"])
        relay = os.environ.get(RELAY_ENV)
        if relay:  # the sandbox's own network: its endpoints through the worker's sockets
            from farm.agents.loopback import serve

            routes = {ctx.mcp_url: f"{relay}/mcp.sock"}
            if ctx.options.get("model_endpoint"):
                routes[str(ctx.options["model_endpoint"])] = f"{relay}/model.sock"
            serve(routes)
        agent = agents.create(str(request["agent"]))
        return {"result": agent.run(ctx).model_dump(mode="json")}
    except InfrastructureError as exc:
        return {"infrastructure_error": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:  # an agent that crashes has failed its trial; the worker says so
        return {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-4000:]}


def main() -> None:
    # The answer goes to the real stdout; whatever the agent prints goes to stderr, so it cannot
    # garble (or forge the shape of) the one line the worker reads.
    answer: TextIO = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    load_plugins()
    if sys.argv[1:] == ["--describe"]:
        payload: dict[str, Any] = describe()
    else:
        preload()
        answer.write(json.dumps({"ready": True}) + "\n")  # the worker may hand it its session now
        answer.flush()
        request = sys.stdin.read()
        if not request.strip():
            return  # a spare process the worker never used (it stopped, or it closed our stdin)
        payload = run(json.loads(request))
    answer.write(json.dumps(payload) + "\n")
    answer.flush()
    sys.stderr.flush()
    # Done: no interpreter teardown (seconds of freeing modules), no waiting on an agent's leftover
    # threads; the worker reads the answer when the process is gone.
    os._exit(0)


if __name__ == "__main__":
    main()
