"""MySQL (`mysql` 5.6, 5.7, 8.x images): docker-entrypoint.sh's MYSQL_* variables and init scripts,
mysqld's error log in each version's format, accounts and grants, InnoDB aborting on I/O errors,
and the `mysql` / `mysqladmin` clients."""

from __future__ import annotations

import hashlib
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
    queue_log,
    shell_fallback,
    split_sql,
    split_top,
    sql_shape,
    sql_string,
    step_faults,
    utc,
    version_from_tag,
    volume_capacity,
    write_log,
)
from kubesim.apps.graph import Address, StoreReply
from kubesim.apps.model import (
    Exited,
    StartContext,
    Started,
    app_model,
    register_image,
)

if TYPE_CHECKING:
    from kubesim.runtime import Ctr, PodRt

register_image("mysql", tags=("5.6.35", "5.6", "5.6.51", "5.7", "5.7.44", "8.0", "8.0.36", "8.0.40", "8.4", "latest"),
               size=330_000_000, executables=("mysqld", "mysql", "mysqladmin", "mysqldump", "docker-entrypoint.sh",
                                              "bash", "sh", "cat", "env", "ls"))


MYSQL_DEFAULT_MINOR = {"5.6": "5.6.51", "5.7": "5.7.44", "8.0": "8.0.40", "8.4": "8.4.3", "8": "8.0.40", "5": "5.7.44"}


MYSQL_SOCKET = "/var/run/mysqld/mysqld.sock"


MYSQL_CPU_PER_OP = 0.0003

# The mysql client's options that take a value, by the field they set: with the value as the next
# argument, after `=` (long names), or glued on (-uroot, -psecret, -hdb).
MYSQL_SPACED_OPTIONS = {"-u": "user", "--user": "user", "-h": "host", "--host": "host", "-P": "port", "--port": "port",
                        "-e": "execute", "--execute": "execute", "-D": "database", "--database": "database"}
MYSQL_LONG_OPTIONS = {"--user": "user", "--password": "password", "--host": "host", "--port": "port",
                      "--execute": "execute", "--database": "database"}
MYSQL_GLUED_OPTIONS = {"-u": "user", "-p": "password", "-h": "host"}


MYSQL_CLI_PASSWORD_WARNING = "Warning: Using a password on the command line interface can be insecure.\n"


def mysql_stamp(t: float, version: str) -> str:
    d = utc(t)
    if version.startswith("5.6"):
        return d.strftime("%Y-%m-%d %H:%M:%S")
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond:06d}Z"


def mysql_line(t: float, version: str, level: str, msg: str, thread: int = 0) -> str:
    """5.6: `2026-12-03 07:00:00 1 [Note] msg`; 5.7: `2026-12-03T07:00:00.000000Z 0 [Note] msg`;
    8.0: `2026-12-03T07:00:00.000000Z 0 [System] [MY-010931] [Server] msg`."""
    if version.startswith("8"):
        code = {"System": "MY-010931", "ERROR": "MY-012592", "Warning": "MY-011810", "Note": "MY-010733"}.get(level, "MY-010000")
        return f"{mysql_stamp(t, version)} {thread} [{level}] [{code}] [Server] {msg}"
    return f"{mysql_stamp(t, version)} {thread if not version.startswith('5.6') else thread or 1} [{level}] {msg}"


def _mysql_user_key(user: str, host: str) -> str:
    return f"{user}@{host}"


def _mysql_host_match(pattern: str, client: str) -> bool:
    if pattern == "%":
        return True
    if pattern == "localhost":
        return client == "localhost"
    return re.fullmatch(re.escape(pattern).replace("%", ".*").replace("_", "."), client) is not None


class MysqlError(Exception):
    """`ERROR <code> (<state>): <msg>`: the code, SQL state and message MySQL reports."""

    def __init__(self, code: int, state: str, msg: str) -> None:
        super().__init__(msg)
        self.code, self.state, self.msg = code, state, msg

    def cli(self, at_line: bool = True) -> str:
        return f"ERROR {self.code} ({self.state}){' at line 1' if at_line else ''}: {self.msg}"


class MysqlSession:
    """A client session as `user`@`client_host` (the matched account `account`) in `db`."""

    def __init__(self, inst: dict[str, Any], account: str, client_host: str, db: str = "") -> None:
        self.inst, self.data, self.account, self.client_host, self.db = inst, inst["data"], account, client_host, db

    @property
    def user(self) -> str:
        return self.account.rsplit("@", 1)[0]

    def _privs(self, account: str | None = None) -> dict[str, list[str]]:
        if self.inst.get("skip_grants"):
            return {"*.*": ["ALL PRIVILEGES"]}
        return (self.data["users"].get(account or self.account) or {}).get("grants", {})

    def can(self, db: str, priv: str = "ALL") -> bool:
        grants = self._privs()
        for scope in ("*.*", f"{db}.*", f"`{db}`.*"):
            privs = grants.get(scope, [])
            if "ALL PRIVILEGES" in privs or priv in privs:
                return True
        return False

    def _super(self) -> bool:
        return self.can("*", "CREATE USER")

    def _denied(self, what: str) -> MysqlError:
        return MysqlError(1227, "42000", f"Access denied; you need (at least one of) the {what} privilege(s) for this "
                                         "operation")

    def _account(self, text: str) -> tuple[str, str]:
        m = re.match(r"^\s*['`\"]?([^'`\"@]*)['`\"]?\s*(?:@\s*['`\"]?([^'`\"]*)['`\"]?)?\s*$", text)
        if not m:
            raise MysqlError(1064, "42000", "You have an error in your SQL syntax")
        return m.group(1), m.group(2) if m.group(2) is not None else "%"

    def run(self, sql: str) -> tuple[list[str], list[list[str]]] | None:
        """Rows (columns, rows) for a query, None for a statement; raises MysqlError."""
        s = " ".join(sql.strip().rstrip(";").split())
        low = s.lower()
        version = self.inst.get("version", "5.6.35")
        old = version.startswith("5.6")
        users = self.data["users"]
        if not s:
            return None
        m = re.match(r"^select (.+?)(?: from (\S+))?(?: where (.+?))?(?: order by .+?)?(?: limit (\d+))?$", s, re.I)
        if m:
            what, src = m.group(1).strip(), (m.group(2) or "").lower().strip("`")
            wl = what.lower()
            if not src:
                vals = {"version()": version, "user()": f"{self.user}@{self.client_host}",
                        "current_user()": self.account, "current_user": self.account, "database()": self.db or "NULL",
                        "@@max_connections": str(self.inst.get("max_connections", 151)), "now()": mysql_stamp(
                            self.inst.get("now", 0.0), "5.6"), "@@version": version, "@@hostname": self.inst.get("host", "")}
                cols = split_top(what)
                row = []
                for col in cols:
                    key = col.strip().lower()
                    if key in vals:
                        row.append(vals[key])
                    elif re.match(r"^-?\d+(\.\d+)?$", key) or key.startswith(("'", '"')):
                        row.append(sql_string(col))
                    else:
                        raise MysqlError(1054, "42S22", f"Unknown column '{col.strip()}' in 'field list'")
                return [c.strip() for c in cols], [row]
            if src in ("mysql.user",):
                if not self.can("mysql", "SELECT"):
                    raise MysqlError(1142, "42000", f"SELECT command denied to user '{self.user}'@'{self.client_host}' "
                                                    "for table 'user'")
                cols = ["user", "host"] if wl == "*" else [c.strip().strip("`").lower() for c in split_top(what)]
                accounts: list[dict[str, str]] = []
                for key, rec in sorted(users.items()):
                    u, h = key.rsplit("@", 1)
                    full = {"user": u, "host": h, "plugin": rec.get("plugin", "mysql_native_password"),
                            "authentication_string": "*" + hashlib.sha1(rec.get("password", "").encode()).hexdigest().upper()
                            if rec.get("password") else "", "password": "", "account_locked": "N"}
                    if old:
                        full["password"], full["authentication_string"] = full["authentication_string"], ""
                    accounts.append(full)
                where = m.group(3)
                if where:
                    mw = re.match(r"(\w+)\s*=\s*'([^']*)'", where)
                    if mw:
                        accounts = [r for r in accounts if r.get(mw.group(1).lower()) == mw.group(2)]
                if re.match(r"^count\(\*\)$", wl):
                    return ["count(*)"], [[str(len(accounts))]]
                return cols, [[r.get(c, "NULL") for c in cols] for r in accounts]
            db = src.split(".")[0] if "." in src else self.db
            if not db:
                raise MysqlError(1046, "3D000", "No database selected")
            table = src.split(".")[-1]
            if db not in self.data["dbs"] or table not in self.data["dbs"][db].get("tables", {}):
                raise MysqlError(1146, "42S02", f"Table '{db}.{table}' doesn't exist")
            if not self.can(db, "SELECT"):
                raise MysqlError(1142, "42000", f"SELECT command denied to user '{self.user}'@'{self.client_host}' for "
                                                f"table '{table}'")
            count = self.data["dbs"][db]["tables"][table]
            return (["count(*)"], [[str(count)]]) if "count(" in wl else ([what], [])
        if low in ("show databases", "show schemas"):
            names = ["information_schema"] + sorted(n for n in self.data["dbs"] if self.can(n, "SELECT") or self._super())
            return ["Database"], [[n] for n in names]
        if low == "show tables":
            if not self.db:
                raise MysqlError(1046, "3D000", "No database selected")
            return [f"Tables_in_{self.db}"], [[t] for t in sorted(self.data["dbs"].get(self.db, {}).get("tables", {}))]
        m = re.match(r"^show grants(?: for (.+))?$", s, re.I)
        if m:
            u, h = self._account(m.group(1)) if m.group(1) else self.account.rsplit("@", 1)
            rec = users.get(_mysql_user_key(u, h))
            if rec is None:
                raise MysqlError(1141, "42000", f"There is no such grant defined for user '{u}' on host '{h}'")
            rows: list[list[str]] = []
            for scope, privs in rec.get("grants", {}).items():
                ident = ""
                if scope == "*.*" and old and rec.get("password"):
                    ident = " IDENTIFIED BY PASSWORD '*" + hashlib.sha1(rec["password"].encode()).hexdigest().upper() + "'"
                rows.append([f"GRANT {', '.join(privs)} ON {scope} TO '{u}'@'{h}'{ident}"
                             + (" WITH GRANT OPTION" if rec.get("grant_option") and scope == "*.*" else "")])
            if not rows:
                rows = [[f"GRANT USAGE ON *.* TO '{u}'@'{h}'"]]
            return [f"Grants for {u}@{h}"], rows
        m = re.match(r"^show (?:global |session )?(variables|status) like '([^']*)'$", s, re.I)
        if m:
            pat = m.group(2).replace("%", ".*")
            vals = ({"max_connections": str(self.inst.get("max_connections", 151)), "port": str(self.inst.get("port", 3306)),
                     "version": version, "datadir": self.inst.get("datadir", "/var/lib/mysql") + "/",
                     "innodb_buffer_pool_size": str(int(self.inst.get("buffer_pool", 128 * 2**20))),
                     "performance_schema": "ON" if self.inst.get("pfs", True) else "OFF", "socket": MYSQL_SOCKET}
                    if m.group(1).lower() == "variables" else
                    {"Threads_connected": str(int(self.inst.get("conns", 1.0))), "Max_used_connections":
                     str(int(self.inst.get("max_used", 1.0))), "Connection_errors_max_connections":
                     str(int(self.inst.get("refused_total", 0.0))), "Uptime": str(int(self.inst.get("now", 0.0) -
                                                                                       self.inst.get("started", 0.0)))})
            name = "Variable_name"
            return [name, "Value"], [[k, v] for k, v in sorted(vals.items()) if re.fullmatch(pat, k, re.I)]
        if low in ("show processlist", "show full processlist"):
            rows = [["1", self.user, self.client_host, self.db or "NULL", "Query", "0", "starting", "show processlist"]]
            return ["Id", "User", "Host", "db", "Command", "Time", "State", "Info"], rows
        m = re.match(r"^set global max_connections\s*=\s*(\d+)$", s, re.I)
        if m:
            if not self._super():
                raise self._denied("SUPER")
            self.inst["max_connections"] = int(m.group(1))
            return None
        m = re.match(r"^create user (if not exists )?(.+?)(?: identified (?:with \w+ )?by (?:password )?'((?:[^']|'')*)')?$",
                     s, re.I)
        if m:
            if not self._super():
                raise self._denied("CREATE USER")
            u, h = self._account(m.group(2))
            key = _mysql_user_key(u, h)
            if key in users:
                if m.group(1):
                    return None
                raise MysqlError(1396, "HY000", f"Operation CREATE USER failed for '{u}'@'{h}'")
            users[key] = {"password": (m.group(3) or "").replace("''", "'"), "grants": {}, "plugin": "mysql_native_password"}
            return None
        m = re.match(r"^drop user (if exists )?(.+)$", s, re.I)
        if m:
            if not self._super():
                raise self._denied("CREATE USER")
            for acct in m.group(2).split(","):
                u, h = self._account(acct)
                if users.pop(_mysql_user_key(u, h), None) is None and not m.group(1):
                    raise MysqlError(1396, "HY000", f"Operation DROP USER failed for '{u}'@'{h}'")
            return None
        m = re.match(r"^set password(?: for (.+?))?\s*=\s*(password\s*\(\s*'((?:[^']|'')*)'\s*\)|'((?:[^']|'')*)')$", s, re.I)
        if m:
            u, h = self._account(m.group(1)) if m.group(1) else self.account.rsplit("@", 1)
            key = _mysql_user_key(u, h)
            if key != self.account and not self._super():
                raise MysqlError(1044, "42000", f"Access denied for user '{self.user}'@'{self.client_host}' to database "
                                                "'mysql'")
            if key not in users:
                raise MysqlError(1133, "42000", "Can't find any matching row in the user table")
            if m.group(4) is not None and old:
                raise MysqlError(1372, "HY000", "Password hash should be a 41-digit hexadecimal number")
            users[key]["password"] = (m.group(3) if m.group(3) is not None else m.group(4) or "").replace("''", "'")
            return None
        m = re.match(r"^alter user (if exists )?(.+?) identified (?:with \w+ )?by '((?:[^']|'')*)'(.*)$", s, re.I)
        if m:
            if old:
                near = s[s.lower().find("identified"):]
                raise MysqlError(1064, "42000", "You have an error in your SQL syntax; check the manual that corresponds "
                                                f"to your MySQL server version for the right syntax to use near '{near}' at "
                                                "line 1")
            u, h = self._account(m.group(2))
            key = _mysql_user_key(u, h)
            if key != self.account and not self._super():
                raise self._denied("CREATE USER")
            if key not in users:
                raise MysqlError(1396, "HY000", f"Operation ALTER USER failed for '{u}'@'{h}'")
            users[key]["password"] = m.group(3).replace("''", "'")
            return None
        m = re.match(r"^(grant|revoke) (.+?) on (\S+) (?:to|from) (.+?)(?: identified by '((?:[^']|'')*)')?"
                     r"( with grant option)?$", s, re.I)
        if m:
            if not self._super() and not (users.get(self.account) or {}).get("grant_option"):
                raise MysqlError(1044, "42000", f"Access denied for user '{self.user}'@'{self.client_host}' to database "
                                                f"'{m.group(3).split('.')[0].strip('`')}'")
            privs = ["ALL PRIVILEGES" if p.strip().upper() in ("ALL", "ALL PRIVILEGES") else p.strip().upper()
                     for p in m.group(2).split(",")]
            scope = m.group(3).replace("`", "")
            scope = scope if "." in scope else f"{self.db}.{scope}"
            for acct in split_top(m.group(4)):
                u, h = self._account(acct)
                key = _mysql_user_key(u, h)
                if key not in users:
                    if m.group(1).lower() == "revoke":
                        raise MysqlError(1141, "42000", f"There is no such grant defined for user '{u}' on host '{h}'")
                    if m.group(5) is None and not old:
                        raise MysqlError(1133, "42000", "Can't find any matching row in the user table")
                    users[key] = {"password": "", "grants": {}, "plugin": "mysql_native_password"}
                rec = users[key]
                if m.group(5) is not None:
                    rec["password"] = m.group(5).replace("''", "'")
                have = rec["grants"].setdefault(scope, [])
                if m.group(1).lower() == "grant":
                    have += [p for p in privs if p not in have]
                    if m.group(6):
                        rec["grant_option"] = True
                else:
                    rec["grants"][scope] = [] if "ALL PRIVILEGES" in privs else [p for p in have if p not in privs]
                    if not rec["grants"][scope]:
                        del rec["grants"][scope]
            return None
        if low == "flush privileges" or low.startswith("flush "):
            return None
        m = re.match(r"^create (?:database|schema) (if not exists )?`?([\w$-]+)`?", s, re.I)
        if m:
            if not self.can(m.group(2), "CREATE"):
                raise MysqlError(1044, "42000", f"Access denied for user '{self.user}'@'{self.client_host}' to database "
                                                f"'{m.group(2)}'")
            if m.group(2) in self.data["dbs"]:
                if m.group(1):
                    return None
                raise MysqlError(1007, "HY000", f"Can't create database '{m.group(2)}'; database exists")
            self.data["dbs"][m.group(2)] = {"tables": {}}
            return None
        m = re.match(r"^drop (?:database|schema) (if exists )?`?([\w$-]+)`?", s, re.I)
        if m:
            if m.group(2) not in self.data["dbs"]:
                if m.group(1):
                    return None
                raise MysqlError(1008, "HY000", f"Can't drop database '{m.group(2)}'; database doesn't exist")
            del self.data["dbs"][m.group(2)]
            return None
        m = re.match(r"^use `?([\w$-]+)`?$", s, re.I)
        if m:
            if m.group(1) not in self.data["dbs"]:
                raise MysqlError(1049, "42000", f"Unknown database '{m.group(1)}'")
            self.db = m.group(1)
            return None
        m = re.match(r"^create table (?:if not exists )?`?([\w$]+)`?(?:\.`?([\w$]+)`?)?", s, re.I)
        if m:
            db, table = (m.group(1), m.group(2)) if m.group(2) else (self.db, m.group(1))
            if not db:
                raise MysqlError(1046, "3D000", "No database selected")
            self.data["dbs"].setdefault(db, {"tables": {}})["tables"].setdefault(table, 0)
            return None
        m = re.match(r"^insert into `?([\w$]+)`?(?:\.`?([\w$]+)`?)?", s, re.I)
        if m:
            db, table = (m.group(1), m.group(2)) if m.group(2) else (self.db, m.group(1))
            tables = self.data["dbs"].get(db, {}).get("tables", {})
            if table not in tables:
                raise MysqlError(1146, "42S02", f"Table '{db}.{table}' doesn't exist")
            tables[table] += max(1, s.lower().count("),(") + 1)
            return None
        if re.match(r"^(set|start|begin|commit|rollback|lock|unlock|alter table|create index|drop table|delete|update|"
                    r"truncate|create (?:or replace )?(?:view|procedure|function|trigger)|delimiter)\b", low):
            return None
        word = s.split()[0]
        raise MysqlError(1064, "42000", "You have an error in your SQL syntax; check the manual that corresponds to your "
                                        f"MySQL server version for the right syntax to use near '{s[len(word):].strip() or word}' "
                                        "at line 1")


def mysql_login(inst: dict[str, Any], user: str, password: str | None, client_host: str,
                db: str) -> tuple[str | None, MysqlError | None]:
    """(the matched account, or the server's refusal). Accounts sort most-specific host first."""
    if inst.get("skip_grants"):
        return _mysql_user_key(user, "%"), None
    candidates = []
    for key in inst["data"]["users"]:
        u, h = key.rsplit("@", 1)
        if u == user and _mysql_host_match(h, client_host):
            candidates.append((h == "%", "%" in h, key))
    using = "YES" if password else "NO"
    if not candidates:
        return None, MysqlError(1045, "28000", f"Access denied for user '{user}'@'{client_host}' (using password: {using})")
    key = sorted(candidates)[0][2]
    if inst["data"]["users"][key].get("password", "") != (password or ""):
        return None, MysqlError(1045, "28000", f"Access denied for user '{user}'@'{client_host}' (using password: {using})")
    if db:
        if db not in inst["data"]["dbs"] and db not in ("mysql", "information_schema", "performance_schema", "sys"):
            return None, MysqlError(1049, "42000", f"Unknown database '{db}'")
        sess = MysqlSession(inst, key, client_host)
        if db not in ("information_schema",) and not sess.can(db, "SELECT") and not sess.can(db, "INSERT"):
            return None, MysqlError(1044, "42000", f"Access denied for user '{user}'@'{client_host}' to database '{db}'")
    return key, None


@app_model
class MySQL(StoreModel):
    """The `mysql` image (5.6, 5.7, 8.x): docker-entrypoint.sh's MYSQL_* variables and init scripts,
    mysqld's error log, accounts and grants, InnoDB's reaction to I/O errors, the `mysql` client."""

    closed_error = "Lost connection to MySQL server during query"

    name = "mysql"
    protocol = "mysql"
    images = ("mysql",)
    memory_base = 100 * 2**20
    entry = ("mysqld", "docker-entrypoint.sh")

    def start(self, ctx: StartContext) -> Started | Exited:
        argv = self.server_command(ctx, ("mysqld",), wrappers=("docker-entrypoint.sh", "entrypoint.sh"))
        if not isinstance(argv, list):
            return argv
        version = version_from_tag(ctx, MYSQL_DEFAULT_MINOR, "8.0.40")
        old = version.startswith("5.6")
        env = ctx.env
        opts = self._options(ctx, argv[1:])
        datadir = opts.get("datadir", "/var/lib/mysql").rstrip("/")
        port = int(opts.get("port", 3306))
        volume = ctx.volume_for(datadir)
        data: dict[str, Any] = volume if volume is not None else {}
        t = ctx.app_time()
        lines: list[str] = []
        rt = ctx.cluster.kubelet.runtime(ctx.pod)
        ctr = rt.containers.get(ctx.container["name"]) if rt else None
        faults = step_faults(ctx.cluster, rt, ctr, {"kind": "mysql"}, datadir) if rt and ctr else {}

        def secret(name: str) -> str:
            if env.get(name):
                return env[name]
            path = env.get(name + "_FILE")
            return (ctx.files.get(path) or "").strip() if path else ""

        root_pw = secret("MYSQL_ROOT_PASSWORD")
        if not data.get("initialized"):
            if not root_pw and not env.get("MYSQL_ALLOW_EMPTY_PASSWORD") and not env.get("MYSQL_RANDOM_ROOT_PASSWORD"):
                if old:
                    return Exited(1, [], after=0.1, stderr=[
                        "error: database is uninitialized and password option is not specified ",
                        "  You need to specify one of MYSQL_ROOT_PASSWORD, MYSQL_ALLOW_EMPTY_PASSWORD and "
                        "MYSQL_RANDOM_ROOT_PASSWORD"])
                stamp = utc(t).strftime("%Y-%m-%d %H:%M:%S+00:00")
                return Exited(1, [f"{stamp} [Note] [Entrypoint]: Entrypoint script for MySQL Server {version}-1.el9 started.",
                                  f"{stamp} [Note] [Entrypoint]: Switching to dedicated user 'mysql'",
                                  f"{stamp} [Note] [Entrypoint]: Entrypoint script for MySQL Server {version}-1.el9 started."],
                              after=0.2, stderr=[
                                  f"{stamp} [ERROR] [Entrypoint]: Database is uninitialized and password option is not specified",
                                  "    You need to specify one of the following as an environment variable:",
                                  "    - MYSQL_ROOT_PASSWORD", "    - MYSQL_ALLOW_EMPTY_PASSWORD", "    - MYSQL_RANDOM_ROOT_PASSWORD"])
            if faults.get("w_errno") or faults.get("r_errno"):
                errno = faults.get("w_errno") or faults.get("r_errno") or 5
                return Exited(1, ["Initializing database",
                                  mysql_line(t, version, "ERROR", f"InnoDB: Operating system error number {errno} in a file "
                                                                  "operation."),
                                  mysql_line(t, version, "ERROR", f"InnoDB: Error number {errno} means "
                                                                  f"'{ERRNO_TEXT.get(errno, 'Input/output error')}'."),
                                  mysql_line(t, version, "ERROR", "InnoDB: Cannot create ./ibdata1"),
                                  mysql_line(t, version, "ERROR", "Aborting")], after=1.0)
            out, code = self._initialize(ctx, data, version, root_pw, t)
            lines += out
            if code:
                return Exited(code, lines, after=3.0)
        elif faults.get("r_errno"):
            errno = faults["r_errno"]
            word = ERRNO_TEXT.get(errno, "Input/output error")
            return Exited(1, [mysql_line(t, version, "Note", f"mysqld (mysqld {version}) starting as process 1 ..."),
                              mysql_line(t, version, "ERROR", "InnoDB: Tried to read 16384 bytes at offset 0. Was only able "
                                                              "to read -1."),
                              mysql_line(t, version, "ERROR", f"InnoDB: Operating system error number {errno} in a file "
                                                              "operation."),
                              mysql_line(t, version, "ERROR", f"InnoDB: Error number {errno} means '{word}'."),
                              mysql_line(t, version, "ERROR", "InnoDB: File ./ibdata1: 'read' returned OS error 105. "
                                                              "Cannot continue operation"),
                              "mysqld got signal 6 ;"], after=1.5)
        t0 = t + (4.0 if lines else 0.0)
        bp = _mysql_size(opts.get("innodb_buffer_pool_size", "134217728"))
        lines += self._start_lines(t0, version, port, bp, ctx.pod.get("spec", {}).get("hostname") or ctx.pod_name)
        pfs = str(opts.get("performance_schema", "ON")).upper() not in ("0", "OFF", "FALSE")
        inst = {"kind": "mysql", "version": version, "datadir": datadir, "port": port, "data": data, "started": ctx.now,
                "now": ctx.now, "max_connections": int(opts.get("max_connections", 151)), "buffer_pool": bp, "pfs": pfs,
                "skip_grants": "skip_grant_tables" in opts, "conns": 1.0, "util": 0.0, "acc": fresh_acc(),
                "host": ctx.pod.get("spec", {}).get("hostname") or ctx.pod_name, "refused_total": 0.0,
                "capacity": volume_capacity(ctx, datadir)}
        return Started(lines, {port}, inst, ready_after=(t0 - t) + 2.0)

    def _options(self, ctx: StartContext, args: list[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for path in sorted(p for p in ctx.files if p.startswith(("/etc/mysql/conf.d/", "/etc/mysql/mysql.conf.d/"))
                           or p in ("/etc/mysql/my.cnf", "/etc/my.cnf")):
            section = ""
            for line in ctx.files[path].splitlines():
                line = line.split("#", 1)[0].strip()
                if line.startswith("["):
                    section = line.strip("[]").strip()
                    continue
                if section in ("mysqld", "server") and line:
                    k, _, v = line.partition("=")
                    out[k.strip().replace("-", "_")] = v.strip() or "1"
        for a in args:
            if a.startswith("--"):
                k, _, v = a[2:].partition("=")
                out[k.replace("-", "_")] = v or "1"
        return out

    def _start_lines(self, t: float, version: str, port: int, bp: float, host: str) -> list[str]:
        L = lambda level, msg: mysql_line(t, version, level, msg, 0 if not version.startswith("5.6") else 1)  # noqa: E731
        if version.startswith("8"):
            return [L("System", f"/usr/sbin/mysqld (mysqld {version}) starting as process 1"),
                    L("System", "InnoDB initialization has started."), L("System", "InnoDB initialization has ended."),
                    L("Warning", "CA certificate ca.pem is self signed."),
                    L("System", "Channel mysql_main configured to support TLS. Encrypted connections are now supported "
                                "for this channel."),
                    L("System", f"/usr/sbin/mysqld: ready for connections. Version: '{version}'  socket: "
                                f"'{MYSQL_SOCKET}'  port: {port}  MySQL Community Server - GPL.")]
        lines = [L("Note", f"mysqld (mysqld {version}) starting as process 1 ...")]
        if version.startswith("5.6"):
            lines += [L("Note", "Plugin 'FEDERATED' is disabled."),
                      L("Note", "InnoDB: Using atomics to ref count buffer pool pages"),
                      L("Note", "InnoDB: The InnoDB memory heap is disabled"),
                      L("Note", "InnoDB: Mutexes and rw_locks use GCC atomic builtins"),
                      L("Note", "InnoDB: Memory barrier is not used"),
                      L("Note", "InnoDB: Compressed tables use zlib 1.2.8"),
                      L("Note", "InnoDB: Using Linux native AIO"),
                      L("Note", "InnoDB: Using CPU crc32 instructions"),
                      L("Note", f"InnoDB: Initializing buffer pool, size = {bp / 2**20:.1f}M"),
                      L("Note", "InnoDB: Completed initialization of buffer pool"),
                      L("Note", "InnoDB: Highest supported file format is Barracuda."),
                      L("Note", "InnoDB: 128 rollback segment(s) are active."),
                      L("Note", "InnoDB: Waiting for purge to start"),
                      L("Note", f"InnoDB: {version} started; log sequence number 1626027")]
        else:
            lines += [L("Note", "InnoDB: PUNCH HOLE support available"),
                      L("Note", f"InnoDB: Initializing buffer pool, total size = {bp / 2**20:.0f}M, instances = 1, "
                                "chunk size = 128M"),
                      L("Note", "InnoDB: Completed initialization of buffer pool"),
                      L("Note", "InnoDB: 96 redo rollback segment(s) found. 96 redo rollback segment(s) are active."),
                      L("Note", f"InnoDB: {version} started; log sequence number 12659734")]
        lines += [L("Note", f"Server hostname (bind-address): '*'; port: {port}"),
                  L("Note", "IPv6 is available."), L("Note", "  - '::' resolves to '::';"),
                  L("Note", "Server socket created on IP: '::'."),
                  L("Warning", f"'proxies_priv' entry '@ root@{host}' ignored in --skip-name-resolve mode."),
                  L("Note", "Event Scheduler: Loaded 0 events"),
                  L("Note", "mysqld: ready for connections."),
                  f"Version: '{version}'  socket: '{MYSQL_SOCKET}'  port: {port}  MySQL Community Server (GPL)"]
        return lines

    def _initialize(self, ctx: StartContext, data: dict[str, Any], version: str, root_pw: str,
                    t: float) -> tuple[list[str], int]:
        env = ctx.env
        old = version.startswith("5.6")
        data.clear()
        data.update({"initialized": True, "version": version, "users": {}, "dbs": {"mysql": {"tables": {}},
                                                                                    "performance_schema": {"tables": {}}},
                     "bytes": 110e6})
        if not old:
            data["dbs"]["sys"] = {"tables": {}}
        lines = ["Initializing database"]
        if old:
            lines += [mysql_line(t, version, "Note", f"/usr/sbin/mysqld (mysqld {version}) starting as process 30 ...", 0),
                      mysql_line(t, version, "Note", "InnoDB: The first specified data file ./ibdata1 did not exist: a new "
                                                     "database to be created!", 0),
                      mysql_line(t, version, "Note", "InnoDB: Setting file ./ibdata1 size to 12 MB", 0),
                      mysql_line(t, version, "Note", "Binlog end", 0)]
        else:
            lines += [mysql_line(t, version, "Warning", "InnoDB: New log files created, LSN=45790"),
                      mysql_line(t, version, "Warning", "InnoDB: Creating foreign key constraint system tables."),
                      mysql_line(t, version, "Warning", "root@localhost is created with an empty password ! Please consider "
                                                        "switching off the --initialize-insecure option.", 1)]
        lines += ["Database initialized", "MySQL init process in progress..."]
        lines += ["Warning: Unable to load '/usr/share/zoneinfo/iso3166.tab' as time zone. Skipping it.",
                  "Warning: Unable to load '/usr/share/zoneinfo/leap-seconds.list' as time zone. Skipping it.",
                  "Warning: Unable to load '/usr/share/zoneinfo/zone.tab' as time zone. Skipping it."]
        root_host = env.get("MYSQL_ROOT_HOST", "%") if not old else "%"
        if env.get("MYSQL_RANDOM_ROOT_PASSWORD"):
            root_pw = hashlib.sha256(f"{ctx.pod_name}{t}".encode()).hexdigest()[:32]
            lines.append(f"GENERATED ROOT PASSWORD: {root_pw}")
        data["users"][_mysql_user_key("root", root_host)] = {"password": root_pw, "grants": {"*.*": ["ALL PRIVILEGES"]},
                                                             "grant_option": True, "plugin": "mysql_native_password"}
        if not old:
            data["users"][_mysql_user_key("root", "localhost")] = {"password": root_pw, "grants": {"*.*": ["ALL PRIVILEGES"]},
                                                                   "grant_option": True, "plugin": "mysql_native_password"}
        sess = MysqlSession({"data": data, "version": version}, _mysql_user_key("root", root_host), "localhost")
        dbname = env.get("MYSQL_DATABASE", "")
        if dbname:
            sess.run(f"CREATE DATABASE IF NOT EXISTS `{dbname}`")
        user, pw = env.get("MYSQL_USER", ""), env.get("MYSQL_PASSWORD", "")
        if user and pw:
            try:
                sess.run(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{pw}'")
                if dbname:
                    sess.run(f"GRANT ALL ON `{dbname}`.* TO '{user}'@'%'")
            except MysqlError as e:
                return lines + [e.cli()], 1
        lines.append("")
        for path in sorted(p for p in ctx.files if p.startswith("/docker-entrypoint-initdb.d/")):
            if path.endswith(".sql"):
                lines.append(f"/usr/local/bin/docker-entrypoint.sh: running {path}")
                sess.db = dbname
                for i, stmt in enumerate(split_sql(ctx.files[path])):
                    try:
                        sess.run(stmt)
                    except MysqlError as e:
                        return lines + [f"ERROR {e.code} ({e.state}) at line {i + 1}: {e.msg}"], 1
                lines.append("")
            elif path.endswith((".sh", ".sql.gz")):
                lines += [f"/usr/local/bin/docker-entrypoint.sh: running {path}", ""]
            else:
                lines.append(f"/usr/local/bin/docker-entrypoint.sh: ignoring {path}")
        lines += ["", "MySQL init process done. Ready for start up.", ""]
        return lines, 0

    # -- the protocol -----------------------------------------------------------------------------------
    def authenticate(self, instance: Any, address: Address, client: str = "") -> str | None:
        inst = instance
        client = client or address.client or "%"
        if not isinstance(inst, dict) or inst.get("kind") != "mysql":
            return "Lost connection to MySQL server at 'reading initial communication packet', system error: 0"
        _, err = mysql_login(inst, address.user or "root", address.password, client, address.database)
        if err is None:
            return None
        if err.code == 1045 and not inst["version"].startswith("5.6"):
            queue_log(inst, f"auth/{address.user}", [("Note", err.msg)])
        return err.msg

    def serve_running(self, cluster: Any, rt: PodRt, c: Ctr, inst: dict[str, Any], command: str, write: bool,
                      rate: float, dt: float, address: Address, now: float) -> StoreReply:
        verb, tables = sql_shape(command)
        write = write or verb in ("INSERT", "UPDATE", "DELETE", "REPLACE")
        n, acc = self.count_requests(inst, rate, dt)
        failures: list[tuple[float, str]] = []
        db = address.database
        for table in tables:
            tdb, _, tname = table.rpartition(".")
            tdb = tdb or db
            if tdb and tdb in inst["data"]["dbs"] and tname not in inst["data"]["dbs"][tdb]["tables"] \
                    and inst["data"]["dbs"][tdb]["tables"]:
                return StoreReply(0.0, 0.001, f"Table '{tdb}.{tname}' doesn't exist")
        if inst["conns"] > inst["max_connections"] + 1:  # one extra connection is reserved for SUPER
            share = (inst["conns"] - inst["max_connections"] - 1) / inst["conns"]
            failures.append((share, "Too many connections"))
            inst["refused_total"] = inst.get("refused_total", 0.0) + share * acc["calls"]
        snap = step_faults(cluster, rt, c, inst, inst["datadir"])
        op = "write" if write else "read"
        count = n if write else n * 0.03  # reads are buffer pool hits but for a few
        errno, share = disk_io(cluster, rt, c, inst, inst["datadir"], op, count, "mysqld")
        if not errno and write and inst["capacity"] and inst["data"].get("bytes", 0.0) >= inst["capacity"]:
            errno, share = 28, 1.0
        if errno and share > 0 and count * share >= 0.2:
            if errno == 28:
                table = (tables[0].rsplit(".", 1)[-1] if tables else "t")
                failures.append((share, f"The table '{table}' is full"))
                if once(inst, "full", now, 10.0):
                    write_log(cluster, rt, c, [mysql_line(now, inst["version"], "ERROR", f"/usr/sbin/mysqld: The table '{table}' "
                                                                                    "is full")], now)
            else:
                self._crash(cluster, rt, c, inst, now, errno, op)
                return StoreReply(0.0, 0.001, "Lost connection to MySQL server during query")
        service = 0.0005 + (0.001 + snap["delay"] if write else 0.03 * snap["delay"])
        latency = queue_latency(service, inst["util"])
        acc["lat"] += latency * rate
        if write:
            acc["writes"] += n
        ok = 1.0
        for s, _ in failures:
            ok *= 1.0 - min(1.0, s)
        return StoreReply(max(0.0, ok), latency, max(failures)[1] if failures else None)

    def _crash(self, cluster: Any, rt: PodRt, c: Ctr, inst: dict[str, Any], now: float, errno: int, op: str) -> None:
        """InnoDB treats a failed data-file read or write as fatal: it prints and aborts mysqld."""
        v = inst["version"]
        word = ERRNO_TEXT.get(errno, "Input/output error")
        lines = [mysql_line(now, v, "ERROR", f"InnoDB: Operating system error number {errno} in a file operation."),
                 mysql_line(now, v, "ERROR", f"InnoDB: Error number {errno} means '{word}'."),
                 mysql_line(now, v, "Note", "InnoDB: Some operating system error numbers are described at "
                                            f"http://dev.mysql.com/doc/refman/{v[:3]}/en/operating-system-error-codes.html"),
                 mysql_line(now, v, "ERROR", f"InnoDB: File ./ibdata1: '{op}' returned OS error {100 + errno}. Cannot "
                                             "continue operation"),
                 f"{utc(now).strftime('%Y-%m-%d %H:%M:%S')} 7f1c3c4f9700  InnoDB: Assertion failure in thread "
                 "139759043041024 in file fil0fil.cc line 5851",
                 f"{utc(now).strftime('%H:%M:%S')} UTC - mysqld got signal 6 ;",
                 "This could be because you hit a bug. It is also possible that this binary",
                 "or one of the libraries it was linked against is corrupt, improperly built,",
                 "or misconfigured. This error can also be caused by malfunctioning hardware."]
        cluster.kubelet.terminate(rt.namespace, rt.name, c.name, 134, "Error", lines)

    def tick(self, cluster: Any, rt: PodRt, c: Ctr, now: float, dt: float) -> None:
        inst = self.own_instance(c, now)
        if inst is None:
            return
        self.flush_queued(cluster, rt, c, inst, now, lambda lvl, msg: mysql_line(now, inst["version"], lvl, msg, 5))
        acc = inst["acc"]
        cap = cpu_cores(cluster, rt, c) / MYSQL_CPU_PER_OP
        snap = step_faults(cluster, rt, c, inst, inst["datadir"])
        io_busy = acc["writes"] * (0.001 + snap["delay"]) / max(dt, 1e-6) / 4.0
        inst["util"] = min(5.0, acc["ops"] / max(dt, 1e-6) / cap + io_busy)
        mean_lat = acc["lat"] / acc["rate"] if acc["rate"] > 0 else 0.0
        inst["conns"] = max(1.0, 2.0 * acc["calls"] + acc["rate"] * mean_lat)
        inst["max_used"] = max(inst.get("max_used", 1.0), min(inst["conns"], inst["max_connections"] + 1))
        inst["data"]["bytes"] = inst["data"].get("bytes", 0.0) + 300.0 * acc["writes"]
        self.account(cluster, rt, c, inst, acc["ops"], MYSQL_CPU_PER_OP, dt)
        inst["acc"] = fresh_acc()

    def memory(self, instance: Any, load_rps: float) -> float:
        if not isinstance(instance, dict):
            return float(self.memory_base)
        v = instance.get("version", "8.0")
        base = {"5.6": 420, "5.7": 190, "8.0": 360}.get(v[:3], 360) * 2**20
        if not instance.get("pfs", True):
            base -= (300 if v.startswith("5.6") else 90) * 2**20
        touched = min(instance.get("buffer_pool", 128 * 2**20), instance["data"].get("bytes", 1e8) * 0.1)
        return base + touched + instance.get("conns", 1.0) * 1.2 * 2**20 + load_rps * 4096

    # -- kubectl exec --------------------------------------------------------------------------------------
    def exec(self, ctx: StartContext, instance: Any, command: list[str]) -> tuple[int, str, str]:
        env, argv = exec_argv(command)
        if not argv:
            return 1, "", "error: you must specify at least one command for the container"
        prog = argv[0].rsplit("/", 1)[-1]
        if prog in ("mysql", "mysqladmin"):
            return self._client(ctx, instance, prog, argv[1:], {**ctx.env, **env})
        return shell_fallback(ctx, command)

    def _client(self, ctx: StartContext, instance: Any, prog: str, args: list[str],
                env: dict[str, str]) -> tuple[int, str, str]:
        opts: dict[str, Any] = {"user": "root", "password": env.get("MYSQL_PWD"), "host": "", "port": 0, "database": ""}
        execute: list[str] = []
        skip_names = False
        rest: list[str] = []
        i = 0
        while i < len(args):
            a = args[i]
            name, eq, after = a.partition("=")
            if a in MYSQL_SPACED_OPTIONS:
                field, value = MYSQL_SPACED_OPTIONS[a], args[i + 1] if i + 1 < len(args) else ""
                i += 1
            elif a.startswith("--") and eq and name in MYSQL_LONG_OPTIONS:
                field, value = MYSQL_LONG_OPTIONS[name], after
            elif a[:2] in MYSQL_GLUED_OPTIONS and len(a) > 2:
                field, value = MYSQL_GLUED_OPTIONS[a[:2]], a[2:]
            elif a in ("-p", "--password"):
                field, value = "password", ""  # would prompt; kubectl exec without -t gives it no terminal
            else:
                if a in ("-N", "--skip-column-names", "-sN", "-Ns", "-BN", "-NB"):
                    skip_names = True
                elif not a.startswith("-"):
                    rest.append(a)  # -s, --silent, -B, --batch, -t, --table, -v, --protocol=tcp change nothing here
                i += 1
                continue
            if field == "execute":
                execute.append(value)
            else:
                opts[field] = int(value) if field == "port" else value
            i += 1
        user, password, host, port, db = opts["user"], opts["password"], opts["host"], opts["port"], opts["database"]
        warn = MYSQL_CLI_PASSWORD_WARNING if password else ""
        local = host in ("", "localhost")
        inst: Any = instance
        client_host = "localhost"
        if not local:
            inst, _, err = peer_instance(ctx, host, port or 3306, "mysql")
            client_host = ctx.pod_ip if host not in ("127.0.0.1", "::1") else host
            if host in ("127.0.0.1", "::1"):
                inst, err = instance, None
            if err:
                if "no such host" in err:
                    return 1, "", warn + f"ERROR 2005 (HY000): Unknown MySQL server host '{host}' (-2)\n"
                return 1, "", warn + f"ERROR 2003 (HY000): Can't connect to MySQL server on '{host}' (111)\n"
        if not isinstance(inst, dict):
            return 1, "", warn + f"ERROR 2002 (HY000): Can't connect to local MySQL server through socket '{MYSQL_SOCKET}' (2)\n"
        if prog == "mysqladmin":
            key, e = mysql_login(inst, user, password, client_host, "")
            if e:
                return 1, "", warn + f"mysqladmin: connect to server at '{host or 'localhost'}' failed\nerror: '{e.msg}'\n"
            if "ping" in rest:
                return 0, "mysqld is alive\n", warn
            if "status" in rest:
                up = int(inst.get("now", 0.0) - inst.get("started", 0.0))
                return 0, (f"Uptime: {up}  Threads: {int(inst.get('conns', 1))}  Questions: 42  Slow queries: 0  Opens: 70  "
                           "Flush tables: 1  Open tables: 63  Queries per second avg: 0.001\n"), warn
            return 0, "", warn
        db = db or (rest[0] if rest else "")
        key, e = mysql_login(inst, user, password, client_host, db)
        if e:
            return 1, "", warn + e.cli(at_line=False) + "\n"
        assert key is not None
        sess = MysqlSession(inst, key, client_host, db)
        inst["now"] = ctx.now
        out: list[str] = []
        for text in execute:
            for stmt in split_sql(text):
                try:
                    res = sess.run(stmt)
                except MysqlError as err:
                    return 1, "".join(out), warn + err.cli() + "\n"
                if res is not None:
                    cols, rows = res
                    if not skip_names:
                        out.append("\t".join(cols) + "\n")
                    out += ["\t".join(r) + "\n" for r in rows]
        return 0, "".join(out), warn


def _mysql_size(text: str) -> float:
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]?)\s*$", str(text), re.I)
    if not m:
        return 128 * 2**20
    return float(m.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[m.group(2).upper()]
