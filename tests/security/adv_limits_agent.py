"""Adversary agent (helper adv), FARM_AGENT_PLUGINS=tests.security.adv_limits_agent: shows what the
agent's process may take of the worker host (its rlimits, 300 children, 256 MiB written to its
tmpfs /tmp, i.e. the host's memory); returns the figures as its transcript."""

from __future__ import annotations

import os
import subprocess

from core.states import END_AGENT_STOPPED
from farm.agents.agent import Agent, AgentContext, AgentResult, agents


@agents.register("adv-limits")
class Limits(Agent):
    uses_model = False

    def run(self, ctx: AgentContext) -> AgentResult:
        st = os.statvfs("/tmp")
        kids = [subprocess.Popen(["sleep", "5"]) for _ in range(300)]
        for k in kids:
            k.wait()
        # 256 MiB into /tmp (tmpfs: the worker host's memory), then freed
        with open("/tmp/blob", "wb") as f:
            for _ in range(256):
                f.write(b"\0" * (1 << 20))
        used = os.statvfs("/tmp")
        os.remove("/tmp/blob")
        notes = {"kind": "adv", "limits": open("/proc/self/limits").read(),
                 "tmp_size_mib": st.f_blocks * st.f_frsize // (1 << 20),
                 "tmp_used_after_write_mib": (used.f_blocks - used.f_bfree) * used.f_frsize // (1 << 20),
                 "children_started": len(kids), "mounts": open("/proc/self/mountinfo").read()[:3000],
                 "cpus": os.cpu_count()}
        return AgentResult(end_reason=END_AGENT_STOPPED, transcript=[notes])
