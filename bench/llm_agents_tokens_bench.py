"""Tokens spent by react and stratus on the same decisions: a scripted LLM (farm.llm.scripted) plays one
investigation and fix for both agents, so every difference comes from how each agent feeds the model
(context growth, summarised observability, sub-agent split). Prints one row per agent and mode.

    .venv/bin/python bench/llm_agents_tokens_bench.py            # the canned test incident (fast)
    .venv/bin/python bench/llm_agents_tokens_bench.py --sim      # also: emulated cluster + real interface
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
logging.disable(logging.INFO)

from farm.agents.agent import AgentContext  # noqa: E402
from farm.agents.react import ReactAgent  # noqa: E402
from farm.agents.stratus import StratusAgent  # noqa: E402
from farm.llm.scripted import ScriptedLLM  # noqa: E402


def row(label: str, r, wall: float) -> str:
    return (f"{label:<34} {r.end_reason:<10} steps {r.steps:>3}  tools {r.tool_calls:>3}  in {r.tokens_in:>7}  "
            f"out {r.tokens_out:>5}  cached {r.tokens_cached:>7}  total {r.tokens_in + r.tokens_out:>7}  "
            f"{wall:5.1f}s")


def canned() -> dict[str, int]:
    from farm.testing.incident_mcp import IncidentMCP
    from farm.testing.incident_plan import responder

    totals = {}
    for agent, mode in ((ReactAgent(), "raw"), (StratusAgent(), "summarised"), (StratusAgent(), "raw")):
        with IncidentMCP(mode=mode) as srv, ScriptedLLM(responder()) as llm:
            ctx = AgentContext(trial_id="bench", namespace="hotel-reservation", mcp_url=srv.url, mcp_token=srv.token,
                               model="openai/scripted-model", tool_mode=mode, options={"api_base": llm.url})
            t0 = time.monotonic()
            r = agent.run(ctx)
            label = f"canned  {type(agent).__name__[:-5].lower()} ({mode})"
            print(row(label, r, time.monotonic() - t0), flush=True)
            totals[label] = r.tokens_in + r.tokens_out
    return totals


def sim() -> dict[str, int]:
    import tempfile

    from farm.interface import AgentInterface
    from farm.llm.scripted import tool_plan
    from farm.problems.catalog import load_catalog
    from farm.pytest_plugin import SimClusters
    from farm.testing.incident_plan import SIM_NS as NS
    from farm.testing.incident_plan import SIM_PLAN as PLAN
    from farm.testing.incident_plan import SIM_PROBLEM as PROBLEM
    from injectors.compose import ProblemInjection

    totals = {}
    with tempfile.TemporaryDirectory() as tmp, SimClusters(lambda name: Path(tmp) / name) as clusters:
        for agent in (ReactAgent(), StratusAgent()):
            cluster = clusters.served("hotel-reservation", seed=11, agent=True)  # as deployed, for each agent
            ProblemInjection(load_catalog().get(PROBLEM)).inject(cluster, NS)
            cluster.advance(60)
            iface = AgentInterface(cluster, NS, "bench", mode=agent.tool_mode)  # type: ignore[arg-type]
            url, token = iface.start()
            try:
                with ScriptedLLM(tool_plan(PLAN)) as llm:
                    ctx = AgentContext(trial_id="bench", namespace=NS, mcp_url=url, mcp_token=token,
                                       model="openai/scripted-model", tool_mode=agent.tool_mode,
                                       options={"api_base": llm.url})
                    t0 = time.monotonic()
                    r = agent.run(ctx)
            finally:
                iface.stop()
            label = f"sim     {type(agent).__name__[:-5].lower()} ({agent.tool_mode})"
            print(row(label, r, time.monotonic() - t0), flush=True)
            totals[label] = r.tokens_in + r.tokens_out
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sim", action="store_true", help="also run on the emulated cluster (slower)")
    args = parser.parse_args()
    totals = canned()
    if args.sim:
        totals |= sim()
    for scope in ("canned", "sim"):
        react = next((v for k, v in totals.items() if k.startswith(scope) and "react" in k), None)
        strat = next((v for k, v in totals.items() if k.startswith(scope) and "stratus (summarised)" in k), None)
        if react and strat:
            print(f"{scope}: stratus uses {strat / react:.2f}x the tokens of react ({react / strat:.1f}x fewer)")


if __name__ == "__main__":
    main()
