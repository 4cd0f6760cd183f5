"""The worker's side of an agent: which agents exist (`known`), the sandbox an agent's process runs
in (`sandbox`) and that process (`process`). Nothing here is given to the agent; the agent's own
side is farm/agents (its runner, `python -m farm.agents.runner`, and the agents themselves)."""
