"""Finding (helper adv): the agent's sandbox bounds nothing of the worker host's resources. bwrap
gives it no cgroup, no rlimit and a tmpfs /tmp and home without a size: in a `farm run` trial
(tests/security/adv_limits_agent.py) the agent started 300 processes, wrote 256 MiB to /tmp (the
tmpfs took 12052 MiB, half the host's memory, as its size) and read RLIMIT_AS, RLIMIT_DATA and
RLIMIT_CPU as unlimited. An agent can take the memory, processes and CPU of the worker, and of the
other sessions on the same host (whose wall-time limits it then spends). This test starts the real
sandbox command (runner_command) and reads what bounds its process."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from farm.agenthost.sandbox import runner_command

PROBE = ("import json, os, resource; st = os.statvfs('/tmp'); print(json.dumps({"
         "'as': resource.getrlimit(resource.RLIMIT_AS)[1], 'nproc': resource.getrlimit(resource.RLIMIT_NPROC)[1], "
         "'tmp_mib': st.f_blocks * st.f_frsize // 2**20}))")


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
@pytest.mark.xfail(strict=True, reason="open (issue 23): the agent's sandbox has no cgroup or rlimits yet; found by "
                   "the adversarial review of 2026-12-07")
def test_the_agent_process_has_bounded_memory_processes_and_tmp() -> None:
    argv, env = runner_command([], env={})
    assert argv[-3:] == ["-S", "-m", "farm.agents.runner"]
    out = subprocess.run(argv[:-2] + ["-c", PROBE], capture_output=True, text=True, timeout=60, env=env or None)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    unbounded = [k for k, v in (("RLIMIT_AS", seen["as"]), ("RLIMIT_NPROC", seen["nproc"]))
                 if v == -1 or v > 10_000]
    if seen["tmp_mib"] > 4096:
        unbounded.append(f"/tmp of {seen['tmp_mib']} MiB")
    assert unbounded == [], f"the agent's process is bounded by nothing of: {unbounded} ({seen})"
