"""Adversary agent (helper adv), FARM_AGENT_PLUGINS=tests.security.adv_soup_agent: submits
tests/security/test_judge_mechanism_soup.py's fixed paragraph on the component named in its
`component` option (what an agent learns from kubectl or the admitted metadata tell), nothing else.
With `form: evidence` (helper adv2) the same mechanisms come under an "Evidence:" heading after a bare
"Root cause: <component>", where the soup threshold does not count them."""

from __future__ import annotations

from core.states import END_SUBMITTED
from farm.agents.agent import Agent, AgentContext, AgentResult, agents
from farm.interface.client import ToolClient

SOUP = ("Root cause: {c}'s deployment was changed: its image tag does not exist so the new pod is stuck in "
        "ImagePullBackOff, its env var, port, targetPort, selector, command and binary are wrong, it was scaled to "
        "zero replicas, its resource limits make it OOMKilled and CrashLoopBackOff, its readiness probe fails, its "
        "config and secret are wrong, the network policy blocks its traffic, its connection to the database is "
        "refused and times out, so requests fail.")

SOUP_AS_EVIDENCE = "Root cause: {c}, so requests fail.\nEvidence: " + SOUP.split(":", 1)[1]


@agents.register("adv-soup")
class Soup(Agent):
    uses_model = False

    def run(self, ctx: AgentContext) -> AgentResult:
        with ToolClient(ctx.mcp_url, ctx.mcp_token) as tools:
            tools.call("kubectl", command="get pods")
            text = SOUP_AS_EVIDENCE if ctx.options.get("form") == "evidence" else SOUP
            tools.call("submit_diagnosis", text=text.format(c=ctx.options["component"]))
        return AgentResult(end_reason=END_SUBMITTED, tool_calls=2, transcript=[])
