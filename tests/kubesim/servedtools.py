"""What the modules testing the served API with kubectl processes share: kubectl 1.20 and 1.33 (a
version .tools lacks is skipped), and kubectl run as a
process against it with the admin's (or a given) kubeconfig."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from clusters.emulated import SimHandle
from tests.conftest import KUBECTLS

NEEDS_KUBECTL = [pytest.mark.kubectl,
                 pytest.mark.skipif(not KUBECTLS["1.20"].exists(), reason="kubectl 1.20 is installed by the setup in .tools")]
VERSIONS = [pytest.param(v, marks=pytest.mark.skipif(not p.exists(), reason=f"no kubectl {v} in .tools"))
            for v, p in KUBECTLS.items()]


def kubectl(cluster: SimHandle, version: str, *args: str, stdin: str | None = None,
            kubeconfig: Path | None = None) -> tuple[int, str]:
    """(exit code, stdout + stderr) of kubectl `version` run with `args`."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cluster.workdir / f"home-{version}"),
           "KUBECONFIG": str(kubeconfig or cluster.kubeconfig)}
    proc = subprocess.run([str(KUBECTLS[version]), *args], env=env, capture_output=True, text=True, timeout=60,
                          input=stdin)
    return proc.returncode, proc.stdout + proc.stderr
