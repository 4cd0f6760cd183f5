"""The SRE agent farm: sweep specs, the problem catalog, the dispatcher, agents, the agent
interface and the oracles. Celery tasks live in `tasks/`, clusters in `clusters/`."""

__version__ = "0.1.0"
