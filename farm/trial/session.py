"""The agent session's process, driven from the worker: the agent runs in its own sandboxed process
(farm/agents/process.py) and reaches the trial only over MCP and, if it uses a model, through a model
proxy of the session's (farm/llm/proxy.py) that calls the provider with the worker's client. The
interface holds the limits: when one ends the session, the agent's process is killed at once; a
process that outlives its wall time is killed too; one that dies without an answer has crashed.

What the agent is given: its options from the sweep entry, minus those only the worker may hold
(the provider's key and address, the sweep's ledger, the farm's Redis), plus its MCP token and
model endpoint. Nothing it answers is trusted for the record (farm/trial/run.py)."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from core.errors import InfrastructureError
from core.states import LIMIT_WALL_TIME
from farm.agenthost.known import agent_plugins
from farm.agenthost.process import prepare, take
from farm.agenthost.relay import Relay
from farm.agenthost.sandbox import ResourceLimits
from farm.agents.agent import AgentContext, AgentLimits, AgentResult
from farm.llm.remote import ENDPOINT_OPTION, TOKEN_OPTION

if TYPE_CHECKING:
    from farm.interface.server import AgentInterface

# Options the worker's model client reads and the agent must not see: the provider's key and
# address, the price, the sweep's ledger and concurrency slots, the farm's Redis.
WORKER_OPTIONS = ("api_base", "api_key", "price", "sweep_id", "sweep_cost_cap", "concurrency", "redis_url",
                  "max_backoff_retries", "max_backoff_s", "temperature")
# Seconds past the wall-time limit a process may take to hand in its result before it is killed.
WALL_GRACE_MAX_S = 30.0
# Seconds an agent has, once a limit ended its session, to hand in its result (its own transcript)
# before it is killed; whatever it calls meanwhile is refused and is no step.
END_GRACE_S = 2.0
POLL_S = 0.25


def wall_grace_s(wall_time_s: float) -> float:
    return min(WALL_GRACE_MAX_S, max(1.0, 0.05 * wall_time_s))


def agent_view(ctx: AgentContext, endpoint: tuple[str, str] | None) -> AgentContext:
    """The context the agent's process is given."""
    options = {k: v for k, v in ctx.options.items() if k not in WORKER_OPTIONS}
    if endpoint is not None:
        options[ENDPOINT_OPTION], options[TOKEN_OPTION] = endpoint
    return ctx.model_copy(update={"options": options})


def cli_environment(agent: str, options: dict[str, Any]) -> tuple[dict[str, str], tuple[str, ...]]:
    """A coding-agent CLI (claude-code, codex) runs like any agent, in the sandbox with its own
    network, its model being the session's proxy: it is given its executable, read-only, and the
    variables its `pass_env` option names, none of them a credential or a model endpoint
    (farm.agents.cli_adapters.passable)."""
    from farm.agents.agent import agents
    from farm.agents.cli_adapters import _CLIAgent, passable

    factory = agents.factory(agent) if agent in agents else None
    if not (isinstance(factory, type) and issubclass(factory, _CLIAgent)):
        return {}, ()
    names = {str(n) for n in options.get("pass_env", [])} - {"PATH", "HOME", "TMPDIR"}
    env = {n: os.environ[n] for n in sorted(names) if n in os.environ and passable(n)}
    exe = shutil.which(str(options.get("executable") or factory.executable))
    return env, ((os.path.realpath(exe),) if exe and not os.path.realpath(exe).startswith("/usr/") else ())


def prepare_agent(agent: str, options: dict[str, Any], limits: AgentLimits | None = None) -> None:
    """Start the agent's process ahead of its session (while the cluster is deployed)."""
    env, files = cli_environment(agent, options)
    prepare(agent_plugins(), env=env, files=files, limits=ResourceLimits.of(limits or AgentLimits()))


@dataclass
class ProcessOutcome:
    result: AgentResult | None  # what the agent answered, None if it answered nothing usable
    error: str | None = None  # why it failed, when it crashed or answered an error
    trace: str | None = None  # its traceback or stderr, when it crashed
    infrastructure: str | None = None  # it could not reach the trial (the MCP session did not open)
    stopped: bool = False  # the worker killed it (a limit, or its wall time)


def run_agent_process(agent: str, ctx: AgentContext, interface: AgentInterface, *,
                      endpoint: tuple[str, str] | None) -> ProcessOutcome:
    """Run the agent's process until it answers, a limit ends the session or its wall time is up."""
    return _run(agent, ctx, interface, endpoint)


def _run(agent: str, ctx: AgentContext, interface: AgentInterface, endpoint: tuple[str, str] | None) -> ProcessOutcome:
    env, files = cli_environment(agent, ctx.options)
    bounds = ResourceLimits.of(ctx.limits)
    proc = take(agent_plugins(), env=env, files=files, limits=bounds)
    relays: list[Relay] = []
    ended = threading.Event()
    interface.on_end = lambda reason, detail: ended.set()
    wall = ctx.limits.wall_time_s
    try:
        if proc.relay_dir is not None:  # its only network paths: the MCP server and the model proxy
            relays.append(Relay(proc.relay_dir / "mcp.sock", _port(ctx.mcp_url)).start())
            if endpoint is not None:
                relays.append(Relay(proc.relay_dir / "model.sock", _port(endpoint[0])).start())
        proc.start(agent, agent_view(ctx, endpoint))
        deadline = proc.started_s + wall + wall_grace_s(wall)
        while not proc.wait(min(POLL_S, max(0.0, deadline - time.monotonic()))):
            if ended.is_set():
                proc.wait(END_GRACE_S)
                break
            if time.monotonic() >= deadline:
                interface.end(LIMIT_WALL_TIME, f"the agent's process did not stop within {wall:g} s")
                break
    finally:
        proc.stop()
        interface.on_end = None
        for relay in relays:
            relay.stop()
    out = proc.outcome()
    if out.stopped:
        return ProcessOutcome(None, stopped=True)
    answer = out.answer or {}
    if "infrastructure_error" in answer:
        return ProcessOutcome(None, infrastructure=str(answer["infrastructure_error"])[:2000])
    if "error" in answer:
        error = str(answer["error"])
        return ProcessOutcome(None, error=(exceeded(error, out.code, bounds) + error)[:2000],
                              trace=str(answer.get("trace", ""))[-4000:])
    if "result" in answer:
        try:
            return ProcessOutcome(AgentResult.model_validate(answer["result"]))
        except ValueError as exc:
            return ProcessOutcome(None, error=f"the agent's process answered an unreadable result: {exc}"[:2000])
    return ProcessOutcome(None, error=exceeded(out.stderr[-4000:], out.code, bounds)
                          + f"the agent's process exited with status {out.code} without a result",
                          trace=out.stderr[-4000:])


# What an agent's process meets at each of its resource limits (farm/agenthost/sandbox.py)
_AT_LIMIT = (("MemoryError", "its memory limit ({memory_mib} MiB)"),
             ("Cannot allocate memory", "its memory limit ({memory_mib} MiB)"),
             ("Resource temporarily unavailable", "its process limit ({processes} processes)"),
             ("No space left on device", "its /tmp or home size ({tmp_mib} MiB)"),
             ("Too many open files", "its open-file limit ({open_files})"))


def exceeded(text: str, code: int | None, bounds: ResourceLimits) -> str:
    """"the agent's process reached <limit>: " when what it died of or answered says so, else ""."""
    if code is not None and code in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
        return f"the agent's process reached its CPU time limit ({bounds.cpu_s} s): "
    for sign, what in _AT_LIMIT:
        if sign in text:
            return f"the agent's process reached {what.format(**vars(bounds))}: "
    return ""


def _port(url: str) -> int:
    port = urlsplit(url).port
    if port is None:
        raise ValueError(f"no port in {url}")
    return port


def model_failure(failures: list[BaseException]) -> InfrastructureError | None:
    """The provider failure that makes the session an infrastructure error, if any."""
    return next((f for f in failures if isinstance(f, InfrastructureError)), None)
