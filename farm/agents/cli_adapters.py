"""`claude-code` and `codex`: run those coding-agent CLIs headless against the trial's MCP server
and turn their JSON event streams into the farm's transcript and usage.

claude: `claude -p PROMPT --output-format stream-json --verbose --mcp-config FILE --strict-mcp-config`
    with only the farm server's tools allowed and every built-in tool (shell, files, search,
    sub-agents, web) disallowed; events are system/init, assistant (content blocks text / tool_use,
    and message usage), user (tool_result blocks) and a final result (usage, total_cost_usd,
    num_turns, subtype).
codex: `codex exec --json --sandbox read-only --cd DIR -c features.shell_tool=false` with the server
    given as `-c mcp_servers.farm.url=...` and the bearer token in an environment variable, and a
    private, empty CODEX_HOME (no user config, so no other MCP servers, and no login); events are thread.started,
    turn.started, item.started / item.completed (agent_message, reasoning, mcp_tool_call,
    command_execution, error) and turn.completed with usage {input_tokens, cached_input_tokens,
    output_tokens}; codex reports no cost, so it is priced from litellm's table.

The model: the CLI's only model endpoint is a farm model proxy (farm/llm/proxy.py), as for the
farm's own agents: claude gets ANTHROPIC_BASE_URL pointed at it and the session's token as its
ANTHROPIC_API_KEY, codex a model provider `farm` whose base_url is the proxy (Responses API) and
whose key variable holds the session's token. The provider's key stays with the client behind the
proxy, which counts the usage, holds the concurrency slot per call, charges the sweep's ledger and
enforces the token and cost budgets; a provider failure it sees ends the session as the provider's
(infrastructure), not the agent's. In a farm that proxy is the worker's (its address and token come
in the context's options, and the sandbox's network holds nothing else); run in-process (tests, a
notebook) the adapter starts one of its own with `LLMClient.from_context`.

Isolation: the MCP tools are the agent's only reach into the incident. In a farm the adapter runs
in the agent's sandboxed process (farm/agenthost/sandbox.py: no farm folder in it at all, and a
network with only the session's MCP server and model proxy on it); within that, the CLI runs in an
empty per-trial directory, with an environment of allowed variables only, none of them naming a
path of the farm's (its catalog holds every problem's ground truth) nor holding a credential.
Both streams are read live: the wall-time, token, cost and step limits stop the process when hit.
"""

from __future__ import annotations

import abc
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import ConfigurationError, InfrastructureError, LimitReached
from core.secrets import scrub
from core.states import (
    END_AGENT_ERROR,
    END_AGENT_STOPPED,
    END_SUBMITTED,
    LIMIT_COST,
    LIMIT_STEPS,
    LIMIT_SWEEP_COST,
    LIMIT_TOKENS,
    LIMIT_WALL_TIME,
)
from farm.agents.agent import Agent, AgentContext, AgentResult, agents
from farm.interface.client import CLIENT_TIMEOUT_S
from farm.llm.client import price_tokens
from farm.llm.limits import SweepLedger, sweep_ledger
from farm.llm.remote import ENDPOINT_OPTION, TOKEN_OPTION
from farm.llm.transcript import Transcript

SERVER_NAME = "farm"
PROMPT = """An incident is in progress in the Kubernetes namespace '{ns}' (incident {trial}). You are the \
on-call SRE. Use only the tools of the MCP server '{server}' (kubectl, prometheus_query, loki_query, \
jaeger_traces, get_alerts, wait, ...): find the root cause (the faulty component, the mechanism, the concrete \
wrong value, the components failing only downstream), call submit_diagnosis with it, then fix it with the \
smallest change, verify with wait and the tools, and call submit_mitigation. Do not delete or scale away the \
application."""
# Environment passed to the CLIs: what they need to run, nothing of the farm's and no credential
# (their model endpoint and its token are the session's, set by the adapter).
PASS_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TERM", "TMPDIR", "USER")
# Variables a sweep's `pass_env` may not hand a CLI, whatever it asks: credentials, and the model
# endpoints the adapter sets itself.
_SECRET_NAME = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|_BASE_URL$|^AWS_|^GOOGLE_|"
                          r"^AZURE_|^CLAUDE_CODE_USE_|PROXY$)")
# The farm's model provider in codex's configuration, and the variable its key is read from.
CODEX_PROVIDER, CODEX_KEY_ENV = "farm", "FARM_MODEL_TOKEN"


def passable(name: str) -> bool:
    """Whether a variable named in `pass_env` may reach the CLI: no credential, no model endpoint,
    none of the farm's own settings."""
    return not name.startswith("FARM_") and not _SECRET_NAME.search(name)
# Claude Code's built-in tools, all refused: the shell, the file tools (Read, Glob, Grep, LS would
# reach the farm's disk and the problem catalog), sub-agents that carry the same tools, the web.
CLAUDE_BUILTIN_TOOLS = ("Bash", "BashOutput", "KillShell", "KillBash", "Read", "Glob", "Grep", "LS", "Edit",
                        "MultiEdit", "Write", "NotebookRead", "NotebookEdit", "Task", "Agent", "WebFetch",
                        "WebSearch", "TodoWrite", "Skill", "SlashCommand", "ExitPlanMode")


def farm_roots() -> list[Path]:
    """The folders that hold the farm's code and data (the problem catalog with its ground truth)."""
    import farm

    return [Path(farm.__file__).resolve().parent.parent]


def _names_farm_path(value: str, roots: list[Path]) -> bool:
    return any(str(root) in value for root in roots)


@dataclass
class Sandbox:
    """A trial's private folders, outside the project: `cwd` is where the CLI runs (empty),
    `config` holds the files the farm writes for it, `home` stands in for a HOME that would name
    a farm path."""

    root: Path
    cwd: Path
    config: Path
    home: Path

    @classmethod
    def create(cls, prefix: str) -> Sandbox:
        base = Path(tempfile.gettempdir()).resolve()
        if _names_farm_path(str(base), farm_roots()):
            base = Path("/tmp")  # a TMPDIR inside the project would put the agent next to the catalog
        root = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
        box = cls(root, root / "work", root / "config", root / "home")
        for folder in (box.cwd, box.config, box.home):
            folder.mkdir(mode=0o700)
        return box

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def agent_environment(names: set[str], box: Sandbox) -> dict[str, str]:
    """The allowed variables of the worker's environment, without any farm path: PATH loses the
    project's folders (its venv and tools), any other variable that names one is dropped, and a
    HOME inside the project becomes the sandbox's own."""
    roots = farm_roots()
    env: dict[str, str] = {}
    for name in sorted(names):
        value = os.environ.get(name)
        if value is None or not passable(name):
            continue  # the farm's settings (database, broker, artifacts) and credentials are never an agent's
        if name == "PATH":
            value = os.pathsep.join(p for p in value.split(os.pathsep) if p and not _names_farm_path(p, roots))
            value = value or "/usr/local/bin:/usr/bin:/bin"
        elif _names_farm_path(value, roots):
            continue
        env[name] = value
    env.setdefault("HOME", str(box.home))
    # No kubeconfig of the worker's: the agent reaches the cluster through the MCP tools only.
    env["KUBECONFIG"] = os.devnull
    return env


class Usage:
    def __init__(self) -> None:
        self.tokens_in = self.tokens_out = self.tokens_cached = 0
        self.cost_usd = 0.0
        self.cost_exact = False  # True once the CLI reported its own total
        self.steps = 0
        self.tool_calls = 0
        self.diagnosis = False
        self.mitigation = False
        self.error: str | None = None
        self.finished = False
        self.seen_messages: set[str] = set()
        self.pending: dict[str, str] = {}  # tool_use id -> tool name, until its result arrives


def _strip_server(name: str) -> str:
    prefix = f"mcp__{SERVER_NAME}__"
    return name[len(prefix):] if name.startswith(prefix) else name


def _block_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return json.dumps(content) if content is not None else ""


class _CLIAgent(Agent):
    executable = ""

    def __init__(self, executable: str | None = None, extra_args: list[str] | None = None,
                 pass_env: list[str] | None = None) -> None:
        self.executable_path = executable or self.executable
        self.extra_args = list(extra_args or [])
        self.pass_env = set(PASS_ENV) | set(pass_env or [])  # more variables the CLI needs, by name
        self._proc: subprocess.Popen[str] | None = None
        self._stopped_for: list[str] = []  # why the adapter's own model proxy ended the session

    @abc.abstractmethod
    def command(self, ctx: AgentContext, box: Sandbox, endpoint: tuple[str, str]) -> tuple[list[str], dict[str, str]]:
        """argv (argv[0] is replaced by the resolved executable) and extra environment, for a CLI
        whose model endpoint is `endpoint` (the proxy's OpenAI-style base URL, ending in /v1, and
        its token)."""

    @abc.abstractmethod
    def on_event(self, event: dict[str, Any], usage: Usage, tr: Transcript, ctx: AgentContext) -> None:
        """Fold one JSON event of the CLI's stream into usage and transcript."""

    def _resolve(self) -> str:
        found = shutil.which(self.executable_path)
        if not found:
            raise ConfigurationError(f"the '{self.executable_path}' executable is not on PATH; install it or set "
                                     f"the agent option executable=/path/to/{self.executable}")
        return found

    def run(self, ctx: AgentContext) -> AgentResult:
        # Sweep entry options (executable, extra_args, pass_env) arrive through the context.
        opts = ctx.options
        self.executable_path = opts.get("executable", self.executable_path)
        self.extra_args = list(opts.get("extra_args", self.extra_args))
        self.pass_env |= set(opts.get("pass_env", []))
        started = time.monotonic()
        tr = Transcript()
        usage = Usage()

        def ended(reason: str, error: str) -> AgentResult:
            tr.event(f"session not started: {error}")
            return AgentResult(end_reason=reason, transcript=tr.entries, error=scrub(error))

        try:
            exe = self._resolve()
        except ConfigurationError as exc:
            return AgentResult(end_reason=END_AGENT_ERROR, error=str(exc))
        ledger = sweep_ledger(opts)
        if ledger is not None:
            try:
                ledger.check()  # a sweep over its cap starts no more sessions
            except LimitReached as exc:
                return ended(exc.reason, str(exc))
        own_proxy = None
        if opts.get(ENDPOINT_OPTION):
            endpoint = (str(opts[ENDPOINT_OPTION]), str(opts.get(TOKEN_OPTION, "")))
        else:
            # Run in-process: a proxy of the adapter's own, with the client the worker would use.
            if not ctx.model:
                return ended(END_AGENT_ERROR, f"{self.executable} needs a model: list one in the sweep's models")
            from farm.llm.client import LLMClient
            from farm.llm.proxy import ModelProxy

            own_proxy = ModelProxy(LLMClient.from_context(ctx), deadline=started + ctx.limits.wall_time_s,
                                   on_limit=lambda reason, detail: self._stop_for(reason),
                                   on_provider_failure=lambda exc: self._stop_for("provider"))
            endpoint = own_proxy.start()
        self._stopped_for = []
        box = Sandbox.create(f"farm-{self.executable}-")
        try:
            argv, extra_env = self.command(ctx, box, endpoint)
            argv[0] = exe
            env = agent_environment(self.pass_env, box)
            env.update(extra_env)
            prompt_shown = PROMPT.format(ns=ctx.namespace, trial=ctx.trial_id, server=SERVER_NAME)
            tr.message("user", prompt_shown)
            reason = self._drive(argv, env, box.cwd, ctx, usage, tr, ledger, started + ctx.limits.wall_time_s)
        finally:
            box.remove()
            if own_proxy is not None:
                own_proxy.stop()
        if own_proxy is not None:
            failure = next((f for f in own_proxy.failures if isinstance(f, InfrastructureError)), None)
            if failure is not None:
                raise failure  # the provider failed, not the agent: as the worker would say
            limit = next((r for r in self._stopped_for if r != "provider"), None)
            if limit is not None:
                reason = limit
            # The usage counted where the key is, not the CLI's own report.
            t = own_proxy.client.totals
            usage.tokens_in, usage.tokens_out, usage.tokens_cached = t.tokens_in, t.tokens_out, t.tokens_cached
            usage.cost_usd = t.cost_usd
            if own_proxy.failures and usage.error is None:
                usage.error = f"model call failed: {own_proxy.failures[-1]}"
        return AgentResult(end_reason=reason, steps=usage.steps, tool_calls=usage.tool_calls,
                           tokens_in=usage.tokens_in, tokens_out=usage.tokens_out,
                           tokens_cached=usage.tokens_cached, cost_usd=usage.cost_usd, transcript=tr.entries,
                           error=scrub(usage.error) if usage.error else None)

    def _stop_for(self, reason: str) -> None:
        """The adapter's own model proxy ended the session (a limit, or the provider failed)."""
        self._stopped_for.append(reason)
        proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()

    def _drive(self, argv: list[str], env: dict[str, str], cwd: Path, ctx: AgentContext, usage: Usage,
               tr: Transcript, ledger: SweepLedger | None, deadline: float) -> str:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                text=True, cwd=cwd, env=env, start_new_session=True)
        self._proc = proc
        stderr: list[str] = []
        threading.Thread(target=lambda: stderr.extend(proc.stderr or []), daemon=True).start()
        limit_hit: list[str] = []

        def stop() -> None:
            # The CLI's own children (MCP stdio servers, shells) are in its process group.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()

        def watchdog() -> None:
            while proc.poll() is None:
                if time.monotonic() > deadline:
                    limit_hit.append(LIMIT_WALL_TIME)
                    stop()
                    return
                time.sleep(0.1)

        threading.Thread(target=watchdog, daemon=True).start()
        assert proc.stdout is not None
        spent_before = ledger.spent() if ledger is not None and ledger.cap_usd is not None else 0.0
        for line in proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                tr.event(f"non-JSON output: {line[:500]}")
                continue
            if isinstance(event, dict):
                self.on_event(event, usage, tr, ctx)
            over = self._over_limit(usage, ctx, ledger, spent_before)
            if over and not limit_hit:
                limit_hit.append(over)
                tr.event(f"session ended: {over}", tokens=usage.tokens_in + usage.tokens_out,
                         cost_usd=round(usage.cost_usd, 6), cost_exact=usage.cost_exact)
                stop()
                break  # what is still buffered happened after the limit: not part of the session
        code = proc.wait()
        self._proc = None
        if limit_hit:
            return limit_hit[0]
        if code != 0 and not usage.finished:
            usage.error = usage.error or f"{self.executable} exited with {code}: {''.join(stderr)[-800:]}"
            return END_AGENT_ERROR
        if usage.error and not (usage.diagnosis or usage.mitigation):
            return END_AGENT_ERROR
        return END_SUBMITTED if (usage.diagnosis or usage.mitigation) else END_AGENT_STOPPED

    @staticmethod
    def _over_limit(u: Usage, ctx: AgentContext, ledger: SweepLedger | None = None,
                    spent_before: float = 0.0) -> str | None:
        lim = ctx.limits
        if u.tokens_in + u.tokens_out > lim.max_tokens:
            return LIMIT_TOKENS
        if u.cost_usd > lim.max_cost_usd:
            return LIMIT_COST
        if u.steps > lim.max_steps:
            return LIMIT_STEPS
        # Other trials' spend since the start is not seen here; the cap is checked again at each start.
        if ledger is not None and ledger.cap_usd is not None and spent_before + u.cost_usd > ledger.cap_usd:
            return LIMIT_SWEEP_COST
        return None


@agents.register("claude-code")
class ClaudeCodeAgent(_CLIAgent):
    executable = "claude"

    def command(self, ctx: AgentContext, box: Sandbox, endpoint: tuple[str, str]) -> tuple[list[str], dict[str, str]]:
        config = {"mcpServers": {SERVER_NAME: {"type": "http", "url": ctx.mcp_url,
                                               "headers": {"Authorization": f"Bearer {ctx.mcp_token}"}}}}
        path = box.config / "mcp.json"
        path.write_text(json.dumps(config))
        path.chmod(0o600)
        argv = [self.executable, "-p", PROMPT.format(ns=ctx.namespace, trial=ctx.trial_id, server=SERVER_NAME),
                "--output-format", "stream-json", "--verbose", "--mcp-config", str(path), "--strict-mcp-config",
                "--allowedTools", f"mcp__{SERVER_NAME}",
                # the agent works the incident through the farm's tools only: no shell, no files
                "--disallowedTools", *CLAUDE_BUILTIN_TOOLS,
                "--max-turns", str(ctx.limits.max_steps)]
        if ctx.model:
            argv += ["--model", ctx.model.split("/", 1)[1] if ctx.model.startswith("anthropic/") else ctx.model]
        url, token = endpoint
        env = {"MCP_TOOL_TIMEOUT": str(int(CLIENT_TIMEOUT_S * 1000)),  # (ms) outlasts the longest wait on a cluster
               # The Anthropic SDK adds /v1/messages to the base URL; the session's token is its key.
               "ANTHROPIC_BASE_URL": url.rstrip("/").removesuffix("/v1"), "ANTHROPIC_API_KEY": token,
               # No telemetry, error reports or update checks: the sandbox's network has no way out.
               "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}
        return argv + self.extra_args, env

    def on_event(self, event: dict[str, Any], usage: Usage, tr: Transcript, ctx: AgentContext) -> None:
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init":
            tr.event("claude session started", session_id=event.get("session_id"), model=event.get("model"),
                     mcp_servers=event.get("mcp_servers"))
        elif kind == "assistant":
            msg = event.get("message") or {}
            texts, calls = [], []
            for block in msg.get("content") or []:
                if block.get("type") == "text":
                    texts.append(block.get("text", ""))
                elif block.get("type") == "tool_use":
                    calls.append({"id": block.get("id"), "name": _strip_server(block.get("name", "")),
                                  "arguments": block.get("input") or {}})
            u = msg.get("usage") or {}
            entry_usage = {"tokens_in": int(u.get("input_tokens", 0)) + int(u.get("cache_creation_input_tokens", 0))
                           + int(u.get("cache_read_input_tokens", 0)),
                           "tokens_out": int(u.get("output_tokens", 0)),
                           "tokens_cached": int(u.get("cache_read_input_tokens", 0))}
            tr.assistant({"content": "\n".join(texts) or None}, entry_usage, msg.get("model") or ctx.model or "",
                         calls)
            # Running totals until the result event gives the exact figures; one message may arrive
            # as several events (one per content block) carrying the same usage, so count it once.
            mid = str(msg.get("id"))
            if mid not in usage.seen_messages:
                usage.seen_messages.add(mid)
                usage.tokens_in += entry_usage["tokens_in"]
                usage.tokens_out += entry_usage["tokens_out"]
                usage.tokens_cached += entry_usage["tokens_cached"]
                usage.steps += 1
                if not usage.cost_exact:
                    # Claude reports cost only at the end: price each message as it streams, so the
                    # cost limit can stop a run that would overspend before its result arrives.
                    cost, _ = price_tokens(ctx.model or msg.get("model"), entry_usage["tokens_in"],
                                           entry_usage["tokens_out"], entry_usage["tokens_cached"],
                                           int(u.get("cache_creation_input_tokens", 0)))
                    usage.cost_usd += cost
            usage.tool_calls += len(calls)
            for c in calls:
                usage.pending[c["id"]] = c["name"]
        elif kind == "user":
            msg = event.get("message") or {}
            content = msg.get("content")
            blocks: list[Any] = content if isinstance(content, list) else []
            for block in blocks:
                if block.get("type") != "tool_result":
                    continue
                name = usage.pending.get(block.get("tool_use_id"), "?")
                is_error = bool(block.get("is_error"))
                tr.tool(block.get("tool_use_id", ""), name, _block_text(block.get("content")), is_error)
                if not is_error and name == "submit_diagnosis":
                    usage.diagnosis = True
                if not is_error and name == "submit_mitigation":
                    usage.mitigation = True
        elif kind == "result":
            u = event.get("usage") or {}
            usage.tokens_in = (int(u.get("input_tokens", 0)) + int(u.get("cache_creation_input_tokens", 0))
                               + int(u.get("cache_read_input_tokens", 0)))
            usage.tokens_out = int(u.get("output_tokens", 0))
            usage.tokens_cached = int(u.get("cache_read_input_tokens", 0))
            if event.get("total_cost_usd") is not None:
                usage.cost_usd, usage.cost_exact = float(event["total_cost_usd"]), True
            usage.steps = int(event.get("num_turns") or usage.steps)
            usage.finished = True
            if event.get("is_error") or event.get("subtype") not in (None, "success"):
                usage.error = f"claude ended with {event.get('subtype')}: {str(event.get('result', ''))[:300]}"
            tr.event("claude session finished", subtype=event.get("subtype"), num_turns=event.get("num_turns"),
                     total_cost_usd=event.get("total_cost_usd"), result=event.get("result"))


@agents.register("codex")
class CodexAgent(_CLIAgent):
    executable = "codex"
    TOKEN_ENV = "FARM_MCP_TOKEN"

    def command(self, ctx: AgentContext, box: Sandbox, endpoint: tuple[str, str]) -> tuple[list[str], dict[str, str]]:
        url, token = endpoint
        provider = f"model_providers.{CODEX_PROVIDER}"
        argv = [self.executable, "exec", "--json", "--skip-git-repo-check", "--sandbox", "read-only",
                "--cd", str(box.cwd),
                # No shell and no image viewer: a read-only sandbox still lets a shell read any file,
                # the problem catalog included. The MCP tools are all that is left.
                "-c", "features.shell_tool=false", "-c", "features.view_image_tool=false",
                "-c", f"mcp_servers.{SERVER_NAME}.url={json.dumps(ctx.mcp_url)}",
                "-c", f"mcp_servers.{SERVER_NAME}.bearer_token_env_var={json.dumps(self.TOKEN_ENV)}",
                # codex's own MCP tool timeout must outlast the longest wait on a real cluster
                "-c", f"mcp_servers.{SERVER_NAME}.tool_timeout_sec={CLIENT_TIMEOUT_S:g}",
                # The model through the session's proxy (Responses API), its token as the key.
                "-c", f"model_provider={json.dumps(CODEX_PROVIDER)}",
                "-c", f"{provider}.name={json.dumps('sre-farm model proxy')}",
                "-c", f"{provider}.base_url={json.dumps(url)}",
                "-c", f"{provider}.env_key={json.dumps(CODEX_KEY_ENV)}",
                "-c", f'{provider}.wire_api="responses"']
        if ctx.model:
            argv += ["-m", ctx.model.split("/", 1)[1] if ctx.model.startswith("openai/") else ctx.model]
        argv += self.extra_args
        argv.append(PROMPT.format(ns=ctx.namespace, trial=ctx.trial_id, server=SERVER_NAME))
        return argv, {self.TOKEN_ENV: ctx.mcp_token, CODEX_KEY_ENV: token, "CODEX_HOME": self._private_home(box)}

    @staticmethod
    def _private_home(box: Sandbox) -> str:
        """An empty CODEX_HOME of the trial's own: no login (its model is the session's proxy) and
        none of the worker's config.toml, whose MCP servers (a filesystem server, say) would reach
        past the farm's tools."""
        home = box.config / "codex-home"
        home.mkdir(mode=0o700)
        return str(home)

    def on_event(self, event: dict[str, Any], usage: Usage, tr: Transcript, ctx: AgentContext) -> None:
        kind = event.get("type")
        if kind == "thread.started":
            tr.event("codex thread started", thread_id=event.get("thread_id"))
        elif kind == "item.completed":
            item = event.get("item") or {}
            itype = item.get("type")
            if itype == "agent_message":
                usage.steps += 1
                tr.assistant({"content": item.get("text")}, {}, ctx.model or "", [])
            elif itype == "reasoning":
                tr.assistant({"content": None, "reasoning_content": item.get("text")}, {}, ctx.model or "", [])
            elif itype == "mcp_tool_call":
                usage.steps += 1
                usage.tool_calls += 1
                name = item.get("tool", "?")
                args = item.get("arguments") or {}
                if isinstance(args, str):
                    try:
                        args = json.loads(args)
                    except json.JSONDecodeError:
                        args = {"_raw": args}
                tr.assistant({"content": None}, {}, ctx.model or "", [{"id": item.get("id"), "name": name,
                                                                        "arguments": args}])
                error = item.get("error")
                failed = item.get("status") == "failed" or bool(error)
                result = item.get("result") or {}
                text = (error or {}).get("message", "") if failed and error else _block_text(result.get("content"))
                failed = failed or bool(result.get("is_error") or result.get("isError"))
                tr.tool(item.get("id", ""), name, text, failed)
                if not failed and name == "submit_diagnosis":
                    usage.diagnosis = True
                if not failed and name == "submit_mitigation":
                    usage.mitigation = True
            elif itype == "command_execution":
                usage.steps += 1
                usage.tool_calls += 1
                tr.assistant({"content": None}, {}, ctx.model or "", [{"id": item.get("id"), "name": "shell",
                                                                        "arguments": {"command": item.get("command")}}])
                tr.tool(item.get("id", ""), "shell", item.get("aggregated_output", ""), item.get("exit_code") not in (0,))
            elif itype == "error":
                tr.event(f"codex error item: {item.get('message')}")
        elif kind == "turn.completed":
            u = event.get("usage") or {}
            usage.tokens_in += int(u.get("input_tokens", 0))
            usage.tokens_cached += int(u.get("cached_input_tokens", 0))
            usage.tokens_out += int(u.get("output_tokens", 0))
            usage.cost_usd, _ = price_tokens(ctx.model, usage.tokens_in, usage.tokens_out, usage.tokens_cached)
            usage.finished = True
        elif kind in ("turn.failed", "error"):
            err = event.get("error") or {}
            usage.error = f"codex {kind}: {err.get('message') if isinstance(err, dict) else event.get('message')}"
            tr.event(usage.error)
