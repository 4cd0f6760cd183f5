"""bench/report_bench.py runs to its figures on a tiny sweep (it once failed at HEAD unnoticed, and
then waited ten minutes on its queue): a bench that rots fails here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PG_ADMIN_URL

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.postgres
def test_report_bench_prints_its_figures() -> None:
    proc = subprocess.run([sys.executable, "bench/report_bench.py", "--trials", "60", "--pg", PG_ADMIN_URL],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = proc.stdout.strip().splitlines()[-1]
    assert re.search(r"report of 60 trials: rendered in [\d.]+ s, peak memory \d+ MB .* 60 trial pages .* whole report [\d.]+ MB", line), line
