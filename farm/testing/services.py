"""Throwaway services of a test's (or the chaos bench's) own, on free loopback ports, that it may
stop, restart and flush: a Redis server without persistence, a PostgreSQL cluster made by initdb
in a temp folder, a moto S3 server whose data outlives its restarts. Never the machine's own."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, up: bool, timeout: float, what: str) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                if up:
                    return
        except OSError:
            if not up:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{what} on port {port} did not come {'up' if up else 'down'} in {timeout:.0f} s")


class RedisServer:
    """redis-server on its own port, no persistence: a restart is also a flush."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.port = folder, free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.folder), "--protected-mode", "no"],
            stdout=(self.folder / "redis.log").open("a"), stderr=subprocess.STDOUT)
        _wait_port(self.port, True, 20, "redis")
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()  # as a crash would: nothing saved
            self.proc.wait(timeout=20)
            self.proc = None
        _wait_port(self.port, False, 20, "redis")

    def restart(self, down_s: float = 0.0) -> None:
        self.stop()
        time.sleep(down_s)
        self.start()


def pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise RuntimeError(f"no PostgreSQL {name} under /usr/lib/postgresql/*/bin")
    return found[-1]


class PostgresServer:
    """A PostgreSQL cluster of its own (initdb in a temp folder), trust auth, user postgres.
    initdb refuses to run as root, so as root it runs as the `postgres` system user."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="farm-pg-"))
        self.data = self.folder / "data"
        self.port = free_port()
        self._as: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.folder, user.pw_uid, user.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def _run(self, *args: str) -> None:
        subprocess.run([*self._as, *args], check=True, capture_output=True, timeout=120)

    def start(self) -> PostgresServer:
        if not self.data.exists():
            self._run(pg_bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self._run(pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "pg.log"), "-w", "-t", "60",
                  "-o", f"-p {self.port} -h 127.0.0.1 -k {self.folder} -c max_connections=200 -c fsync=off",
                  "start")
        return self

    def stop(self, mode: str = "immediate") -> None:
        """`immediate` is a crash as far as clients see: every connection dropped."""
        self._run(pg_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self, down_s: float = 0.0) -> None:
        self.stop()
        time.sleep(down_s)
        self.start()

    def create_database(self, name: str) -> str:
        import sqlalchemy as sa

        admin = sa.create_engine(self.url(), isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        admin.dispose()
        return self.url(name)

    def destroy(self) -> None:
        try:
            self.stop("immediate")
        except subprocess.CalledProcessError:
            pass  # already stopped
        shutil.rmtree(self.folder, ignore_errors=True)


class MotoS3:
    """moto's S3 server in this process. Stopping it takes the endpoint down; its buckets and
    objects live in this process, so they are all there again when it starts on the same port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.server: Any = None  # moto.server.ThreadedMotoServer, imported when started

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MotoS3:
        import logging

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()
        _wait_port(self.port, True, 20, "moto")
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
        _wait_port(self.port, False, 20, "moto")


def terminate(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 60) -> int | None:
    """Signal a process group and wait for it; SIGKILL after `timeout`."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait(timeout=30)
