"""Every bench runs to its figures at a tiny size (issue 29: a bench that rots fails here, not on the
day someone needs its numbers). Each is started as a user starts it, a process from the project's
root, and must print the line its figures end with; no figure is asserted (timings are the bench's
business, and the machine running the suite is shared). Benches with their own test are elsewhere
in tests/bench/; those left out say why in LEFT_OUT."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PG_ADMIN_URL

ROOT = Path(__file__).resolve().parents[2]

# (bench, its arguments at a tiny size, a line its output must have)
TINY: list[tuple[str, list[str], str]] = [
    ("catalog_bench", ["--limit", "1"], r"problems: 1\s+passed: 1"),
    ("dispatch_bench", ["--trials", "20", "--pg", PG_ADMIN_URL],
     r"total\s+postgres submit \+ mark queued \+ publish:\s+[\d.]+ µs/trial \([\d.]+ s for 20 trials\)"),
    ("leaderboard_bench", ["--rows", "500", "--pg", PG_ADMIN_URL], r"postgres\s+rows=\s+500 by=problem\s+groups="),
    ("sandbox_bench", ["--calls", "2", "--starts", "1"], r"agent process overhead per tool call: -?[\d.]+ ms"),
    ("sim_api_bench", ["--pods", "10", "--seconds", "0.3"], r"kubectl get pods \(10 rows\)\s+median"),
    ("sim_cluster_bench", ["--minutes", "0.5"], r"recorded: \d+ series, \d+ successful client requests"),
    ("sim_output_hash", ["--app", "hotel-reservation", "--minutes", "0.5", "--no-fault"], r"\nrng\s+[\d.]+"),
    ("sim_live_bench", ["--clusters", "1", "--seconds", "3"], r"write → controller reaction .*: [\d.]+ ms"),
    ("view_bench", ["--trials", "100", "--repeat", "1", "--pg", PG_ADMIN_URL], r"server peak resident memory \d+ MB"),
    ("metadata_spy_bench", ["--limit", "2"], r"the spy named the faulted component in \d+ of 2 problems"),
    ("exec_bench", ["--repeat", "1"], r"port-forward: HTTP GET /"),
    ("sre_session_bench", [], r"\d+ commands, \d+ passed"),
    ("llm_agents_tokens_bench", [], r"canned: stratus uses [\d.]+x the tokens of react"),
    ("artifacts_bench", ["--repeat", "1"], r"artifact step CPU per trial: [\d.]+ ms"),
    ("judge_bench", ["--labels", "tests/farm/oracles/labels/blind_shared_c.jsonl", "--no-attacks"],
     r"blind_shared_c.jsonl: n=80 accuracy [\d.]+ kappa [\d.-]+"),
]

LEFT_OUT = {
    "chaos_bench": "kills and restarts workers, Redis and S3 for minutes by design; its smallest run is a sweep "
                   "undisturbed and again disturbed",
    "noise_bench": "a sweep per noise kind: 2-3 CPU-minutes at its smallest",
    "throughput_bench": "whole trials measured as a process tree: 2 CPU-minutes at its smallest",
    "sim_observability_bench": "a fixed 2,000-series cluster: about 3 CPU-minutes, no size option",
    "local_llm_bench": "needs the local model's server, which tests/farm/llm drives through the same code",
}


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.kubectl
@pytest.mark.timeout(900)
@pytest.mark.parametrize(("bench", "args", "expect"), TINY, ids=[t[0] for t in TINY])
def test_the_bench_prints_its_figures(bench: str, args: list[str], expect: str) -> None:
    # tests/conftest.py has put the project's kubectl first on PATH; the bench inherits it.
    proc = subprocess.run([sys.executable, f"bench/{bench}.py", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=840)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert re.search(expect, out), f"{bench} printed no line matching {expect!r}:\n{out[-3000:]}"


def test_every_bench_is_run_by_a_test_or_left_out_with_a_reason() -> None:
    benches = {p.stem for p in (ROOT / "bench").glob("*_bench.py")}
    run_here = {t[0] for t in TINY}
    own_tests = {p.stem.removeprefix("test_") for p in (ROOT / "tests" / "bench").glob("test_*_bench.py")}
    assert benches - run_here - own_tests - set(LEFT_OUT) == set(), "a bench no test runs"
    assert set(LEFT_OUT) <= benches, "LEFT_OUT names a bench that is gone"
