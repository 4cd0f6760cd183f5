"""Finding (helper adv): the agent's sandbox bounded nothing of the worker host's resources. bwrap
gave it no rlimit and a tmpfs /tmp and home without a size: in a `farm run` trial
(tests/security/adv_limits_agent.py) the agent started 300 processes, wrote 256 MiB to /tmp (the
tmpfs took 12052 MiB, half the host's memory, as its size) and read RLIMIT_AS, RLIMIT_DATA and
RLIMIT_CPU as unlimited. Now its process has rlimits (data memory, processes, open files, CPU, no
core) and sized tmpfs, from the sweep's agent limits (farm/agenthost/sandbox.py ResourceLimits):
these tests start the real sandbox command (runner_command) and read or hit what bounds it, and
run a trial whose agent takes memory until it is refused."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from sqlmodel import Session, select

from core.states import END_AGENT_ERROR
from farm.agenthost.sandbox import ResourceLimits, runner_command
from farm.dispatcher import submit
from farm.pytest_plugin import SimClusters
from farm.spec import SweepSpec
from farm.trial import run_all, start_run
from results import ledger
from results.artifact_store import LocalArtifactStore
from results.db import engine_for
from results.models import Attempt, Trial
from tests.security import agent_plugins

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

PROBE = ("import json, os, resource; st = os.statvfs('/tmp'); lim = lambda r: resource.getrlimit(r)[1]; "
         "print(json.dumps({'as': lim(resource.RLIMIT_AS), 'data': lim(resource.RLIMIT_DATA), "
         "'nproc': lim(resource.RLIMIT_NPROC), 'core': lim(resource.RLIMIT_CORE), "
         "'tmp_mib': st.f_blocks * st.f_frsize // 2**20}))")


def _sandboxed(code: str, limits: ResourceLimits = ResourceLimits()) -> subprocess.CompletedProcess[str]:
    argv, env = runner_command([], env={}, limits=limits)
    assert argv[-3:] == ["-S", "-m", "farm.agents.runner"]
    return subprocess.run(argv[:-2] + ["-c", code], capture_output=True, text=True, timeout=60, env=env or None)


def test_the_agent_process_has_bounded_memory_processes_and_tmp() -> None:
    out = _sandboxed(PROBE)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    # RLIMIT_DATA bounds what a process allocates; RLIMIT_AS would also count the address space a
    # runtime only reserves (a Node CLI agent's), so either one bounding memory is enough
    memory = min(v for v in (seen["as"], seen["data"], 2**63) if v != -1)
    unbounded = [k for k, v in (("RLIMIT_AS/DATA", memory), ("RLIMIT_NPROC", seen["nproc"])) if v > 2**32]
    if seen["tmp_mib"] > 4096:
        unbounded.append(f"/tmp of {seen['tmp_mib']} MiB")
    assert unbounded == [], f"the agent's process is bounded by nothing of: {unbounded} ({seen})"
    assert (seen["data"], seen["nproc"], seen["core"], seen["tmp_mib"]) == (2048 << 20, 256, 0, 512)


def test_processes_and_tmp_space_past_the_limits_are_refused() -> None:
    limits = ResourceLimits(processes=24, tmp_mib=8)
    code = ("import json, subprocess\n"
            "kids, full = [], None\n"
            "try:\n"
            "    for _ in range(200): kids.append(subprocess.Popen(['sleep', '30']))\n"
            "except OSError as e: refused = str(e)\n"
            "written = 0\n"
            "try:\n"
            "    with open('/tmp/fill', 'wb') as f:\n"
            "        for _ in range(64): f.write(b'1' * 2**20); f.flush(); written += 1\n"
            "except OSError as e: full = str(e)\n"
            "print(json.dumps({'started': len(kids), 'refused': refused, 'written_mib': written, 'full': full}))\n"
            "for k in kids: k.kill()\n")
    out = _sandboxed(code, limits)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert 0 < seen["started"] < 24 and "Resource temporarily unavailable" in seen["refused"], seen
    assert seen["written_mib"] <= 8 and "No space left on device" in seen["full"], seen


@pytest.mark.kubectl
@pytest.mark.slow
def test_an_agent_past_its_memory_limit_ends_its_session_with_that_reason(
        sim_clusters: SimClusters, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FARM_AGENT_PLUGINS", agent_plugins.__name__)
    engine = engine_for(f"sqlite:///{tmp_path / 'hog.sqlite'}")
    spec = SweepSpec(name="hog", problems={"ids": ["hr-geo-image-tag-wrong"]},
                     agents=[{"name": "hog", "options": {"take": "memory"}}],
                     limits={"wall_time_s": 300, "memory_mib": 256})
    claim = ledger.claim(engine, submit(engine, spec).to_run[0], "hog-worker", sim_clusters.served(seed=3).ref)
    assert claim is not None
    run = start_run(engine, claim, sim_clusters.served(seed=3), LocalArtifactStore(tmp_path / "artifacts"))
    assert run is not None
    assert run_all(run) == "recorded", run.events[-3:]  # the trial is recorded: the worker is unharmed
    with Session(engine) as s:
        trial, attempt = s.exec(select(Trial)).one(), s.exec(select(Attempt)).one()
    assert trial.end_reason == attempt.end_reason == END_AGENT_ERROR
    assert (attempt.error or "").startswith("the agent's process reached its memory limit (256 MiB)"), attempt.error
