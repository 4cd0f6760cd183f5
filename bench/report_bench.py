"""`farm report` on a 10,000-trial sweep of synthetic rows in PostgreSQL (a database of its own,
dropped after): render time and peak memory of the rendering process. Targets: < 30 s on 2 cores,
< 1 GB.

    .venv/bin/python bench/report_bench.py [--trials 10000] [--pg postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sqlalchemy as sa  # noqa: E402

from bench.scratch_db import scratch_database  # noqa: E402

AGENTS = [("baseline", "-", "raw"), ("react", "openai/gpt-4o", "raw"), ("react", "anthropic/claude-sonnet-4-5", "raw"),
          ("stratus", "openai/gpt-4o", "summarised"), ("stratus", "anthropic/claude-sonnet-4-5", "summarised")]
TOOLS = ("kubectl", "prometheus_query", "loki_query", "jaeger_traces", "get_alerts", "wait")
LAYERS = ("application", "operator", "os", "hardware")


def fill(url: str, n: int) -> None:
    from results.db import engine_for
    from results.models import Attempt, Sweep, Trial

    engine = engine_for(url)
    rng = random.Random(1)
    now = time.time()
    with engine.begin() as conn:
        conn.execute(sa.insert(Sweep), [{"id": "bench", "spec_json": json.dumps({"name": "bench", "seeds": [0, 1, 2]}),
                                         "created_at": now, "updated_at": now, "cancelled": False, "cost_cap_usd": 5000.0}])
    trials, attempts = [], []
    for i in range(n):
        agent, model, mode = AGENTS[i % len(AGENTS)]
        state = "finished" if i % 60 else ("infra_failed" if i % 120 else "skipped_cost_cap")
        d, m = rng.random() < 0.5, rng.random() < 0.55
        tin = 0 if model == "-" else rng.randint(5_000, 300_000)
        row = {"id": f"t{i}", "sweep_id": "bench", "key": f"p{i % 163}|{agent}|{model}|{i % 3}|{i % 2}",
               "problem_id": f"p{i % 163}", "app": "hotel-reservation", "layer": LAYERS[i % 4],
               "composition": ("single", "concurrent", "correlated", "metastable")[i % 7 % 4], "agent": agent,
               "model": model, "seed": i % 3, "noise": bool(i % 2), "state": state, "current_attempt": 1,
               "infra_attempts": 0, "final_attempt": 1 if state == "finished" else None}
        row.update(dict.fromkeys(("diagnosis_passed", "mitigation_passed", "e2e_passed", "judge_offline", "tokens_in",
                                  "tokens_out", "cost_usd", "time_to_diagnosis_s", "time_to_mitigation_s")))
        if state == "finished":
            row.update(diagnosis_passed=d, mitigation_passed=m, e2e_passed=d and m, judge_offline=True,
                       tokens_in=tin, tokens_out=tin // 20, cost_usd=tin * 3e-6,
                       time_to_diagnosis_s=rng.uniform(20, 900) if d else None,
                       time_to_mitigation_s=rng.uniform(60, 1200) if m else None)
        trials.append(row)
        per_tool = {t: {"calls": rng.randint(1, 9), "tokens": rng.randint(50, 20_000)} for t in rng.sample(TOOLS, 4)}
        attempts.append({"trial_id": f"t{i}", "token": 1, "worker": f"w{i % 8}", "cluster": "sim:sim",
                         "state": {"finished": "recorded", "infra_failed": "infra_error"}.get(state, "cost_capped"),
                         "phase": "recorded", "started_at": now, "ended_at": now, "diagnosis_passed": d,
                         "mitigation_passed": m, "e2e_passed": d and m, "judge": "offline", "judge_offline": True,
                         "diagnosis_threshold": 0.7, "tokens_in": tin, "tokens_out": tin // 20,
                         "tokens_cached": tin // 3, "cost_usd": tin * 3e-6, "tool_calls": 20,
                         "tool_output_tokens": sum(v["tokens"] for v in per_tool.values()),
                         "tool_tokens": per_tool, "tool_mode": mode,  # the mapped attribute: stored as JSON text
                         "error_phase": "deploy" if state == "infra_failed" else None})
    with engine.begin() as conn:
        for i in range(0, n, 5000):
            conn.execute(sa.insert(Trial), trials[i:i + 5000])
            conn.execute(sa.insert(Attempt), attempts[i:i + 5000])
    engine.dispose()


def render(url: str, out: str, queue: mp.Queue) -> None:
    from results.db import engine_for
    from results.report import build_report

    t0 = time.perf_counter()
    index = build_report(engine_for(url), "bench", out)
    queue.put((time.perf_counter() - t0, index.stat().st_size, len(list((Path(out) / "trials").iterdir()))))


def _result(proc: mp.process.BaseProcess, queue: mp.Queue, timeout: float = 600.0) -> tuple[float, int, int]:
    """The rendering process's figures; SystemExit as soon as it dies without them (a traceback
    of its own is above), instead of waiting out the timeout."""
    import queue as queues

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return queue.get(timeout=0.5)  # type: ignore[no-any-return]
        except queues.Empty:
            if not proc.is_alive():
                raise SystemExit(f"report_bench: the rendering process exited with code {proc.exitcode}") from None
    proc.kill()
    raise SystemExit(f"report_bench: no report after {timeout:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=10_000)
    ap.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = ap.parse_args()
    with scratch_database(args.pg, "farm_report_bench") as url:
        t0 = time.perf_counter()
        fill(url, args.trials)
        print(f"filled {args.trials:,d} trials and attempts in {time.perf_counter() - t0:.1f} s")
        with tempfile.TemporaryDirectory() as tmp:
            # A fresh process renders, so its peak memory is the report's alone.
            ctx = mp.get_context("spawn")
            queue = ctx.Queue()
            proc = ctx.Process(target=render, args=(url, tmp, queue))
            proc.start()
            seconds, size, pages = _result(proc, queue)
            proc.join()
            peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"report of {args.trials:,d} trials: rendered in {seconds:.1f} s (target < 30 s), "
              f"peak memory {peak_mb:.0f} MB (target < 1024 MB); index.html {size / 1e6:.1f} MB, {pages:,d} trial pages")

if __name__ == "__main__":
    main()
