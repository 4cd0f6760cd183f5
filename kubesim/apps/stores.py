"""Stateful back ends: MongoDB (users, roles and `--auth`, init scripts from
/docker-entrypoint-initdb.d, data on its volume, WiredTiger I/O errors that abort mongod) and
memcached (an in-memory cache that starts cold). Log lines in mongod 4.4's JSON format.

Both are `DataStore`s for the call-graph applications: `authenticate`/`serve` use the same user,
role and load accounting hotel-reservation's workload applies (it calls the module functions
`authenticate`/`authorize` directly); their per-step work (WiredTiger I/O, checkpoints, memory)
stays in the workload's store pass, which ticks every `mongo` and `memcached` instance."""

from __future__ import annotations

import re
import shlex
from typing import Any

import yaml

from kubesim.apps.graph import Address, DataStore, StoreReply
from kubesim.apps.model import (
    Exited,
    StartContext,
    Started,
    app_model,
    mongo_log,
    register_image,
)

register_image("mongo", tags=("4.4.6", "4.4", "4.4.29", "5.0", "5.0.26", "6.0", "7.0", "latest"), size=168_000_000,
               executables=("mongod", "mongo", "mongosh", "docker-entrypoint.sh", "bash", "sh"))
register_image("library/mongo", tags=("4.4.6", "4.4", "5.0", "6.0", "7.0", "latest"), size=168_000_000,
               executables=("mongod", "mongo", "docker-entrypoint.sh"))
register_image("memcached", tags=("latest", "1.6.7", "1.6", "1.6.21", "alpine"), size=30_000_000,
               executables=("memcached", "docker-entrypoint.sh"))
register_image("library/memcached", tags=("latest", "1.6.7", "1.6"), size=30_000_000, executables=("memcached",))

ROLE_RE = re.compile(r"\{\s*role\s*:\s*['\"]([\w-]+)['\"]\s*,\s*db\s*:\s*['\"]([\w.-]+)['\"]\s*\}")
WRITE_ROLES = {"readWrite", "dbOwner", "root", "readWriteAnyDatabase", "dbAdmin"}
READ_ROLES = WRITE_ROLES | {"read", "readAnyDatabase"}


def _roles(text: str, default_db: str) -> list[list[str]]:
    roles = [[r, d] for r, d in ROLE_RE.findall(text)]
    stripped = ROLE_RE.sub("", text)
    roles += [[r, default_db] for r in re.findall(r"['\"](read|readWrite|dbOwner|root|userAdminAnyDatabase|readWriteAnyDatabase|readAnyDatabase|dbAdmin|userAdmin)['\"]", stripped)]
    return roles


def run_mongo_js(data: dict[str, Any], js: str, db: str = "test") -> list[str]:
    """Apply the user-management statements of a mongo shell script to the server's data."""
    users: dict[str, dict[str, Any]] = data.setdefault("users", {})
    out = []
    for stmt in re.split(r";\s*|\n", js):
        s = stmt.strip()
        if not s:
            continue
        m = re.match(r"use\s+([\w-]+)", s)
        if m:
            db = m.group(1)
            out.append(f"switched to db {db}")
            continue
        m = re.search(r"getSiblingDB\(\s*['\"]([\w-]+)['\"]\s*\)", s)
        if m:
            db = m.group(1)
        m = re.search(r"createUser\(\s*\{(.*)\}\s*\)", s, re.S)
        if m:
            body = m.group(1)
            um = re.search(r"user\s*:\s*['\"]([^'\"]+)['\"]", body)
            pm = re.search(r"pwd\s*:\s*['\"]([^'\"]*)['\"]", body)
            if um:
                name = um.group(1)
                if name in users.get(db, {}):
                    out.append(f'uncaught exception: Error: couldn\'t add user: User "{name}@{db}" already exists')
                    continue
                roles = _roles(body.split("roles", 1)[1] if "roles" in body else "", db)
                users.setdefault(db, {})[name] = {"pwd": pm.group(1) if pm else "", "roles": roles}
                role_txt = ", ".join(f'{{ "role" : "{r}", "db" : "{d}" }}' for r, d in roles)
                out.append(f'Successfully added user: {{ "user" : "{name}", "roles" : [ {role_txt} ] }}')
            continue
        m = re.search(r"dropUser\(\s*['\"]([^'\"]+)['\"]", s)
        if m:
            existed = users.get(db, {}).pop(m.group(1), None) is not None
            out.append("true" if existed else "false")
            continue
        m = re.search(r"(revokeRolesFromUser|grantRolesToUser)\(\s*['\"]([^'\"]+)['\"]\s*,\s*\[(.*)\]", s, re.S)
        if m:
            user = users.get(db, {}).get(m.group(2))
            if user is None:
                out.append(f"uncaught exception: Error: Could not find user \"{m.group(2)}\" for db \"{db}\"")
                continue
            roles = _roles(m.group(3), db)
            if m.group(1) == "grantRolesToUser":
                user["roles"] += [r for r in roles if r not in user["roles"]]
            else:
                user["roles"] = [r for r in user["roles"] if r not in roles]
            continue
        m = re.search(r"changeUserPassword\(\s*['\"]([^'\"]+)['\"]\s*,\s*['\"]([^'\"]*)['\"]", s)
        if m and m.group(1) in users.get(db, {}):
            users[db][m.group(1)]["pwd"] = m.group(2)
            continue
        if "shutdownServer" in s or re.search(r"shutdown\s*:\s*1", s):
            data["_shutdown"] = True
            out.append("server should be down...")
    return out


# What DeathStarBench's hotel-reservation seeds (cmd/*/db.go): collection → documents, per database.
SEEDED = {"geo-db": {"geo": 80}, "profile-db": {"hotels": 80}, "rate-db": {"inventory": 80},
          "recommendation-db": {"recommendation": 80}, "reservation-db": {"reservation": 1, "number": 80},
          "user-db": {"user": 501}}
_READ_COMMANDS = {"stats": "dbStats", "getCollectionNames": "listCollections", "getUsers": "usersInfo",
                  "serverStatus": "serverStatus", "listDatabases": "listDatabases", "count": "count"}


def _shell_doc(value: Any, indent: int = 0) -> str:
    """A document as the legacy mongo shell prints it: tabs, `"key" : value`."""
    pad = "\t" * (indent + 1)
    if isinstance(value, dict):
        if not value:
            return "{ }"
        items = [f'{pad}"{k}" : {_shell_doc(v, indent + 1)}' for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "\t" * indent + "}"
    if isinstance(value, list):
        return "[ ]" if not value else "[ " + ", ".join(_shell_doc(v, indent) for v in value) + " ]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def _seeded(ctx: StartContext, db: str) -> dict[str, int]:
    if db in SEEDED and ctx.pod_name.startswith("mongodb-" + db.removesuffix("-db")):
        return SEEDED[db]
    return {}


def mongo_reads(ctx: StartContext, instance: Any, js: str, db: str, authed: bool) -> tuple[int, str] | None:
    """The read commands an SRE evaluates (`db.stats()`, `show dbs`, `db.getCollectionNames()`,
    `db.X.count()`, `db.serverStatus().connections`, `rs.status()`, ping): (exit code, output)."""
    data = (instance or {}).get("data") or {}
    dbs = sorted({"admin", "config", "local"} | {d for d in SEEDED if _seeded(ctx, d)} | set(data.get("users", {})))
    out: list[str] = []
    for stmt in [x.strip() for x in re.split(r";\s*|\n", js) if x.strip()]:
        m = re.match(r"^(?:printjson\()?\s*db\.(?:getSiblingDB\(['\"]([\w-]+)['\"]\)\.)?(\w+)(?:\.(\w+))?\((.*?)\)\s*(?:\.(\w+))?\)?$", stmt)
        which = m.group(3) or m.group(2) if m else ""
        name = _READ_COMMANDS.get(which) if m else None
        if stmt in ("show dbs", "show databases") or "listDatabases" in stmt or "getDBNames" in stmt:
            name = "listDatabases"
        elif "rs.status()" in stmt:
            out.append(_shell_doc({"ok": 0, "errmsg": "not running with --replSet", "code": 76, "codeName": "NoReplicationEnabled"}))
            continue
        elif re.search(r"ping['\"]?\s*[:)]|['\"]ping['\"]", stmt):
            out.append(_shell_doc({"ok": 1}))
            continue
        elif "db.version()" in stmt:
            out.append("4.4.6")
            continue
        elif stmt in ("show collections", "show tables"):
            name, which = "listCollections", "getCollectionNames"
        if name is None:
            continue
        target = (m.group(1) if m and m.group(1) else db)
        if instance and instance.get("auth") and not authed and name != "serverStatus":
            return 1, (f"uncaught exception: Error: command {name} requires authentication :\n"
                       "_getErrorWithCode@src/mongo/shell/utils.js:25:13\n")
        colls = _seeded(ctx, target)
        if name == "listDatabases":
            if stmt.startswith("show"):
                out += [f"{d:<18} {0.000 if not _seeded(ctx, d) else 0.001:.3f}GB" for d in dbs]
            else:
                out.append(_shell_doc({"databases": [{"name": d, "sizeOnDisk": 40960 if _seeded(ctx, d) else 8192,
                                                      "empty": False} for d in dbs], "totalSize": 40960 * len(dbs), "ok": 1}))
        elif name == "dbStats":
            objects = sum(colls.values())
            out.append(_shell_doc({"db": target, "collections": len(colls), "views": 0, "objects": objects,
                                   "avgObjSize": 112 if objects else 0, "dataSize": 112 * objects,
                                   "storageSize": 20480 * len(colls), "indexes": 2 * len(colls), "indexSize": 36864 * len(colls),
                                   "totalSize": 57344 * len(colls), "scaleFactor": 1, "ok": 1}))
        elif name == "listCollections":
            out.append("\n".join(sorted(colls)) if stmt.startswith("show") else _shell_doc(sorted(colls)))
        elif name == "count":
            out.append(str(colls.get(m.group(2) if m else "", 0)))
        elif name == "usersInfo":
            users = data.get("users", {}).get(target, {})
            out.append(_shell_doc([{"_id": f"{target}.{u}", "user": u, "db": target,
                                    "roles": [{"role": r, "db": d} for r, d in rec.get("roles", [])]}
                                   for u, rec in users.items()]))
        elif name == "serverStatus":
            conns = {"current": int((instance or {}).get("conns", 0)) + 1, "available": 838859, "totalCreated": 40}
            doc = {"host": ctx.pod_name, "version": "4.4.6", "process": "mongod", "connections": conns}
            field = m.group(5) if m else None
            out.append(_shell_doc(doc.get(field, doc) if field else doc))
    return (0, "".join(line + "\n" for line in out)) if out else None


def expand_shell_vars(script: str) -> str:
    """Substitute the `NAME="value"` assignments a shell init script makes into its later lines."""
    env: dict[str, str] = {}
    out = []
    for line in script.splitlines():
        m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)=[\"']?([^\"']*)[\"']?\s*$", line)
        if m:
            env[m.group(1)] = m.group(2)
            continue
        out.append(re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda mm: env.get(mm.group(1), mm.group(0)), line))
    return "\n".join(out)


MONGO_CAPACITY = 3000.0  # operations per second one mongod serves before queueing (the workload's figure)
MONGO_READS = {"find", "aggregate", "count", "distinct", "getmore", "find_one", "count_documents"}
MONGO_WRITES = {"insert", "update", "delete", "findandmodify", "findoneandupdate", "replace", "bulkwrite", "upsert",
                "createindex", "insert_one", "insert_many", "update_one", "update_many", "delete_one", "delete_many"}


def auth_source(address: Address) -> str:
    """The database a driver authenticates against: `authSource` in the URI, else its path, else admin."""
    m = re.search(r"[?&]authSource=([^&]+)", address.raw or "")
    return m.group(1) if m else (address.database or "admin")


@app_model
class MongoDB(DataStore):
    name = "mongodb"
    protocol = "mongo"
    images = ("mongo", "library/mongo")
    memory_base = 80 * 2**20

    def missing_executable(self, spec: dict[str, Any], info: Any) -> str | None:
        argv = list(spec.get("command") or [])
        if argv and argv[0].rsplit("/", 1)[-1] not in ("mongod", "docker-entrypoint.sh", "mongo", "bash", "sh", "numactl"):
            return f'exec: "{argv[0]}": executable file not found in $PATH'
        return None

    def _config(self, ctx: StartContext) -> tuple[bool, str]:
        argv = ctx.argv
        auth = "--auth" in argv
        if "--config" in argv or "-f" in argv:
            idx = argv.index("--config") if "--config" in argv else argv.index("-f")
            path = argv[idx + 1] if idx + 1 < len(argv) else ""
            text = ctx.files.get(path)
            if text is None:
                return auth, "Error reading config file: No such file or directory\ntry 'mongod --help' for more information"
            if re.search(r"authorization\s*:\s*['\"]?enabled", text):
                auth = True
        return auth, ""

    @staticmethod
    def _config_tls(ctx: StartContext) -> tuple[bool, str]:
        """(plaintext refused, certificate key file) from net.tls (or the older net.ssl) of the --config file."""
        argv = ctx.argv
        flag = "--config" if "--config" in argv else "-f" if "-f" in argv else ""
        i = argv.index(flag) + 1 if flag else 0
        try:
            net = (yaml.safe_load(ctx.files.get(argv[i], "")) or {}).get("net") if flag and i < len(argv) else None
        except (yaml.YAMLError, AttributeError):
            return False, ""
        tls = ((net.get("tls") or net.get("ssl")) if isinstance(net, dict) else None) or {}
        if not isinstance(tls, dict):
            return False, ""
        return str(tls.get("mode")) in ("requireTLS", "requireSSL"), str(tls.get("certificateKeyFile") or
                                                                         tls.get("PEMKeyFile") or "")

    def start(self, ctx: StartContext) -> Started | Exited:
        t = ctx.app_time()
        user, pwd = ctx.env.get("MONGO_INITDB_ROOT_USERNAME", ""), ctx.env.get("MONGO_INITDB_ROOT_PASSWORD", "")
        if (user or pwd) and not (user and pwd):
            # docker-entrypoint.sh refuses half a root user before mongod ever starts
            return Exited(1, [], after=0.0, stderr=["error: missing 'MONGO_INITDB_ROOT_USERNAME' or 'MONGO_INITDB_ROOT_PASSWORD'",
                                                    "       both must be specified for a user to be created"])
        auth, err = self._config(ctx)
        if err:
            return Exited(2, err.split("\n"), after=0.0)
        data = ctx.volume_for("/data/db")
        if data is None:
            data = {}
        host = ctx.pod.get("spec", {}).get("hostname") or ctx.pod_name
        argv = ctx.argv
        conf_tls, conf_key = self._config_tls(ctx)  # net.tls in the --config file counts as the flags do
        tls = "requireTLS" in argv or "requireSSL" in argv or conf_tls
        if tls:
            key = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("--tlsCertificateKeyFile", "--sslPEMKeyFile")),
                       "") or conf_key
            if not key:
                return Exited(2, [mongo_log(t, "F", "CONTROL", 20574, "-", "Error during global initialization",
                                            {"error": {"code": 2, "codeName": "BadValue",
                                                       "errmsg": "need tlsCertificateKeyFile or certificateSelector when TLS is enabled"}})])
            if key not in ctx.files:
                return Exited(1, [mongo_log(t, "F", "NETWORK", 23248, "main", "cannot read certificate file",
                                            {"keyFile": key, "error": "error:02001002:system library:fopen:No such file or directory"}),
                                  mongo_log(t, "F", "-", 23091, "main", "Fatal assertion", {"msgid": 28595, "file": "src/mongo/util/net/ssl_manager_openssl.cpp", "line": 2269}),
                                  mongo_log(t, "F", "-", 23092, "main", "\n\n***aborting after fassert() failure\n\n")], after=0.5)
        lines = [mongo_log(t, "I", "CONTROL", 23285, "main", "Automatically disabling TLS 1.0, to force-enable TLS 1.0 specify --sslDisabledProtocols 'none'"),
                 mongo_log(t, "I", "NETWORK", 4648601, "main", "Implicit TCP FastOpen unavailable. If TCP FastOpen is required, set tcpFastOpenServer, tcpFastOpenClient, and tcpFastOpenQueueSize."),
                 mongo_log(t, "I", "STORAGE", 4615611, "initandlisten", "MongoDB starting",
                           {"pid": 1, "port": 27017, "dbPath": "/data/db", "architecture": "64-bit", "host": host}),
                 mongo_log(t, "I", "CONTROL", 23403, "initandlisten", "Build Info",
                           {"buildInfo": {"version": "4.4.6", "gitVersion": "72e66213c2c3eab37d9358d5e78ad7f5c1d0d0d7",
                                          "openSSLVersion": "OpenSSL 1.1.1f  31 Mar 2020", "modules": [], "allocator": "tcmalloc",
                                          "environment": {"distmod": "ubuntu2004", "distarch": "x86_64", "target_arch": "x86_64"}}}),
                 mongo_log(t, "I", "CONTROL", 21951, "initandlisten", "Options set by command line",
                           {"options": {"net": {"bindIp": "*"}, **({"security": {"authorization": "enabled"}} if auth else {})}})]
        failed = ctx.cluster.chaos.io_error(ctx.pod, ctx.container["name"], "/data/db", "read")
        disk = ctx.cluster.nodes.io(self._data_node(ctx), "read", 4096, 64) if data is not None else 0.0
        if failed or disk >= 0.999 or (disk > 0 and ctx.cluster.rng.random() < disk * 8):
            errno = failed or 5
            return Exited(14, lines + wiredtiger_failure(t, "WiredTiger.wt", "read", errno, "initandlisten"), after=1.0)
        lines.append(mongo_log(t, "I", "STORAGE", 22315, "initandlisten", "Opening WiredTiger",
                               {"config": "create,cache_size=7480M,session_max=33000,eviction=(threads_min=4,threads_max=4),"
                                          "config_base=false,statistics=(fast),log=(enabled=true,archive=true,path=journal,"
                                          "compressor=snappy),file_manager=(close_idle_time=100000,close_scan_interval=10,"
                                          "close_handle_minimum=250),statistics_log=(wait=0),verbose=[recovery_progress,checkpoint_progress,compact_progress],"}))
        if not data.get("initialized"):
            if user and pwd:
                auth = True
                data.setdefault("users", {}).setdefault("admin", {})[user] = {"pwd": pwd, "roles": [["root", "admin"]]}
                lines.append(f'Successfully added user: {{ "user" : "{user}", "roles" : [ {{ "role" : "root", "db" : "admin" }} ] }}')
            scripts = sorted(p for p in ctx.files if p.startswith("/docker-entrypoint-initdb.d/"))
            for path in scripts:
                lines.append(f"/usr/local/bin/docker-entrypoint.sh: running {path}")
                js = expand_shell_vars(ctx.files[path])
                for out in run_mongo_js(data, js, "admin"):
                    lines.append(out)
            if not auth and not scripts:
                lines.append(mongo_log(t, "W", "CONTROL", 22120, "initandlisten",
                                       "Access control is not enabled for the database. Read and write access to data and configuration is unrestricted",
                                       {"tags": ["startupWarnings"]}))
            data["initialized"] = True
        data.pop("_shutdown", None)
        lines += [mongo_log(t + 0.5, "I", "NETWORK", 23015, "listener", "Listening on", {"address": "/tmp/mongodb-27017.sock"}),
                  mongo_log(t + 0.5, "I", "NETWORK", 23015, "listener", "Listening on", {"address": "0.0.0.0"}),
                  mongo_log(t + 0.5, "I", "NETWORK", 23016, "listener", "Waiting for connections", {"port": 27017, "ssl": "off"})]
        if data.get("users", {}).get("admin") and (user and pwd):
            auth = True
        inst = {"kind": "mongo", "tls": tls, "auth": auth, "data": data, "conns": 0, "last_checkpoint": ctx.now, "host": host}
        return Started(lines, {27017}, inst, ready_after=1.0)

    @staticmethod
    def _data_node(ctx: StartContext) -> str | None:
        for path, _ in ctx.volumes.items():
            if path == "/data/db":
                return ctx.node
        return None

    def memory(self, instance: Any, load_rps: float) -> float:
        return self.memory_base + 30_000 * load_rps

    def exec(self, ctx: StartContext, instance: Any, command: list[str]) -> tuple[int, str, str]:
        if not command:
            return 1, "", "error: you must specify at least one command for the container"
        argv = list(command)
        text = ""
        if argv[0] in ("bash", "sh", "/bin/bash", "/bin/sh"):
            if len(argv) >= 3 and argv[1] == "-c":
                text = expand_shell_vars(argv[2])
            elif len(argv) >= 2 and argv[1] in ctx.files:
                text = expand_shell_vars(ctx.files[argv[1]])
            elif len(argv) >= 2:
                return 127, "", f"{argv[0]}: {argv[1]}: No such file or directory\n"
            try:
                argv = shlex.split(text.split("\n")[0]) if text.strip().startswith("mongo") else argv
            except ValueError:
                pass
        if argv[0] in ("cat",) and len(argv) > 1:
            return (0, ctx.files[argv[1]], "") if argv[1] in ctx.files else (1, "", f"cat: {argv[1]}: No such file or directory\n")
        if argv[0] not in ("mongo", "mongosh") and not text:
            return 126, "", (f'OCI runtime exec failed: exec failed: unable to start container process: exec: "{argv[0]}": '
                             "executable file not found in $PATH: unknown")
        data = instance["data"] if instance else {}
        js = text
        user = pwd = None
        db = "test"
        authdb = None
        for i, a in enumerate(argv):
            if a in ("-u", "--username") and i + 1 < len(argv):
                user = argv[i + 1]
            elif a in ("-p", "--password") and i + 1 < len(argv):
                pwd = argv[i + 1]
            elif a == "--authenticationDatabase" and i + 1 < len(argv):
                authdb = argv[i + 1]
            elif a == "--eval" and i + 1 < len(argv):
                js = argv[i + 1]
            elif i > 0 and not a.startswith("-") and argv[i - 1] not in ("-u", "--username", "-p", "--password", "--eval",
                                                                        "--authenticationDatabase", "--host", "--port"):
                db = a.split("/")[-1] or db
        head = "MongoDB shell version v4.4.6\nconnecting to: mongodb://127.0.0.1:27017/" + db + \
            "?compressors=disabled&gssapiServiceName=mongodb\n"
        if user is not None:
            err = authenticate(instance, user, pwd or "", authdb or db)
            if err:
                return 1, head, ("Error: Authentication failed. :\nconnect@src/mongo/shell/mongo.js:374:17\n@(connect):2:6\n"
                                 "exception: connect failed\nexiting with code 1\n")
        elif instance and instance.get("auth") and re.search(r"createUser|dropUser|RolesFromUser|RolesToUser", js) \
                and data.get("users"):
            return 1, head, ('uncaught exception: Error: command requires authentication :\n_getErrorWithCode@src/mongo/shell/utils.js:25:13\n')
        reads = mongo_reads(ctx, instance, js, db, authed=user is not None)
        if reads is not None and reads[0] != 0:
            return reads[0], head, reads[1]
        out = run_mongo_js(data, js, db) + (reads[1].splitlines() if reads else [])
        if data.pop("_shutdown", False):
            ctx.cluster.kubelet.terminate(ctx.namespace, ctx.pod_name, ctx.container["name"], 0, "Completed",
                                          [mongo_log(ctx.app_time(), "I", "COMMAND", 4784900, "conn1", "Received shutdown request")])
        return 0, head + "".join(o + "\n" for o in out), ""

    # -- DataStore: what a call-graph service's driver meets ------------------------------------------
    def authenticate(self, instance: Any, address: Address) -> str | None:
        if not isinstance(instance, dict) or instance.get("kind") != "mongo":
            return "connection refused"
        if instance.get("tls"):
            return PLAINTEXT_REFUSED % f"{address.host}:{address.port}"
        if not address.user:
            return None  # drivers connect unauthenticated; commands are checked in serve()
        return authenticate(instance, address.user, address.password, auth_source(address))

    def serve(self, cluster: Any, rt: Any, c: Any, command: str, write: bool, rate: float, dt: float,
              address: Address) -> StoreReply:
        """`<op> [<db>[.<collection>]]` (`find post.post`, `insert user.user`): authorization as
        hotel's services meet it, then the load the workload's store pass turns into WiredTiger I/O."""
        inst = c.instance
        if not isinstance(inst, dict) or inst.get("kind") != "mongo":
            return StoreReply(0.0, 0.0, "connection() error occurred during connection handshake: EOF")
        words = command.split()
        op = words[0].lower() if words else "find"
        db = words[1].split(".")[0] if len(words) > 1 else (address.database or "test")
        write = write or op in MONGO_WRITES
        if op not in MONGO_WRITES and op not in MONGO_READS:  # a span name (hotel's `mongo_rate`): the driver's own command
            op = "insert" if write else "find"
        err = authorize(inst, address.user or None, auth_source(address), db, write, op)
        if err:
            return StoreReply(0.0, 0.001, err)
        inst["load"] = inst.get("load", 0.0) + rate
        io = inst.setdefault("io", {"read": 0.0, "write": 0.0})
        io["write" if write else "read"] += rate * dt
        util = min(0.95, inst["load"] / MONGO_CAPACITY)
        return StoreReply(1.0, 0.002 / max(0.05, 1 - util) + inst.get("io_delay", 0.0), None)

    def tick(self, cluster: Any, rt: Any, c: Any, now: float, dt: float) -> None:
        """The step's reads and writes on /data/db: an I/O delay Chaos Mesh injects slows every
        query (and mongod says so), a checkpoint writes each minute, and an I/O error or a failing
        disk makes WiredTiger abort the process."""
        inst = c.instance
        if not isinstance(inst, dict) or inst.get("kind") != "mongo":
            return
        w = cluster.workload
        load = inst.pop("load", 0.0)
        io = inst.pop("io", {"read": 0.0, "write": 0.0})
        reads, writes = io["read"] * 0.05, io["write"]  # the WiredTiger cache serves most reads
        podobj = w._pod(rt.namespace, rt.name) or {}
        delay = cluster.chaos.io_delay(podobj, c.name, "/data/db")
        inst["io_delay"] = delay
        if delay > 0:
            n = cluster.nodes.get(rt.node)
            if n is not None:
                n.disks[0].io_time += min(dt, (reads + writes + 4) * delay)
            if w._log_once(f"slowio/{rt.namespace}/{rt.name}", 15.0, now) and podobj:
                t0 = now + cluster.nodes.clock_offset(rt.node)
                ms = int(delay * 1000) + 3
                cluster.logs.write(podobj, c.name, [
                    mongo_log(t0, "I", "COMMAND", 51803, f"conn{3 + int(now) % 40}", "Slow query",
                              {"type": "command", "ns": "local.oplog", "command": {"find": "inventory"},
                               "planSummary": "COLLSCAN", "durationMillis": ms,
                               "storage": {"data": {"bytesRead": 4096, "timeReadingMicros": ms * 1000}}}),
                    mongo_log(t0, "I", "STORAGE", 22430, "Checkpointer", "WiredTiger message",
                              {"message": f"[{int(t0)}:0][1:0x7f3c2d1fe700], WT_SESSION.checkpoint: "
                                          f"[WT_VERB_CHECKPOINT_PROGRESS] Checkpoint has been running for "
                                          f"{max(1, int(delay * 40))} seconds and wrote: 40 pages (1 MB)"})], now)
        if now - inst.get("last_checkpoint", now) >= 60.0:
            inst["last_checkpoint"] = now
            writes += 40
        t = now + cluster.nodes.clock_offset(rt.node)
        for op, count in (("read", reads), ("write", writes)):
            if count <= 0:
                continue
            errno = cluster.chaos.io_error(podobj, c.name, "/data/db", op, count)
            frac = cluster.nodes.io(rt.node, op, 4096, count) if rt.volumes else 0.0
            if errno or (frac > 0 and cluster.rng.random() < 1 - (1 - frac) ** max(1.0, count)):
                ctx_name = "Checkpointer" if op == "write" else "conn" + str(3 + int(now) % 40)
                file = "collection-0-4587235146126372893.wt" if op == "read" else "WiredTiger.wt"
                cluster.kubelet.terminate(rt.namespace, rt.name, c.name, 14, "Error",
                                          wiredtiger_failure(t, file, op, errno or 5, ctx_name))
                return
        c.cpu_seconds += load * dt * 0.0003
        c.memory = self.memory(inst, load) + c.__dict__.get("_stress_mem", 0.0)


def authenticate(instance: dict[str, Any] | None, user: str, pwd: str, authdb: str = "admin") -> str | None:
    """None if `user` authenticates against the server; else the driver's error text."""
    if instance is None:
        return "connection refused"
    if instance.get("tls"):
        return PLAINTEXT_REFUSED % "mongodb:27017"
    rec = instance["data"].get("users", {}).get(authdb, {}).get(user)
    if rec is None or rec.get("pwd") != pwd:
        return ("connection() error occurred during connection handshake: auth error: sasl conversation error: unable to "
                'authenticate using mechanism "SCRAM-SHA-1": (AuthenticationFailed) Authentication failed.')
    return None


PLAINTEXT_REFUSED = ("connection() error occurred during connection handshake: connection(%s[-3]) socket was "
                     "unexpectedly closed: EOF")


def authorize(instance: dict[str, Any] | None, user: str | None, authdb: str, db: str, write: bool, command: str) -> str | None:
    if instance is not None and instance.get("tls"):
        return PLAINTEXT_REFUSED % "mongodb:27017"
    if instance is None or not instance.get("auth"):
        return None
    if user is None:
        return f"(Unauthorized) command {command} requires authentication"
    rec = instance["data"].get("users", {}).get(authdb, {}).get(user)
    if rec is None:
        return f"(Unauthorized) command {command} requires authentication"
    allowed = WRITE_ROLES if write else READ_ROLES
    for role, rdb in rec.get("roles") or []:
        if role in allowed and (rdb == db or role.endswith("AnyDatabase") or role == "root"):
            return None
    return f"(Unauthorized) not authorized on {db} to execute command {{ {command}: \"{db.split('-')[0]}\" }}"


def wiredtiger_failure(t: float, file: str, op: str, errno: int, ctx: str) -> list[str]:
    word = {5: "Input/output error", 28: "No space left on device", 30: "Read-only file system",
            13: "Permission denied"}.get(errno, f"errno {errno}")
    call = "pread" if op == "read" else "pwrite"
    msg = (f"[{int(t)}:{int((t % 1) * 1e6)}][1:0x7f3c2d1fe700], file:{file}, WT_SESSION.{'open_cursor' if op == 'read' else 'checkpoint'}: "
           f"__posix_file_{op}, {435 if op == 'read' else 579}: /data/db/{file}: handle-{op}: {call}: failed to {op} "
           f"4096 bytes at offset 45056: {word}")
    return [mongo_log(t, "E", "STORAGE", 22435, ctx, "WiredTiger error", {"error": errno, "message": msg}),
            mongo_log(t, "F", "-", 23089, ctx, "Fatal assertion", {"msgid": 50853, "file": "src/mongo/db/storage/wiredtiger/wiredtiger_util.cpp", "line": 566}),
            mongo_log(t, "F", "-", 23090, ctx, "\n\n***aborting after fassert() failure\n\n")]


def memcached_listen(argv: list[str]) -> tuple[int, list[str]]:
    """memcached's -p/--port (TCP port, 11211) and -l/--listen (comma-separated interfaces, all when unset)."""
    port, listen = 11211, []
    for i, a in enumerate(argv):
        value = argv[i + 1] if i + 1 < len(argv) else ""
        for flag in ("-p", "--port", "-l", "--listen"):
            if a == flag or a.startswith(flag + "=") or (len(flag) == 2 and a.startswith(flag) and len(a) > 2):
                v = a.split("=", 1)[1] if "=" in a else (a[2:] if len(flag) == 2 and len(a) > 2 else value)
                if flag in ("-p", "--port") and v.isdigit():
                    port = int(v)
                elif flag in ("-l", "--listen"):
                    # an IPv4 address may carry :port; IPv6 ones are bare or [bracketed]
                    listen += [(x.split(":")[0] if x.count(":") == 1 else x).strip("[]") for x in v.split(",") if x]
    return port, listen


@app_model
class Memcached(DataStore):
    name = "memcached"
    protocol = "memcached"
    images = ("memcached", "library/memcached")
    memory_base = 3 * 2**20
    item_bytes = 1100.0  # a cached object with its item header and slab overhead

    def start(self, ctx: StartContext) -> Started | Exited:
        argv = ctx.argv
        if argv and argv[0].rsplit("/", 1)[-1] not in ("memcached", "docker-entrypoint.sh") and not argv[0].startswith("-"):
            return Exited(127, [f"/usr/local/bin/docker-entrypoint.sh: line 17: exec: {argv[0]}: not found"])
        port, listen = memcached_listen(argv)
        # -l 127.0.0.1 (a hardening guide's advice) binds the loopback only: nothing outside the pod connects.
        loopback = bool(listen) and all(a in ("127.0.0.1", "localhost", "::1") for a in listen)
        return Started([], set() if loopback else {port}, {"kind": "memcached", "items": 0.0, "listen": listen},
                       ready_after=0.0)

    def memory(self, instance: Any, load_rps: float) -> float:
        return self.memory_base + (instance or {}).get("items", 0.0) * 2048

    def authenticate(self, instance: Any, address: Address) -> str | None:
        if not isinstance(instance, dict) or instance.get("kind") != "memcached":
            return "connection refused"
        return None  # the image runs without SASL

    def serve(self, cluster: Any, rt: Any, c: Any, command: str, write: bool, rate: float, dt: float,
              address: Address) -> StoreReply:
        """`get`/`set`/`delete`...: a set adds an item until `-m` (64 MB) worth are cached (LRU evicts)."""
        inst = c.instance
        if not isinstance(inst, dict) or inst.get("kind") != "memcached":
            return StoreReply(0.0, 0.0, "SERVER HAS FAILED AND IS DISABLED UNTIL TIMED RETRY")
        op = (command.split() or ["get"])[0].lower()
        if write or op in ("set", "add", "replace", "cas", "append", "prepend", "incr", "decr"):
            cap = inst.get("limit_mb", 64.0) * 2**20 / self.item_bytes
            inst["items"] = min(cap, inst.get("items", 0.0) + rate * dt * 0.5)
        elif op in ("delete", "flush_all"):
            inst["items"] = 0.0 if op == "flush_all" else max(0.0, inst.get("items", 0.0) - rate * dt)
        return StoreReply(1.0, 0.0003, None)

    def tick(self, cluster: Any, rt: Any, c: Any, now: float, dt: float) -> None:
        """Its memory follows the items it holds."""
        if not isinstance(c.instance, dict) or c.instance.get("kind") != "memcached":
            return
        c.memory = self.memory(c.instance, 0.0) + c.__dict__.get("_stress_mem", 0.0)
