"""Which agents this farm can run and what scheduling needs of each (does it use a model, which
tool mode): the built-in agents from their registry; agent plugins (the modules named in
FARM_AGENT_PLUGINS) by asking the agent's process, in its sandbox, so their code never runs in a
worker or the dispatcher. A module listed in FARM_PLUGINS (imported by the farm itself) cannot
register an agent: it would run in the worker, next to the scorers."""

from __future__ import annotations

import functools
import json
import os
import subprocess
from dataclasses import dataclass

from core.errors import ConfigurationError
from farm.agents.agent import BUILT_IN_AGENT_MODULES, agents
from farm.agents.runner import PLUGINS_ENV

DESCRIBE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class AgentInfo:
    uses_model: bool
    tool_mode: str  # "raw" or "summarised": the interface mode the agent is built for


def agent_plugins() -> list[str]:
    return [m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(",") if m.strip()]


def known_agents() -> dict[str, AgentInfo]:
    found = _built_in()
    plugins = agent_plugins()
    if plugins:
        found = {**found, **_described(tuple(plugins))}
    return found


def agent_info(name: str) -> AgentInfo:
    known = known_agents()
    if name not in known:
        if name in agents:
            module = getattr(agents.factory(name), "__module__", "?")
            raise ConfigurationError(
                f"agent '{name}' is registered by {module}, a module the farm imports itself (FARM_PLUGINS): "
                f"an agent's code runs only in its own sandboxed process; list its module in {PLUGINS_ENV}")
        raise KeyError(f"unknown agent '{name}' (known: {', '.join(sorted(known)) or 'none'})")
    return known[name]


def _built_in() -> dict[str, AgentInfo]:
    out = {}
    for name in agents.names():
        factory = agents.factory(name)
        if getattr(factory, "__module__", "") in BUILT_IN_AGENT_MODULES:
            out[name] = AgentInfo(bool(getattr(factory, "uses_model", True)), str(getattr(factory, "tool_mode", "raw")))
    return out


@functools.cache
def _described(plugins: tuple[str, ...]) -> dict[str, AgentInfo]:
    from farm.agenthost.sandbox import runner_command

    argv, env = runner_command(list(plugins), env={})
    try:
        proc = subprocess.run([*argv, "--describe"], env=env, capture_output=True, timeout=DESCRIBE_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
        described = json.loads(proc.stdout.decode().strip().splitlines()[-1]) if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        raise ConfigurationError(f"{PLUGINS_ENV}={','.join(plugins)}: the agent plugins could not be loaded "
                                 f"in the agent's process: {exc}") from None
    if not isinstance(described, dict):
        raise ConfigurationError(f"{PLUGINS_ENV}={','.join(plugins)}: the agent plugins could not be loaded in the "
                                 f"agent's process (exit {proc.returncode}): {proc.stderr.decode()[-1500:]}")
    return {name: AgentInfo(bool(info.get("uses_model", True)), str(info.get("tool_mode", "raw")))
            for name, info in described.items() if name not in _built_in()}
