"""`react`: the plain tool-calling agent. One conversation over litellm with every MCP tool; the
model investigates, submits a diagnosis, mitigates and calls submit_mitigation. Any litellm model
string works; the MCP tools are given in OpenAI function form and litellm converts them."""

from __future__ import annotations

from farm.agents.agent import Agent, AgentContext, AgentResult, agents
from farm.agents.loop import Session, converse, run_session

SYSTEM_PROMPT = """You are an on-call site reliability engineer. An incident is in progress in the Kubernetes \
namespace of an application. Work it only through the tools you have: kubectl (one command, no shell), \
Prometheus, Loki, Jaeger, alerts, and wait.

1. Investigate until you find the root cause, not a symptom: which component is faulty, by what mechanism, \
with the concrete wrong value (key, value, port, selector, limit); which components only fail downstream of it.
2. Call submit_diagnosis once with that diagnosis in prose.
3. Mitigate with the smallest change that removes the cause, then verify the application is healthy again \
(use wait to let it settle). Never delete or scale away the application to silence it. undo_last reverts \
your last change if it made things worse.
4. Call submit_mitigation when it is fixed."""


@agents.register("react")
class ReactAgent(Agent):
    """The baseline LLM agent: everything in one growing context."""

    tool_mode = "raw"

    def __init__(self, system_prompt: str | None = None, max_output_chars: int | None = None) -> None:
        self.system_prompt = system_prompt or SYSTEM_PROMPT
        self.max_output_chars = max_output_chars

    def run(self, ctx: AgentContext) -> AgentResult:
        # The sweep entry's options reach the agent through the context; they override the constructor.
        opts = ctx.options
        self.system_prompt = opts.get("system_prompt", self.system_prompt)
        self.max_output_chars = opts.get("max_output_chars", self.max_output_chars)
        return run_session(ctx, self._body, agent_name="react")

    def _body(self, s: Session) -> None:
        task = (f"Incident {s.ctx.trial_id}: the application in namespace '{s.ctx.namespace}' is unhealthy. "
                "Find the root cause, submit a diagnosis, mitigate, and submit the mitigation.")
        messages = [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": task}]
        s.transcript.message("system", self.system_prompt)
        s.transcript.message("user", task)
        limit = self.max_output_chars
        converse(s, messages, s.tools.openai_tools(),
                 shape_output=(lambda t: t if len(t) <= limit else t[:limit] + "\n[truncated]") if limit else None)
