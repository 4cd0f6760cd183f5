"""The agent's OS sandbox (bubblewrap, as for the agent's kubectl: farm/interface/sandbox.py). The
agent's process sees the system's programs and libraries (/usr), the Python runtime and its
installed packages, a copy of the farm code an agent may use (its base and registry, the MCP client,
the LLM loop; never the catalog, the oracles, the interface's server, the ledger), the agent plugin
modules and nothing else of the farm: no project folder, no worker environment, no credential but
its MCP token and its model endpoint's token (given on stdin), an empty home and /tmp. It runs in
its own PID, IPC and UTS namespaces as an unprivileged user without capabilities; the network stays
(the agent reaches its MCP server and model endpoint on loopback).

FARM_UNSAFE_NO_SANDBOX=1 runs the agent's process unconfined (a developer's machine, loudly)."""

from __future__ import annotations

import compileall
import functools
import logging
import os
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

from farm.agents.runner import RELAY_ENV
from farm.interface.sandbox import HOST_FILES, SANDBOX_UID, SandboxUnavailable, find_bwrap, unsafe_opt_out

log = logging.getLogger("farm.agenthost.sandbox")

ROOT = Path(__file__).resolve().parents[2]
# The farm code an agent's process may import, relative to the project root: a folder is copied
# whole, a file alone. tests/security/test_agent_imports.py checks that the built-in agents need
# nothing else. farm/interface/__init__.py is written empty: the real one loads the server.
AGENT_CODE = ("core/__init__.py", "core/errors.py", "core/states.py", "core/secrets.py", "core/registry.py",
              "farm/__init__.py", "farm/agents", "farm/llm", "farm/interface/client.py")
EMPTY_PACKAGES = ("farm/interface/__init__.py",)
CODE_PATH = "/opt/farm-agent"  # where the copy is mounted
PLUGIN_PATH = "/opt/agent-plugins"  # where agent plugin modules are mounted
SITE_PATH = "/opt/site-packages"  # where the installed packages are mounted
RELAY_PATH = "/run/endpoints"  # where the Unix sockets to the session's endpoints appear
HOME_PATH = "/home/agent"
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
# The farm's own packages (pyproject's packages.find). A worker installed with `pip install .` (every
# image) has them in site-packages, the catalog and its ground truth included: the sandbox hides
# them wherever it mounts that folder; the agent gets only its own copy (CODE_PATH).
FARM_PACKAGES = ("core", "apps", "farm", "tasks", "injectors", "clusters", "results")


@functools.cache
def agent_code() -> Path:
    """A copy of AGENT_CODE (compiled: the sandbox cannot write bytecode), made once per process,
    so the agent reads the worker's own version of the code and nothing beside it."""
    tree = Path(tempfile.mkdtemp(prefix="farm-agent-code-"))
    for rel in AGENT_CODE:
        src, dst = ROOT / rel, tree / rel
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    for rel in EMPTY_PACKAGES:
        (tree / rel).write_text("")
    compileall.compile_dir(str(tree), quiet=2)
    return tree


def _search_path() -> list[Path]:
    return [Path(p or ".").resolve() for p in sys.path if Path(p or ".").is_dir()]


def plugin_files(modules: list[str]) -> list[tuple[Path, Path]]:
    """The files (and package folders) of the agent plugin modules, each with its sys.path entry,
    found without importing them (importing one here would run its code in the worker):
    each parent package's __init__.py, and the module itself (a package's whole folder)."""
    found: list[tuple[Path, Path]] = []
    for module in modules:
        parts = module.split(".")
        for base in _search_path():
            pkg, last = base.joinpath(*parts[:-1]), parts[-1]
            target = pkg / last if (pkg / last / "__init__.py").is_file() else pkg / f"{last}.py"
            if not target.exists():
                continue
            for i in range(1, len(parts)):
                init = base.joinpath(*parts[:i], "__init__.py")
                if init.is_file():
                    found.append((base, init))
            found.append((base, target))
            break
        else:
            from core.errors import ConfigurationError

            raise ConfigurationError(f"FARM_AGENT_PLUGINS names '{module}', which is on no path of this worker's "
                                     "sys.path (a module or package the agent's process can be given)")
    return list(dict.fromkeys(found))


def runner_command(plugins: list[str], *, env: dict[str, str], files: tuple[str, ...] = (),
                   relay_dir: Path | None = None) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of the agent's process: `python -m farm.agents.runner` in
    the sandbox (or unconfined under the opt-out). `env` is the agent's own environment (added to
    the sandbox's fixed one); `files` are host files it needs read-only at their own path (a CLI
    agent's executable). With `relay_dir` the sandbox has a network of its own with nothing on it:
    it reaches its session's endpoints only through the Unix sockets the worker puts in that
    folder (farm/agenthost/relay.py, farm/agents/loopback.py)."""
    base = Path(sys.base_prefix).resolve()
    sites = list(dict.fromkeys(Path(sysconfig.get_path(k)).resolve() for k in ("purelib", "platlib")))
    code = agent_code()
    # The interpreter itself (not a virtualenv's link to it, which lives in the project): `-S`
    # skips site's .pth files (an editable install's finder points into the project).
    python = str(Path(sys.executable).resolve())
    plugin_paths = plugin_files(plugins)
    if unsafe_opt_out():
        log.warning("FARM_UNSAFE_NO_SANDBOX is set: the agent's process runs UNCONFINED, with this worker's "
                    "files in reach; never do this on a farm that evaluates agents")
        roots = list(dict.fromkeys(str(b) for b, _ in plugin_paths))
        full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp"),
                "PYTHONPATH": os.pathsep.join([str(code), *roots, *map(str, sites)]), "PYTHONDONTWRITEBYTECODE": "1",
                "FARM_AGENT_PLUGINS": ",".join(plugins), **env}
        return [python, "-S", "-m", "farm.agents.runner"], full
    binds: list[str] = []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            binds += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            binds += ["--ro-bind", d, d]
    for host in HOST_FILES:
        if os.path.exists(host):
            binds += ["--ro-bind", host, host]
    if not str(base).startswith("/usr/"):
        binds += ["--ro-bind", str(base), str(base)]
    # The installed packages at a neutral path: a virtualenv's own path is inside the project.
    site_paths = [f"{SITE_PATH}/{i}" for i in range(len(sites))]
    for host_site, path in zip(sites, site_paths, strict=True):
        binds += ["--ro-bind", str(host_site), path]
        for package in FARM_PACKAGES:
            if (Path(host_site) / package).is_dir():
                binds += ["--tmpfs", f"{path}/{package}"]
                if str(host_site).startswith(tuple(d + "/" for d in SYSTEM_DIRS)):  # seen again through /usr
                    binds += ["--tmpfs", f"{host_site}/{package}"]
    binds += ["--ro-bind", str(code), CODE_PATH]
    for b, p in plugin_paths:
        binds += ["--ro-bind", str(p), f"{PLUGIN_PATH}/{p.relative_to(b)}"]
    for f in files:
        binds += ["--ro-bind", f, f]
    network: list[str] = []
    if relay_dir is not None:
        binds += ["--bind", str(relay_dir), RELAY_PATH]
        network = ["--unshare-net"]
        env = {**env, RELAY_ENV: RELAY_PATH}
    pythonpath = os.pathsep.join([CODE_PATH, PLUGIN_PATH, *site_paths])
    fixed = {"PATH": f"{Path(python).parent}:/usr/local/bin:/usr/bin:/bin", "HOME": HOME_PATH, "TMPDIR": "/tmp",
             "LANG": "C.UTF-8", "PYTHONPATH": pythonpath, "PYTHONDONTWRITEBYTECODE": "1",
             "FARM_AGENT_PLUGINS": ",".join(plugins), **env}
    setenv = [arg for k, v in fixed.items() for arg in ("--setenv", k, v)]
    argv = [find_bwrap(), "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
            "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", *network,
            "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", HOME_PATH, *binds,
            "--chdir", HOME_PATH, "--clearenv", *setenv, "--hostname", "sandbox", "--",
            python, "-S", "-m", "farm.agents.runner"]
    return argv, {}


__all__ = ["SandboxUnavailable", "agent_code", "plugin_files", "runner_command"]
