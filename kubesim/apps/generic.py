"""Images without a dedicated model (busybox, alpine, curl, pause...): a small shell interpreter for
the commands manifests and injectors actually run (`sleep`, `echo`, `exit`, `cat`, `wget`/`curl`,
`nslookup`, loops), and the exec-not-found check the runtime applies to every command."""

from __future__ import annotations

import re
import shlex
from typing import Any

from kubesim.apps.model import Exited, ImageInfo, StartContext, Started, register_image
from kubesim.quantity import parse_quantity

BASE_MEMORY = 1_000_000.0  # what a shell and its tools hold

for _repo, _exe in (("busybox", ("sh", "sleep", "echo", "cat", "wget", "nslookup", "true", "false", "ls", "env", "date", "ping")),
                    ("alpine", ("sh", "sleep", "echo", "cat", "wget", "nslookup", "true", "false", "ls", "env", "date")),
                    ("curlimages/curl", ("sh", "curl", "sleep", "echo", "cat")),
                    ("ubuntu", ("bash", "sh", "sleep", "echo", "cat", "true", "false", "env", "date")),
                    ("debian", ("bash", "sh", "sleep", "echo", "cat", "true", "false", "env", "date")),
                    ("nginx", ("nginx", "sh", "bash", "cat", "echo", "sleep")),
                    ("python", ("python", "python3", "sh", "bash", "sleep", "echo", "cat")),
                    ("bitnami/kubectl", ("kubectl", "sh", "bash", "sleep", "echo")),
                    ("polinux/stress", ("stress", "sh", "sleep", "echo")),
                    ("progrium/stress", ("stress", "sh", "sleep")),
                    ("gcr.io/google-containers/pause", ("/pause",)), ("registry.k8s.io/pause", ("/pause",)),
                    # the registry's older spelling of the same project (kr8s's test pods use it)
                    ("gcr.io/google_containers/pause", ("/pause",))):
    register_image(_repo, size=5_000_000, executables=_exe)

SHELLS = ("sh", "/bin/sh", "bash", "/bin/bash", "/usr/bin/env")


def executable_in(info: ImageInfo, argv0: str) -> str | None:
    """None if `argv0` can be exec'd in the image; else runc's error text."""
    base = argv0.rsplit("/", 1)[-1]
    if argv0 in SHELLS or base in ("sh", "bash") and info.shell:
        return None
    if not info.executables or base in {e.rsplit("/", 1)[-1] for e in info.executables}:
        return None
    if argv0.startswith("/") or argv0.startswith("./"):
        return f"exec: \"{argv0}\": stat {argv0}: no such file or directory"
    return f'exec: "{argv0}": executable file not found in $PATH'


def shell_outcome(ctx: StartContext, argv: list[str], info: ImageInfo | None) -> Started | Exited:
    """What a container running `argv` (no dedicated model) does: runs forever, or exits."""
    if not argv:
        if info is not None and info.executables and info.executables[0] == "/pause":
            return Started([], set())
        if info is not None and "nginx" in info.repository:
            return Started(["/docker-entrypoint.sh: Configuration complete; ready for start up"], {80})
        return Exited(0, [], after=0.0)
    if argv[0].rsplit("/", 1)[-1] in ("sh", "bash") and len(argv) >= 3 and argv[1] in ("-c", "-ec", "-xc"):
        script = argv[2]
    else:
        script = " ".join(shlex.quote(a) for a in argv)
    return _script(ctx, script)


def _script(ctx: StartContext, script: str, tmpfs: list[float] | None = None) -> Started | Exited:
    """`tmpfs` collects the bytes the script left in memory-backed filesystems."""
    tmpfs = [] if tmpfs is None else tmpfs
    m = re.search(r"until\s+nc\s+-z\s+(?:-\w+\s+)*([\w.-]+)\s+(\d+)\s*;\s*do(.*?)done", script, re.S)
    if m:
        conn = ctx.connect(m.group(1), int(m.group(2)))
        if conn.ok_share == 0:  # loops (the workload re-checks every step) until the dependency answers
            rest = script[m.end():].strip(" ;")
            return Started(_echoes(m.group(3))[:1], set(), {"kind": "wait", "host": m.group(1), "port": int(m.group(2)),
                                                           "line": (_echoes(m.group(3)) or [""])[0], "then": rest})
        script = script[:m.start()] + script[m.end():]
    poll = _poll_loop(script)
    if poll is not None:
        return Started(_echoes(script.split("while")[0]), set(), poll)
    echo = _echo_loop(script, ctx.now)
    if echo is not None:
        return Started(_echoes(script.split("while")[0]) + echo["lines"], set(), echo)
    server = re.search(r"(?:^|[;&\n])\s*(?:exec\s+)?python3?\s+-m\s+http\.server\b\s*(\d+)?", script)
    if server:
        # Python's static file server: it serves the working directory on its port until stopped
        return Started(_echoes(script[:server.start()]), {int(server.group(1) or 8000)})
    listener = re.search(r"(?:^|[;&\n])\s*(?:exec\s+)?nc\s+([^;&|\n]*)", script)
    if listener and re.search(r"(?:^|\s)-\w*l", listener.group(1)):
        # a listening nc (-l, -lk) waits on its socket for as long as nobody stops it
        port = re.search(r"-\w*p\s*(\d+)", listener.group(1)) or re.search(r"(\d+)\s*$", listener.group(1))
        return Started(_echoes(script[:listener.start()]), {int(port.group(1))} if port else set())
    forever = re.search(r"\bwhile\s+(true|:)\b|\bsleep\s+(infinity|inf)\b|\btail\s+-f\b", script)
    if forever:
        head = script[:forever.start()]
        if re.search(r"\bdd\b", head) and not re.search(r"(?:^|[;&|\n])\s*(?:if|then|for|while|case)\s", head):
            # what runs before it can fail first: `dd ... && tail -f /dev/null` never gets to idle
            done = _script(ctx, head.strip().rstrip("&;").strip(), tmpfs)
            if isinstance(done, Exited) and done.code != 0:
                return done
            return Started(_echoes(head), set(), stderr=done.stderr if isinstance(done, Exited) else [],
                           memory=sum(tmpfs))
        return Started(_echoes(script.split("while")[0]), set())
    lines: list[str] = []
    stderr: list[str] = []
    elapsed = 0.0
    for part in re.split(r"\s*(?:;|&&|\n)\s*", script):
        words = part.strip().split()
        if not words:
            continue
        cmd = words[0]
        if cmd == "sleep":
            try:
                elapsed += float(words[1].rstrip("s")) if len(words) > 1 else 0.0
            except ValueError:
                return Exited(1, lines + [f"sleep: invalid number '{words[1]}'"], after=elapsed)
        elif cmd == "echo":
            lines.append(" ".join(words[1:]).strip("'\""))
        elif cmd == "exit":
            code = int(words[1]) if len(words) > 1 and words[1].isdigit() else 0
            return Exited(code, lines, after=elapsed)
        elif cmd == "false":
            return Exited(1, lines, after=elapsed)
        elif cmd == "dd":
            code, out = _dd(ctx, words[1:], tmpfs)
            stderr.extend(out)
            if code:
                return Exited(code, lines, after=elapsed, stderr=stderr, reason="OOMKilled" if code == 137 else "")
        elif cmd == "cp" and len(words) >= 3:
            src, dst = words[-2], words[-1]
            mounts = [m.get("mountPath", "").rstrip("/") + "/" for m in ctx.container.get("volumeMounts") or []]
            mounted = any(src.startswith(m) for m in mounts)
            if "*" in src or not mounted:
                continue  # a path baked into the image: assume the image ships it
            if src not in ctx.files:
                return Exited(1, lines + [f"cp: can't stat '{src}': No such file or directory"], after=elapsed)
            if dst.endswith("/") or not dst.rsplit("/", 1)[-1].count("."):
                dst = dst.rstrip("/") + "/" + src.rsplit("/", 1)[-1]
            ctx.files[dst] = ctx.files[src]
            ctx.write_file(dst, ctx.files[src])
        elif cmd == "cat" and len(words) > 1:
            path = words[1]
            if path in ctx.files:
                lines.extend(ctx.files[path].splitlines())
            else:
                return Exited(1, lines + [f"cat: can't open '{path}': No such file or directory"], after=elapsed)
        elif cmd in ("wget", "curl"):
            url = next((w for w in words[1:] if w.startswith("http")), "")
            m = re.match(r"https?://([^/:]+)(?::(\d+))?", url)
            if m:
                conn = ctx.connect(m.group(1), int(m.group(2) or 80))
                err = conn.first_error() if conn.ok_share == 0 else None
                if err:
                    return Exited(1 if cmd == "wget" else 7, lines + [f"{cmd}: {err}"], after=elapsed + 1)
        elif cmd == "nslookup" and len(words) > 1:
            _, err = ctx.cluster.network.lookup(ctx.pod, words[1])
            if err:
                return Exited(1, lines + [f"** server can't find {words[1]}: NXDOMAIN"], after=elapsed)
            lines.append(f"Server:\t\t10.96.0.10\nAddress:\t10.96.0.10:53\n\nName:\t{words[1]}")
    return Exited(0, lines, after=elapsed, stderr=stderr)


def _poll_loop(script: str) -> dict[str, Any] | None:
    """`while true; do wget/curl URL; sleep N; done`: a client that requests URL every N seconds
    for as long as it runs (the workload makes each request: see Workload._poll)."""
    m = re.search(r"\bwhile\s+(?:true|:)\s*;?\s*do\b(.*?)\bdone\b", script, re.S)
    if m is None:
        return None
    url, tool, every = "", "", 1.0
    for part in re.split(r"\s*(?:;|&&|\|\||\n)\s*", m.group(1)):
        try:
            words = shlex.split(part)
        except ValueError:
            return None
        if not words:
            continue
        if words[0] in ("wget", "curl") and not url:
            tool = words[0]
            url = next((w for w in words[1:] if w.startswith("http://")), "")
        elif words[0] == "sleep" and len(words) > 1:
            try:
                every = float(words[1].rstrip("s"))
            except ValueError:
                return None
    if not url:
        return None
    return {"kind": "poll", "tool": tool, "url": url, "every": max(every, 0.05)}


def _echo_loop(script: str, now: float) -> dict[str, Any] | None:
    """`while true; do echo ...; sleep N; done`: a container that logs the same lines every N
    seconds for as long as it runs (the workload writes each round: see Workload._echo). Its first
    round is logged as it starts."""
    m = re.search(r"\bwhile\s+(?:true|:)\s*;?\s*do\b(.*?)\bdone\b", script, re.S)
    if m is None:
        return None
    lines: list[str] = []
    every = 0.0
    for part in re.split(r"\s*(?:;|\n)\s*", m.group(1)):
        try:
            words = shlex.split(part)
        except ValueError:
            return None
        if not words:
            continue
        if words[0] == "echo":
            lines.append(" ".join(words[1:]))
        elif words[0] == "sleep" and len(words) == 2:
            try:
                every += float(words[1].rstrip("s"))
            except ValueError:
                return None
        else:
            return None  # a body that does more than log and wait is not this loop
    if not lines or every <= 0:
        return None
    return {"kind": "echo", "lines": lines, "every": max(every, ECHO_MIN_PERIOD), "next": now + every}


# A tighter loop is logged at this period: a log that fills as fast as the real one would is not
# worth the emulator's memory.
ECHO_MIN_PERIOD = 0.5

_DD_UNITS = {"c": 1, "w": 2, "b": 512, "kB": 1000, "k": 1024, "K": 1024, "MB": 10**6, "M": 2**20, "GB": 10**9,
             "G": 2**30}


def _dd_number(text: str) -> int | None:
    m = re.fullmatch(r"(\d+)([A-Za-z]*)", text)
    if m is None or (m.group(2) and m.group(2) not in _DD_UNITS):
        return None
    return int(m.group(1)) * _DD_UNITS.get(m.group(2), 1)


def _human(n: float) -> str:
    """busybox's make_human_readable_str(n, 1, 0): one decimal and a 1024-based suffix."""
    for unit, div in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n >= div:
            return f"{n / div:.1f}{unit}"
    return f"{int(n)}"


def _dd(ctx: StartContext, operands: list[str], tmpfs: list[float]) -> tuple[int, list[str]]:
    """busybox dd writing `count` blocks of `bs` bytes to `of`: it fills the filesystem the file
    lands on and fails with ENOSPC past its size (tmpfs pages are charged to the container)."""
    from kubesim.apps.tmpfs import landing

    ops = dict(o.split("=", 1) for o in operands if "=" in o)
    bs = _dd_number(ops.get("bs", "512"))
    count = _dd_number(ops["count"]) if "count" in ops else None
    if bs is None or ("count" in ops and count is None):
        bad = ops.get("bs", "") if bs is None else ops.get("count", "")
        return 1, [f"dd: invalid number '{bad}'"]
    out = ops.get("of")
    source = ops.get("if", "")
    if out is None or source not in ("/dev/zero", "/dev/urandom", "/dev/random"):
        return 0, []  # to stdout, or from a file: nothing lands anywhere the model tracks
    land = landing(ctx, out)
    if land.backing == "read-only":
        return 1, [f"dd: can't open '{out}': Read-only file system"]
    wanted = bs * count if count is not None else float("inf")
    room = max(0.0, land.capacity - (land.used - land.written.get(out, 0.0)))
    written = min(wanted, room)
    land.written[out] = written
    if land.memory_backed:
        tmpfs.append(written)
        limit = parse_quantity(((ctx.container.get("resources") or {}).get("limits") or {}).get("memory"))
        if limit and BASE_MEMORY + sum(tmpfs) > limit:
            # tmpfs pages cannot be reclaimed without swap: the cgroup's OOM killer ends dd first
            return 137, []
    full, part = int(written // bs), int(written % bs > 0)
    seconds = max(written / 1.6e9, 2e-5)
    stats = [f"{full}+{part} records in" if written >= wanted else f"{full + part + 1}+0 records in",
             f"{full}+{part} records out",
             f"{int(written)} bytes ({_human(written)}B) copied, {seconds:.6f} seconds, {_human(written / seconds)}B/s"]
    if written < wanted:
        return 1, [f"dd: writing '{out}': No space left on device", *stats]
    return 0, stats


def _echoes(text: str) -> list[str]:
    return [m.group(1).strip("'\"") for m in re.finditer(r"echo\s+([^;&\n]+)", text)]


def run_shell(ctx: StartContext, command: list[str]) -> tuple[int, str, str]:
    """`kubectl exec` into a container without a dedicated model."""
    if not command:
        return 1, "", "error: you must specify at least one command for the container"
    if command[0] in ("env", "printenv"):
        return 0, "".join(f"{k}={v}\n" for k, v in sorted(ctx.env.items())), ""
    if command[0] == "cat" and len(command) > 1:
        if command[1] in ctx.files:
            return 0, ctx.files[command[1]], ""
        return 1, "", f"cat: {command[1]}: No such file or directory\n"
    if command[0] in ("true", "ls", "echo", "date", "sh", "bash"):
        if command[0] == "echo":
            return 0, " ".join(command[1:]) + "\n", ""
        if command[0] in ("sh", "bash") and len(command) >= 3:
            outcome = _script(ctx, command[2])
            if isinstance(outcome, Exited):
                return outcome.code, "".join(line + "\n" for line in outcome.lines), ""
        return 0, "", ""
    if command[0] == "false":
        return 1, "", ""
    return 126, "", (f'OCI runtime exec failed: exec failed: unable to start container process: exec: "{command[0]}": '
                     "executable file not found in $PATH: unknown")


def placeholder(instance: Any) -> None:
    """Generic containers keep no state."""
