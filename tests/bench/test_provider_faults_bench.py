"""bench/provider_faults_bench.py end to end from the public CLI at a tiny size: `farm run` against
the faulty provider leaves the provider's failures infra_failed (exit code 3), none counted against
the agent, and the same command once the provider is mended completes them (exit code 0). Five
models (no fault, one that fails one attempt then answers, refused credentials, 503s, the agent's
own context overflow), one seed, one worker."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODELS = "steady,flaky-attempt,auth,unavailable,context-length"


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_provider_faults_bench_retries_the_providers_failures_to_completion(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "bench/provider_faults_bench.py", "--workers", "1", "--seeds", "1",
                           "--models", MODELS, "--out", str(tmp_path / "bench")],
                          cwd=ROOT, capture_output=True, text=True, timeout=1100)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    first = re.search(r"^run 1: (\d+) trials infra_failed on the provider, (\d+) counted against the agent, "
                      r"n (\d+), agent errors (\d+) \(context length (\d+)\), exit (\d+)$", proc.stdout, re.M)
    second = re.search(r"^run 2: (\d+)/(\d+) finished, provider failures left (\d+), counted against the agent "
                       r"(\d+), n (\d+), exit (\d+)$", proc.stdout, re.M)
    assert first and second, proc.stdout[-3000:]
    # run 1: auth and unavailable are the provider's (flaky-attempt's retry answered); context
    # length is the agent's, counted in n
    assert first.groups() == ("2", "0", "3", "1", "1", "3")
    assert second.groups() == ("5", "5", "0", "0", "5", "0")
