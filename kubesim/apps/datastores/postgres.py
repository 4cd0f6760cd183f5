"""PostgreSQL (`postgres` images): docker-entrypoint.sh (POSTGRES_* variables, initdb, scripts under
/docker-entrypoint-initdb.d), roles/databases/schemas/tables with their privileges, pg_hba's verdicts
as libpq reports them, the postmaster's log (PANIC and crash recovery on WAL write errors, read
errors, a full disk, checkpoints), and `psql` / `pg_isready`."""

from __future__ import annotations

import hashlib
import math
import re
import shlex
from typing import TYPE_CHECKING, Any

from kubesim.apps.datastores import pglocks
from kubesim.apps.datastores.common import (
    ERRNO_TEXT,
    StoreModel,
    conf_file,
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

register_image("postgres", tags=("17.6", "17", "17.5", "17.4", "17.2", "16", "16.10", "16.4", "15", "15.8", "14", "13",
                                 "17-alpine", "17.6-alpine", "16-alpine", "15-alpine", "alpine", "latest"),
               size=158_000_000, executables=("postgres", "psql", "pg_isready", "pg_ctl", "initdb", "pg_dump",
                                              "docker-entrypoint.sh", "bash", "sh", "cat", "env", "ls"))


PG_VERSION_LINE = {
    "17": "PostgreSQL {v} (Debian {v}-1.pgdg13+1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 14.2.0-19) 14.2.0, 64-bit",
    "16": "PostgreSQL {v} (Debian {v}-1.pgdg120+1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14) 12.2.0, 64-bit",
    "15": "PostgreSQL {v} (Debian {v}-1.pgdg120+1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14) 12.2.0, 64-bit",
}


PG_DEFAULT_MINOR = {"17": "17.6", "16": "16.10", "15": "15.14", "14": "14.19", "13": "13.22"}


PG_CLIENT_POOL = 4.0
PG_SOCKET = "/var/run/postgresql/.s.PGSQL.{port}"


PG_MISSING_PASSWORD = [
    "Error: Database is uninitialized and superuser password is not specified.",
    "       You must specify POSTGRES_PASSWORD to a non-empty value for the",
    "       superuser. For example, \"-e POSTGRES_PASSWORD=password\" on \"docker run\".",
    "",
    "       You may also use \"POSTGRES_HOST_AUTH_METHOD=trust\" to allow all",
    "       connections without a password. This is *not* recommended.",
    "",
    "       See PostgreSQL documentation about \"trust\":",
    "       https://www.postgresql.org/docs/current/auth-trust.html",
]


PG_HBA_LINE = 128  # the docker image appends `host all all all scram-sha-256` after initdb's rules


PG_CPU_PER_OP = 0.00025


def pg_stamp(t: float) -> str:
    d = utc(t)
    return d.strftime("%Y-%m-%d %H:%M:%S.") + f"{d.microsecond // 1000:03d} UTC"


def pg_line(t: float, pid: int, level: str, msg: str) -> str:
    """postgres's default log_line_prefix '%m [%p] ': `2026-12-03 07:00:00.123 UTC [1] LOG:  msg`."""
    return f"{pg_stamp(t)} [{pid}] {level}:  {msg}"


def _ident(word: str) -> str:
    word = word.strip().rstrip(";").strip()
    if word.startswith('"') and word.endswith('"') and len(word) >= 2:
        return word[1:-1]
    return word.lower()


def _qualified(name: str) -> str:
    parts = [_ident(p) for p in re.findall(r'"[^"]*"|[^.]+', name.strip())]
    return ".".join(parts)


class PgError(Exception):
    def __init__(self, msg: str, prefix: str = "") -> None:
        super().__init__(msg)
        self.prefix = prefix  # what psql prints before the server's ERROR line

    """An SQL error as psql prints it after `ERROR:  `."""


def pg_new_cluster(superuser: str, password: str | None, version: str) -> dict[str, Any]:
    """What initdb leaves in PGDATA: the bootstrap superuser and the three initial databases."""
    data: dict[str, Any] = {
        "initialized": True, "major": version.split(".")[0], "next_oid": 16384, "bytes": 39.5e6, "auto_conf": {},
        "roles": {superuser: {"oid": 10, "password": password, "super": True, "login": True, "createdb": True,
                              "createrole": True, "member_of": []}},
        "dbs": {}, "system_id": 7400000000000000000 + int(hashlib.sha256(superuser.encode()).hexdigest()[:12], 16),
    }
    for name, oid in (("template1", 1), ("template0", 4), ("postgres", 5)):
        data["dbs"][name] = _pg_db(oid, superuser)
    return data


def _pg_db(oid: int, owner: str) -> dict[str, Any]:
    return {"oid": oid, "owner": owner, "connect_public": True, "connect": [],
            "schemas": {"public": {"owner": "pg_database_owner", "usage": ["PUBLIC"]}}, "tables": {}}


def _pg_oid(data: dict[str, Any], n: int = 1) -> int:
    oid = data["next_oid"]
    data["next_oid"] = oid + n
    return oid


class PgSession:
    """One psql / client session's view: role `user` connected to database `db` of `data`."""

    def __init__(self, data: dict[str, Any], db: str, user: str, inst: dict[str, Any] | None = None,
                 pid: int | None = None) -> None:
        self.data, self.db, self.user, self.inst = data, db, user, inst
        self.pid = pid  # its backend's pid when it is a long-lived session (pglocks.backends)
        self.settings: dict[str, str] = {}
        self.in_txn = False

    # -- helpers ---------------------------------------------------------------------------------
    @property
    def dbrec(self) -> dict[str, Any]:
        return self.data["dbs"][self.db]

    def is_super(self, role: str | None = None) -> bool:
        rec = self.data["roles"].get(role or self.user) or {}
        return bool(rec.get("super"))

    def _role(self, name: str) -> dict[str, Any]:
        rec = self.data["roles"].get(name)
        if rec is None:
            raise PgError(f'role "{name}" does not exist')
        return rec

    def _roles_of(self, role: str) -> set[str]:
        out, todo = {role, "PUBLIC"}, [role]
        while todo:
            for m in (self.data["roles"].get(todo.pop()) or {}).get("member_of", []):
                if m not in out:
                    out.add(m)
                    todo.append(m)
        return out

    def table(self, name: str) -> tuple[str, dict[str, Any]]:
        name = _qualified(name)
        tables = self.dbrec["tables"]
        if "." not in name:
            for schema in (self.user, "public"):
                if f"{schema}.{name}" in tables:
                    return f"{schema}.{name}", tables[f"{schema}.{name}"]
            raise PgError(f'relation "{name}" does not exist')
        if name not in tables:
            raise PgError(f'relation "{name}" does not exist')
        return name, tables[name]

    def check_table(self, name: str, write: bool) -> tuple[str, dict[str, Any]]:
        full, rec = self._check_table(name, write)
        if self.inst is not None:
            self._wait_lock(full, "RowExclusiveLock" if write else "AccessShareLock")
        return full, rec

    def _wait_lock(self, table: str, mode: str) -> None:
        """A statement whose lock conflicts with another session's waits until that transaction
        ends: cut by lock_timeout or statement_timeout when set; otherwise psql is left waiting
        until its operator interrupts it (Ctrl-C sends a cancel request)."""
        holder = pglocks.blocker(self.inst or {}, table, mode, self.pid)
        if holder is None:
            return
        if _ms(self.settings.get("lock_timeout", "0")) > 0:
            raise PgError("canceling statement due to lock timeout")
        if _ms(self.settings.get("statement_timeout", "0")) > 0:
            raise PgError("canceling statement due to statement timeout")
        raise PgError("canceling statement due to user request", prefix="Cancel request sent\n")

    def _check_table(self, name: str, write: bool) -> tuple[str, dict[str, Any]]:
        full, rec = self.table(name)
        if self.is_super():
            return full, rec
        mine = self._roles_of(self.user)
        schema = self.dbrec["schemas"].get(full.split(".")[0], {})
        if schema.get("owner") not in mine and not (set(schema.get("usage", [])) & mine) \
                and not (full.startswith("public.") and schema.get("owner") == "pg_database_owner"):
            raise PgError(f"permission denied for schema {full.split('.')[0]}")
        if rec.get("owner") not in mine and not (set(rec.get("grants", [])) & mine):
            raise PgError(f"permission denied for table {full.split('.')[-1]}")
        del write
        return full, rec

    # -- statements ------------------------------------------------------------------------------
    def run(self, sql: str) -> tuple[str, Any]:
        """('tag', 'CREATE ROLE') | ('rows', (cols, rows)) for one statement; raises PgError."""
        s = " ".join(sql.strip().rstrip(";").split())
        low = s.lower()
        first = low.split(" ", 1)[0] if low else ""
        if not s:
            return "tag", ""
        if re.match(r"^(create|alter) (user|role) ", low):
            return self._role_stmt(s, low)
        if re.match(r"^drop (user|role) ", low):
            return self._drop_role(s, low)
        if low.startswith("create database "):
            return self._create_db(s)
        if low.startswith("drop database "):
            return self._drop_db(s)
        if low.startswith("create schema "):
            return self._create_schema(s)
        if low.startswith("create table ") or low.startswith("create unlogged table "):
            return self._create_table(s)
        if low.startswith("insert into "):
            return self._insert(s)
        if low.startswith("delete from "):
            return self._delete(s)
        if low.startswith("grant ") or low.startswith("revoke "):
            return self._grant(s, low)
        if low.startswith("alter system "):
            m = re.match(r"alter system set (\w+)\s*(?:=|to)\s*(.+)$", s, re.I)
            if not self.is_super():
                raise PgError("permission denied to set parameter \"%s\"" % (m.group(1) if m else ""))
            if m:
                self.data["auto_conf"][m.group(1).lower()] = sql_string(m.group(2))
            return "tag", "ALTER SYSTEM"
        if first in ("select", "show", "table", "with"):
            return self._select(s, low)
        if first in ("begin", "start"):
            self.in_txn = True
            return "tag", "BEGIN"
        if first in ("commit", "end"):
            self.in_txn = False
            return "tag", "COMMIT"
        if first == "rollback":
            self.in_txn = False
            return "tag", "ROLLBACK"
        if first == "set":
            m = re.match(r"set (?:session |local )?(\w+)\s*(?:=|to)\s*(.+)$", s, re.I)
            if m:
                self.settings[m.group(1).lower()] = sql_string(m.group(2).strip())
            return "tag", "SET"
        if first == "lock":
            return self._lock(s)
        if first == "update":
            m = re.match(r"update\s+([\w.\"]+)", s, re.I)
            if m:
                self.check_table(m.group(1), True)
            return "tag", "UPDATE 0"
        if first in ("create", "alter", "drop", "comment", "truncate", "analyze", "vacuum", "reindex", "cluster",
                     "do", "copy", "lock", "listen", "notify", "discard", "reset", "prepare", "execute", "deallocate"):
            words = s.split()
            tag = " ".join(w.upper() for w in words[:2]) if first in ("create", "alter", "drop") else first.upper()
            if first in ("create", "alter", "drop") and len(words) > 2 and words[1].lower() in ("or", "unique", "temp",
                                                                                                   "temporary"):
                tag = f"{first.upper()} {words[3 if words[1].lower() == 'or' else 2].upper()}"
            return "tag", tag
        raise PgError(f'syntax error at or near "{s.split()[0]}"')

    def _lock(self, s: str) -> tuple[str, Any]:
        m = re.match(r"lock (?:table )?(?:only )?([\w.\"]+(?:\s*,\s*[\w.\"]+)*)(?: in ([a-z ]+?) mode)?( nowait)?$", s, re.I)
        if not m:
            raise PgError(f'syntax error at or near "{s.split()[-1]}"')
        mode_sql = " ".join((m.group(2) or "access exclusive").lower().split())
        if mode_sql not in pglocks.SQL_MODES:
            raise PgError(f'syntax error at or near "{(m.group(2) or "").split()[0]}"')
        if not self.in_txn:
            raise PgError("LOCK TABLE can only be used in transaction blocks")
        mode = pglocks.MODES[pglocks.SQL_MODES[mode_sql]]
        for name in m.group(1).split(","):
            full, _ = self._check_table(name.strip(), True)
            if m.group(3) and pglocks.blocker(self.inst or {}, full, mode, self.pid) is not None:
                raise PgError(f'could not obtain lock on relation "{full.split(".")[-1]}"')
            self._wait_lock(full, mode)
            rec = pglocks.backends(self.inst or {}).get(self.pid or -1)
            if rec is not None:
                rec["locks"].append((full, mode))
        return "tag", "LOCK TABLE"

    def _role_stmt(self, s: str, low: str) -> tuple[str, Any]:
        m = re.match(r"^(create|alter) (user|role) (\"[^\"]+\"|[\w$-]+)(.*)$", s, re.I)
        if not m:
            raise PgError(f'syntax error at or near "{s.split()[2] if len(s.split()) > 2 else s}"')
        verb, kind, name, rest = m.group(1).lower(), m.group(2).lower(), _ident(m.group(3)), m.group(4)
        roles = self.data["roles"]
        if verb == "alter" and name in ("current_user", "session_user"):
            name = self.user
        rest_low = rest.lower()
        mr = re.match(r"\s+rename to (\"[^\"]+\"|[\w$-]+)", rest, re.I)
        if verb == "create":
            if name in roles:
                raise PgError(f'role "{name}" already exists')
            if not self.is_super() and not (roles.get(self.user) or {}).get("createrole"):
                raise PgError("permission denied to create role")
            rec: dict[str, Any] = {"oid": _pg_oid(self.data), "password": None, "super": False, "login": kind == "user",
                   "createdb": False, "createrole": False, "member_of": []}
        else:
            rec = self._role(name)
            if name != self.user and not self.is_super() and not (roles.get(self.user) or {}).get("createrole"):
                raise PgError("permission denied to alter role")
            if name != self.user and rec.get("super") and not self.is_super():
                raise PgError("permission denied to alter role")
            if mr:
                new = _ident(mr.group(1))
                if new in roles:
                    raise PgError(f'role "{new}" already exists')
                roles[new] = roles.pop(name)
                roles[new]["password"] = None  # MD5/SCRAM secrets are salted with the name; PG clears it
                return "tag", "ALTER ROLE"
        pm = re.search(r"(?:encrypted\s+)?password\s+('(?:[^']|'')*'|null)", rest, re.I)
        if pm:
            rec["password"] = None if pm.group(1).lower() == "null" else sql_string(pm.group(1))
        for word, key, val in (("nologin", "login", False), ("login", "login", True), ("nosuperuser", "super", False),
                               ("superuser", "super", True), ("nocreatedb", "createdb", False),
                               ("createdb", "createdb", True), ("nocreaterole", "createrole", False),
                               ("createrole", "createrole", True)):
            if re.search(rf"\b{word}\b", rest_low.split("password")[0] + " " + rest_low.split("'")[-1]):
                if key == "super" and not self.is_super():
                    raise PgError("permission denied to alter role" if verb == "alter" else "permission denied to create role")
                rec[key] = val
                rest_low = re.sub(rf"\b{word}\b", " ", rest_low)
        mi = re.search(r"\bin (?:role|group) ([\w\", ]+)", rest, re.I)
        if mi:
            for r in mi.group(1).split(","):
                self._role(_ident(r))
                rec["member_of"].append(_ident(r))
        if verb == "create":
            roles[name] = rec
            return "tag", "CREATE ROLE"
        return "tag", "ALTER ROLE"

    def _drop_role(self, s: str, low: str) -> tuple[str, Any]:
        m = re.match(r"^drop (?:user|role) (if exists )?(.+)$", s, re.I)
        assert m
        for raw in m.group(2).split(","):
            name = _ident(raw)
            if name not in self.data["roles"]:
                if m.group(1):
                    continue
                raise PgError(f'role "{name}" does not exist')
            if name == self.user:
                raise PgError("current user cannot be dropped")
            owned = [db for db, rec in self.data["dbs"].items() if rec["owner"] == name]
            if owned:
                raise PgError(f'role "{name}" cannot be dropped because some objects depend on it')
            del self.data["roles"][name]
        return "tag", "DROP ROLE"

    def _create_db(self, s: str) -> tuple[str, Any]:
        m = re.match(r"create database (\"[^\"]+\"|[\w$-]+)(.*)$", s, re.I)
        if not m:
            raise PgError("syntax error at or near \"DATABASE\"")
        name = _ident(m.group(1))
        if name in self.data["dbs"]:
            raise PgError(f'database "{name}" already exists')
        if not self.is_super() and not (self.data["roles"].get(self.user) or {}).get("createdb"):
            raise PgError("permission denied to create database")
        owner = self.user
        mo = re.search(r"owner\s*=?\s*(\"[^\"]+\"|[\w$-]+)", m.group(2), re.I)
        if mo:
            owner = _ident(mo.group(1))
            self._role(owner)
        self.data["dbs"][name] = _pg_db(_pg_oid(self.data), owner)
        self.data["bytes"] += 7.5e6
        return "tag", "CREATE DATABASE"

    def _drop_db(self, s: str) -> tuple[str, Any]:
        m = re.match(r"drop database (if exists )?(\"[^\"]+\"|[\w$-]+)", s, re.I)
        assert m
        name = _ident(m.group(2))
        if name not in self.data["dbs"]:
            if m.group(1):
                return "tag", "DROP DATABASE"
            raise PgError(f'database "{name}" does not exist')
        if name == self.db:
            raise PgError("cannot drop the currently open database")
        del self.data["dbs"][name]
        return "tag", "DROP DATABASE"

    def _create_schema(self, s: str) -> tuple[str, Any]:
        m = re.match(r"create schema (if not exists )?(\"[^\"]+\"|[\w$-]+)?(?:\s+authorization\s+(\"[^\"]+\"|[\w$-]+))?",
                     s, re.I)
        if not m or not (m.group(2) or m.group(3)):
            raise PgError("syntax error at end of input")
        owner = _ident(m.group(3)) if m.group(3) else self.user
        name = _ident(m.group(2)) if m.group(2) else owner
        if owner != self.user:
            self._role(owner)
        schemas = self.dbrec["schemas"]
        if name in schemas:
            if m.group(1):
                return "tag", "CREATE SCHEMA"
            raise PgError(f'schema "{name}" already exists')
        schemas[name] = {"owner": owner, "usage": []}
        _pg_oid(self.data)
        return "tag", "CREATE SCHEMA"

    def _create_table(self, s: str) -> tuple[str, Any]:
        m = re.match(r"create (?:unlogged )?table (if not exists )?((?:\"[^\"]+\"|[\w$]+)(?:\.(?:\"[^\"]+\"|[\w$]+))?)\s*\((.*)\)",
                     s, re.I | re.S)
        if not m:
            raise PgError("syntax error at or near \"(\"")
        name = _qualified(m.group(2))
        if "." not in name:
            name = f"public.{name}"
        schema = name.split(".")[0]
        if schema not in self.dbrec["schemas"]:
            raise PgError(f'schema "{schema}" does not exist')
        if name in self.dbrec["tables"]:
            if m.group(1):
                return "tag", "CREATE TABLE"
            raise PgError(f'relation "{name.split(".")[-1]}" already exists')
        cols, serial = [], None
        for part in split_top(m.group(3)):
            words = part.split()
            if not words or words[0].upper() in ("PRIMARY", "FOREIGN", "CONSTRAINT", "UNIQUE", "CHECK", "EXCLUDE"):
                continue
            cols.append(_ident(words[0]))
            if len(words) > 1 and words[1].upper() in ("SERIAL", "BIGSERIAL", "SMALLSERIAL"):
                serial = _ident(words[0])
        self.dbrec["tables"][name] = {"oid": _pg_oid(self.data, 3), "owner": self.user, "cols": cols, "rows": [],
                                      "grants": [], "serial": serial, "seq": 0}
        return "tag", "CREATE TABLE"

    def _insert(self, s: str) -> tuple[str, Any]:
        m = re.match(r"insert into ((?:\"[^\"]+\"|[\w$]+)(?:\.(?:\"[^\"]+\"|[\w$]+))?)\s*(\(([^)]*)\))?\s*values\s*(.*)$",
                     s, re.I | re.S)
        if not m:
            m2 = re.match(r"insert into ([\w.\"$]+)", s, re.I)
            if m2:
                self.check_table(m2.group(1), True)
            return "tag", "INSERT 0 1"
        _, rec = self.check_table(m.group(1), True)
        cols = [_ident(c) for c in m.group(3).split(",")] if m.group(3) else list(rec["cols"])
        n = 0
        for tup in re.findall(r"\(((?:[^()']|'(?:[^']|'')*'|\([^()]*\))*)\)", m.group(4)):
            vals = [sql_string(v) for v in split_top(tup)]
            row = dict(zip(cols, vals, strict=False))
            if rec.get("serial") and rec["serial"] not in row:
                rec["seq"] = rec.get("seq", 0) + 1
                row[rec["serial"]] = str(rec["seq"])
            rec["rows"].append(row)
            n += 1
        self.data["bytes"] += 200 * n
        return "tag", f"INSERT 0 {n}"

    def _delete(self, s: str) -> tuple[str, Any]:
        m = re.match(r"delete from ([\w.\"$]+)(?:\s+where\s+(\w+)\s*=\s*('(?:[^']|'')*'|[\w.]+))?", s, re.I)
        if not m:
            raise PgError("syntax error at or near \"FROM\"")
        _, rec = self.check_table(m.group(1), True)
        before = len(rec["rows"])
        if m.group(2):
            col, val = _ident(m.group(2)), sql_string(m.group(3))
            rec["rows"] = [r for r in rec["rows"] if r.get(col) != val]
        else:
            rec["rows"] = []
        return "tag", f"DELETE {before - len(rec['rows'])}"

    def _grant(self, s: str, low: str) -> tuple[str, Any]:
        grant = low.startswith("grant")
        verb = "GRANT" if grant else "REVOKE"
        m = re.match(r"^(?:grant|revoke)\s+(?:grant option for\s+)?(.+?)\s+on\s+(.+?)\s+(?:to|from)\s+(.+?)(?:\s+with grant option|\s+cascade|\s+restrict)?$",
                     s, re.I)
        if not m:
            mm = re.match(r"^(?:grant|revoke)\s+(.+?)\s+(?:to|from)\s+(.+)$", s, re.I)
            if not mm:
                raise PgError(f'syntax error at or near "{s.split()[-1]}"')
            for r in mm.group(1).split(","):
                self._role(_ident(r))
            for who in mm.group(2).split(","):
                rec = self._role(_ident(who))
                for r in mm.group(1).split(","):
                    if grant and _ident(r) not in rec["member_of"]:
                        rec["member_of"].append(_ident(r))
                    elif not grant and _ident(r) in rec["member_of"]:
                        rec["member_of"].remove(_ident(r))
            return "tag", "GRANT ROLE" if grant else "REVOKE ROLE"
        privs, target, who_text = m.group(1).upper(), m.group(2), m.group(3)
        who = [("PUBLIC" if w.strip().upper() == "PUBLIC" else _ident(w)) for w in who_text.split(",")]
        for w in who:
            if w != "PUBLIC":
                self._role(w)

        def apply(lst: list[str]) -> None:
            for w in who:
                if grant and w not in lst:
                    lst.append(w)
                elif not grant and w in lst:
                    lst.remove(w)

        tlow = target.lower()
        if tlow.startswith("database "):
            for name in (_ident(x) for x in target[9:].split(",")):
                rec = self.data["dbs"].get(name)
                if rec is None:
                    raise PgError(f'database "{name}" does not exist')
                if "CONNECT" in privs or "ALL" in privs:
                    if "PUBLIC" in who:
                        rec["connect_public"] = grant
                    apply(rec["connect"])
            return "tag", verb
        if tlow.startswith("schema "):
            for name in (_ident(x) for x in target[7:].split(",")):
                rec = self.dbrec["schemas"].get(name)
                if rec is None:
                    raise PgError(f'schema "{name}" does not exist')
                apply(rec["usage"])
            return "tag", verb
        mall = re.match(r"all (tables|sequences|functions|routines) in schema (.+)$", target, re.I)
        if mall:
            for name in (_ident(x) for x in mall.group(2).split(",")):
                if name not in self.dbrec["schemas"]:
                    raise PgError(f'schema "{name}" does not exist')
                if mall.group(1).lower() == "tables":
                    for tname, rec in self.dbrec["tables"].items():
                        if tname.split(".")[0] == name:
                            apply(rec.setdefault("grants", []))
            return "tag", verb
        if tlow.startswith(("sequence ", "function ", "type ", "language ", "tablespace ", "foreign ")):
            return "tag", verb
        tables = target[6:] if tlow.startswith("table ") else target
        for name in tables.split(","):
            _, rec = self.table(name)
            apply(rec.setdefault("grants", []))
        return "tag", verb

    # -- queries ---------------------------------------------------------------------------------
    def _select(self, s: str, low: str) -> tuple[str, Any]:
        inst = self.inst or {}
        version = inst.get("version", "17.6")
        if low.startswith("show "):
            name = low[5:].strip()
            settings = {"max_connections": str(inst.get("max_connections", 100)),
                        "shared_buffers": f"{int(inst.get('shared_buffers', 128 * 2**20) // 2**20)}MB",
                        "port": str(inst.get("port", 5432)), "server_version": version,
                        "data_directory": inst.get("datadir", "/var/lib/postgresql/data"),
                        "listen_addresses": "*", "password_encryption": "scram-sha-256"}
            if name not in settings:
                raise PgError(f'unrecognized configuration parameter "{name}"')
            return "rows", ([name], [[settings[name]]])
        m = re.match(r"^select (.+?)(?: from (.+?))?(?: where (.+?))?(?: order by .+?)?(?: limit (\d+))?$", s, re.I)
        if not m:
            raise PgError(f'syntax error at or near "{s.split()[-1]}"')
        what, src, where, limit = m.group(1).strip(), (m.group(2) or "").strip(), m.group(3), m.group(4)
        if not src:
            return self._scalar(what, version)
        src_l = src.lower().split()[0]
        conns = inst.get("conns", 1.0)
        if src_l in ("pg_user", "pg_roles", "pg_authid", "pg_shadow", "pg_catalog.pg_user", "pg_catalog.pg_roles"):
            rows = []
            for name, rec in sorted(self.data["roles"].items(), key=lambda kv: kv[1]["oid"]):
                if src_l.endswith("pg_user") and not rec.get("login"):
                    continue
                rows.append({"usename": name, "rolname": name, "usesysid": str(rec["oid"]), "oid": str(rec["oid"]),
                             "usesuper": "t" if rec.get("super") else "f", "rolsuper": "t" if rec.get("super") else "f",
                             "rolcanlogin": "t" if rec.get("login") else "f",
                             "usecreatedb": "t" if rec.get("createdb") else "f",
                             "rolcreatedb": "t" if rec.get("createdb") else "f",
                             "passwd": "********", "rolpassword": "SCRAM-SHA-256$4096:..." if rec.get("password") else ""})
            default = ["usename", "usesysid", "usecreatedb", "usesuper", "passwd"] if "user" in src_l or "shadow" in src_l \
                else ["rolname", "rolsuper", "rolcreatedb", "rolcanlogin", "oid"]
            return "rows", _project(what, rows, default, where, limit)
        if src_l in ("pg_database", "pg_catalog.pg_database"):
            rows = [{"datname": n, "oid": str(r["oid"]), "datdba": str(self.data["roles"].get(r["owner"], {}).get("oid", 10)),
                     "datallowconn": "f" if n == "template0" else "t"} for n, r in
                    sorted(self.data["dbs"].items(), key=lambda kv: kv[1]["oid"])]
            return "rows", _project(what, rows, ["oid", "datname", "datdba", "datallowconn"], where, limit)
        if src_l in ("pg_stat_activity", "pg_catalog.pg_stat_activity", "pg_locks", "pg_catalog.pg_locks"):
            if src_l.endswith("pg_locks"):
                oids = {t: str(r["oid"]) for t, r in self.dbrec["tables"].items()}
                rows = pglocks.lock_rows(inst, oids, str(self.dbrec["oid"]))
                default = ["locktype", "database", "relation", "pid", "mode", "granted"]
            else:
                rows = self._activity(inst, s, conns)
                default = ["datname", "usename", "state", "client_addr"]
            rows = [{k: str(v) if v is not None else "" for k, v in r.items()} for r in rows]
            fm = re.match(r"^pg_(terminate|cancel)_backend\(\s*(\w+)\s*\)(?:\s+as\s+(\w+))?$", what.strip(), re.I)
            if fm:
                picked = _filter(rows, where)[: int(limit) if limit else None]
                out = [[self._signal(fm.group(1).lower(), int(r.get(_ident(fm.group(2)), "0") or 0))] for r in picked]
                return "rows", ([fm.group(3) or f"pg_{fm.group(1).lower()}_backend"], out)
            return "rows", _project(what, rows, default, where, limit)
        if src_l in ("pg_namespace", "information_schema.schemata"):
            rows = [{"nspname": n, "schema_name": n, "schema_owner": r["owner"]} for n, r in self.dbrec["schemas"].items()]
            return "rows", _project(what, rows, ["nspname"], where, limit)
        if src_l in ("pg_tables", "information_schema.tables"):
            rows = [{"schemaname": t.split(".")[0], "tablename": t.split(".")[1], "table_schema": t.split(".")[0],
                     "table_name": t.split(".")[1], "tableowner": r["owner"]} for t, r in self.dbrec["tables"].items()]
            return "rows", _project(what, rows, ["schemaname", "tablename", "tableowner"], where, limit)
        _, rec = self.check_table(src.split()[0], False)
        rows = [dict(r) for r in rec["rows"]]
        return "rows", _project(what, rows, list(rec["cols"]), where, limit)

    def _activity(self, inst: dict[str, Any], statement: str, conns: float) -> list[dict[str, Any]]:
        now = pg_stamp(inst.get("now", 0.0)).replace(" UTC", "+00")
        rows: list[dict[str, Any]] = [{"datname": self.db, "usename": self.user, "state": "active", "client_addr": "",
                                       "application_name": "psql", "pid": str(inst.get("next_pid", 64) + 1),
                                       "query": statement, "backend_type": "client backend", "query_start": now}]
        rows += pglocks.activity_rows(inst)
        n = max(1, int(round(conns))) - len(rows)
        rows += [{"datname": inst.get("db", self.db), "usename": inst.get("client_user", self.user), "state": "idle",
                  "client_addr": f"10.244.1.{10 + i % 200}", "application_name": "", "pid": str(200 + i),
                  "backend_type": "client backend"} for i in range(max(0, n))]
        return rows

    def _signal(self, how: str, pid: int) -> str:
        try:
            return pglocks.terminate(self.inst or {}, pid, self.is_super(), cancel=how == "cancel")
        except PermissionError as e:
            raise PgError(str(e)) from None

    def _scalar(self, what: str, version: str) -> tuple[str, Any]:
        w = what.lower().rstrip(";").strip()
        major = version.split(".")[0]
        fm = re.match(r"^pg_(terminate|cancel)_backend\(\s*(\d+)\s*\)$", w)
        if fm:
            return "rows", ([f"pg_{fm.group(1)}_backend"], [[self._signal(fm.group(1), int(fm.group(2)))]])
        if re.match(r"^pg_sleep\(\s*[\d.]+\s*\)$", w):
            return "rows", (["pg_sleep"], [[""]])
        bm = re.match(r"^pg_blocking_pids\(\s*(\d+)\s*\)$", w)
        if bm:
            mine = [r for r in pglocks.waiters(self.inst or {}) if r["pid"] == int(bm.group(1))]
            return "rows", (["pg_blocking_pids"], [["{" + ",".join(str(r["holder"]) for r in mine) + "}"]])
        if w == "version()":
            return "rows", (["version"], [[PG_VERSION_LINE.get(major, PG_VERSION_LINE["17"]).format(v=version)]])
        if w in ("current_user", "user", "session_user", "current_user()"):
            return "rows", ([w.rstrip("()")], [[self.user]])
        if w in ("current_database()",):
            return "rows", (["current_database"], [[self.db]])
        if w == "pg_reload_conf()":
            return "rows", (["pg_reload_conf"], [["t"]])
        if w == "pg_is_in_recovery()":
            return "rows", (["pg_is_in_recovery"], [["f"]])
        if w in ("now()", "current_timestamp"):
            return "rows", (["now"], [[pg_stamp((self.inst or {}).get("now", 0.0)).replace(" UTC", "+00")]])
        if w == "inet_server_addr()":
            return "rows", (["inet_server_addr"], [[(self.inst or {}).get("ip", "")]])
        m = re.match(r"^(-?\d+(?:\.\d+)?|'(?:[^']|'')*')(?:\s+as\s+(\w+))?$", what.strip(), re.I)
        if m:
            return "rows", ([m.group(2) or "?column?"], [[sql_string(m.group(1))]])
        fm = re.match(r"^(\w+)\s*\(", w)
        if fm:
            raise PgError(f"function {fm.group(1)}() does not exist")
        raise PgError(f'column "{what.strip()}" does not exist')


def _project(what: str, rows: list[dict[str, str]], default: list[str], where: str | None,
             limit: str | None) -> tuple[list[str], list[list[str]]]:
    rows = _filter(rows, where)
    if limit:
        rows = rows[: int(limit)]
    w = what.strip().lower()
    if re.match(r"^count\(\s*(\*|1|\w+)\s*\)$", w):
        return ["count"], [[str(len(rows))]]
    cols = default if w == "*" else [_ident(c.split(" as ")[-1]) if " as " in c.lower() else _ident(c)
                                      for c in split_top(what)]
    src_cols = default if w == "*" else [_ident(c.split(" as ")[0].split(" AS ")[0]) for c in split_top(what)]
    cols = ["?column?" if re.match(r"^-?\d+$", c) and c == s else c for c, s in zip(cols, src_cols, strict=True)]
    out_rows = [[c if re.match(r"^-?\d+$", c) else r.get(c, "") if r.get(c) is not None else "" for c in src_cols]
                for r in rows]
    return cols, out_rows


def _filter(rows: list[dict[str, str]], where: str | None) -> list[dict[str, str]]:
    """WHERE as conjunctions of `col = value`, `col <> value` and `col IS [NOT] NULL`."""
    for cond in re.split(r"\s+and\s+", (where or "").strip(), flags=re.I) if where else []:
        m = re.match(r"([\w:]+)\s*(=|<>|!=)\s*('(?:[^']|'')*'|[\w.]+)$", cond.strip(), re.I)
        n = re.match(r"([\w:]+)\s+is\s+(not\s+)?null$", cond.strip(), re.I)
        if m:
            col, op, val = _ident(m.group(1)), m.group(2), sql_string(m.group(3))
            rows = [r for r in rows if (r.get(col) == val) == (op == "=")]
        elif n:
            col = _ident(n.group(1))
            rows = [r for r in rows if bool(r.get(col)) == bool(n.group(2))]
    return rows


def _ms(value: str) -> float:
    """A *_timeout setting in milliseconds ('3000', '3s', '1min')."""
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|min|h)?\s*$", str(value), re.I)
    if not m:
        return 0.0
    return float(m.group(1)) * {"ms": 1, "s": 1000, "min": 60000, "h": 3600000}.get((m.group(2) or "ms").lower(), 1)


def pg_table(cols: list[str], rows: list[list[str]], tuples_only: bool = False, unaligned: bool = False) -> str:
    """psql's aligned (or -A unaligned, -t tuples-only) output of a result."""
    if unaligned:
        lines = [] if tuples_only else ["|".join(cols)]
        lines += ["|".join(r) for r in rows]
        if not tuples_only:
            lines.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
        return "\n".join(lines) + "\n"
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(cols)]
    numeric = [all(re.match(r"^-?\d+(\.\d+)?$", r[i]) for r in rows) and rows != [] for i in range(len(cols))]
    out = []
    if not tuples_only:
        head = []
        for c, w in zip(cols, widths, strict=True):
            left = (w - len(c)) // 2
            head.append(" " + " " * left + c + " " * (w - len(c) - left) + " ")
        out.append("|".join(head))
        out.append("+".join("-" * (w + 2) for w in widths))
    for r in rows:
        cells = []
        for i, (v, w) in enumerate(zip(r, widths, strict=True)):
            cell = v.rjust(w) if numeric[i] else v.ljust(w)
            cells.append(" " + cell + (" " if i < len(r) - 1 else ""))
        out.append("|".join(cells).rstrip() if not numeric[-1] else "|".join(cells))
    if not tuples_only:
        out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out) + "\n\n"


def _pg_size(text: str, unit: float = 8192.0) -> float:
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*(kB|MB|GB|TB|B)?\s*$", str(text), re.I)
    if not m:
        return 128 * 2**20
    mult = {"b": 1, "kb": 2**10, "mb": 2**20, "gb": 2**30, "tb": 2**40}.get((m.group(2) or "").lower(), unit)
    return float(m.group(1)) * mult


def heredoc_body(script: str, env: dict[str, str]) -> str:
    """The SQL a `psql <<-EOSQL ... EOSQL` init script feeds psql: bash expands $VAR and ${VAR}
    from the container's environment in the body unless the delimiter is quoted ('EOSQL')."""
    m = re.search(r"<<(-?)\s*(['\"]?)(\w+)\2\n(.*?)\n\s*\3\s*$", script, re.S | re.M)
    if m is None:
        return ""
    body = m.group(4)
    if m.group(2):
        return body
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda v: env.get(v.group(1) or v.group(2), ""), body)


@app_model
class PostgreSQL(StoreModel):
    """The `postgres` image: docker-entrypoint.sh (initdb, POSTGRES_* variables, init scripts), the
    postmaster's log, pg_hba's verdicts, a capacity-bound server whose disk can fail under it."""

    closed_error = ("server closed the connection unexpectedly\n\tThis probably means the server terminated "
                    "abnormally\n\tbefore or while processing the request.")

    name = "postgres"
    protocol = "postgres"
    images = ("postgres",)
    memory_base = 22 * 2**20
    entry = ("postgres", "docker-entrypoint.sh")

    # -- start ---------------------------------------------------------------------------------------
    def start(self, ctx: StartContext) -> Started | Exited:
        session = self._session(ctx)
        if session is not None:
            return session
        argv = self.server_command(ctx, ("postgres",))
        if not isinstance(argv, list):
            return argv
        version = version_from_tag(ctx, PG_DEFAULT_MINOR, "17.6")
        major = version.split(".")[0]
        env = ctx.env
        pgdata = env.get("PGDATA") or "/var/lib/postgresql/data"
        settings = self._settings(ctx, argv[1:])
        superuser = env.get("POSTGRES_USER") or "postgres"
        dbname = env.get("POSTGRES_DB") or superuser
        password = env.get("POSTGRES_PASSWORD") or ""
        if not password and env.get("POSTGRES_PASSWORD_FILE"):
            password = (ctx.files.get(env["POSTGRES_PASSWORD_FILE"]) or "").strip()
        host_auth = env.get("POSTGRES_HOST_AUTH_METHOD") or ("scram-sha-256" if int(major) >= 14 else "md5")
        volume = ctx.volume_for(pgdata)
        data: dict[str, Any] = volume if volume is not None else {}
        t = ctx.app_time()
        lines: list[str] = []
        clean_start = t
        rt = ctx.cluster.kubelet.runtime(ctx.pod)
        ctr = rt.containers.get(ctx.container["name"]) if rt else None
        probe = {"kind": "postgres"}
        if not data.get("initialized"):
            if not password and host_auth != "trust":
                return Exited(1, [], after=0.1, stderr=list(PG_MISSING_PASSWORD))
            if ctr is not None:
                f = step_faults(ctx.cluster, rt, ctr, probe, pgdata) if rt else {}
                if f.get("w_errno") or f.get("r_errno"):
                    word = ERRNO_TEXT.get(f.get("w_errno") or f.get("r_errno") or 5, "Input/output error")
                    return Exited(1, self._initdb_lines(pgdata)[:11] + [
                        f'initdb: error: could not create directory "{pgdata}/global": {word}',
                        f'initdb: removing contents of data directory "{pgdata}"'], after=0.4)
            out, code = self._initialize(ctx, data, superuser, password or None, dbname, version, pgdata, t)
            lines += out
            if code:
                return Exited(code, lines, after=2.0)
            clean_start = t + 2.5
        else:
            lines += ["", "PostgreSQL Database directory appears to contain a database; Skipping initialization", ""]
        if str(data.get("major")) != major:
            return Exited(1, lines + [
                pg_line(t, 1, "FATAL", "database files are incompatible with server"),
                pg_line(t, 1, "DETAIL", f"The data directory was initialized by PostgreSQL version {data.get('major')}, "
                                        f"which is not compatible with this version {version}.")], after=0.2)
        for k, v in (data.get("auto_conf") or {}).items():
            settings[k] = v  # postgresql.auto.conf (ALTER SYSTEM) is read last
        port = int(settings.get("port") or env.get("PGPORT") or 5432)
        t0 = clean_start
        lines.append(pg_line(t0, 1, "LOG", "starting " + PG_VERSION_LINE.get(major, PG_VERSION_LINE["17"]).format(v=version)))
        if ctr is not None and rt is not None:
            f = step_faults(ctx.cluster, rt, ctr, probe, pgdata)
            if f["r_errno"]:
                return Exited(134, lines + [pg_line(t0, 1, "PANIC", f'could not read file "global/pg_control": '
                                                                    f'{ERRNO_TEXT.get(f["r_errno"], "Input/output error")}')],
                              after=0.3)
            if f["w_errno"]:
                return Exited(1, lines + [pg_line(t0, 1, "FATAL", f'could not write lock file "postmaster.pid": '
                                                                  f'{ERRNO_TEXT.get(f["w_errno"], "Input/output error")}')],
                              after=0.3)
        lines += [pg_line(t0, 1, "LOG", f'listening on IPv4 address "0.0.0.0", port {port}'),
                  pg_line(t0, 1, "LOG", f'listening on IPv6 address "::", port {port}'),
                  pg_line(t0, 1, "LOG", f'listening on Unix socket "{PG_SOCKET.format(port=port)}"')]
        last = data.get("shutdown_at", t0 - 3)
        if data.pop("crashed", False):
            lines += [pg_line(t0, 29, "LOG", f"database system was interrupted; last known up at {pg_stamp(last)}"),
                      pg_line(t0, 29, "LOG", "database system was not properly shut down; automatic recovery in progress"),
                      pg_line(t0, 29, "LOG", "redo starts at 0/1A2B390"),
                      pg_line(t0, 29, "LOG", "invalid record length at 0/1A2C0F8: expected at least 24, got 0"),
                      pg_line(t0, 29, "LOG", "redo done at 0/1A2C0C0 system usage: CPU: user: 0.00 s, system: 0.00 s, "
                                             "elapsed: 0.00 s"),
                      pg_line(t0, 27, "LOG", "checkpoint starting: end-of-recovery immediate wait"),
                      pg_line(t0, 27, "LOG", "checkpoint complete: wrote 3 buffers (0.0%); 0 WAL file(s) added, 0 removed, "
                                             "0 recycled; write=0.002 s, sync=0.001 s, total=0.005 s; sync files=2, "
                                             "longest=0.001 s, average=0.001 s; distance=0 kB, estimate=0 kB; "
                                             "lsn=0/1A2C0F8, redo lsn=0/1A2C0F8")]
        else:
            lines.append(pg_line(t0, 29, "LOG", f"database system was shut down at {pg_stamp(last)}"))
        lines.append(pg_line(t0, 1, "LOG", "database system is ready to accept connections"))
        data["shutdown_at"] = t0
        inst = {"kind": "postgres", "version": version, "major": major, "datadir": pgdata, "port": port, "data": data,
                "super": superuser, "host_auth": host_auth, "ip": ctx.pod_ip, "started": ctx.now, "now": ctx.now,
                "max_connections": int(float(settings.get("max_connections", 100))),
                "shared_buffers": _pg_size(settings.get("shared_buffers", "128MB")), "state": "up", "next_pid": 64,
                "util": 0.0, "conns": 1.0, "capacity": volume_capacity(ctx, pgdata), "last_checkpoint": ctx.now,
                "dirty": 0.0, "acc": fresh_acc()}
        return Started(lines, {port}, inst, ready_after=max(1.0, t0 - t + 1.0))

    def _settings(self, ctx: StartContext, args: list[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        conf_path = None
        i = 0
        while i < len(args):
            a = args[i]
            nxt = args[i + 1] if i + 1 < len(args) else ""
            if a == "-c" and "=" in nxt:
                k, _, v = nxt.partition("=")
                out[k.strip().lower().replace("-", "_")] = sql_string(v)
                i += 1
            elif a.startswith("--") and "=" in a:
                k, _, v = a[2:].partition("=")
                out[k.lower().replace("-", "_")] = sql_string(v)
            elif a == "-p":
                out["port"] = nxt
                i += 1
            elif a == "-N":
                out["max_connections"] = nxt
                i += 1
            elif a == "-B":
                out["shared_buffers"] = nxt
                i += 1
            i += 1
        conf_path = out.get("config_file")
        if conf_path and conf_path in ctx.files:
            base = conf_file(ctx.files[conf_path])
            base.update(out)
            out = base
        return out

    @staticmethod
    def _initdb_lines(pgdata: str) -> list[str]:
        return ['The files belonging to this database system will be owned by user "postgres".',
                "This user must also own the server process.", "",
                'The database cluster will be initialized with locale "en_US.utf8".',
                'The default database encoding has accordingly been set to "UTF8".',
                'The default text search configuration will be set to "english".', "",
                "Data page checksums are disabled.", "",
                f"fixing permissions on existing directory {pgdata} ... ok",
                "creating subdirectories ... ok",
                "selecting dynamic shared memory implementation ... posix",
                'selecting default "max_connections" ... 100',
                'selecting default "shared_buffers" ... 128MB',
                "selecting default time zone ... Etc/UTC",
                "creating configuration files ... ok",
                "running bootstrap script ... ok",
                "performing post-bootstrap initialization ... ok",
                "syncing data to disk ... ok", "", "",
                "Success. You can now start the database server using:", "",
                f"    pg_ctl -D {pgdata} -l logfile start", "",
                'initdb: warning: enabling "trust" authentication for local connections',
                "initdb: hint: You can change this by editing pg_hba.conf or using the option -A, or --auth-local and "
                "--auth-host, the next time you run initdb."]

    def _initialize(self, ctx: StartContext, data: dict[str, Any], superuser: str, password: str | None, dbname: str,
                    version: str, pgdata: str, t: float) -> tuple[list[str], int]:
        """docker-entrypoint.sh's first run: initdb, a temporary server, POSTGRES_DB, init scripts."""
        data.clear()
        data.update(pg_new_cluster(superuser, password, version))
        major = version.split(".")[0]
        tmp = 48
        lines = self._initdb_lines(pgdata)
        lines += ["waiting for server to start...." + pg_line(t + 1, tmp, "LOG", "starting " + PG_VERSION_LINE.get(
                      major, PG_VERSION_LINE["17"]).format(v=version)),
                  pg_line(t + 1, tmp, "LOG", f'listening on Unix socket "{PG_SOCKET.format(port=5432)}"'),
                  pg_line(t + 1, 51, "LOG", f"database system was shut down at {pg_stamp(t + 0.9)}"),
                  pg_line(t + 1, tmp, "LOG", "database system is ready to accept connections"),
                  " done", "server started"]
        if dbname != "postgres":
            sess = PgSession(data, "postgres", superuser)
            sess.run(f'CREATE DATABASE "{dbname}"')
            lines.append("CREATE DATABASE")
        lines += ["", ""]
        for path in sorted(p for p in ctx.files if p.startswith("/docker-entrypoint-initdb.d/")):
            fname = path.rsplit("/", 1)[-1]
            if fname.endswith(".sh"):
                lines.append(f"/usr/local/bin/docker-entrypoint.sh: running {path}")
                body = heredoc_body(ctx.files[path], ctx.env)
                out, code = self._run_script(data, dbname, superuser, path, body)
            elif fname.endswith(".sql"):
                lines.append(f"/usr/local/bin/docker-entrypoint.sh: running {path}")
                out, code = self._run_script(data, dbname, superuser, path, ctx.files[path])
            elif fname.endswith((".sql.gz", ".sql.xz", ".sql.zst")):
                lines.append(f"/usr/local/bin/docker-entrypoint.sh: running {path}")
                out, code = [], 0
            else:
                lines.append(f"/usr/local/bin/docker-entrypoint.sh: ignoring {path}")
                continue
            lines += out
            if code:
                return lines, code
            lines.append("")
        lines += ["", "waiting for server to shut down..." + pg_line(t + 2, tmp, "LOG", "received fast shutdown request"),
                  "." + pg_line(t + 2, tmp, "LOG", "aborting any active transactions"),
                  pg_line(t + 2, tmp, "LOG", 'background worker "logical replication launcher" (PID 54) exited with '
                                             "exit code 1"),
                  pg_line(t + 2, 49, "LOG", "shutting down"),
                  pg_line(t + 2, 49, "LOG", "checkpoint starting: shutdown immediate"),
                  pg_line(t + 2.1, 49, "LOG", "checkpoint complete: wrote 926 buffers (5.7%); 0 WAL file(s) added, 0 "
                                              "removed, 0 recycled; write=0.023 s, sync=0.354 s, total=0.391 s; sync "
                                              "files=301, longest=0.003 s, average=0.002 s; distance=4264 kB, "
                                              "estimate=4264 kB; lsn=0/1A2B390, redo lsn=0/1A2B390"),
                  pg_line(t + 2.1, tmp, "LOG", "database system is shut down"), " done", "server stopped", "",
                  "PostgreSQL init process complete; ready for start up.", ""]
        data["shutdown_at"] = t + 2.1
        return lines, 0

    @staticmethod
    def _run_script(data: dict[str, Any], db: str, user: str, path: str, text: str) -> tuple[list[str], int]:
        """`psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB"` over a script."""
        out: list[str] = []
        sess = PgSession(data, db, user)
        pos = 0
        for stmt in split_sql(text):
            at = text.find(stmt.split("\n")[0].strip(), pos)
            line_no = text.count("\n", 0, at if at >= 0 else pos) + 1
            pos = at + 1 if at >= 0 else pos
            low = stmt.strip().lower()
            m = re.match(r"^\\c(?:onnect)?\s+(\S+)", stmt.strip())
            if m:
                sess.db = _ident(m.group(1))
                out.append(f'You are now connected to database "{sess.db}" as user "{user}".')
                continue
            try:
                kind, res = sess.run(stmt)
            except PgError as e:
                out.append(f"psql:{path}:{line_no}: ERROR:  {e}")
                return out, 3
            if kind == "tag":
                if res:
                    out.append(res)
            else:
                out += pg_table(*res).rstrip("\n").split("\n")
            del low
        return out, 0

    # -- the protocol -----------------------------------------------------------------------------------
    def authenticate(self, instance: Any, address: Address) -> str | None:
        inst = instance
        if not isinstance(inst, dict) or inst.get("kind") != "postgres":
            return "server closed the connection unexpectedly"
        if inst.get("state") == "recovering":
            return "FATAL:  the database system is in recovery mode"
        user = address.user or "postgres"
        db = address.database or user
        err, server = pg_login(inst, user, address.password, db, local=False)
        if server:
            queue_log(inst, f"auth/{user}/{db}/{err}", server)
        return err

    def serve_running(self, cluster: Any, rt: PodRt, c: Ctr, inst: dict[str, Any], command: str, write: bool,
                      rate: float, dt: float, address: Address, now: float) -> StoreReply:
        if inst.get("state") == "recovering":
            return StoreReply(0.0, 0.001, "FATAL:  the database system is in recovery mode")
        verb, tables = sql_shape(command)
        write = write or verb in ("INSERT", "UPDATE", "DELETE", "UPSERT", "MERGE", "COPY", "TRUNCATE")
        user = address.user or "postgres"
        db = address.database or user
        n, acc = self.count_requests(inst, rate, dt)
        data = inst["data"]
        if db not in data["dbs"]:
            return StoreReply(0.0, 0.001, f'FATAL:  database "{db}" does not exist')
        sess = PgSession(data, db, user, inst)
        relfile = ""
        for name in tables:
            try:
                full, rec = sess._check_table(name, write)
            except PgError as e:
                self._server_error(cluster, rt, c, inst, now, str(e), command)
                return StoreReply(0.0, 0.001, f"ERROR:  {e}")
            relfile = f"base/{data['dbs'][db]['oid']}/{rec['oid']}"
            holder = pglocks.blocker(inst, full, "RowExclusiveLock" if write else "AccessShareLock")
            if holder is not None:
                return self._lock_wait(cluster, rt, c, inst, now, full, holder, command, user, db, rate, acc)
        if not relfile:
            relfile = f"base/{data['dbs'][db]['oid']}/{16397 if not data['dbs'][db]['tables'] else min(r['oid'] for r in data['dbs'][db]['tables'].values())}"
        failures: list[tuple[float, str]] = []
        limit = max(1, inst["max_connections"] - 3)  # superuser_reserved_connections
        if inst["conns"] > limit:
            share = (inst["conns"] - limit) / inst["conns"]
            failures.append((share, "FATAL:  sorry, too many clients already"))
            if once(inst, "toomany", now, 10.0):
                write_log(cluster, rt, c, [pg_line(now, self._pid(inst), "FATAL", "sorry, too many clients already")], now)
        snap = step_faults(cluster, rt, c, inst, inst["datadir"])
        delay = snap["delay"]
        if write:
            acc["writes"] += n
            errno, share = disk_io(cluster, rt, c, inst, inst["datadir"], "write", n, "postgres")
            if not errno and inst["capacity"] and data["bytes"] >= inst["capacity"]:
                errno, share = 28, 1.0
            if errno and share > 0 and n * share >= 0.2:
                if errno == 28:
                    msg = f'could not extend file "{relfile}": No space left on device'
                    failures.append((share, f"ERROR:  {msg}"))
                    if once(inst, "enospc", now, 5.0):
                        pid = self._pid(inst)
                        write_log(cluster, rt, c, [pg_line(now, pid, "ERROR", msg), pg_line(now, pid, "HINT", "Check free disk space."),
                                              pg_line(now, pid, "STATEMENT", _statement(command))], now)
                else:
                    self._panic(cluster, rt, c, inst, now, errno, command)
                    return StoreReply(0.0, 0.001, "server closed the connection unexpectedly\n\tThis probably means the "
                                                  "server terminated abnormally\n\tbefore or while processing the request.")
        miss = self._miss(inst, now)
        if not write or verb == "SELECT":
            errno, share = disk_io(cluster, rt, c, inst, inst["datadir"], "read", n * miss, "postgres")
            fail = share * min(1.0, miss * 4)
            if errno and fail > 0:
                block = int(hashlib.sha256(f"{relfile}{int(now)}".encode()).hexdigest()[:4], 16) % 64
                msg = (f"invalid page in block {block} of relation {relfile}" if errno < 0 else
                       f'could not read block {block} in file "{relfile}": {ERRNO_TEXT.get(errno, "Input/output error")}')
                failures.append((fail, f"ERROR:  {msg}"))
                self._server_error(cluster, rt, c, inst, now, msg, command)
        service = 0.0004 + (0.0012 + delay if write else miss * (0.0002 + delay))
        latency = queue_latency(service, inst["util"])
        acc["lat"] += latency * rate
        ok = 1.0
        for share, _ in failures:
            ok *= 1.0 - min(1.0, share)
        error = max(failures)[1] if failures else None
        return StoreReply(max(0.0, ok), latency, error)

    def _lock_wait(self, cluster: Any, rt: PodRt, c: Ctr, inst: dict[str, Any], now: float, table: str,
                   holder: dict[str, Any], command: str, user: str, db: str, rate: float,
                   acc: dict[str, float]) -> StoreReply:
        """The query queues behind the holder's lock until that transaction ends: no error from the
        server; the client's deadline cuts it, and its driver's cancel request ends the wait (the
        server logs the cancelled statement). Queued backends are about rate × that deadline."""
        wait = max(1.0, float(holder.get("until", now + 86400.0)) - now)
        deadline = min(wait, 10.0)
        statement = _statement(command)
        waits = inst.setdefault("lock_waits_next", {})
        key = (table, user, db, statement, holder["pid"])
        # a client's pool bounds its connections (pgxpool: max(4, CPUs)); the rest queue in the client
        queued = min(rate * deadline, PG_CLIENT_POOL)
        waits[key] = waits.get(key, 0.0) + queued
        acc["lat"] += queued
        if once(inst, "lockcancel/" + table, now, 10.0):
            pid = self._pid(inst)
            write_log(cluster, rt, c, [pg_line(now, pid, "ERROR", "canceling statement due to user request"),
                                       pg_line(now, pid, "STATEMENT", statement)], now)
        return StoreReply(1.0, wait, None)

    @staticmethod
    def _pid(inst: dict[str, Any]) -> int:
        inst["next_pid"] = inst.get("next_pid", 64) + 1
        return inst["next_pid"]

    @staticmethod
    def _miss(inst: dict[str, Any], now: float) -> float:
        """Share of reads that reach the disk: a cold cache after start, or data beyond shared_buffers."""
        cold = 0.6 * math.exp(-(now - inst.get("started", now)) / 90.0)
        over = max(0.0, 1.0 - inst["shared_buffers"] / max(inst["data"].get("bytes", 1.0), 1.0))
        return min(1.0, 0.02 + cold + over)

    def _server_error(self, cluster: Any, rt: PodRt, c: Ctr, inst: dict[str, Any], now: float, msg: str,
                      command: str) -> None:
        if once(inst, "err/" + msg[:40], now, 5.0):
            pid = self._pid(inst)
            write_log(cluster, rt, c, [pg_line(now, pid, "ERROR", msg), pg_line(now, pid, "STATEMENT", _statement(command))], now)

    def _panic(self, cluster: Any, rt: PodRt, c: Ctr, inst: dict[str, Any], now: float, errno: int, command: str) -> None:
        """A failed WAL write PANICs the backend; the postmaster kills every session and recovers."""
        if inst.get("state") == "recovering":
            return
        pglocks.backends(inst).clear()  # the postmaster kills every session
        pid = self._pid(inst)
        seg = "000000010000000000000001"
        word = ERRNO_TEXT.get(errno, "Input/output error")
        write_log(cluster, rt, c, [
            pg_line(now, pid, "PANIC", f'could not write to log file "{seg}" at offset 1687552, length 8192: {word}'),
            pg_line(now, pid, "STATEMENT", _statement(command)),
            pg_line(now, 1, "LOG", f"server process (PID {pid}) was terminated by signal 6: Aborted"),
            pg_line(now, 1, "DETAIL", f"Failed process was running: {_statement(command)}"),
            pg_line(now, 1, "LOG", "terminating any other active server processes"),
            pg_line(now, 1, "LOG", "all server processes terminated; reinitializing"),
            pg_line(now, pid + 1, "LOG", f"database system was interrupted; last known up at {pg_stamp(inst['last_checkpoint'])}"),
            pg_line(now, pid + 1, "LOG", "database system was not properly shut down; automatic recovery in progress")], now)
        inst["state"] = "recovering"
        inst["panic_at"] = now
        inst["recovery_pid"] = pid + 1
        inst["next_pid"] = pid + 2
        inst["data"]["crashed"] = True

    def tick(self, cluster: Any, rt: PodRt, c: Ctr, now: float, dt: float) -> None:
        if isinstance(c.instance, dict) and c.instance.get("kind") == "pg-client":
            self._client_tick(cluster, rt, c, c.instance, now)
            return
        inst = self.own_instance(c, now)
        if inst is None:
            return
        inst["lock_waits"] = inst.pop("lock_waits_next", {})
        for pid, rec in inst.get("ended_backends", {}).items():
            if rec.get("logged"):
                continue
            rec["logged"] = True
            msg = ("canceling statement due to user request" if rec["ended"] == "cancel"
                   else "terminating connection due to administrator command")
            write_log(cluster, rt, c, [pg_line(now, pid, "ERROR" if rec["ended"] == "cancel" else "FATAL", msg)], now)
        self.flush_queued(cluster, rt, c, inst, now, lambda lvl, msg: pg_line(now, self._pid(inst), lvl, msg))
        acc = inst["acc"]
        ops = acc["ops"]
        cap = cpu_cores(cluster, rt, c) / PG_CPU_PER_OP
        snap = step_faults(cluster, rt, c, inst, inst["datadir"])
        io_busy = (acc["writes"] * (0.001 + snap["delay"]) + (ops - acc["writes"]) * self._miss(inst, now)
                   * (0.0002 + snap["delay"])) / max(dt, 1e-6) / 8.0
        inst["util"] = min(5.0, (ops / max(dt, 1e-6)) / cap + io_busy)
        mean_lat = acc["lat"] / acc["rate"] if acc["rate"] > 0 else 0.0
        inst["conns"] = max(1.0, 2.0 * acc["calls"] + acc["rate"] * mean_lat)
        inst["data"]["bytes"] = inst["data"].get("bytes", 0.0) + 200.0 * acc["writes"]
        inst["dirty"] = inst.get("dirty", 0.0) + acc["writes"]
        if inst.get("state") == "recovering" and now > inst.get("panic_at", now):
            self._recover(cluster, rt, c, inst, now)
            if c.instance is None:
                return
        elif now - inst.get("last_checkpoint", now) >= 300.0 and inst.get("dirty", 0.0) > 0:
            self._checkpoint(cluster, rt, c, inst, now)
            if c.instance is None:
                return
        self.account(cluster, rt, c, inst, ops, PG_CPU_PER_OP, dt)
        inst["acc"] = fresh_acc()

    def _recover(self, cluster: Any, rt: PodRt, c: Ctr, inst: dict[str, Any], now: float) -> None:
        pid = inst.get("recovery_pid", 130)
        errno, share = disk_io(cluster, rt, c, inst, inst["datadir"], "write", 20, "postgres")
        lines = [pg_line(now, pid, "LOG", "redo starts at 0/1A2B390")]
        if errno and share > 0:
            word = ERRNO_TEXT.get(errno, "Input/output error")
            lines += [pg_line(now, pid, "PANIC", f'could not write to file "pg_wal/xlogtemp.{pid}": {word}'),
                      pg_line(now, 1, "LOG", f"startup process (PID {pid}) was terminated by signal 6: Aborted"),
                      pg_line(now, 1, "LOG", "aborting startup due to startup process failure"),
                      pg_line(now, 1, "LOG", "database system is shut down")]
            cluster.kubelet.terminate(rt.namespace, rt.name, c.name, 1, "Error", lines)
            return
        lines += [pg_line(now, pid, "LOG", "invalid record length at 0/1A2C0F8: expected at least 24, got 0"),
                  pg_line(now, pid, "LOG", "redo done at 0/1A2C0C0 system usage: CPU: user: 0.00 s, system: 0.00 s, "
                                           "elapsed: 0.01 s"),
                  pg_line(now, 27, "LOG", "checkpoint starting: end-of-recovery immediate wait"),
                  pg_line(now, 27, "LOG", "checkpoint complete: wrote 12 buffers (0.1%); 0 WAL file(s) added, 0 removed, "
                                          "0 recycled; write=0.003 s, sync=0.002 s, total=0.008 s; sync files=9, "
                                          "longest=0.001 s, average=0.001 s; distance=3 kB, estimate=3 kB; "
                                          "lsn=0/1A2C0F8, redo lsn=0/1A2C0F8"),
                  pg_line(now, 1, "LOG", "database system is ready to accept connections")]
        write_log(cluster, rt, c, lines, now)
        inst["state"] = "up"
        inst["data"].pop("crashed", None)

    def _checkpoint(self, cluster: Any, rt: PodRt, c: Ctr, inst: dict[str, Any], now: float) -> None:
        """log_checkpoints is on by default since PostgreSQL 15: a timed checkpoint every 5 minutes."""
        pages = max(1, int(inst["dirty"] / 20) + 3)
        snap = step_faults(cluster, rt, c, inst, inst["datadir"])
        errno, share = disk_io(cluster, rt, c, inst, inst["datadir"], "write", pages, "postgres")
        start = [pg_line(now, 27, "LOG", "checkpoint starting: time")]
        if errno and share > 0 and errno != 28:
            relfile = f"base/{next(iter(inst['data']['dbs'].values()))['oid']}/1259"
            word = ERRNO_TEXT.get(errno, "Input/output error")
            write_log(cluster, rt, c, start + [pg_line(now, 27, "PANIC", f'could not fsync file "{relfile}": {word}'),
                                          pg_line(now, 1, "LOG", "checkpointer process (PID 27) was terminated by signal 6: Aborted"),
                                          pg_line(now, 1, "LOG", "terminating any other active server processes"),
                                          pg_line(now, 1, "LOG", "all server processes terminated; reinitializing")], now)
            inst["state"] = "recovering"
            inst["panic_at"] = now
            inst["recovery_pid"] = self._pid(inst)
            inst["data"]["crashed"] = True
            return
        write_s = min(270.0, 0.01 * pages + pages * snap["delay"] + 2.5)
        sync_s = 0.002 * pages + snap["delay"] * max(1, pages // 8)
        write_log(cluster, rt, c, start + [pg_line(now, 27, "LOG", (
            f"checkpoint complete: wrote {pages} buffers ({pages / 16384 * 100:.1f}%); 0 WAL file(s) added, 0 removed, "
            f"0 recycled; write={write_s:.3f} s, sync={sync_s:.3f} s, total={write_s + sync_s + 0.004:.3f} s; "
            f"sync files={max(1, pages // 6)}, longest={sync_s / max(1, pages // 6) * 2:.3f} s, "
            f"average={sync_s / max(1, pages // 6):.3f} s; distance={pages * 8} kB, estimate={pages * 8} kB; "
            f"lsn=0/{0x1A2C0F8 + int(inst['dirty']) * 160:X}, redo lsn=0/{0x1A2C0F8 + int(inst['dirty']) * 150:X}"))], now)
        inst["last_checkpoint"] = now
        inst["dirty"] = 0.0

    def memory(self, instance: Any, load_rps: float) -> float:
        if not isinstance(instance, dict):
            return float(self.memory_base)
        if instance.get("kind") == "pg-client":
            return 6.0 * 2**20  # a psql process
        touched = min(instance.get("shared_buffers", 128 * 2**20), instance["data"].get("bytes", 40e6) * 0.6)
        return float(self.memory_base) + touched + instance.get("conns", 1.0) * 1.8 * 2**20 + load_rps * 4096

    def on_stop(self, ctx: StartContext, instance: Any) -> None:
        if isinstance(instance, dict) and instance.get("kind") == "postgres":
            instance["data"]["shutdown_at"] = instance.get("now", 0.0)
            instance["stopped"] = True  # its sessions' connections are gone with it
            pglocks.backends(instance).clear()

    # -- a long-lived client session (a psql in another container holding a transaction open) ----------
    def _session(self, ctx: StartContext) -> Started | Exited | None:
        """`psql ... -c "BEGIN; LOCK TABLE t ...; SELECT pg_sleep(N);"` run as a container's
        command (possibly after an `until psql ...; do sleep; done` wait): one backend on the
        server it dials, holding what its transaction took while pg_sleep runs. None when the
        command is no such session."""
        argv = ctx.argv
        if len(argv) >= 3 and argv[0].rsplit("/", 1)[-1] in ("sh", "bash") and argv[1] in ("-c", "-ec", "-xc"):
            script = argv[2]
        else:
            script = shlex.join(argv)
        if "psql" not in script or "pg_sleep" not in script.lower():
            return None
        lex = shlex.shlex(script.replace("\\\n", " "), posix=True, punctuation_chars=";&|")
        lex.whitespace_split = True
        words: list[str] = []
        segments: list[list[str]] = []
        for tok in lex:
            if tok and set(tok) <= set(";&|"):
                segments.append(words)
                words = []
            else:
                words.append(tok)
        segments.append(words)
        for seg in reversed(segments):
            names = [w.rsplit("/", 1)[-1] for w in seg]
            if "psql" not in names:
                continue
            at = names.index("psql")
            env = dict(w.split("=", 1) for w in seg[:at] if re.match(r"^\w+=", w))
            args = seg[at + 1:]
            opts: dict[str, str] = {"h": "", "U": "", "d": "", "p": "5432", "c": ""}
            for i, a in enumerate(args[:-1]):
                if a in ("-h", "-U", "-d", "-p", "-c"):
                    opts[a[1]] = args[i + 1]
            if "pg_sleep" in opts["c"].lower():
                return self._open_session(ctx, opts, {**ctx.env, **env})
        return None

    def _open_session(self, ctx: StartContext, opts: dict[str, str], env: dict[str, str]) -> Started | Exited:
        host, port = opts["h"] or env.get("PGHOST", ""), int(opts["p"] or 5432)
        user = opts["U"] or env.get("PGUSER") or "postgres"
        db = opts["d"] or env.get("PGDATABASE") or user
        inst, ip, err = peer_instance(ctx, host, port, "postgres")
        where = f'connection to server at "{host}" ({ip or host}), port {port} failed: '
        if err or not isinstance(inst, dict):
            return Exited(2, [], after=0.1, stderr=[f"psql: error: {where}Connection refused",
                                                    "	Is the server running on that host and accepting TCP/IP connections?"])
        err, _ = pg_login(inst, user, env.get("PGPASSWORD") or "", db, local=False)
        if err:
            return Exited(2, [], after=0.1, stderr=[f"psql: error: {where}{err}"])
        pid = self._pid(inst)
        sql = opts["c"]
        now = ctx.now
        rec: dict[str, Any] = {"pid": pid, "datname": db, "usename": user, "application_name": "psql",
                               "client_addr": ctx.pod_ip, "state": "active", "wait_event_type": "Timeout",
                               "wait_event": "PgSleep", "query": sql, "backend_type": "client backend",
                               "backend_start": pg_stamp(now).replace(" UTC", "+00"), "locks": [],
                               "super": bool((inst["data"]["roles"].get(user) or {}).get("super"))}
        pglocks.backends(inst)[pid] = rec
        sess = PgSession(inst["data"], db, user, inst, pid=pid)
        stmts = split_sql(sql)
        sess.in_txn = len(stmts) > 1  # one -c string is one implicit transaction
        for stmt in stmts:
            sm = re.match(r"^\s*select\s+pg_sleep\(\s*([\d.]+)\s*\)\s*;?\s*$", stmt, re.I)
            if sm:
                rec["until"] = now + float(sm.group(1))
                rec["xact_start"] = rec["query_start"] = rec["backend_start"]
                return Started([], set(), {"kind": "pg-client", "server": inst, "pid": pid, "until": rec["until"]})
            try:
                sess.run(stmt)
            except PgError as e:
                pglocks.backends(inst).pop(pid, None)
                return Exited(1, [], after=0.1, stderr=[f"ERROR:  {e}"])
        pglocks.backends(inst).pop(pid, None)
        return Exited(0, [], after=0.1)

    def _client_tick(self, cluster: Any, rt: PodRt, c: Ctr, inst: dict[str, Any], now: float) -> None:
        server = inst["server"]
        rec = pglocks.backends(server).get(inst["pid"])
        if rec is not None and not server.get("stopped") and now < inst["until"]:
            return
        pglocks.backends(server).pop(inst["pid"], None)
        if rec is not None and now >= inst["until"]:
            cluster.kubelet.terminate(rt.namespace, rt.name, c.name, 0, "Completed", [" pg_sleep ", "----------",
                                                                                     " ", "(1 row)", ""])
            return
        ended = (server.get("ended_backends") or {}).get(inst["pid"]) or {}
        first = ("ERROR:  canceling statement due to user request" if ended.get("ended") == "cancel" else
                 "FATAL:  terminating connection due to administrator command")
        code = 1 if ended.get("ended") == "cancel" else 2
        lost = [] if code == 1 else ["server closed the connection unexpectedly",
                                     "\tThis probably means the server terminated abnormally",
                                     "\tbefore or while processing the request.", "connection to server was lost"]
        cluster.kubelet.terminate(rt.namespace, rt.name, c.name, code, "Error", [], stderr=[first, *lost])

    # -- kubectl exec ------------------------------------------------------------------------------------
    def exec(self, ctx: StartContext, instance: Any, command: list[str]) -> tuple[int, str, str]:
        env, argv = exec_argv(command)
        if not argv:
            return 1, "", "error: you must specify at least one command for the container"
        prog = argv[0].rsplit("/", 1)[-1]
        if prog == "psql":
            return self._psql(ctx, instance, argv[1:], {**ctx.env, **env})
        if prog == "pg_isready":
            return self._isready(ctx, instance, argv[1:])
        if prog in ("postgres", "pg_ctl", "initdb"):
            return 1, "", ('"root" execution of the PostgreSQL server is not permitted.\nThe server must be started under '
                           "an unprivileged user ID to prevent\npossible system security compromise.  See the documentation "
                           "for\nmore information on how to properly start the server.\n")
        return shell_fallback(ctx, command)

    def _isready(self, ctx: StartContext, instance: Any, args: list[str]) -> tuple[int, str, str]:
        host, port = "", int((instance or {}).get("port", 5432))
        for i, a in enumerate(args):
            if a in ("-h", "--host") and i + 1 < len(args):
                host = args[i + 1]
            elif a in ("-p", "--port") and i + 1 < len(args):
                port = int(args[i + 1])
        where = host or "/var/run/postgresql"
        target, _, err = peer_instance(ctx, host, port, "postgres")
        inst = instance if not host or host in ("localhost", "127.0.0.1", "::1") else target
        if err or not isinstance(inst, dict):
            return 2, f"{where}:{port} - no response\n", ""
        if inst.get("state") == "recovering":
            return 1, f"{where}:{port} - rejecting connections\n", ""
        return 0, f"{where}:{port} - accepting connections\n", ""

    def _psql(self, ctx: StartContext, instance: Any, args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
        opts: dict[str, Any] = {"user": env.get("PGUSER"), "db": env.get("PGDATABASE"), "host": env.get("PGHOST", ""),
                                "port": env.get("PGPORT"), "password": env.get("PGPASSWORD"), "cmds": [], "t": False,
                                "A": False}
        positional: list[str] = []
        i = 0
        while i < len(args):
            a = args[i]
            nxt = args[i + 1] if i + 1 < len(args) else ""
            long = a.split("=", 1)
            key = {"-U": "user", "--username": "user", "-d": "db", "--dbname": "db", "-h": "host", "--host": "host",
                   "-p": "port", "--port": "port", "-c": "cmd", "--command": "cmd", "-f": "file", "--file": "file"}
            if a in key:
                opts.setdefault("_order", []).append((key[a], nxt))
                i += 2
                continue
            if long[0] in key and len(long) == 2:
                opts.setdefault("_order", []).append((key[long[0]], long[1]))
            elif len(a) > 2 and a[:2] in ("-U", "-d", "-h", "-p", "-c") and not a.startswith("--"):
                opts.setdefault("_order", []).append((key[a[:2]], a[2:]))
            elif a in ("-t", "--tuples-only"):
                opts["t"] = True
            elif a in ("-A", "--no-align"):
                opts["A"] = True
            elif a in ("-tA", "-At"):
                opts["t"] = opts["A"] = True
            elif a in ("-l", "--list"):
                opts["cmds"].append("\\l")
            elif a in ("-v", "--set", "-P", "--pset", "-F", "-R"):
                i += 1
            elif not a.startswith("-"):
                positional.append(a)
            i += 1
        for k, v in opts.pop("_order", []):
            if k == "cmd":
                opts["cmds"].append(v)
            elif k == "file":
                if v not in ctx.files:
                    return 1, "", f"psql: error: {v}: No such file or directory\n"
                opts["cmds"].append(ctx.files[v])
            else:
                opts[k] = v
        if positional:
            conninfo = positional[0]
            if "://" in conninfo or "=" in conninfo:
                from kubesim.apps.graph import parse_address
                parsed = parse_address(conninfo, "postgres")
                if parsed is not None:
                    opts["host"], opts["port"] = parsed.host, str(parsed.port)
                    opts["user"] = parsed.user or opts["user"]
                    opts["password"] = parsed.password or opts["password"]
                    opts["db"] = parsed.database or opts["db"]
            else:
                opts["db"] = opts["db"] or conninfo
            if len(positional) > 1:
                opts["user"] = opts["user"] or positional[1]
        user = opts["user"] or "root"  # kubectl exec runs as root: libpq's default user is the OS user
        db = opts["db"] or user
        host = opts["host"] or ""
        port = int(opts["port"] or (instance or {}).get("port", 5432))
        local = host in ("", "localhost", "127.0.0.1", "::1")
        if local:
            inst = instance
            where = (f'connection to server on socket "{PG_SOCKET.format(port=port)}" failed: ' if not host else
                     f'connection to server at "{host}" ({"::1" if host == "localhost" else host}), port {port} failed: ')
        else:
            inst, ip, err = peer_instance(ctx, host, port, "postgres")
            if err:
                if "no such host" in err:
                    return 2, "", f'psql: error: could not translate host name "{host}" to address: Name or service not known\n'
                if err == "protocol":
                    return 2, "", (f'psql: error: connection to server at "{host}" ({ip}), port {port} failed: '
                                   "received invalid response to SSL negotiation: H\n")
                word = "Connection timed out" if "timeout" in err else "Connection refused"
                return 2, "", (f'psql: error: connection to server at "{host}" ({ip or host}), port {port} failed: {word}\n'
                               "\tIs the server running on that host and accepting TCP/IP connections?\n")
            where = f'connection to server at "{host}" ({ip}), port {port} failed: '
        if not isinstance(inst, dict):
            return 2, "", f"psql: error: {where}No such file or directory\n"
        if inst.get("state") == "recovering":
            return 2, "", f"psql: error: {where}FATAL:  the database system is in recovery mode\n"
        err, server = pg_login(inst, user, opts["password"] or "", db, local=local)
        if err:
            if server and inst is instance:
                ctx.cluster.logs.write(ctx.pod, ctx.container["name"],
                                       [pg_line(ctx.now, self._pid(inst), lvl, msg) for lvl, msg in server], ctx.now)
            return 2, "", f"psql: error: {where}{err}\n"
        sess = PgSession(inst["data"], db, user, inst)
        inst["now"] = ctx.now
        stdout, stderr, code = [], [], 0
        for cmd in opts["cmds"]:
            if cmd.strip().startswith("\\"):
                out, e = pg_meta(sess, cmd.strip(), inst, host, port)
                if e:
                    stderr.append(e)
                    code = 1
                stdout.append(out)
                continue
            for stmt in split_sql(cmd):
                try:
                    kind, res = sess.run(stmt)
                except PgError as e:
                    stderr.append(f"{e.prefix}ERROR:  {e}\n")
                    code = 1
                    if inst is instance:
                        pid = self._pid(inst)
                        ctx.cluster.logs.write(ctx.pod, ctx.container["name"],
                                               [pg_line(ctx.now, pid, "ERROR", str(e)),
                                                pg_line(ctx.now, pid, "STATEMENT", stmt.strip())], ctx.now)
                    break
                if kind == "tag":
                    if res and not opts["t"]:
                        stdout.append(res + "\n")
                else:
                    stdout.append(pg_table(res[0], res[1], tuples_only=opts["t"], unaligned=opts["A"]))
        return code, "".join(stdout), "".join(stderr)


def _statement(command: str) -> str:
    verb, tables = sql_shape(command)
    if len(command.split()) > 2 or not tables:
        return command
    t = tables[0]
    return {"SELECT": f"SELECT * FROM {t} WHERE id = $1", "INSERT": f"INSERT INTO {t} VALUES ($1, $2)",
            "UPDATE": f"UPDATE {t} SET updated = now() WHERE id = $1", "DELETE": f"DELETE FROM {t} WHERE id = $1"
            }.get(verb, command)


def pg_login(inst: dict[str, Any], user: str, password: str | None, db: str,
             local: bool) -> tuple[str | None, list[tuple[str, str]]]:
    """(the client's error or None, the server's log lines) for a connection attempt; pg_hba.conf of the
    image: trust on the socket and loopback, POSTGRES_HOST_AUTH_METHOD (scram-sha-256) for the rest."""
    data = inst["data"]
    role = data["roles"].get(user)
    method = "trust" if local else inst.get("host_auth", "scram-sha-256")
    hba = f'Connection matched file "{inst["datadir"]}/pg_hba.conf" line {PG_HBA_LINE}: "host all all all {method}"'
    if method == "reject":
        msg = f'pg_hba.conf rejects connection for host "10.244.1.7", user "{user}", database "{db}", no encryption'
        return f"FATAL:  {msg}", [("FATAL", msg)]
    if method != "trust":
        if not password:
            return "fe_sendauth: no password supplied", []
        failed = f'password authentication failed for user "{user}"'
        if role is None:
            return f"FATAL:  {failed}", [("FATAL", failed), ("DETAIL", f'Role "{user}" does not exist.\n\t{hba}')]
        if role.get("password") is None:
            return f"FATAL:  {failed}", [("FATAL", failed), ("DETAIL", f'User "{user}" has no password assigned.\n\t{hba}')]
        if role["password"] != password:
            return f"FATAL:  {failed}", [("FATAL", failed), ("DETAIL", hba)]
    elif role is None:
        return f'FATAL:  role "{user}" does not exist', [("FATAL", f'role "{user}" does not exist')]
    if not role.get("login"):
        return f'FATAL:  role "{user}" is not permitted to log in', [("FATAL", f'role "{user}" is not permitted to log in')]
    rec = data["dbs"].get(db)
    if rec is None:
        return f'FATAL:  database "{db}" does not exist', [("FATAL", f'database "{db}" does not exist')]
    if db == "template0":
        return ('FATAL:  database "template0" is not currently accepting connections',
                [("FATAL", 'database "template0" is not currently accepting connections')])
    if not role.get("super") and not rec.get("connect_public", True) and rec.get("owner") != user \
            and user not in rec.get("connect", []):
        return (f'FATAL:  permission denied for database "{db}"\nDETAIL:  User does not have CONNECT privilege.',
                [("FATAL", f'permission denied for database "{db}"'), ("DETAIL", "User does not have CONNECT privilege.")])
    return None, []


def pg_meta(sess: PgSession, cmd: str, inst: dict[str, Any], host: str, port: int) -> tuple[str, str]:
    """psql backslash commands an SRE uses: \\du \\l \\dn \\dt \\conninfo."""
    word, _, arg = cmd.partition(" ")
    arg = arg.strip()
    data = sess.data
    if word in ("\\du", "\\dg", "\\du+"):
        rows = []
        for name, rec in sorted(data["roles"].items()):
            attrs = []
            if rec.get("super"):
                attrs = ["Superuser", "Create role", "Create DB", "Replication", "Bypass RLS"]
            else:
                if rec.get("createrole"):
                    attrs.append("Create role")
                if rec.get("createdb"):
                    attrs.append("Create DB")
                if not rec.get("login"):
                    attrs.append("Cannot login")
            rows.append([name, ", ".join(attrs)])
        return _titled("List of roles", ["Role name", "Attributes"], rows), ""
    if word in ("\\l", "\\list", "\\l+"):
        rows = []
        for name, rec in sorted(data["dbs"].items()):
            acl = f"=c/{rec['owner']}" if name.startswith("template") else ""
            if not rec.get("connect_public", True) or rec.get("connect"):
                acl = f"{rec['owner']}=CTc/{rec['owner']}" + "".join(f" {r}=c/{rec['owner']}" for r in rec.get("connect", []))
            rows.append([name, rec["owner"], "UTF8", "libc", "en_US.utf8", "en_US.utf8", "", "", acl])
        return _titled("List of databases", ["Name", "Owner", "Encoding", "Locale Provider", "Collate", "Ctype", "Locale",
                                             "ICU Rules", "Access privileges"], rows), ""
    if word in ("\\dn", "\\dn+"):
        rows = [[n, r["owner"]] for n, r in sorted(sess.dbrec["schemas"].items())]
        return _titled("List of schemas", ["Name", "Owner"], rows), ""
    if word in ("\\dt", "\\dt+", "\\d"):
        pat = arg.replace("*", ".*") if arg else "public\\..*"
        if arg and "." not in arg:
            pat = "public\\." + pat
        rows = [[t.split(".")[0], t.split(".")[1], "table", r["owner"]] for t, r in sorted(sess.dbrec["tables"].items())
                if re.fullmatch(pat, t)]
        if not rows:
            return "", f"Did not find any relation named \"{arg}\".\n" if arg else "Did not find any relations.\n"
        return _titled("List of relations", ["Schema", "Name", "Type", "Owner"], rows), ""
    if word == "\\conninfo":
        via = 'via socket in "/var/run/postgresql"' if not host else f'on host "{host}"'
        return f'You are connected to database "{sess.db}" as user "{sess.user}" {via} at port "{port}".\n', ""
    if word in ("\\q", "\\quit"):
        return "", ""
    return "", f"invalid command {word}\nTry \\? for help.\n"


def _titled(title: str, cols: list[str], rows: list[list[str]]) -> str:
    body = pg_table(cols, rows)
    lines = body.split("\n")
    width = len(lines[0])
    body = "\n".join(lines[:-3] + [""]) if lines[-3].startswith("(") else body
    return title.center(width).rstrip() + "\n" + body + "\n"
