"""Services of the reliability tests' own (a Redis server, a PostgreSQL cluster, a moto S3
server, each on a free loopback port), so that a test may restart or flush them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from farm.testing.harness import Farm
from farm.testing.services import MotoS3, PostgresServer, RedisServer


@pytest.fixture()
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def pg_server() -> Iterator[PostgresServer]:
    server = PostgresServer().start()
    yield server
    server.destroy()


@pytest.fixture()
def moto_s3() -> Iterator[MotoS3]:
    server = MotoS3().start()
    yield server
    server.stop()


@pytest.fixture()
def farm(tmp_path: Path, redis_server: RedisServer, pg_server: PostgresServer, moto_s3: MotoS3) -> Iterator[Farm]:
    """A farm on fresh services: its own database, broker and bucket; workers killed after."""
    from results.db import engine_for

    db_url = pg_server.create_database(f"farm_{uuid.uuid4().hex[:10]}")
    f = Farm(tmp_path, redis_server.url, db_url, moto_s3.endpoint)
    f.make_bucket()
    yield f
    f.stop_all()
    engine_for(db_url).dispose()
    engine_for.cache_clear()
