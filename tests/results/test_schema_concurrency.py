"""Schema creation that tolerates concurrency: many processes opening a fresh database at the same
moment (as `docker compose up --scale worker=N` does) all succeed and leave one schema at the
current version; a database ahead of the code is refused with a clear message."""

from __future__ import annotations

import multiprocessing as mp
import subprocess
import sys
import time

import pytest
import sqlalchemy as sa

from results.db import SCHEMA_VERSION, SchemaTooNew, engine_for, schema_table, schema_version
from tests.conftest import ROOT

OPENERS = 8


def _open_at(url: str, start_at: float, out: mp.Queue) -> None:
    import traceback

    from results.db import engine_for

    time.sleep(max(0.0, start_at - time.time()))  # every process hits CREATE TABLE together
    try:
        engine_for(url)
        out.put("ok")
    except Exception:
        out.put(traceback.format_exc())


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_many_processes_create_the_schema_at_once(dialect: str, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("sqlite_url" if dialect == "sqlite" else "pg_url")
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    start_at = time.time() + 4.0  # spawned interpreters take a few seconds to import
    procs = [ctx.Process(target=_open_at, args=(url, start_at, out)) for _ in range(OPENERS)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    assert results == ["ok"] * OPENERS, "\n".join(r for r in results if r != "ok")
    assert all(p.exitcode == 0 for p in procs)
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        assert schema_version(conn) == SCHEMA_VERSION
        assert conn.execute(sa.select(sa.func.count()).select_from(schema_table)).scalar_one() == 1
    tables = set(sa.inspect(engine).get_table_names())
    assert {"sweep", "trial", "attempt", "worker", "infraevent", "farm_schema"} <= tables
    engine.dispose()


def test_a_database_newer_than_the_code_is_refused(pg_url: str, tmp_path) -> None:
    engine_for(pg_url)
    engine_for.cache_clear()
    raw = sa.create_engine(pg_url)
    with raw.begin() as conn:
        conn.execute(schema_table.update().values(version=SCHEMA_VERSION + 1))
    try:
        _refused(pg_url, tmp_path)
    finally:
        with raw.begin() as conn:  # the fixture's teardown opens the database again
            conn.execute(schema_table.update().values(version=SCHEMA_VERSION))
        raw.dispose()


def _refused(pg_url: str, tmp_path) -> None:
    with pytest.raises(SchemaTooNew, match=rf"schema version {SCHEMA_VERSION + 1}, newer than this farm's"):
        engine_for(pg_url)
    engine_for.cache_clear()
    # A worker started against it exits at once, non-zero, saying why (before touching the broker).
    env = {"PATH": "/usr/bin:/bin", "FARM_DATABASE_URL": pg_url, "PYTHONPATH": str(ROOT),
           "FARM_BROKER_URL": "redis://127.0.0.1:1/0", "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "farm.cli", "worker", "--cluster", "sim", "--name", "w-new"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "newer than this farm's" in proc.stderr + proc.stdout
