"""`farm sim up` as a person runs it: a real process that deploys hotel-reservation on a live
emulated cluster, prints its endpoints and writes a kubeconfig that a stock kubectl uses; Ctrl-C
stops it and the emulated cluster's server with it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = ROOT / ".tools" / "kubectl-root" / "usr" / "bin" / "kubectl"

pytestmark = [pytest.mark.kubectl, pytest.mark.slow,
              pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl 1.20 is installed by the test setup in .tools")]


def wait_for(path: Path, pattern: str, proc: subprocess.Popen[bytes], timeout: float) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(pattern, path.read_text(errors="replace"), re.M)
        if m:
            return m
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    raise AssertionError(f"no {pattern!r} from farm sim up (exit {proc.poll()}):\n{path.read_text(errors='replace')}")


def server_pids(workdir_hint: str) -> list[int]:
    """PIDs of emulated-cluster servers whose command line names `workdir_hint`."""
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "kubesim.server" in cmd and workdir_hint in cmd:
                out.append(int(proc.name))
    return out


def test_sim_up_serves_an_app_to_kubectl_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "farm-sim.kubeconfig"
    log = tmp_path / "sim-up.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path), "COLUMNS": "200"}
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", "from farm.cli import main; main()", "sim", "up",
                                 "--app", "hotel-reservation", "--seed", "3", "--speed", "20",
                                 "--kubeconfig", str(kubeconfig)],
                                cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(log, r"^Ctrl-C stops the cluster\.", proc, timeout=240)
        text = log.read_text()
        assert "deploying hotel-reservation into namespace hotel-reservation" in text
        m = re.search(r"^kubeconfig\s+(\S+)", text, re.M)
        assert m and Path(m.group(1)) == kubeconfig.resolve() and kubeconfig.exists()
        endpoints = dict(re.findall(r"^(kubernetes|prometheus|loki|jaeger|control)\s+(\S+)", text, re.M))
        assert endpoints["kubernetes"].startswith("https://127.0.0.1:")
        assert server_pids(str(tmp_path)), "the emulated cluster's server runs as its own process"

        kenv = {"PATH": f"{KUBECTL.parent}:/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": str(kubeconfig)}
        # The clock is live (20 cluster seconds a second): the app becomes ready on its own.
        deadline, rows = time.monotonic() + 120, []
        while time.monotonic() < deadline:
            got = subprocess.run([str(KUBECTL), "get", "pods", "-n", "hotel-reservation", "--no-headers"],
                                 env=kenv, capture_output=True, text=True, timeout=60)
            assert got.returncode == 0, got.stderr
            rows = [line.split() for line in got.stdout.splitlines()]
            if len(rows) >= 20 and all(r[1] == "1/1" and r[2] == "Running" for r in rows):
                break
            time.sleep(2)
        names = {r[0].rsplit("-", 2)[0] for r in rows}
        assert {"frontend", "search", "geo", "rate", "mongodb-rate", "wrk2-load"} <= names, rows
        assert all(r[1] == "1/1" and r[2] == "Running" for r in rows), rows

        with urllib.request.urlopen(endpoints["control"], timeout=30) as resp:
            now = json.loads(resp.read())
        assert now  # the control endpoint answers (cluster time)
        with urllib.request.urlopen(endpoints["prometheus"], timeout=30) as resp:
            assert json.loads(resp.read())["status"] == "success"
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, log.read_text()
    deadline = time.monotonic() + 30
    while server_pids(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not server_pids(str(tmp_path)), "the server outlived farm sim up"
