"""PostgreSQL's heavyweight table locks and the backends that hold or wait for them: what
`LOCK TABLE` takes, which later statements queue behind it (the documented conflict table), and
what pg_stat_activity / pg_locks show of it, and pg_terminate_backend / pg_cancel_backend, which
end a session and so release everything its transaction held."""

from __future__ import annotations

from typing import Any

# pg_locks mode names, in the order of the documentation's "Conflicting Lock Modes" table.
MODES = ("AccessShareLock", "RowShareLock", "RowExclusiveLock", "ShareUpdateExclusiveLock", "ShareLock",
         "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock")
# For each mode (by index) the indexes of the modes it conflicts with.
_CONFLICTS = {0: {7}, 1: {6, 7}, 2: {4, 5, 6, 7}, 3: {3, 4, 5, 6, 7}, 4: {2, 3, 5, 6, 7},
              5: {2, 3, 4, 5, 6, 7}, 6: {1, 2, 3, 4, 5, 6, 7}, 7: {0, 1, 2, 3, 4, 5, 6, 7}}
SQL_MODES = {"access share": 0, "row share": 1, "row exclusive": 2, "share update exclusive": 3, "share": 4,
             "share row exclusive": 5, "exclusive": 6, "access exclusive": 7}


def conflicts(a: str, b: str) -> bool:
    return MODES.index(b) in _CONFLICTS[MODES.index(a)]


def backends(inst: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """The server's long-lived client sessions (pid → record) beyond the pooled application ones."""
    out: dict[int, dict[str, Any]] = inst.setdefault("backends", {})
    return out


def blocker(inst: dict[str, Any], table: str, mode: str, pid: int | None = None) -> dict[str, Any] | None:
    """The backend (not `pid`) whose granted lock on `table` conflicts with `mode`, if any."""
    for rec in backends(inst).values():
        if rec["pid"] == pid:
            continue
        for held_table, held_mode in rec.get("locks", []):
            if held_table == table and conflicts(mode, held_mode):
                return rec
    return None


def waiters(inst: dict[str, Any]) -> list[dict[str, Any]]:
    """Application queries queued behind a lock in the last step: about rate × the time their
    client waits before cancelling (its deadline), each an `active` backend waiting on Lock/relation."""
    out: list[dict[str, Any]] = []
    for (table, user, db, statement, holder), n in sorted((inst.get("lock_waits") or {}).items()):
        for i in range(min(50, max(1, round(n)))):
            out.append({"pid": 300 + len(out), "datname": db, "usename": user, "application_name": "",
                        "client_addr": f"10.244.1.{40 + i % 200}", "state": "active", "wait_event_type": "Lock",
                        "wait_event": "relation", "query": statement, "backend_type": "client backend",
                        "table": table, "mode": "AccessShareLock", "holder": holder})
    return out


def terminate(inst: dict[str, Any], pid: int, by_super: bool, cancel: bool = False) -> str:
    """pg_terminate_backend / pg_cancel_backend(pid): 't', 'f' (no such backend: PostgreSQL only
    warns), or raises PermissionError with PostgreSQL's message. Cancelling the holder's
    pg_sleep fails its transaction and psql -c exits on the error, so both end the session."""
    rec = backends(inst).get(pid)
    if rec is None:
        return "f"
    if rec.get("super") and not by_super:
        verb = "cancel query" if cancel else "terminate process"
        raise PermissionError(f"permission denied to {verb}\nDETAIL:  Only roles with the SUPERUSER attribute may "
                              f"{'cancel queries' if cancel else 'terminate processes'} of roles with the SUPERUSER "
                              "attribute.")
    backends(inst).pop(pid)
    rec["ended"] = "cancel" if cancel else "terminate"
    inst.setdefault("ended_backends", {})[pid] = rec
    return "t"


def activity_rows(inst: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in rec.items() if k != "locks"} for rec in backends(inst).values()] + waiters(inst)


def lock_rows(inst: dict[str, Any], oids: dict[str, str], db_oid: str) -> list[dict[str, str]]:
    """pg_locks: each session's relation locks (granted) and the queued application reads (not)."""
    rows = []
    for rec in list(backends(inst).values()) + waiters(inst):
        held = rec.get("locks") or [(rec["table"], rec["mode"])]
        granted = "t" if rec.get("locks") else "f"
        for table, mode in held:
            rows.append({"locktype": "relation", "database": db_oid, "relation": oids.get(table, ""),
                         "relation::regclass": table, "pid": str(rec["pid"]), "mode": mode, "granted": granted,
                         "fastpath": "f", "virtualtransaction": f"{3 + rec['pid'] % 7}/{rec['pid']}"})
        rows.append({"locktype": "virtualxid", "database": "", "relation": "", "relation::regclass": "",
                     "pid": str(rec["pid"]), "mode": "ExclusiveLock", "granted": "t", "fastpath": "t",
                     "virtualtransaction": f"{3 + rec['pid'] % 7}/{rec['pid']}"})
    return rows
