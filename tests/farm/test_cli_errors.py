"""What `farm` says when a service it needs is down, when a person presses Ctrl-C, and whether
every `farm ...` hint it prints names commands and options that exist. Real processes against
closed loopback ports; real client exceptions (SQLAlchemy, redis, botocore)."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from farm.cli.errors import explain, interrupted

ROOT = Path(__file__).resolve().parents[2]
CLOSED = "127.0.0.1:1"  # nothing listens on port 1


def farm(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "farm.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=180, env={**os.environ, **(env or {})})


def test_an_unreachable_database_is_one_line_naming_it_and_debug_shows_the_traceback():
    down = farm("leaderboard", "--db", f"postgresql://farm:hunter2@{CLOSED}/farm")
    assert down.returncode == 1
    lines = down.stderr.strip().splitlines()
    assert len(lines) == 1, down.stderr
    assert "the database postgresql://farm:***@127.0.0.1:1/farm cannot be reached" in lines[0]
    assert "FARM_DATABASE_URL" in lines[0] and "--debug" in lines[0] and "hunter2" not in down.stderr
    debug = farm("leaderboard", "--db", f"postgresql://farm:hunter2@{CLOSED}/farm", "--debug")
    assert debug.returncode != 0 and "Traceback" in debug.stderr


def test_an_unreachable_broker_is_one_line_naming_it(tmp_path):
    down = farm("sweep", "submit", str(ROOT / "examples/hotel-smoke.yaml"), cwd=tmp_path,
                env={"FARM_DATABASE_URL": f"sqlite:///{tmp_path / 'farm.sqlite'}",
                     "FARM_BROKER_URL": f"redis://:s3cret@{CLOSED}/0"})
    assert down.returncode == 1
    lines = down.stderr.strip().splitlines()
    assert len(lines) == 1, down.stderr
    assert f"the broker redis://:***@{CLOSED}/0 cannot be reached" in lines[0] and "FARM_BROKER_URL" in lines[0]
    assert "s3cret" not in down.stderr
    # Nothing half-done: no sweep whose trials wait in SQL for messages that were never sent.
    db = tmp_path / "farm.sqlite"
    if db.exists():
        with sqlite3.connect(db) as conn:
            tables = {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}
            if "trial" in tables:
                assert conn.execute("select count(*) from trial").fetchone() == (0,)
            if "sweep" in tables:
                assert conn.execute("select count(*) from sweep").fetchone() == (0,)


def test_an_unreachable_artifact_store_names_its_endpoint(monkeypatch):
    import boto3
    from botocore.config import Config

    monkeypatch.setenv("FARM_ARTIFACTS", "s3://farm-artifacts")
    s3 = boto3.client("s3", endpoint_url=f"http://{CLOSED}", aws_access_key_id="x", aws_secret_access_key="y",
                      region_name="us-east-1", config=Config(retries={"max_attempts": 1}, connect_timeout=2))
    with pytest.raises(Exception) as caught:
        s3.head_bucket(Bucket="farm-artifacts")
    line = explain(caught.value, ["farm", "report"])
    assert line is not None and f"s3://farm-artifacts at http://{CLOSED}" in line and "AWS_ENDPOINT_URL" in line


def test_a_bug_keeps_its_traceback():
    assert explain(ZeroDivisionError("x"), ["farm"]) is None
    assert explain(sqlite3.ProgrammingError("x"), ["farm"]) is None


def test_ctrl_c_in_a_run_says_how_to_resume(tmp_path):
    spec = ROOT / "examples/hotel-smoke.yaml"
    proc = subprocess.Popen([sys.executable, "-m", "farm.cli", "run", str(spec), "--workers", "1", "--out",
                             str(tmp_path / "out")], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        deadline = time.time() + 120
        while not _running(tmp_path / "out" / "farm.sqlite"):
            assert proc.poll() is None and time.time() < deadline, "no trial ever started"
            time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole process group
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, stderr[-2000:]
    assert f"`farm run {spec} --out {tmp_path / 'out'}` runs the rest" in stderr
    assert "Aborted!" not in stderr


def _running(db: Path) -> bool:
    """A trial of the run holds its lease (the run is mid-trial)."""
    if not db.exists():
        return False
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return bool(conn.execute("SELECT count(*) FROM trial WHERE state = 'running'").fetchone()[0])
    except sqlite3.OperationalError:  # the schema is still being made
        return False


def test_interrupted_names_the_command_to_run_again():
    assert "`farm run s.yaml --out o` runs the rest" in interrupted(["farm", "run", "s.yaml", "--out", "o"])
    assert interrupted(["farm", "sweep", "status", "x", "--watch"]) == "stopped watching; the sweep goes on"


def test_every_farm_hint_names_a_command_and_options_that_exist():
    """Hints in messages and help texts (`farm ...` in backquotes) must work as written."""
    import typer.main

    from farm.cli import app

    root = typer.main.get_command(app)
    hints = set()
    for folder in ("farm", "results", "tasks", "clusters", "core", "injectors"):
        for path in (ROOT / folder).rglob("*.py"):
            hints |= set(re.findall(r"`(farm [^`]+)`", path.read_text()))
    assert len(hints) > 10
    wrong = []
    for hint in sorted(hints):
        words = hint.split()[1:]
        command = root
        ctx = root.make_context("farm", [], resilient_parsing=True)
        # (typer carries its own click: a group is what has subcommands)
        while hasattr(command, "list_commands") and words and not words[0].startswith("-"):
            sub = command.get_command(ctx, words[0])
            if sub is None:
                wrong.append(f"{hint}: no command '{words[0]}'")
                break
            command, words = sub, words[1:]
        options = {o for p in command.params for o in getattr(p, "opts", [])} | {"--help"}
        wrong += [f"{hint}: no option {w}" for w in words if w.startswith("-") and w.split("=")[0] not in options]
    assert wrong == []
