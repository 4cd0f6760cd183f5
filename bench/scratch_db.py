"""A PostgreSQL database of a bench's own: created empty, dropped after (its connections ended
first), so a bench never touches a database it did not make."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa


@contextmanager
def scratch_database(admin_url: str, prefix: str) -> Iterator[str]:
    """The URL of a new database `<prefix>_<random>` on the server of `admin_url`."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield admin_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as c:
            c.exec_driver_sql(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}' "
                              "AND pid <> pg_backend_pid()")
            c.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}"')
        admin.dispose()
