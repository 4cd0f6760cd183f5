"""What every data store model shares: the per-step view of the disk under a data directory
(IOChaos faults and latency, KernelChaos, a node's bad sectors, a full disk), capacity queueing,
`kubectl exec` argument handling, dialing another store from inside a container, SQL text helpers."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from kubesim.apps.graph import Address, DataStore, StoreReply
from kubesim.apps.model import (
    IMAGES,
    Exited,
    StartContext,
    Started,
    normalize_image,
)
from kubesim.quantity import parse_quantity

if TYPE_CHECKING:
    from kubesim.runtime import Ctr, PodRt


ERRNO_TEXT = {5: "Input/output error", 28: "No space left on device", 30: "Read-only file system", 13: "Permission denied"}


CHAOS_DRAWS = 10  # single-op draws that estimate the share of I/Os an IOChaos fault hits


@dataclass
class ConsumeReply(StoreReply):
    """A Kafka fetch loop's step: `read` messages per second reached the consumer (at most its rate)."""

    read: float = 0.0


def utc(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def pod_of(cluster: Any, rt: PodRt) -> dict[str, Any] | None:
    return cluster.raw("pods", rt.namespace, rt.name)


def container_spec(pod: dict[str, Any] | None, name: str) -> dict[str, Any]:
    for s in (pod or {}).get("spec", {}).get("containers", []):
        if s.get("name") == name:
            return s
    return {}


def cpu_cores(cluster: Any, rt: PodRt, c: Ctr) -> float:
    """CPU the process can use: its limit (else the node), node throttling, minus a CPU burner."""
    spec = container_spec(pod_of(cluster, rt), c.name)
    lim = ((spec.get("resources") or {}).get("limits") or {}).get("cpu")
    node = cluster.nodes.get(rt.node)
    cores = parse_quantity(lim) if lim else (node.cpu if node else 1.0)
    cores *= cluster.nodes.cpu_factor(rt.node)
    stress = cluster.chaos.stress(rt.namespace, rt.name, c.name)
    if stress.get("cpu"):
        cores = max(cores * 0.05, cores - stress["cpu"])
    return max(cores, 0.01)


def write_log(cluster: Any, rt: PodRt, c: Ctr, lines: list[str], now: float | None = None) -> None:
    pod = pod_of(cluster, rt)
    if pod is not None and lines:
        cluster.logs.write(pod, c.name, lines, now)


def once(inst: dict[str, Any], key: str, now: float, every: float) -> bool:
    seen = inst.setdefault("logged", {})
    if now - seen.get(key, -1e18) < every:
        return False
    seen[key] = now
    return True


def chaos_share(cluster: Any, pod: dict[str, Any] | None, container: str, path: str, op: str) -> tuple[int, float]:
    """(errno, share of single I/Os failing) under `path` from IOChaos/KernelChaos."""
    if not pod or not cluster.chaos.state.get("effects"):
        return 0, 0.0
    hits = [cluster.chaos.io_error(pod, container, path, op, 1.0) for _ in range(CHAOS_DRAWS)]
    bad = [h for h in hits if h]
    return (bad[0] if bad else 0), len(bad) / CHAOS_DRAWS


def step_faults(cluster: Any, rt: PodRt, c: Ctr, inst: dict[str, Any], path: str) -> dict[str, Any]:
    """What the disk under `path` does to this fluid step's I/O (computed once per step)."""
    now = cluster.clock.now()
    snap = inst.get("_faults")
    if snap is not None and snap["t"] == now:
        return snap
    pod = pod_of(cluster, rt)
    r_errno, r_share = chaos_share(cluster, pod, c.name, path, "read")
    w_errno, w_share = chaos_share(cluster, pod, c.name, path, "write")
    full = float(cluster.nodes.fault(rt.node, "diskFullPercent") or 0.0)
    if full >= 99.5:
        w_errno, w_share = 28, 1.0
    snap = {"t": now, "r_errno": r_errno, "r_share": r_share, "w_errno": w_errno, "w_share": w_share,
            "delay": cluster.chaos.io_delay(pod or {}, c.name, path) if pod else 0.0}
    inst["_faults"] = snap
    return snap


def disk_io(cluster: Any, rt: PodRt, c: Ctr, inst: dict[str, Any], path: str, op: str, count: float,
            comm: str) -> tuple[int, float]:
    """Account `count` I/Os of `op` under `path`; (errno, share failing) from chaos and bad sectors."""
    snap = step_faults(cluster, rt, c, inst, path)
    errno, share = (snap["r_errno"], snap["r_share"]) if op == "read" else (snap["w_errno"], snap["w_share"])
    frac = cluster.nodes.io(rt.node, op, 8192, count, comm) if count > 0 else 0.0
    if frac > 0:
        errno = errno or 5
        share = 1.0 - (1.0 - share) * (1.0 - frac)
    return errno, share


def queue_latency(service: float, util: float) -> float:
    """M/M/1-style wait: grows without bound as utilisation nears 1 (a saturated server queues)."""
    if util < 0.95:
        return service / (1.0 - util)
    return service * 20.0 * (1.0 + (util - 0.95) * 40.0)


def exec_argv(command: list[str]) -> tuple[dict[str, str], list[str]]:
    """`sh -c "PGPASSWORD=x psql …"`, `env X=y cmd …` → ({X: y}, argv)."""
    env: dict[str, str] = {}
    argv = list(command)
    if len(argv) >= 3 and argv[0].rsplit("/", 1)[-1] in ("sh", "bash", "ash") and argv[1] in ("-c", "-ec", "-lc"):
        try:
            argv = shlex.split(argv[2].split("\n")[0].split("&&")[0].split(";")[0])
        except ValueError:
            argv = argv[2].split()
    while argv and (argv[0] == "env" or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", argv[0])):
        if argv[0] != "env":
            k, _, v = argv[0].partition("=")
            env[k] = v
        argv = argv[1:]
    return env, argv


def not_found(cmd: str) -> tuple[int, str, str]:
    return 126, "", (f'OCI runtime exec failed: exec failed: unable to start container process: exec: "{cmd}": '
                     "executable file not found in $PATH: unknown")


def shell_fallback(ctx: StartContext, command: list[str]) -> tuple[int, str, str]:
    from kubesim.apps.generic import run_shell
    return run_shell(ctx, command)


def peer_instance(ctx: StartContext, host: str, port: int, kind: str) -> tuple[Any, str, str | None]:
    """The instance a client inside the container reaches at host:port: (instance, address, error)."""
    if host in ("", "localhost", "127.0.0.1", "::1"):
        return None, "127.0.0.1", None  # the caller uses its own instance
    conn = ctx.connect(host, port)
    if conn.ok_share == 0:
        return None, "", conn.first_error() or "connection refused"
    target = next(tg for tg in conn.targets if not tg.error)
    ip = (conn.service or {}).get("spec", {}).get("clusterIP") or target.pod.get("status", {}).get("podIP", "")
    rt = ctx.cluster.kubelet.runtime(target.pod)
    for c in (rt.containers.values() if rt else []):
        if c.state == "running" and target.port in c.ports and isinstance(c.instance, dict):
            if c.instance.get("kind") == kind:
                return c.instance, ip, None
            return None, ip, "protocol"
    return None, ip, "connection refused"


class StoreModel(DataStore):
    """What every store model here shares: the start-command check against the image's binaries,
    per-step accounting (CPU, memory), and the image's shell for commands it does not model."""

    entry: tuple[str, ...] = ()  # programs the image's entrypoint runs besides its own server
    # What a client library reports when the container runs no server of this model (its shell,
    # a client) and the connection drops.
    closed_error: ClassVar[str] = "EOF"

    def serve(self, cluster: Any, rt: PodRt, c: Ctr, command: str, write: bool, rate: float, dt: float,
              address: Address) -> StoreReply:
        now = cluster.clock.now()
        inst = self.own_instance(c, now)
        if inst is None:
            return StoreReply(0.0, 0.0, self.closed_error)
        return self.serve_running(cluster, rt, c, inst, command, write, rate, dt, address, now)

    def serve_running(self, cluster: Any, rt: PodRt, c: Ctr, inst: dict[str, Any], command: str, write: bool,
                      rate: float, dt: float, address: Address, now: float) -> StoreReply:
        """`serve` for a container that runs this model's server (`inst`, stamped with `now`)."""
        return StoreReply()

    def missing_executable(self, spec: dict[str, Any], info: Any) -> str | None:
        argv = list(spec.get("command") or [])
        if not argv or info is None or not info.executables:
            return None
        name = argv[0]
        base = name.rsplit("/", 1)[-1]
        known = {e.rsplit("/", 1)[-1] for e in info.executables} | set(self.entry)
        if base in known or name in info.executables:
            return None
        if name.startswith("/") or name.startswith("./"):
            return f'exec: "{name}": stat {name}: no such file or directory'
        return f'exec: "{name}": executable file not found in $PATH'

    def server_command(self, ctx: StartContext, servers: tuple[str, ...],
                       wrappers: tuple[str, ...] = ("docker-entrypoint.sh",),
                       config_first: bool = False) -> list[str] | Started | Exited:
        """The server's argv as the image's entrypoint script makes it from the container's command:
        the script itself dropped, bare options (or, with `config_first`, a config file) given to the
        first of `servers`. A command that runs none of them is the image's shell's: its outcome."""
        argv = ctx.argv
        if argv and argv[0].rsplit("/", 1)[-1] in wrappers:
            argv = argv[1:]
        if not argv or argv[0].startswith("-") or (config_first and argv[0].endswith(".conf")):
            argv = [servers[0], *argv]
        if argv[0].rsplit("/", 1)[-1] not in servers:
            from kubesim.apps.generic import shell_outcome
            return shell_outcome(ctx, argv, IMAGES.get(normalize_image(ctx.container.get("image", ""))[0]))
        return argv

    def account(self, cluster: Any, rt: PodRt, c: Ctr, inst: dict[str, Any], ops: float, cpu_per_op: float,
                dt: float) -> None:
        used = ops * cpu_per_op / max(cluster.nodes.cpu_factor(rt.node), 0.02)
        cores = cpu_cores(cluster, rt, c)
        c.cpu_seconds += used
        cluster.nodes.account_cpu(rt.node, used)
        if cores * dt > 0 and used > cores * dt * 0.6:
            c.cpu_throttled_periods += dt / 0.1 * min(0.95, used / (cores * dt) - 0.6)
        c.net_rx += ops * 300
        c.net_tx += ops * 900
        c.memory = self.memory(inst, ops / dt if dt > 0 else 0.0) + c.__dict__.get("_stress_mem", 0.0)

    def own_instance(self, c: Ctr, now: float) -> dict[str, Any] | None:
        """The container's running instance of this model, stamped with the time of the step; None
        while the container runs something else (the image's shell, a client)."""
        inst = c.instance
        if not isinstance(inst, dict) or inst.get("kind") != self.name:
            return None
        inst["now"] = now
        return inst

    @staticmethod
    def count_requests(inst: dict[str, Any], rate: float, dt: float) -> tuple[float, dict[str, float]]:
        """One caller's requests of a step (`rate` per second for `dt`) added to the instance's
        accumulator: how many, and the accumulator."""
        n = rate * dt
        acc = inst["acc"]
        acc["ops"] += n
        acc["rate"] += rate
        acc["calls"] += 1
        return n, acc

    def flush_queued(self, cluster: Any, rt: PodRt, c: Ctr, inst: dict[str, Any], now: float,
                     line: Callable[[str, str], str]) -> None:
        """Writes the last 30 server log lines `authenticate` queued (it has no cluster to write
        with), each made by `line(level, message)`, and forgets which refusals it logged."""
        inst.pop("pending_keys", None)
        pending = inst.pop("pending_log", None)
        if pending:
            write_log(cluster, rt, c, [line(lvl, msg) for lvl, msg in pending[-30:]], now)


def queue_log(inst: dict[str, Any], key: str, lines: list[tuple[str, str]]) -> None:
    """Queue server log lines from `authenticate`, one set per distinct refusal per step."""
    seen = inst.setdefault("pending_keys", set())
    if key in seen:
        return
    seen.add(key)
    inst.setdefault("pending_log", []).extend(lines)


def sql_string(text: str) -> str:
    text = text.strip()
    if text.startswith(("E'", "e'")):
        text = text[1:]
    if text.startswith("'") and text.endswith("'") and len(text) >= 2:
        return text[1:-1].replace("''", "'")
    if text.startswith('"') and text.endswith('"') and len(text) >= 2:
        return text[1:-1]
    return text


def split_sql(text: str) -> list[str]:
    """Statements of a script: `;` outside quotes and dollar-quoted bodies; comments dropped."""
    out, buf, i, n = [], [], 0, len(text)
    quote: str | None = None
    while i < n:
        ch = text[i]
        if quote is None:
            if text.startswith("--", i):
                j = text.find("\n", i)
                i = n if j < 0 else j
                continue
            if text.startswith("/*", i):
                j = text.find("*/", i + 2)
                i = n if j < 0 else j + 2
                continue
            m = re.match(r"\$[A-Za-z_]*\$", text[i:])
            if m:
                quote = m.group(0)
                buf.append(quote)
                i += len(quote)
                continue
            if ch in "'\"`":
                quote = ch
            elif ch == ";":
                stmt = "".join(buf).strip()
                if stmt:
                    out.append(stmt)
                buf = []
                i += 1
                continue
            buf.append(ch)
            i += 1
            continue
        if quote.startswith("$"):
            if text.startswith(quote, i):
                buf.append(quote)
                i += len(quote)
                quote = None
                continue
        elif ch == quote:
            if i + 1 < n and text[i + 1] == quote:
                buf.append(ch + ch)
                i += 2
                continue
            quote = None
        buf.append(ch)
        i += 1
    stmt = "".join(buf).strip()
    if stmt:
        out.append(stmt)
    return out


def split_top(text: str, sep: str = ",") -> list[str]:
    """Split on `sep` outside parentheses and quotes."""
    out, buf, depth = [], [], 0
    quote: str | None = None
    for ch in text:
        if quote:
            buf.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == sep and depth == 0:
            out.append("".join(buf).strip())
            buf = []
            continue
        buf.append(ch)
    if "".join(buf).strip():
        out.append("".join(buf).strip())
    return out


def version_from_tag(ctx: StartContext, defaults: dict[str, str], fallback: str) -> str:
    tag = normalize_image(ctx.container.get("image", ""))[1]
    m = re.match(r"^(\d+(?:\.\d+){0,2})", tag)
    if not m:
        return fallback
    v = m.group(1)
    return defaults.get(v, v) if v.count(".") == 0 else v


def volume_capacity(ctx: StartContext, path: str) -> float:
    """Bytes of the PersistentVolumeClaim mounted over `path` (0 = the node's disk)."""
    best, vol_name = "", ""
    for m in ctx.container.get("volumeMounts") or []:
        mp = m.get("mountPath", "")
        if (path == mp or path.startswith(mp.rstrip("/") + "/")) and len(mp) > len(best):
            best, vol_name = mp, m.get("name", "")
    for v in ctx.pod.get("spec", {}).get("volumes") or []:
        if v.get("name") == vol_name and "persistentVolumeClaim" in v:
            claim = ctx.cluster.store.try_get("persistentvolumeclaims", ctx.namespace,
                                              v["persistentVolumeClaim"].get("claimName", ""))
            size = (((claim or {}).get("spec") or {}).get("resources") or {}).get("requests", {}).get("storage")
            return parse_quantity(size) if size else 0.0
    return 0.0


def conf_file(text: str) -> dict[str, str]:
    """postgresql.conf / my.cnf style `key = value  # comment` lines (sections ignored)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("[") or "=" not in line:
            continue
        k, _, v = line.partition("=")
        out[k.strip().lower().replace("-", "_")] = sql_string(v.strip())
    return out


def fresh_acc() -> dict[str, float]:
    return {"ops": 0.0, "rate": 0.0, "calls": 0.0, "writes": 0.0, "lat": 0.0}


def sql_shape(command: str) -> tuple[str, list[str]]:
    """`SELECT catalog.products` or a statement → (verb, tables it names)."""
    words = command.replace(",", " ").replace("(", " ").replace(")", " ").split()
    if not words:
        return "", []
    verb = words[0].upper()
    tables: list[str] = []
    if len(words) == 2 and re.match(r'^[\w."]+$', words[1]):
        return verb, [words[1]]
    for i, w in enumerate(words[:-1]):
        if w.upper() in ("FROM", "INTO", "UPDATE", "JOIN") and re.match(r'^[\w."]+$', words[i + 1]):
            tables.append(words[i + 1])
    return verb, tables
