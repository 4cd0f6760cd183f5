"""Finding (helper adv): the agent's sandbox mounts the worker's installed packages (sysconfig
purelib) at /opt/site-packages. Under the Dockerfile's `pip install .` (not editable, as every
farm/kind-worker image is built) those packages ARE the farm: farm/problems/catalog/*.yaml with
every problem's ground truth and fix, and the worker's own results/ and tasks/ modules. The dev
setup (editable install) hides this because site-packages then holds only a finder.

This test builds that layout the cheap way (a hard-linked copy of this virtualenv whose editable
finder is replaced by the packages themselves, which is what `pip install .` writes) and starts
the agent's real sandbox from it, with the real bwrap command line from runner_command. The
catalog must not be readable there. tests/security/adv_catalog_cheat.py is a whole agent that
uses it (diagnosis passed, judge score 0.8, on hr-geo-image-tag-wrong through `farm run`)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("core", "apps", "farm", "tasks", "injectors", "clusters", "results")  # pyproject's packages.find

PROBE = r"""
import glob, json, subprocess, sys
from farm.agenthost.sandbox import runner_command
argv, _ = runner_command([], env={})
assert argv[-3:] == ["-S", "-m", "farm.agents.runner"], argv[-3:]
code = ("import glob, json; print(json.dumps(sorted(glob.glob('/opt/site-packages/*/farm/problems/catalog/*.yaml'))"
        " + sorted(glob.glob('/opt/site-packages/*/results/ledger.py'))))")
out = subprocess.run(argv[:-2] + ["-c", code], capture_output=True, text=True, timeout=60)
print(out.stdout.strip() or out.stderr)
"""


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_installed_farm_is_not_mounted_into_the_agent_sandbox(tmp_path: Path) -> None:
    venv = Path(sys.prefix)
    if venv == Path(sys.base_prefix):
        pytest.skip("needs the project's virtualenv")
    copy = tmp_path / "venv"
    subprocess.run(["cp", "-al", str(venv), str(copy)], check=True)
    site = copy / Path(sysconfig.get_path("purelib")).relative_to(venv)
    for stale in [*site.glob("__editable__*"), *site.glob("sre_farm-*.dist-info")]:
        if stale.is_dir():
            shutil.rmtree(stale)
        else:
            stale.unlink()
    for package in PACKAGES:
        shutil.copytree(ROOT / package, site / package, ignore=shutil.ignore_patterns("__pycache__"))
    python = copy / "bin" / "python"
    out = subprocess.run([str(python), "-c", PROBE], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    seen = out.stdout.strip()
    assert seen == "[]", f"the agent's sandbox reads the installed farm: {seen}"
