"""One agent session's process, seen from the worker: `start(agent, ctx)` runs farm.agents.runner in
the agent sandbox with the context on stdin; `wait(timeout)` until it exits; `stop()` kills it and
everything it started (at a limit, a deadline, or the end of the session); `outcome()` reads what it
answered. Its answer is the agent's word: the worker records what its interface and model proxy
saw, and uses the answer only for the agent's own transcript."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from farm.agenthost.sandbox import ResourceLimits, hand_over, runner_command
from farm.agents.agent import AgentContext
from farm.interface.sandbox import unsafe_opt_out

STDERR_TAIL = 8000  # characters of the agent's stderr kept for a crash report
MAX_ANSWER_BYTES = 64 * 1024 * 1024  # an answer with a long transcript; more is not read


@dataclass
class Outcome:
    """How the process ended: `answer` is its parsed JSON line (None if it wrote none), `code` its
    exit status (negative: killed by that signal), `stderr` the tail of what it printed."""

    answer: dict[str, Any] | None
    code: int | None
    stderr: str
    stopped: bool  # the worker killed it


class AgentProcess:
    """`isolated`: the sandbox gets a network of its own, and reaches only the session's endpoints
    (its MCP server and model proxy) through `relay_dir`; every agent runs so, CLI agents included."""

    def __init__(self, plugins: list[str], *, env: dict[str, str] | None = None,
                 files: tuple[str, ...] = (), isolated: bool = True, limits: ResourceLimits = ResourceLimits()) -> None:
        self.plugins, self.env, self.files, self.isolated = plugins, dict(env or {}), files, isolated
        self.limits = limits
        self.key = (tuple(plugins), tuple(sorted(self.env.items())), tuple(files), isolated, limits)
        self.relay_dir: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_s = 0.0  # time.monotonic() when the process was started
        self._stdout = bytearray()
        self._stderr = bytearray()
        self._readers: list[threading.Thread] = []
        self._stopped = threading.Event()

    def spawn(self) -> AgentProcess:
        """Start the process: it loads what agents need, then waits for its request."""
        if self.isolated and not unsafe_opt_out():
            self.relay_dir = Path(tempfile.mkdtemp(prefix="agent-endpoints-"))
            hand_over(self.relay_dir)
        argv, env = runner_command(self.plugins, env=self.env, files=self.files, relay_dir=self.relay_dir,
                                   limits=self.limits)
        # Its own session and process group: stop() reaches whatever it started.
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env, start_new_session=True, close_fds=True, cwd="/")
        for stream, buf, limit in ((self.proc.stdout, self._stdout, MAX_ANSWER_BYTES),
                                   (self.proc.stderr, self._stderr, None)):
            reader = threading.Thread(target=_drain, args=(stream, buf, limit), daemon=True, name="agent-output")
            reader.start()
            self._readers.append(reader)
        return self

    def start(self, agent: str, ctx: AgentContext) -> None:
        """Hand the (spawned) process its session."""
        if self.proc is None:
            self.spawn()
        assert self.proc is not None and self.proc.stdin is not None
        request = json.dumps({"agent": agent, "context": ctx.model_dump(mode="json")}).encode()
        self.started_s = time.monotonic()
        try:
            self.proc.stdin.write(request)
            self.proc.stdin.close()
        except OSError:  # it died before reading its context: outcome() says how
            pass

    def ready(self, timeout: float) -> bool:
        """True once the process has loaded what agents need and waits for its session."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._stdout:
            if not self.running() or time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def wait(self, timeout: float | None) -> bool:
        """True once the process has exited (within `timeout` seconds)."""
        assert self.proc is not None
        try:
            self.proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """Kill the process and its group (bwrap takes the sandbox's PID namespace down with it)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self._stopped.set()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            self.proc.kill()
        self.proc.wait()
        self._remove_relay_dir()

    def _remove_relay_dir(self) -> None:
        if self.relay_dir is not None:
            shutil.rmtree(self.relay_dir, ignore_errors=True)

    def outcome(self) -> Outcome:
        assert self.proc is not None
        code = self.proc.wait()
        self._remove_relay_dir()
        for reader in self._readers:
            reader.join(timeout=5)
        answer: dict[str, Any] | None = None
        lines = bytes(self._stdout).strip().splitlines()
        if lines and not self._stopped.is_set():
            try:
                parsed = json.loads(lines[-1])
                answer = parsed if isinstance(parsed, dict) else None
            except ValueError:
                answer = None
        return Outcome(answer, code, bytes(self._stderr).decode(errors="replace")[-STDERR_TAIL:],
                       self._stopped.is_set())


def _drain(stream: Any, buf: bytearray, limit: int | None) -> None:
    while chunk := stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536):
        if limit is None:
            buf.extend(chunk)
            del buf[:-STDERR_TAIL * 2]
        elif len(buf) < limit:
            buf.extend(chunk[: limit - len(buf)])


# One process started ahead of the next session (a worker runs one session at a time): its
# interpreter start and imports happen while the cluster is deployed, not when the session starts.
_spare: AgentProcess | None = None
_spare_lock = threading.Lock()


def prepare(plugins: list[str], *, env: dict[str, str] | None = None, files: tuple[str, ...] = (),
            isolated: bool = True, limits: ResourceLimits = ResourceLimits()) -> None:
    """Start a spare process for a coming session, unless one for the same agent setup is ready."""
    global _spare
    wanted = AgentProcess(plugins, env=env, files=files, isolated=isolated, limits=limits)
    with _spare_lock:
        if _spare is not None and _spare.key == wanted.key and _spare.running():
            return
        old, _spare = _spare, wanted.spawn()
    if old is not None:
        old.stop()


def take(plugins: list[str], *, env: dict[str, str] | None = None, files: tuple[str, ...] = (),
         isolated: bool = True, limits: ResourceLimits = ResourceLimits()) -> AgentProcess:
    """A process for this session: the spare if it fits, else a new one; a new spare is started
    for the session after it."""
    global _spare
    wanted = AgentProcess(plugins, env=env, files=files, isolated=isolated, limits=limits)
    with _spare_lock:
        spare, _spare = _spare, None
    if spare is not None and (spare.key != wanted.key or not spare.running()):
        spare.stop()
        spare = None
    proc = spare or wanted.spawn()
    prepare(plugins, env=env, files=files, isolated=isolated, limits=limits)
    return proc


def discard_spare() -> None:
    global _spare
    with _spare_lock:
        spare, _spare = _spare, None
    if spare is not None:
        spare.stop()
