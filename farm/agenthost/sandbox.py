"""The agent's OS sandbox (bubblewrap, as for the agent's kubectl: farm/interface/sandbox.py). The
agent's process sees the system's programs and libraries (/usr), the Python runtime and its
installed packages, a copy of the farm code an agent may use (its base and registry, the MCP client,
the LLM loop; never the catalog, the oracles, the interface's server, the ledger), the agent plugin
modules and nothing else of the farm: no project folder, no worker environment, no credential but
its MCP token and its model endpoint's token (given on stdin), an empty home and /tmp. It runs in
its own PID, IPC and UTS namespaces as an unprivileged user without capabilities; the network stays
(the agent reaches its MCP server and model endpoint on loopback).

Its share of the host is bounded (ResourceLimits, from the sweep's agent limits): its data
memory, its processes, its open files and CPU time by rlimits set before its code runs, no core
files, and /tmp and home as tmpfs of a fixed size. RLIMIT_NPROC counts the processes of the
process's real uid, and the kernel exempts host root: a root worker therefore runs bwrap without a
user namespace and the agent's process as a uid of its own (SANDBOX_UID_BASE + the worker's pid:
one per concurrent session), the way an unprivileged worker's sandbox is counted in its own user
namespace. A cgroup would bound the whole sandbox at once; no cgroup is made (the worker says so
once in its log), the rlimits bound each process of it.

FARM_UNSAFE_NO_SANDBOX=1 runs the agent's process unconfined (a developer's machine, loudly)."""

from __future__ import annotations

import compileall
import functools
import logging
import os
import re
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
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
# A root worker's agent runs as this uid plus the worker's pid (below the pid range's top, above
# any account's uid), a uid no file and no other session has.
SANDBOX_UID_BASE = 3_000_000


@dataclass(frozen=True)
class ResourceLimits:
    """What the agent's process may take of the worker host (the sweep's agent limits)."""

    memory_mib: int = 2048  # RLIMIT_DATA of each process: its heap and private mappings
    processes: int = 256  # RLIMIT_NPROC: processes and threads of the sandbox's uid
    tmp_mib: int = 512  # the size of each of /tmp and home (tmpfs: the host's memory)
    open_files: int = 4096  # RLIMIT_NOFILE
    cpu_s: int = 3600  # RLIMIT_CPU of each process: a backstop, the wall-time limit comes first

    @classmethod
    def of(cls, limits: object) -> ResourceLimits:
        """From an AgentLimits (a wall time past half the default CPU time raises that to twice it)."""
        wall = float(getattr(limits, "wall_time_s", 0.0))
        return cls(memory_mib=int(getattr(limits, "memory_mib", cls.memory_mib)),
                   processes=int(getattr(limits, "processes", cls.processes)),
                   tmp_mib=int(getattr(limits, "tmp_mib", cls.tmp_mib)), cpu_s=max(cls.cpu_s, int(2 * wall)))

    def prlimit(self) -> list[str]:
        return ["prlimit", f"--data={self.memory_mib << 20}", f"--nproc={self.processes}",
                f"--nofile={self.open_files}",
                # SIGXCPU at the soft limit (the session names it), SIGKILL 10 s later
                f"--cpu={self.cpu_s}:{self.cpu_s + 10}", "--core=0", "--"]


@functools.cache
def bwrap_version(bwrap: str) -> tuple[int, ...]:
    out = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10).stdout
    m = re.search(r"(\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


@functools.cache
def _say_once(message: str) -> None:
    log.warning(message)


def sandbox_uid() -> int | None:
    """The uid the agent's process runs as on the host when the worker is root (None otherwise:
    an unprivileged worker's sandbox is its own user namespace)."""
    return SANDBOX_UID_BASE + os.getpid() if os.geteuid() == 0 else None


def hand_over(path: Path) -> None:
    """Open the folder of the agent's endpoint sockets to its uid for passing through, not writing
    (a writable host folder would be disk space no tmpfs size bounds); the sockets are its own."""
    if sandbox_uid() is not None:
        path.chmod(0o711)


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
    tree.chmod(0o755)  # mkdtemp's 0700 would keep out the sandbox's own uid
    for sub in tree.rglob("*"):
        sub.chmod(sub.stat().st_mode | stat.S_IRGRP | stat.S_IROTH | (0o055 if sub.is_dir() else 0))
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


def _parents(binds: list[str]) -> list[str]:
    """The folders above the mount points, made first and open to all (bwrap makes them 0700,
    which would keep out a sandbox uid that is not root's)."""
    targets = [binds[i + 2] for i, arg in enumerate(binds) if arg in ("--ro-bind", "--bind")]
    targets += [binds[i + 1] for i, arg in enumerate(binds) if arg == "--tmpfs"]
    parents = {str(p) for t in targets for p in Path(t).parents if str(p) != "/"}
    return [arg for d in sorted(parents, key=lambda d: (d.count("/"), d)) for arg in ("--perms", "0755", "--dir", d)]


def runner_command(plugins: list[str], *, env: dict[str, str], files: tuple[str, ...] = (),
                   relay_dir: Path | None = None,
                   limits: ResourceLimits = ResourceLimits()) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of the agent's process: `python -m farm.agents.runner` in
    the sandbox (or unconfined under the opt-out). `env` is the agent's own environment (added to
    the sandbox's fixed one); `files` are host files it needs read-only at their own path (a CLI
    agent's executable). With `relay_dir` the sandbox has a network of its own with nothing on it:
    it reaches its session's endpoints only through the Unix sockets the worker puts in that
    folder (farm/agenthost/relay.py, farm/agents/loopback.py). `limits` bound its process."""
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
        return [*limits.prlimit(), python, "-S", "-m", "farm.agents.runner"], full
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
    binds = _parents(binds) + binds
    pythonpath = os.pathsep.join([CODE_PATH, PLUGIN_PATH, *site_paths])
    fixed = {"PATH": f"{Path(python).parent}:/usr/local/bin:/usr/bin:/bin", "HOME": HOME_PATH, "TMPDIR": "/tmp",
             "LANG": "C.UTF-8", "PYTHONPATH": pythonpath, "PYTHONDONTWRITEBYTECODE": "1",
             "FARM_AGENT_PLUGINS": ",".join(plugins), **env}
    setenv = [arg for k, v in fixed.items() for arg in ("--setenv", k, v)]
    bwrap = find_bwrap()
    if bwrap_version(bwrap) >= (0, 5):
        size = str(limits.tmp_mib << 20)
        tmpfs = ["--perms", "1777", "--size", size, "--tmpfs", "/tmp", "--perms", "0777", "--size", size,
                 "--tmpfs", HOME_PATH]
    else:
        tmpfs = ["--tmpfs", "/tmp", "--tmpfs", HOME_PATH]
        _say_once(f"bubblewrap {'.'.join(map(str, bwrap_version(bwrap)))} cannot size a tmpfs (0.5 can): the "
                  "agent's /tmp and home take up to half the host's memory")
    _say_once("the agent's process is bounded by rlimits (memory, processes, files, CPU) and tmpfs sizes; the "
              "worker makes it no cgroup, so a sandbox's processes together may take more than one's limit")
    uid = sandbox_uid()
    if uid is None:  # unprivileged: the sandbox's own user namespace counts its processes
        user = ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--cap-drop", "ALL"]
        enter = limits.prlimit()
    else:  # root: no user namespace (it would map to root, whom RLIMIT_NPROC exempts); a uid of its own
        user = []
        enter = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
                 "--bounding-set=-all", "--no-new-privs", "--", *limits.prlimit()]
    argv = [bwrap, *user, "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", *network,
            "--die-with-parent", "--new-session", "--proc", "/proc", "--dev", "/dev", *tmpfs, *binds,
            "--chdir", HOME_PATH, "--clearenv", *setenv, "--hostname", "sandbox", "--",
            *enter, python, "-S", "-m", "farm.agents.runner"]
    return argv, {}


__all__ = ["ResourceLimits", "SandboxUnavailable", "agent_code", "hand_over", "plugin_files", "runner_command"]
