"""A test plugin (loaded through FARM_PLUGINS): the baseline agent, slowed down in wall time so
that a test can kill its worker mid-session."""

from __future__ import annotations

import os
import time

from farm.agents.agent import Agent, AgentContext, AgentResult, agents


@agents.register("slow-baseline")
class SlowBaseline(Agent):
    uses_model = False

    def run(self, ctx: AgentContext) -> AgentResult:
        time.sleep(float(os.environ.get("FARM_TEST_AGENT_SLEEP", "4")))
        return agents.create("baseline").run(ctx)
