"""Fixtures shared by the whole suite: Debian's kubectl 1.20 first on PATH, `kubectl_binary` (each
of 1.20 and 1.33 in turn), an isolated PostgreSQL database per run, a Redis key prefix per run, a
real S3-compatible server (moto)."""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KUBECTL_DIR = ROOT / ".tools" / "kubectl-root" / "usr" / "bin"
# The clients kubectl tests run with: Debian's 1.20 (SPDY for exec and port-forward) and 1.33
# from scripts/setup.sh --dev (WebSocket by default, SPDY as its fallback).
KUBECTLS = {"1.20": KUBECTL_DIR / "kubectl", "1.33": ROOT / ".tools" / "kubectl-v33" / "kubectl"}

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
if KUBECTL_DIR.is_dir():
    os.environ["PATH"] = f"{KUBECTL_DIR}{os.pathsep}{os.environ.get('PATH', '')}"
# The farm reads these; a developer's own settings must not leak into tests.
for var in ("FARM_BROKER_URL", "FARM_DATABASE_URL", "FARM_ARTIFACTS", "FARM_BROKER_KEYPREFIX"):
    os.environ.pop(var, None)

REDIS_URL = "redis://127.0.0.1:6379/9"
PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """moto in server mode on a free loopback port (a real AWS-compatible HTTP server), stopped on exit."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture(params=sorted(KUBECTLS), ids=lambda v: f"kubectl-{v}")
def kubectl_binary(request: pytest.FixtureRequest) -> Path:
    """Each kubectl version in turn: a test taking it runs once per version."""
    path = KUBECTLS[request.param]
    if not path.exists():
        pytest.skip(f"kubectl {request.param} is installed by ./scripts/setup.sh --dev in {path.parent}")
    return path


@pytest.fixture(scope="session")
def redis_prefix() -> Iterator[str]:
    """A key prefix of this run's own; only keys under it are deleted afterwards."""
    import redis

    prefix = f"farmtest-{uuid.uuid4().hex[:8]}:"
    yield prefix
    client = redis.Redis.from_url(REDIS_URL)
    for key in client.scan_iter(match=f"{prefix}*", count=1000):
        client.delete(key)


@pytest.fixture()
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database, created for the test and dropped after it."""
    import sqlalchemy as sa

    name = f"farm_test_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    yield url
    from results.db import engine_for

    engine_for(url).dispose()
    engine_for.cache_clear()
    with admin.connect() as conn:
        conn.exec_driver_sql(
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}' AND pid <> pg_backend_pid()"
        )
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}"')
    admin.dispose()


@pytest.fixture()
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'farm.sqlite'}"


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'farm.sqlite'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """moto in server mode on loopback: a real S3-compatible HTTP server."""
    import logging

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per S3 request otherwise

    with moto_server() as url:
        yield url


@pytest.fixture()
def s3_env(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    return s3_endpoint


LOCAL_MODEL = "smollm2-135m"


@pytest.fixture(scope="session")
def local_model_url() -> Iterator[str]:
    """The api_base of the host's server for local/smollm2-135m (started or reused; it stops after
    the run once no process uses it). Not installed is a failure, not a skip: ./scripts/setup.sh
    --dev installs it, and CI runs it. FARM_SKIP_LOCAL_MODEL=1 skips, saying so, on a developer's
    machine that cannot build llama-cpp-python."""
    from core.errors import ConfigurationError
    from farm.llm import local_server

    try:
        local_server.check_installed(LOCAL_MODEL)
    except ConfigurationError as exc:
        if os.environ.get("FARM_SKIP_LOCAL_MODEL"):
            pytest.skip(f"{exc} (skipped: FARM_SKIP_LOCAL_MODEL is set)")
        pytest.fail(f"{exc}; the tests drive it (./scripts/setup.sh --dev installs it)", pytrace=False)
    yield local_server.ensure(LOCAL_MODEL)
    local_server.release(LOCAL_MODEL)
