"""The SQL engine: SQLite by default (WAL, so several local worker processes share one file),
PostgreSQL for a farm; the URL comes from FARM_DATABASE_URL or the caller."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import SQLModel, create_engine

from results import models  # noqa: F401  (registers the tables)


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
    SQLModel.metadata.create_all(engine)
    add_missing_columns(engine)
    return engine


def add_missing_columns(engine: Engine) -> list[str]:
    """create_all makes missing tables but never alters existing ones: a nullable column added to a
    model later is added here (NULL on old rows), so a database of an older version stays readable.
    Several workers may start together; a column another one added first is fine."""
    from sqlalchemy import inspect
    from sqlalchemy.exc import DBAPIError

    added = []
    for table in SQLModel.metadata.sorted_tables:
        inspector = inspect(engine)
        if not inspector.has_table(table.name):
            continue
        have = {c["name"] for c in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name in have or not column.nullable:
                continue
            kind = column.type.compile(dialect=engine.dialect)
            try:
                with engine.begin() as conn:
                    conn.exec_driver_sql(f'ALTER TABLE "{table.name}" ADD COLUMN "{column.name}" {kind}')
                added.append(f"{table.name}.{column.name}")
            except DBAPIError:
                if column.name not in {c["name"] for c in inspect(engine).get_columns(table.name)}:
                    raise
    return added


def redact_url(url: str) -> str:
    """The URL without its password, for messages and logs."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # an unparsable URL is reported by whoever uses it
        return url.split("@")[-1]
