"""The SRE agent farm: sweep specs, the problem catalog, the dispatcher, agents, the agent
interface and the oracles. Celery tasks live in `tasks/`, clusters in `clusters/`."""

__version__ = "0.1.0"

# Imported by module, never by name here (loading the farm must not load its agents or its CLI).
__all__ = ["__version__", "agenthost", "agents", "cli", "deploy", "dispatcher", "interface", "llm", "oracles", "owner",
           "problems", "runner", "serving", "spec", "trial"]
