"""The SQL engine: SQLite by default (WAL, so several local worker processes share one file),
PostgreSQL for a farm; the URL comes from FARM_DATABASE_URL or the caller.

The schema is made or upgraded once per database, whoever opens it first: in one transaction
under a database lock (PostgreSQL's transaction-level advisory lock, SQLite's write lock taken by
BEGIN IMMEDIATE), so workers that start together never race on CREATE TABLE. The version the
database is at is recorded in `farm_schema`; code that finds a newer one refuses to write."""

from __future__ import annotations

import os
import time
from functools import cache
from pathlib import Path
from typing import Any, cast

from sqlalchemy import Column, Float, Integer, MetaData, Table, event, inspect, select, text
from sqlalchemy.engine import Connection, CursorResult, Engine
from sqlalchemy.sql.base import Executable
from sqlmodel import Session, SQLModel, create_engine

from core.errors import ConfigurationError
from results import models  # noqa: F401  (registers the tables)

# The schema this code writes. Bump it with every change to results/models.py; a change that is
# more than new nullable columns gets its step in `_MIGRATIONS`.
# 1: the tables as first released; 2: trial.published_at and trial.publishes (the reaper's);
# 3: trial.noise_level, {attempt,trial}.diagnosis_pass_rule, attempt.tool_tokens_json and tool_mode;
# 4: the diagnosis_verdict table (diagnoses judged again by `farm judge rescore`) and
#    {attempt,trial}.rca_top1, rca_top3 and fault_type_correct (structured diagnoses).
SCHEMA_VERSION = 4
# Any constant shared by every farm process: the key of the advisory lock schema changes take.
_PG_SCHEMA_LOCK = 0x5F4E_5343  # "_NSC"

# Kept apart from SQLModel.metadata: it describes the database, not a result.
_schema_meta = MetaData()
schema_table = Table("farm_schema", _schema_meta, Column("id", Integer, primary_key=True),
                     Column("version", Integer, nullable=False), Column("updated_at", Float, nullable=False))


class SchemaTooNew(ConfigurationError):
    """The database was upgraded by a newer farm than this one: writing to it could corrupt it."""


def default_url(out_dir: str | Path | None = None) -> str:
    """The database to write to: FARM_DATABASE_URL, else `farm-out/farm.sqlite` (created)."""
    if url := os.environ.get("FARM_DATABASE_URL"):
        return url
    folder = Path(out_dir or "farm-out")
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'farm.sqlite'}"


def existing_url(out_dir: str | Path | None = None) -> str | None:
    """The database to read from: FARM_DATABASE_URL, else `farm-out/farm.sqlite` if a run made
    it, else None. Reading never creates a folder or a database."""
    if url := os.environ.get("FARM_DATABASE_URL"):
        return url
    path = Path(out_dir or "farm-out") / "farm.sqlite"
    return f"sqlite:///{path}" if path.is_file() else None


@cache
def engine_for(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 60, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record):  # type: ignore[no-untyped-def]
            # pysqlite must not issue its own BEGIN; the "begin" hook below does.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=60000")
            cur.close()

        # SQLite's default deferred transactions can deadlock two writers that both read
        # first; BEGIN IMMEDIATE takes the write lock up front.
        @event.listens_for(engine, "begin")
        def _begin(conn):  # type: ignore[no-untyped-def]
            conn.exec_driver_sql("BEGIN IMMEDIATE")
    else:
        engine = create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=5)
    ensure_schema(engine)
    return engine


def schema_version(bind: Engine | Connection) -> int | None:
    """The version recorded in the database, or None when it has none (fresh, or made before
    versions were recorded)."""
    if isinstance(bind, Engine):
        with bind.connect() as conn:
            return schema_version(conn)
    if not inspect(bind).has_table(schema_table.name):
        return None
    return bind.execute(select(schema_table.c.version).where(schema_table.c.id == 1)).scalar_one_or_none()


def _refuse_newer(version: int | None, engine: Engine) -> None:
    if version is not None and version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"the database {redact_url(str(engine.url))} has schema version {version}, newer than this "
            f"farm's {SCHEMA_VERSION}: a newer farm upgraded it; upgrade this installation (pip install -U) "
            "before starting it against that database")


# Steps beyond "create missing tables, add missing nullable columns", by the version they reach.
_MIGRATIONS: dict[int, list[str]] = {}


def ensure_schema(engine: Engine) -> int:
    """Bring the database to SCHEMA_VERSION once, whoever gets there first; returns the version
    found before. Raises SchemaTooNew when the database is ahead of this code."""
    found = schema_version(engine)
    _refuse_newer(found, engine)
    if found == SCHEMA_VERSION:
        return found  # the common case: no lock taken
    with engine.begin() as conn:  # on SQLite this is BEGIN IMMEDIATE: the database's write lock
        if engine.dialect.name == "postgresql":
            # Held to the end of this transaction; every other opener waits here, then finds the
            # version current and does nothing.
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_SCHEMA_LOCK})
        found = schema_version(conn)
        _refuse_newer(found, engine)
        if found == SCHEMA_VERSION:
            return found
        _schema_meta.create_all(conn)
        SQLModel.metadata.create_all(conn)
        add_missing_columns(conn)
        for version in sorted(v for v in _MIGRATIONS if v > (found or 0)):
            for statement in _MIGRATIONS[version]:
                conn.exec_driver_sql(statement)
        values = {"version": SCHEMA_VERSION, "updated_at": time.time()}
        if found is None:
            conn.execute(schema_table.insert().values(id=1, **values))
        else:
            conn.execute(schema_table.update().where(schema_table.c.id == 1).values(**values))
    return found or 0


def add_missing_columns(bind: Engine | Connection) -> list[str]:
    """create_all makes missing tables but never alters existing ones: a nullable column added to a
    model later is added here (NULL on old rows), so a database of an older version stays readable.
    Runs inside ensure_schema's locked transaction, so no other opener adds one at the same time."""
    if isinstance(bind, Engine):
        with bind.begin() as conn:
            return add_missing_columns(conn)
    added = []
    inspector = inspect(bind)
    for table in SQLModel.metadata.sorted_tables:
        if not inspector.has_table(table.name):
            continue
        have = {c["name"] for c in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name in have or not column.nullable:
                continue
            kind = column.type.compile(dialect=bind.dialect)
            bind.exec_driver_sql(f'ALTER TABLE "{table.name}" ADD COLUMN "{column.name}" {kind}')
            added.append(f"{table.name}.{column.name}")
    return added


def redact_url(url: str) -> str:
    """The URL without its password, for messages and logs."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # an unparsable URL is reported by whoever uses it
        return url.split("@")[-1]


def execute_dml(session: Session, statement: Executable) -> CursorResult[Any]:
    """Run an UPDATE or INSERT in the session. Its result is a CursorResult, which has the
    rowcount (SQLModel's Session.execute is typed as returning a plain Result)."""
    return cast(CursorResult[Any], session.execute(statement))


def read_only_engine(url: str) -> Engine:
    """An engine for a reader that must never write nor slow the writers: PostgreSQL sessions in
    read-only mode, SQLite opened read-only without the writers' BEGIN IMMEDIATE (readers of a WAL
    database take no lock). ConfigurationError when the database is not one a farm made."""
    from sqlalchemy.engine import make_url

    if url.startswith("sqlite"):
        path = make_url(url).database
        if not path or not Path(path).is_file():
            raise ConfigurationError(f"no farm database at {path or url}")
        engine = create_engine(f"sqlite:///file:{Path(path).resolve()}?mode=ro&uri=true",
                               connect_args={"timeout": 60, "check_same_thread": False})
    else:
        engine = create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=5,
                               connect_args={"options": "-c default_transaction_read_only=on"})
    version = schema_version(engine)
    if version is None:
        raise ConfigurationError(f"{redact_url(url)} holds no farm tables (no farm_schema): run a sweep into it first")
    return engine
