"""Redis and Valkey: the config file and command-line directives (an unknown one is fatal), the start
banner, `requirepass`, `maxmemory` and its eviction policy, RDB snapshots and the AOF whose write
errors make the server refuse writes (MISCONF), and `redis-cli` / `valkey-cli`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from kubesim.apps.datastores.common import (
    ERRNO_TEXT,
    StoreModel,
    cpu_cores,
    disk_io,
    exec_argv,
    fresh_acc,
    once,
    peer_instance,
    queue_latency,
    shell_fallback,
    utc,
    version_from_tag,
    write_log,
)
from kubesim.apps.graph import Address, StoreReply
from kubesim.apps.model import (
    Exited,
    StartContext,
    Started,
    app_model,
    normalize_image,
    register_image,
)

if TYPE_CHECKING:
    from kubesim.runtime import Ctr, PodRt

register_image("redis", tags=("6.2.4", "6.2", "6.2.14", "6", "7.0", "7.2", "7.2.4", "7.4", "7", "alpine", "6.2-alpine",
                              "7-alpine", "7.2-alpine", "latest"),
               size=40_000_000, executables=("redis-server", "redis-cli", "docker-entrypoint.sh", "sh", "bash", "cat",
                                             "env", "ls"))
register_image("valkey/valkey", tags=("7.2-alpine", "7.2", "7.2.5", "7.2.8", "8.0", "8.0-alpine", "8.1", "8.1-alpine",
                                      "9.0.1-alpine3.23", "9.0.1", "9.0", "9.0-alpine", "alpine", "latest"),
               size=16_000_000, executables=("valkey-server", "valkey-cli", "redis-server", "redis-cli",
                                             "docker-entrypoint.sh", "sh", "cat", "env", "ls"))


REDIS_DIRECTIVES = {
    "bind", "protected-mode", "port", "tcp-backlog", "unixsocket", "unixsocketperm", "timeout", "tcp-keepalive",
    "tls-port", "tls-cert-file", "tls-key-file", "tls-key-file-pass", "tls-client-cert-file", "tls-client-key-file",
    "tls-dh-params-file", "tls-ca-cert-file", "tls-ca-cert-dir", "tls-auth-clients", "tls-replication", "tls-cluster",
    "tls-protocols", "tls-ciphers", "tls-ciphersuites", "tls-prefer-server-ciphers", "tls-session-caching",
    "tls-session-cache-size", "tls-session-cache-timeout", "daemonize", "supervised", "pidfile", "loglevel", "logfile",
    "syslog-enabled", "syslog-ident", "syslog-facility", "crash-log-enabled", "crash-memcheck-enabled", "databases",
    "always-show-logo", "set-proc-title", "proc-title-template", "save", "stop-writes-on-bgsave-error", "rdbcompression",
    "rdbchecksum", "sanitize-dump-payload", "dbfilename", "rdb-del-sync-files", "dir", "replicaof", "slaveof",
    "masterauth", "masteruser", "replica-serve-stale-data", "replica-read-only", "repl-diskless-sync",
    "repl-diskless-sync-delay", "repl-diskless-sync-max-replicas", "repl-diskless-load", "repl-ping-replica-period",
    "repl-timeout", "repl-disable-tcp-nodelay", "repl-backlog-size", "repl-backlog-ttl", "replica-priority",
    "min-replicas-to-write", "min-replicas-max-lag", "replica-announce-ip", "replica-announce-port",
    "tracking-table-max-keys", "acllog-max-len", "aclfile", "requirepass", "user", "rename-command", "maxclients",
    "maxmemory", "maxmemory-policy", "maxmemory-samples", "maxmemory-eviction-tenacity", "replica-ignore-maxmemory",
    "active-expire-effort", "lazyfree-lazy-eviction", "lazyfree-lazy-expire", "lazyfree-lazy-server-del",
    "replica-lazy-flush", "lazyfree-lazy-user-del", "lazyfree-lazy-user-flush", "io-threads", "io-threads-do-reads",
    "oom-score-adj", "oom-score-adj-values", "disable-thp", "appendonly", "appendfilename", "appenddirname",
    "appendfsync", "no-appendfsync-on-rewrite", "auto-aof-rewrite-percentage", "auto-aof-rewrite-min-size",
    "aof-load-truncated", "aof-use-rdb-preamble", "aof-timestamp-enabled", "lua-time-limit", "busy-reply-threshold",
    "cluster-enabled", "cluster-config-file", "cluster-node-timeout", "cluster-port", "slowlog-log-slower-than",
    "slowlog-max-len", "latency-monitor-threshold", "notify-keyspace-events", "hash-max-ziplist-entries",
    "hash-max-ziplist-value", "hash-max-listpack-entries", "hash-max-listpack-value", "list-max-ziplist-size",
    "list-max-listpack-size", "list-compress-depth", "set-max-intset-entries", "set-max-listpack-entries",
    "set-max-listpack-value", "zset-max-ziplist-entries", "zset-max-ziplist-value", "zset-max-listpack-entries",
    "zset-max-listpack-value", "hll-sparse-max-bytes", "stream-node-max-bytes", "stream-node-max-entries",
    "activerehashing", "client-output-buffer-limit", "client-query-buffer-limit", "proto-max-bulk-len", "hz",
    "dynamic-hz", "aof-rewrite-incremental-fsync", "rdb-save-incremental-fsync", "lfu-log-factor", "lfu-decay-time",
    "activedefrag", "jemalloc-bg-thread", "enable-debug-command", "enable-module-command", "enable-protected-configs",
    "loadmodule", "include", "locale-collate", "shutdown-timeout", "shutdown-on-sigint", "shutdown-on-sigterm",
    "latency-tracking", "latency-tracking-info-percentiles", "ignore-warnings", "availability-zone",
}


REDIS_POLICIES = ("volatile-lru", "allkeys-lru", "volatile-lfu", "allkeys-lfu", "volatile-random", "allkeys-random",
                  "volatile-ttl", "noeviction")


REDIS_WRITES = {"SET", "SETEX", "SETNX", "PSETEX", "MSET", "HSET", "HMSET", "HSETNX", "HINCRBY", "ZADD", "ZINCRBY", "LPUSH",
                "RPUSH", "SADD", "INCR", "INCRBY", "DECR", "APPEND", "XADD", "PFADD", "GETSET", "EXPIRE", "DEL", "UNLINK",
                "HDEL", "ZREM", "ZREMRANGEBYRANK", "ZREMRANGEBYSCORE", "SREM", "LREM", "LTRIM", "RPOP", "LPOP", "PERSIST",
                "FLUSHALL", "FLUSHDB", "RENAME", "EXPIREAT", "PEXPIRE"}


REDIS_SHRINK = {"DEL", "UNLINK", "HDEL", "ZREM", "ZREMRANGEBYRANK", "ZREMRANGEBYSCORE", "SREM", "LREM", "LTRIM", "RPOP", "LPOP",
                "EXPIRE", "PEXPIRE", "EXPIREAT", "PERSIST", "FLUSHALL", "FLUSHDB"}


REDIS_BASE_USED = 870_000.0  # used_memory of an empty server


REDIS_BYTES_PER_WRITE = 120.0  # net dataset growth of one write (new fields, members, keys)


REDIS_CPU_PER_OP = 0.000012


def redis_size(text: str) -> float:
    """Redis memory units: 1k=1000, 1kb=1024, 1m=1e6, 1mb=1024², 1g=1e9, 1gb=1024³."""
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]b?|b)?\s*$", str(text), re.I)
    if not m:
        raise ValueError(text)
    unit = (m.group(2) or "").lower()
    return float(m.group(1)) * {"": 1, "b": 1, "k": 1e3, "kb": 2**10, "m": 1e6, "mb": 2**20, "g": 1e9, "gb": 2**30}[unit]


def _human(n: float) -> str:
    for unit, size in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return f"{int(n)}B"


def redis_stamp(t: float) -> str:
    d = utc(t)
    return d.strftime("%d %b %Y %H:%M:%S.") + f"{d.microsecond // 1000:03d}"


def redis_line(t: float, role: str, mark: str, msg: str, pid: int = 1) -> str:
    """`1:M 03 Dec 2026 07:00:00.123 * Ready to accept connections` (role C/M/S, mark . - * #)."""
    return f"{pid}:{role} {redis_stamp(t)} {mark} {msg}"


@app_model
class Redis(StoreModel):
    """redis-server / valkey-server: the config file or command-line directives, the start banner,
    `requirepass`, `maxmemory` with its eviction policy, RDB snapshots and the AOF (whose write
    errors make the server refuse writes), and `redis-cli` / `valkey-cli`."""

    name = "redis"
    protocol = "redis"
    images = ("redis", "valkey/valkey")
    memory_base = 3 * 2**20
    entry = ("redis-server", "valkey-server", "docker-entrypoint.sh")

    @staticmethod
    def _flavor(ctx: StartContext) -> tuple[str, str]:
        repo = normalize_image(ctx.container.get("image", ""))[0]
        if repo.endswith("/valkey"):
            return "valkey", version_from_tag(ctx, {"7": "7.2.8", "7.2": "7.2.8", "8": "8.1.1", "8.0": "8.0.2",
                                                     "8.1": "8.1.1", "9": "9.0.1", "9.0": "9.0.1"}, "9.0.1")
        return "redis", version_from_tag(ctx, {"6": "6.2.14", "6.2": "6.2.14", "7": "7.4.2", "7.0": "7.0.15",
                                                "7.2": "7.2.4", "7.4": "7.4.2"}, "7.4.2")

    def start(self, ctx: StartContext) -> Started | Exited:
        flavor, version = self._flavor(ctx)
        server = f"{flavor}-server"
        argv = self.server_command(ctx, (server, "redis-server", "valkey-server"), config_first=True)
        if not isinstance(argv, list):
            return argv
        name = "Valkey" if flavor == "valkey" else "Redis"
        t = ctx.app_time()
        cfg: dict[str, str] = {}
        conf = next((a for a in argv[1:2] if not a.startswith("-")), None)
        lines = [redis_line(t, "C", "#", f"oO0OoO0OoO0Oo {name} is starting oO0OoO0OoO0Oo"),
                 redis_line(t, "C", "#", f"{name} version={version}, bits=64, commit=00000000, modified=0, pid=1, "
                                         "just started")]
        if conf is not None:
            text = ctx.files.get(conf)
            if text is None:
                return Exited(1, [], after=0.05, stderr=[f"Fatal error, can't open config file '{conf}': No such file or "
                                                         "directory"])
            for no, raw in enumerate(text.splitlines(), 1):
                line = raw.strip()
                if not line or line.startswith("#"):
                    continue
                words = line.split()
                key = words[0].lower()
                err = self._check(key, words[1:])
                if err:
                    return Exited(1, [], after=0.05, stderr=["", f"*** FATAL CONFIG FILE ERROR ({name} {version}) ***",
                                                             f"Reading the configuration file, at line {no}",
                                                             f">>> '{line}'", err])
                cfg[key] = " ".join(words[1:])
            lines.append(redis_line(t, "C", "#", "Configuration loaded"))
        else:
            lines.append(redis_line(t, "C", "#", f"Warning: no config file specified, using the default config. In order "
                                                 f"to specify a config file use {server} /path/to/{flavor}.conf"))
        rest = argv[2:] if conf is not None else argv[1:]
        i = 0
        while i < len(rest):
            if rest[i].startswith("--"):
                key = rest[i][2:].lower()
                vals = []
                while i + 1 < len(rest) and not rest[i + 1].startswith("--"):
                    vals.append(rest[i + 1])
                    i += 1
                err = self._check(key, vals)
                if err:
                    return Exited(1, [], after=0.05, stderr=["", f"*** FATAL CONFIG FILE ERROR ({name} {version}) ***",
                                                             "Reading the configuration file, at line 2",
                                                             f">>> '{key} {' '.join(vals)}'", err])
                cfg[key] = " ".join(vals)
            i += 1
        port = int(cfg.get("port", "6379") or 6379)
        workdir = cfg.get("dir", "/data")
        persist = ctx.volume_for(workdir)
        data = persist if persist is not None else {}
        maxmemory = redis_size(cfg.get("maxmemory", "0"))
        save = cfg.get("save", "3600 1 300 100 60 10000").replace('"', "").split()
        ready = "Ready to accept connections tcp" if (flavor == "valkey" or version >= "7.2") else "Ready to accept connections"
        if port == 0:
            ready = "Ready to accept connections"
        lines += [redis_line(t, "M", "*", "monotonic clock: POSIX clock_gettime"),
                  redis_line(t, "M", "*", f"Running mode=standalone, port={port}."),
                  redis_line(t, "M", "#", "Server initialized"),
                  redis_line(t, "M", "#", "WARNING Memory overcommit must be enabled! Without it, a background save or "
                                          "replication may fail under low memory condition. Being disabled, it can also "
                                          "cause failures without low memory condition, see "
                                          "https://github.com/jemalloc/jemalloc/issues/1328. To fix this issue add "
                                          "'vm.overcommit_memory = 1' to /etc/sysctl.conf and then reboot or run the "
                                          "command 'sysctl vm.overcommit_memory=1' for this to take effect."
                             if flavor == "valkey" or version >= "7" else
                             "WARNING overcommit_memory is set to 0! Background save may fail under low memory "
                             "condition. To fix this issue add 'vm.overcommit_memory = 1' to /etc/sysctl.conf and then "
                             "reboot or run the command 'sysctl vm.overcommit_memory=1' for this to take effect.")]
        if data.get("keys"):
            lines += [redis_line(t, "M", "*", f"Loading RDB produced by version {data.get('version', version)}"),
                      redis_line(t, "M", "*", f"RDB age {int(max(0.0, ctx.now - data.get('saved_at', ctx.now)))} seconds"),
                      redis_line(t, "M", "*", f"RDB memory usage when created {data.get('used', 0.0) / 2**20:.2f} Mb"),
                      redis_line(t, "M", "*", f"Done loading RDB, keys loaded: {int(data['keys'])}, keys expired: 0."),
                      redis_line(t, "M", "*", "DB loaded from disk: 0.001 seconds")]
        io_threads = int(cfg.get("io-threads", "1") or 1)
        lines.append(redis_line(t, "M", "*", ready))
        inst = {"kind": "redis", "flavor": flavor, "version": version, "port": port, "dir": workdir,
                "requirepass": cfg.get("requirepass", "").strip('"') or None, "maxmemory": maxmemory,
                "policy": cfg.get("maxmemory-policy", "noeviction"), "maxclients": int(cfg.get("maxclients", "10000")),
                "save": [(int(save[i]), int(save[i + 1])) for i in range(0, len(save) - 1, 2)] if save and save[0] else [],
                "appendonly": cfg.get("appendonly", "no").lower() == "yes", "stop_writes": cfg.get(
                    "stop-writes-on-bgsave-error", "yes").lower() == "yes", "protected": cfg.get("protected-mode", "no") == "yes"
                and "bind" not in cfg, "io_threads": io_threads, "dataset": float(data.get("used", 0.0)),
                "keys": float(data.get("keys", 0.0)), "explicit": {}, "data": data, "dirty": 0.0, "last_save": ctx.now,
                "bgsave_ok": True, "aof_ok": True, "clients": 1.0, "util": 0.0, "evicted": 0.0, "rejected": 0.0,
                "started": ctx.now, "now": ctx.now, "acc": fresh_acc(), "ops_total": 0.0, "conns_total": 0.0}
        return Started(lines, {port} if port else set(), inst, ready_after=0.5)

    @staticmethod
    def _check(key: str, args: list[str]) -> str | None:
        if key not in REDIS_DIRECTIVES:
            return "Bad directive or wrong number of arguments"
        if key in ("maxmemory",) and args:
            try:
                redis_size(args[0])
            except ValueError:
                return "argument must be a memory value"
        if key == "maxmemory-policy" and args and args[0].lower() not in REDIS_POLICIES:
            return "argument(s) must be one of the following: " + ", ".join(REDIS_POLICIES)
        if key == "port" and args and (not args[0].isdigit() or int(args[0]) > 65535):
            return "argument must be between 0 and 65535 inclusive"
        return None

    def used(self, inst: dict[str, Any]) -> float:
        return REDIS_BASE_USED + inst["dataset"] + inst.get("clients", 1.0) * 20_000

    # -- the protocol -------------------------------------------------------------------------------------
    def authenticate(self, instance: Any, address: Address) -> str | None:
        inst = instance
        if not isinstance(inst, dict) or inst.get("kind") != "redis":
            return "EOF"
        return self._auth(inst, address.user, address.password)

    @staticmethod
    def _auth(inst: dict[str, Any], user: str, password: str | None) -> str | None:
        wrong = ("WRONGPASS invalid username-password pair or user is disabled." if inst["version"] >= "6.2"
                 or inst["flavor"] == "valkey" else "WRONGPASS invalid username-password pair")
        if user and user != "default":
            return wrong
        need = inst.get("requirepass")
        if need is None:
            if password:
                return ("ERR AUTH <password> called without any password configured for the default user. Are you sure "
                        "your configuration is correct?")
            return None
        if not password:
            return "NOAUTH Authentication required."
        if password != need:
            return wrong
        return None

    def serve_running(self, cluster: Any, rt: PodRt, c: Ctr, inst: dict[str, Any], command: str, write: bool,
                      rate: float, dt: float, address: Address, now: float) -> StoreReply:
        verb = (command.split() or ["GET"])[0].upper()
        write = write or verb in REDIS_WRITES
        n, acc = self.count_requests(inst, rate, dt)
        if inst.get("protected"):
            return StoreReply(0.0, 0.0002, "DENIED Redis is running in protected mode because protected mode is enabled "
                                           "and no password is set for the default user.")
        if inst["clients"] > inst["maxclients"]:
            return StoreReply(0.0, 0.0002, "ERR max number of clients reached")
        if write:
            acc["writes"] += n
            if inst["appendonly"] and not inst["aof_ok"]:
                return StoreReply(0.0, 0.0002, f"MISCONF Errors writing to the AOF file: {inst.get('aof_error', 'Input/output error')}")
            if inst["stop_writes"] and not inst["bgsave_ok"] and inst["save"]:
                return StoreReply(0.0, 0.0002, self._misconf(inst))
            if verb not in REDIS_SHRINK:
                grow = n * REDIS_BYTES_PER_WRITE
                if inst["maxmemory"] and self.used(inst) + grow > inst["maxmemory"]:
                    if inst["policy"] == "noeviction" or (inst["policy"].startswith("volatile") and not inst.get("volatile")):
                        room = max(0.0, inst["maxmemory"] - self.used(inst))
                        ok = room / grow if grow > 0 else 0.0
                        inst["dataset"] += room
                        inst["rejected"] += n * (1 - ok)
                        return StoreReply(ok, 0.0003, "OOM command not allowed when used memory > 'maxmemory'.")
                    inst["evicted"] += grow / REDIS_BYTES_PER_WRITE
                    grow = max(0.0, inst["maxmemory"] - self.used(inst))
                inst["dataset"] += grow
                inst["keys"] += n * 0.2
                inst["dirty"] += n
            else:
                inst["dataset"] = max(0.0, inst["dataset"] - n * REDIS_BYTES_PER_WRITE * 0.5)
                inst["dirty"] += n
        latency = queue_latency(0.00015, inst["util"])
        acc["lat"] += latency * rate
        return StoreReply(1.0, latency, None)

    @staticmethod
    def _misconf(inst: dict[str, Any]) -> str:
        if inst["flavor"] == "valkey" or inst["version"] >= "7":
            who = "Valkey" if inst["flavor"] == "valkey" else "Redis"
            return (f"MISCONF {who} is configured to save RDB snapshots, but it's currently unable to persist to disk. "
                    "Commands that may modify the data set are disabled, because this instance is configured to report "
                    "errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check "
                    f"the {who} logs for details about the RDB error.")
        return ("MISCONF Redis is configured to save RDB snapshots, but it is currently not able to persist on disk. "
                "Commands that may modify the data set are disabled, because this instance is configured to report errors "
                "during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs "
                "for details about the RDB error.")

    def tick(self, cluster: Any, rt: PodRt, c: Ctr, now: float, dt: float) -> None:
        inst = self.own_instance(c, now)
        if inst is None:
            return
        acc = inst["acc"]
        cap = 1.0 / REDIS_CPU_PER_OP * min(max(1, inst["io_threads"]), 2) * min(1.0, cpu_cores(cluster, rt, c))
        inst["util"] = min(5.0, acc["ops"] / max(dt, 1e-6) / cap)
        inst["clients"] = max(1.0, acc["calls"] * 2.0)
        inst["ops_total"] += acc["ops"]
        inst["conns_total"] = max(inst["conns_total"], inst["clients"])
        if inst["appendonly"] and acc["writes"] > 0:
            errno, share = disk_io(cluster, rt, c, inst, inst["dir"], "write", dt, "redis-server")
            if errno and share > 0:
                word = ERRNO_TEXT.get(errno, "Input/output error")
                if inst["aof_ok"] or once(inst, "aof", now, 30.0):
                    write_log(cluster, rt, c, [redis_line(now, "M", "#", f"Error writing to the AOF file: {word}")], now)
                inst["aof_ok"], inst["aof_error"] = False, word
            elif not inst["aof_ok"]:
                write_log(cluster, rt, c, [redis_line(now, "M", "*", "AOF write error looks solved, Redis can write again.")], now)
                inst["aof_ok"] = True
        self._maybe_save(cluster, rt, c, inst, now)
        self.account(cluster, rt, c, inst, acc["ops"], REDIS_CPU_PER_OP, dt)
        inst["acc"] = fresh_acc()

    def _maybe_save(self, cluster: Any, rt: PodRt, c: Ctr, inst: dict[str, Any], now: float) -> None:
        """serverCron's `save <seconds> <changes>` points; a failed save retries after 5 s."""
        if not inst["save"] or inst["dirty"] < 1:
            return
        since = now - inst["last_save"]
        due = next(((s, ch) for s, ch in inst["save"] if inst["dirty"] >= ch and since >= s), None)
        if due is None and not (not inst["bgsave_ok"] and now - inst.get("last_try", 0.0) >= 5.0):
            return
        inst["last_try"] = now
        pid = 20 + int(now) % 900
        lines = []
        if due is not None:
            lines.append(redis_line(now, "M", "*", f"{due[1]} changes in {due[0]} seconds. Saving..."))
        lines.append(redis_line(now, "M", "*", f"Background saving started by pid {pid}"))
        errno, share = disk_io(cluster, rt, c, inst, inst["dir"], "write", 64, "redis-server")
        if errno and share > 0:
            word = ERRNO_TEXT.get(errno, "Input/output error")
            lines += [redis_line(now, "C", "#", f"Write error saving DB on disk: {word}", pid),
                      redis_line(now + 0.1, "M", "#", "Background saving error")]
            inst["bgsave_ok"] = False
        else:
            lines += [redis_line(now, "C", "*", "DB saved on disk", pid),
                      redis_line(now, "C", "*", "Fork CoW for RDB: current 0 MB, peak 0 MB, average 0 MB", pid),
                      redis_line(now + 0.1, "M", "*", "Background saving terminated with success")]
            inst["bgsave_ok"] = True
            inst["last_save"] = now
            inst["dirty"] = 0.0
            inst["data"].update({"used": inst["dataset"], "keys": inst["keys"], "saved_at": now, "version": inst["version"]})
        if inst["bgsave_ok"] or once(inst, "bgsave", now, 5.0):
            write_log(cluster, rt, c, lines, now)

    def memory(self, instance: Any, load_rps: float) -> float:
        if not isinstance(instance, dict):
            return float(self.memory_base)
        base = (6.5 if instance.get("flavor") == "valkey" else 5.5) * 2**20
        return base + self.used(instance) * 1.25 + load_rps * 64

    # -- kubectl exec ----------------------------------------------------------------------------------
    def exec(self, ctx: StartContext, instance: Any, command: list[str]) -> tuple[int, str, str]:
        env, argv = exec_argv(command)
        if not argv:
            return 1, "", "error: you must specify at least one command for the container"
        prog = argv[0].rsplit("/", 1)[-1]
        if prog in ("redis-cli", "valkey-cli"):
            return self._cli(ctx, instance, argv[1:], {**ctx.env, **env})
        return shell_fallback(ctx, command)

    def _cli(self, ctx: StartContext, instance: Any, args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
        host, port, password, user = "127.0.0.1", int((instance or {}).get("port", 6379) or 6379), None, ""
        warn = True
        password = env.get("REDISCLI_AUTH") or env.get("VALKEYCLI_AUTH") or None
        words: list[str] = []
        i = 0
        while i < len(args):
            a = args[i]
            nxt = args[i + 1] if i + 1 < len(args) else ""
            if a == "-h":
                host, i = nxt, i + 1
            elif a == "-p":
                port, i = int(nxt), i + 1
            elif a in ("-a", "--pass"):
                password, i = nxt, i + 1
            elif a == "--user":
                user, i = nxt, i + 1
            elif a == "--no-auth-warning":
                warn = False
            elif a in ("-n", "-r", "-i"):
                i += 1
            elif a in ("--raw", "--no-raw", "-c", "-e", "--tls"):
                pass
            elif a == "-u":
                from kubesim.apps.graph import parse_address
                u = parse_address(nxt, "redis")
                if u:
                    host, port, password = u.host, u.port, u.password or password
                i += 1
            else:
                words = args[i:]
                break
            i += 1
        stderr = ""
        if password is not None and any(a in ("-a", "--pass", "-u") for a in args) and warn:
            stderr += "Warning: Using a password with '-a' or '-u' option on the command line interface may not be safe.\n"
        inst: Any = instance
        if host not in ("127.0.0.1", "localhost", "::1"):
            inst, _, err = peer_instance(ctx, host, port, "redis")
            if err:
                word = "Name or service not known" if "no such host" in err else "Connection refused"
                return 1, "", stderr + f"Could not connect to Redis at {host}:{port}: {word}\n"
        if not isinstance(inst, dict):
            return 1, "", stderr + f"Could not connect to Redis at {host}:{port}: Connection refused\n"
        authed = inst.get("requirepass") is None
        if password is not None:
            err = self._auth(inst, user, password)
            if err and not err.startswith("ERR AUTH"):
                stderr += f"AUTH failed: {err}\n"
            elif err:
                stderr += f"AUTH failed: {err}\n"
            else:
                authed = True
        if not words:
            return 0, "", stderr  # an interactive session with no terminal reads EOF at once
        reply, is_err = self._command(ctx, inst, [w for w in words], authed)
        code = 1 if is_err and (inst["flavor"] == "valkey" or inst["version"] >= "7") else 0
        return code, reply, stderr

    def _command(self, ctx: StartContext, inst: dict[str, Any], words: list[str], authed: bool) -> tuple[str, bool]:
        cmd = words[0].upper()
        args = words[1:]
        if cmd == "AUTH":
            err = self._auth(inst, args[0] if len(args) > 1 else "", args[-1] if args else "")
            return (err + "\n", True) if err else ("OK\n", False)
        if not authed and cmd not in ("HELLO",):
            return "NOAUTH Authentication required.\n", True
        inst["now"] = ctx.now
        if cmd == "PING":
            return (args[0] if args else "PONG") + "\n", False
        if cmd == "DBSIZE":
            return f"{int(inst['keys']) + len(inst['explicit'])}\n", False
        if cmd == "INFO":
            return self._info(inst, (args[0] if args else "default").lower()), False
        if cmd == "CONFIG" and args:
            sub = args[0].upper()
            if sub == "GET" and len(args) > 1:
                vals = {"maxmemory": str(int(inst["maxmemory"])), "maxmemory-policy": inst["policy"],
                        "requirepass": inst.get("requirepass") or "", "port": str(inst["port"]),
                        "maxclients": str(inst["maxclients"]), "save": " ".join(f"{s} {c}" for s, c in inst["save"]),
                        "appendonly": "yes" if inst["appendonly"] else "no", "dir": inst["dir"],
                        "stop-writes-on-bgsave-error": "yes" if inst["stop_writes"] else "no",
                        "io-threads": str(inst["io_threads"]), "bind": "* -::*", "protected-mode": "no"}
                pat = args[1].replace("*", ".*")
                out = "".join(f"{k}\n{v}\n" for k, v in sorted(vals.items()) if re.fullmatch(pat, k))
                return out, False
            if sub == "SET" and len(args) >= 3:
                key, val = args[1].lower(), " ".join(args[2:])
                if key == "maxmemory":
                    try:
                        inst["maxmemory"] = redis_size(val)
                    except ValueError:
                        return (f"ERR CONFIG SET failed (possibly related to argument '{key}') - argument must be a memory "
                                "value\n"), True
                elif key == "maxmemory-policy":
                    if val.lower() not in REDIS_POLICIES:
                        return f"ERR CONFIG SET failed (possibly related to argument '{key}') - Invalid argument\n", True
                    inst["policy"] = val.lower()
                elif key == "requirepass":
                    inst["requirepass"] = val or None
                elif key == "maxclients":
                    inst["maxclients"] = int(val)
                elif key == "save":
                    parts = val.split()
                    inst["save"] = [(int(parts[i]), int(parts[i + 1])) for i in range(0, len(parts) - 1, 2)]
                elif key == "appendonly":
                    inst["appendonly"] = val.lower() == "yes"
                elif key == "stop-writes-on-bgsave-error":
                    inst["stop_writes"] = val.lower() == "yes"
                    if not inst["stop_writes"]:
                        inst["bgsave_ok"] = True
                elif key not in REDIS_DIRECTIVES:
                    return f"ERR Unknown option or number of arguments for CONFIG SET - '{key}'\n", True
                return "OK\n", False
            if sub == "REWRITE":
                return "OK\n", False
            if sub == "RESETSTAT":
                return "OK\n", False
        if cmd in ("FLUSHALL", "FLUSHDB"):
            inst["dataset"], inst["keys"], inst["explicit"] = 0.0, 0.0, {}
            inst["dirty"] += 1
            return "OK\n", False
        if cmd in ("BGSAVE", "SAVE"):
            inst["last_save"] = -1e18
            inst["dirty"] = max(inst["dirty"], 1.0)
            return ("Background saving started\n" if cmd == "BGSAVE" else "OK\n"), False
        if cmd == "LASTSAVE":
            return f"{int(inst['last_save'])}\n", False
        if cmd == "SET" and len(args) >= 2:
            if inst["maxmemory"] and self.used(inst) >= inst["maxmemory"] and inst["policy"] == "noeviction":
                return "OOM command not allowed when used memory > 'maxmemory'.\n", True
            if inst["stop_writes"] and not inst["bgsave_ok"] and inst["save"]:
                return self._misconf(inst) + "\n", True
            inst["explicit"][args[0]] = args[1]
            inst["dataset"] += len(args[0]) + len(args[1]) + 50
            return "OK\n", False
        if cmd == "GET" and args:
            return inst["explicit"].get(args[0], "") + "\n", False
        if cmd in ("DEL", "UNLINK") and args:
            n = sum(1 for a in args if inst["explicit"].pop(a, None) is not None)
            return f"{n}\n", False
        if cmd in ("KEYS", "SCAN"):
            return "".join(f"{k}\n" for k in inst["explicit"]), False
        if cmd == "CLIENT" and args and args[0].upper() == "LIST":
            n = int(inst.get("clients", 1.0))
            return "".join(f"id={i + 3} addr=10.244.1.{10 + i}:{40000 + i} laddr={ctx.pod_ip}:{inst['port']} fd={8 + i} "
                           f"name= age={int(ctx.now - inst['started'])} idle=0 flags=N db=0 sub=0 psub=0 multi=-1 qbuf=0 "
                           "qbuf-free=0 argv-mem=0 obl=0 oll=0 omem=0 tot-mem=20512 events=r cmd=hgetall user=default "
                           "redir=-1\n" for i in range(n)), False
        if cmd == "ACL" and args and args[0].upper() == "WHOAMI":
            return "default\n", False
        if cmd == "SHUTDOWN":
            ctx.cluster.kubelet.terminate(ctx.namespace, ctx.pod_name, ctx.container["name"], 0, "Completed",
                                          [redis_line(ctx.now, "M", "#", "User requested shutdown..."),
                                           redis_line(ctx.now, "M", "#", f"{'Valkey' if inst['flavor'] == 'valkey' else 'Redis'} "
                                                                         "is now ready to exit, bye bye...")])
            return "", False
        shown = ", ".join(f"'{a}'" for a in args[:3])
        if inst["flavor"] == "valkey" or inst["version"] >= "7":
            return f"ERR unknown command '{words[0]}', with args beginning with: {shown}\n", True
        return f"ERR unknown command `{words[0]}`, with args beginning with: {', '.join(f'`{a}`' for a in args[:3])}" \
            + (", " if args else "") + "\n", True

    def _info(self, inst: dict[str, Any], section: str) -> str:
        used = self.used(inst)
        rss = self.memory(inst, 0.0)
        name = "valkey" if inst["flavor"] == "valkey" else "redis"
        uptime = int(inst["now"] - inst["started"])
        sections = {
            "server": [f"{name}_version:{inst['version']}", f"{name}_mode:standalone", "os:Linux 5.15.0-1057-azure x86_64",
                       "arch_bits:64", "process_id:1", f"tcp_port:{inst['port']}", f"uptime_in_seconds:{uptime}",
                       f"uptime_in_days:{uptime // 86400}", "executable:/data/" + name + "-server",
                       "config_file:" + ("" if not inst.get("conf") else inst["conf"])],
            "clients": [f"connected_clients:{int(inst['clients'])}", "cluster_connections:0",
                        f"maxclients:{inst['maxclients']}", "blocked_clients:0", "tracking_clients:0"],
            "memory": [f"used_memory:{int(used)}", f"used_memory_human:{_human(used)}", f"used_memory_rss:{int(rss)}",
                       f"used_memory_rss_human:{_human(rss)}", f"used_memory_peak:{int(used)}",
                       f"used_memory_peak_human:{_human(used)}", f"maxmemory:{int(inst['maxmemory'])}",
                       f"maxmemory_human:{_human(inst['maxmemory'])}", f"maxmemory_policy:{inst['policy']}",
                       f"mem_fragmentation_ratio:{rss / used:.2f}", "mem_allocator:jemalloc-5.3.0"],
            "persistence": ["loading:0", f"rdb_changes_since_last_save:{int(inst['dirty'])}",
                            "rdb_bgsave_in_progress:0", f"rdb_last_save_time:{int(inst['last_save']) if inst['last_save'] > 0 else 0}",
                            f"rdb_last_bgsave_status:{'ok' if inst['bgsave_ok'] else 'err'}",
                            f"aof_enabled:{1 if inst['appendonly'] else 0}",
                            f"aof_last_write_status:{'ok' if inst['aof_ok'] else 'err'}"],
            "stats": [f"total_connections_received:{int(inst['conns_total'])}",
                      f"total_commands_processed:{int(inst['ops_total'])}", f"instantaneous_ops_per_sec:"
                      f"{int(inst['util'] / REDIS_CPU_PER_OP)}", "rejected_connections:0",
                      f"evicted_keys:{int(inst['evicted'])}", "expired_keys:0", "keyspace_hits:0", "keyspace_misses:0"],
            "replication": ["role:master", "connected_slaves:0"],
            "cpu": ["used_cpu_sys:0.5", "used_cpu_user:0.8"],
            "keyspace": [f"db0:keys={int(inst['keys']) + len(inst['explicit'])},expires=0,avg_ttl=0"]
            if inst["keys"] + len(inst["explicit"]) >= 1 else [],
        }
        names = list(sections) if section in ("default", "all", "everything") else [section]
        out = []
        for s in names:
            if s not in sections:
                continue
            out.append(f"# {s.capitalize() if s != 'cpu' else 'CPU'}\r\n" + "".join(line + "\r\n" for line in sections[s]))
        return "\r\n".join(out) + ("\n" if out else "\n")
