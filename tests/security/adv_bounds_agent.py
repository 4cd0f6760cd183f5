"""Adversary agent (helper h23b), FARM_AGENT_PLUGINS=tests.security.adv_bounds_agent: after the
agent's process was given rlimits and sized tmpfs (issue 23), tries what rlimits do not see and
returns the figures as its transcript:

- memory outside RLIMIT_DATA: a memfd written with write() and a shared anonymous mapping
  (shmem: the host's memory, in no process's data segment);
- memory times processes: each process has its own RLIMIT_DATA, so `workers` children of
  `per_worker_mib` each hold more than the limit together;
- /dev/shm and the sandbox's other writable places (tmpfs of the host's memory);
- a fork bomb is not tried: RLIMIT_NPROC refuses it (tests/security/test_agent_resources.py).

`take_mib` (option) is how much it tries to hold each way."""

from __future__ import annotations

import mmap
import os
import subprocess
import sys

from core.states import END_AGENT_STOPPED
from farm.agents.agent import Agent, AgentContext, AgentResult, agents

MIB = 1 << 20


def _memfd(mib: int) -> int:
    fd, held = os.memfd_create("hold"), 0
    try:
        for _ in range(mib):
            os.write(fd, b"\1" * MIB)
            held += 1
    except OSError:
        pass
    return held


def _shared_mapping(mib: int) -> int:
    try:
        area = mmap.mmap(-1, mib * MIB, flags=mmap.MAP_SHARED)
        for offset in range(0, mib * MIB, 4096):
            area[offset] = 1
        _shared_mapping.keep = area  # type: ignore[attr-defined]
        return mib
    except (OSError, ValueError):
        return 0


def _workers(n: int, per_mib: int) -> int:
    """Fresh interpreters (not forks, which would start with this process's heap) that each touch
    `per_mib`; the MiB they hold together at once."""
    code = (f"import sys, time; b = bytearray({per_mib} * 2**20); b[::4096] = bytes(len(b[::4096])); "
            "print(1, flush=True); time.sleep(5)")
    kids = [subprocess.Popen([sys.executable, "-S", "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            for _ in range(n)]
    held = sum(per_mib for k in kids if k.stdout is not None and k.stdout.readline().strip() == b"1")
    for k in kids:
        k.kill()
        k.wait()
    return held


def writable_tmpfs() -> list[str]:
    found = []
    for path in ("/dev/shm", "/dev", "/run", "/opt", "/", "/run/endpoints"):
        try:
            with open(os.path.join(path, ".probe"), "wb"):
                pass
            os.remove(os.path.join(path, ".probe"))
            found.append(path)
        except OSError:
            pass
    return found


@agents.register("adv-bounds")
class Bounds(Agent):
    uses_model = False

    def run(self, ctx: AgentContext) -> AgentResult:
        mib = int(ctx.options.get("take_mib", 256))
        notes = {"kind": "adv", "limit_mib": ctx.limits.memory_mib, "memfd_mib": _memfd(mib),
                 "shared_mapping_mib": _shared_mapping(mib),
                 "workers_mib": _workers(int(ctx.options.get("workers", 4)), int(ctx.options.get("per_worker_mib", 48))),
                 "writable": writable_tmpfs()}
        return AgentResult(end_reason=END_AGENT_STOPPED, transcript=[notes])
