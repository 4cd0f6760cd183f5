"""`kubectl exec` into a modelled container: the command is looked up on the image's PATH (runc's
error when it is not there), shells interpret their scripts, everyday tools run in tools.py and
the image's own programs (mongo, psql, redis-cli, ...) in the container's behaviour model."""

from __future__ import annotations

import dataclasses
import fnmatch
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubesim.apps.model import AppModel, StartContext
from kubesim.userland import fs as fsmod
from kubesim.userland.images import BUSYBOX, COREUTILS, NET, PROCPS, Userland, default_argv, userland_of
from kubesim.userland.shell import Shell

if TYPE_CHECKING:
    from kubesim.runtime import Ctr, PodRt

SHELLS = ("sh", "ash", "bash", "dash")
GENERIC_TOOLS = BUSYBOX | COREUTILS | PROCPS | NET
READ_ONLY = ("/proc/", "/sys/", fsmod.SA_DIR + "/")


def oci_not_found(name: str) -> str:
    if "/" in name:
        return (f'OCI runtime exec failed: exec failed: unable to start container process: exec: "{name}": '
                f"stat {name}: no such file or directory: unknown\n")
    return (f'OCI runtime exec failed: exec failed: unable to start container process: exec: "{name}": '
            "executable file not found in $PATH: unknown\n")


class WritableFs(fsmod.Filesystem):
    """The container's files with its mounts' rules: ConfigMap, Secret and token mounts and
    /proc are read-only; what is written persists in the container's writable layer."""

    read_only_mounts: tuple[str, ...] = ()

    def write_checked(self, path: str, text: str, append: bool = False) -> str | None:
        path = fsmod.normalize(path)
        if path.startswith(READ_ONLY) or any(path.startswith(m.rstrip("/") + "/") for m in self.read_only_mounts):
            return "Read-only file system"
        parent = path.rsplit("/", 1)[0] or "/"
        if not self.is_dir(parent):
            return "nonexistent directory"
        self.write(path, text, append)
        return None


@dataclass
class Process:
    pid: int
    argv: list[str]
    cpu: float = 0.0
    rss: float = 0.0
    start: float = 0.0


class Sandbox:
    """One exec: the container's userland, filesystem, environment and process table."""

    def __init__(self, ctx: StartContext, rt: PodRt, c: Ctr, model: AppModel | None) -> None:
        self.ctx, self.rt, self.c, self.model = ctx, rt, c, model
        self.cluster = ctx.cluster
        self.land: Userland = userland_of(c.image or ctx.container.get("image", ""))
        self.env = fsmod.base_env(ctx, self.land)
        layers = self.cluster.kubelet.state.setdefault("writable_layers", {})
        written = layers.setdefault(c.container_id, {})
        self.main_argv = _main_argv(ctx)
        self.fs = WritableFs({}, written)
        built = fsmod.build(ctx, self.land, self.env, self.main_argv, rt.ip, c.container_id, written)
        self.fs.files, self.fs.dirs = built.files, built.dirs
        self.fs.read_only_mounts = tuple(m.get("mountPath", "") for m in ctx.container.get("volumeMounts") or []
                                         if m.get("readOnly") or _volume_kind(ctx, m.get("name")) in ("configMap", "secret",
                                                                                                     "projected", "downwardAPI"))
        seq = self.cluster.kubelet.state.setdefault("exec_pids", {})
        self.next_pid = seq.get(c.container_id, 6) + 1
        seq[c.container_id] = self.next_pid + 4
        self.procs = [Process(1, self.main_argv, c.cpu_seconds, c.memory, c.started_at or 0.0)]
        target = ctx.container.get("targetContainerName")
        other = rt.containers.get(target) if target else None
        if other is not None and other.state == "running":
            # `kubectl debug --target`: the debug container joins the target's process namespace
            spec: dict[str, Any] = next((s for s in ctx.pod["spec"].get("containers", []) if s["name"] == target), {})
            own = dataclasses.replace(ctx, container=spec)
            self.procs = [Process(1, _main_argv(own), other.cpu_seconds, other.memory, other.started_at or 0.0),
                          Process(self.next_pid - 1, self.main_argv, c.cpu_seconds, c.memory, c.started_at or 0.0)]
        self.now = self.cluster.clock.now()
        self.budget = [0]

    # -- entry ------------------------------------------------------------------------------------
    def run_top(self, command: list[str], stdin: str = "") -> tuple[int, str, str]:
        return self.run_argv(None, command, stdin, self.env)

    def run_argv(self, shell: Shell | None, argv: list[str], stdin: str, env: dict[str, str]) -> tuple[int, str, str]:
        from kubesim.userland.tools import TOOLS
        if argv[0] == "\0which":
            found = self.land.resolve(argv[1])
            if found is None:
                return 1, "", ""
            return 0, self.where(argv[1]) + "\n", ""
        found = self.land.resolve(argv[0])
        if found is None and argv[0].rsplit("/", 1)[-1] not in GENERIC_TOOLS:
            # a program the behaviour model knows the image for although the registry lists none
            # (the OpenTelemetry demo's kafka is apache/kafka with /opt/kafka/bin)
            answered = self.program(argv, stdin, env, unknown_fails=True)
            if answered is not None:
                return answered
        if found is None:
            if shell is None:
                return 126, "", oci_not_found(argv[0])
            if "/" in argv[0]:
                return 127, "", f"{shell.name}: {argv[0]}: not found\n" if shell.flavor != "bash" else \
                    f"{shell.name}: line 1: {argv[0]}: No such file or directory\n"
            return 127, "", shell.not_found(argv[0])
        kind, name = found
        if kind == "program":
            return self.program(argv, stdin, env) or (1, "", "")
        if name in SHELLS:
            return self.shell(name, argv, stdin, env)
        return TOOLS[name](self, argv, stdin, env)

    def where(self, name: str) -> str:
        if "/" in name:
            return name
        for p in self.land.programs:
            if p.rsplit("/", 1)[-1] == name:
                return p if p.startswith("/") else f"/usr/local/bin/{p}"
        return ("/bin/" if self.land.family in ("busybox", "alpine") or name in SHELLS else "/usr/bin/") + name

    def shell(self, name: str, argv: list[str], stdin: str, env: dict[str, str]) -> tuple[int, str, str]:
        flavor = "bash" if name == "bash" else ("ash" if self.land.family in ("busybox", "alpine") else "dash")
        args = argv[1:]
        script: str | None = None
        positional: list[str] = []
        while args:
            a = args[0]
            if a in ("-c",) or (a.startswith("-") and "c" in a[1:] and not a.startswith("--")):
                if len(args) < 2:
                    return 2, "", f"{name}: -c: option requires an argument\n"
                script, positional = args[1], args[2:]
                break
            if a.startswith("-") or a.startswith("+"):
                args = args[1:]
                continue
            text = self.fs.read(a if a.startswith("/") else "/" + a)
            if text is None:
                return 127, "", (f"{name}: can't open '{a}': No such file or directory\n"
                                                             if flavor == "ash" else f"{name}: {a}: No such file or directory\n")
            script, positional = text, args[1:]
            break
        if script is None:
            script = stdin  # kubectl exec without -i gives it an empty stdin: the shell exits at once
            stdin = ""
        sh = Shell(env, self.run_argv, self.glob, name, [positional[0] if positional else name] + positional[1:], flavor,
                   self.budget)
        sh.files = self.fs
        self.procs.append(Process(self.next_pid + 1, list(argv), 0.0, 0.0, self.now))
        return sh.run_script(script, stdin)

    def program(self, argv: list[str], stdin: str, env: dict[str, str],
                unknown_fails: bool = False) -> tuple[int, str, str] | None:
        """One of the image's own programs: its behaviour model runs it when it models it.
        With `unknown_fails`, None when the model does not know it either."""
        model = self.model
        if model is not None and type(model).exec is not AppModel.exec:
            ctx = dataclasses.replace(self.ctx, env=dict(env))
            code, out, err = model.exec(ctx, self.c.instance, list(argv))
            self.cluster.touch()
            if not (code == 126 and ("executable file not found" in err or "no such file" in err)):
                return code, out, err
        if unknown_fails:
            return None
        base = argv[0].rsplit("/", 1)[-1]
        if any(a in ("--version", "-version", "version", "-v", "-V") for a in argv[1:2]):
            tag = self.ctx.container.get("image", "").rsplit(":", 1)[-1] if ":" in self.ctx.container.get("image", "") else "latest"
            return 0, f"{base} version {tag}\n", ""
        return 1, "", f"{base}: this program takes no commands in a running container here\n"

    # -- helpers for the tools ---------------------------------------------------------------------
    def glob(self, pattern: str) -> list[str]:
        if not pattern.startswith("/"):
            return []
        directory, _, leaf = pattern.rpartition("/")
        dirs = [directory or "/"]
        if any(ch in directory for ch in "*?["):
            dirs = sorted(d for d in self.fs.dirs if fnmatch.fnmatchcase(d, directory))
        out = []
        for d in dirs:
            for name in self.fs.listdir(d):
                if fnmatch.fnmatchcase(name, leaf) and not (name.startswith(".") and not leaf.startswith(".")):
                    out.append(f"{d.rstrip('/')}/{name}")
        return sorted(out)

    def pod(self) -> dict[str, Any]:
        return self.ctx.pod


def _volume_kind(ctx: StartContext, name: str | None) -> str:
    for v in (ctx.pod.get("spec") or {}).get("volumes") or []:
        if v.get("name") == name:
            return next((k for k in v if k != "name"), "")
    return ""


def _main_argv(ctx: StartContext) -> list[str]:
    image = ctx.container.get("image", "")
    argv = list(ctx.container.get("command") or []) + list(ctx.container.get("args") or [])
    if not ctx.container.get("command") and argv and argv[0].startswith("-"):
        # flags alone: the image's entrypoint puts its server in front (mongo's `--auth` → `mongod --auth`)
        argv = default_argv(image) + argv
    if not argv:
        argv = default_argv(image, ctx.container.get("name", ""))
    if argv and argv[0].rsplit("/", 1)[-1] == "docker-entrypoint.sh" and len(argv) > 1:
        argv = argv[1:]  # the entrypoint execs the server it starts
    return argv


def run_exec(ctx: StartContext, rt: PodRt, c: Ctr, model: AppModel | None, command: list[str],
             stdin: str = "") -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `command` exec'd in the running container `c`."""
    return Sandbox(ctx, rt, c, model).run_top(command, stdin)


def interactive_shell(image: str, argv: list[str]) -> bool:
    """True when the process reads its commands from stdin: a shell without -c or a script (or
    the image's default shell), as `kubectl run -i` and `kubectl debug -i` start one."""
    land = userland_of(image)
    argv = argv or default_argv(image)
    found = land.resolve(argv[0]) if argv else None
    if found is None or found[1] not in SHELLS:
        return False
    return not any(a == "-c" or (a.startswith("-") and "c" in a[1:] and not a.startswith("--")) or not a.startswith("-")
                   for a in argv[1:])


def run_to_completion(ctx: StartContext, rt: PodRt, c: Ctr, argv: list[str]) -> Any:
    """A finite command as a container's main process: it runs in the userland at start, and its
    output becomes the container's log as it exits (half a second later)."""
    from kubesim.apps.model import Exited
    code, out, err = Sandbox(ctx, rt, c, None).run_top(argv or default_argv(ctx.container.get("image", "")))
    return Exited(code, out.splitlines(), after=0.5, stderr=err.splitlines())
