"""`farm report` on a 10,000-trial sweep of synthetic rows in PostgreSQL (a database of its own,
dropped after): render time and peak memory of the rendering process, and the report's size on
disk. Each attempt points at one of a dozen artifact folders written like a long agent session's
(60 steps, tool outputs of a few KB, a cluster snapshot), so the trial pages are as large as real
ones would be. Targets: 10,000 trials of rows alone (`--bare`) < 30 s on 2 cores; < 1 GB; at
2,000 trials of long sessions the whole report < 50 MB.

    .venv/bin/python bench/report_bench.py [--trials 10000] [--bare] [--pg postgresql://postgres@127.0.0.1:5432/postgres]
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


def write_artifacts(root: Path, folders: int = 12) -> list[str]:
    """Artifact folders of long synthetic sessions; returns their file:// URIs."""
    rng = random.Random(2)
    uris = []
    for f in range(folders):
        d = root / f"attempt-{f}"
        d.mkdir(parents=True)
        steps, calls = [], []
        for i in range(60):
            tool = TOOLS[i % len(TOOLS)]
            output = "\n".join(f"pod-{j}-{rng.randrange(10**6):06d}   1/1   Running   {rng.randrange(9)}   {j}h"
                                for j in range(rng.randint(20, 80)))
            steps.append({"step_id": i, "source": "agent", "model_name": "openai/gpt-4o",
                          "message": f"Step {i}: looking at {tool} for the failing service. " * 4,
                          "tool_calls": [{"tool_call_id": f"c{i}", "function_name": tool,
                                          "arguments": {"command": f"get pods -n test-{i}"}}],
                          "observation": {"results": [{"source_call_id": f"c{i}", "content": output}]},
                          "metrics": {"prompt_tokens": 1000 * i, "completion_tokens": 80, "cached_tokens": 500 * i}})
            calls.append({"index": i, "name": tool, "args": {"command": f"get pods -n test-{i}"}, "output": output,
                          "tokens": len(output) // 4})
        docs = {
            "trajectory.atif": {"schema_version": "ATIF-v1.4", "session_id": f"s{f}", "steps": steps},
            "tool_calls": calls,
            "diagnosis": {"text": "The geo service cannot reach mongodb-geo: its password was rotated. " * 5},
            "verdicts": {"diagnosis": {"judge": "offline", "offline": True, "composite": 0.8, "passed": True,
                                       "pass_rule": "composite>=0.7 and L1", "pass_rule_text": "L1 holds and the "
                                       "composite reaches 0.7", "answers": [
                                           {"id": f"L{k}", "dimension": "localization", "question": "right service?",
                                            "answer": True, "quote": "geo service", "evidence": "names geo"}
                                           for k in range(1, 7)]},
                         "mitigation": {"passed": True, "checks": {"pods ready": True, "success rate": True}}},
            "cluster_snapshot": {"pods": {"items": [{"metadata": {"name": f"pod-{j}"}, "status": {"phase": "Running"}}
                                                    for j in range(40)]}},
        }
        for name, doc in docs.items():
            (d / f"{name}.json").write_text(json.dumps(doc))
        uris.append(d.as_uri())
    return uris


def fill(url: str, n: int, artifacts: list[str]) -> None:
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
                         "error_phase": "deploy" if state == "infra_failed" else None,
                         "artifacts_uri": artifacts[i % len(artifacts)] if artifacts and state == "finished" else None})
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
    total = sum(f.stat().st_size for f in Path(out).rglob("*") if f.is_file())
    pages = len(list((Path(out) / "trials").glob("*.html")))
    queue.put((time.perf_counter() - t0, index.stat().st_size, pages, total))


def _result(proc: mp.process.BaseProcess, queue: mp.Queue, timeout: float = 600.0) -> tuple[float, int, int, int]:
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
    ap.add_argument("--bare", action="store_true", help="Attempts without artifacts (rows only).")
    ap.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = ap.parse_args()
    with scratch_database(args.pg, "farm_report_bench") as url, tempfile.TemporaryDirectory() as store:
        t0 = time.perf_counter()
        artifacts = [] if args.bare else write_artifacts(Path(store))
        fill(url, args.trials, artifacts)
        print(f"filled {args.trials:,d} trials and attempts in {time.perf_counter() - t0:.1f} s")
        with tempfile.TemporaryDirectory() as tmp:
            # A fresh process renders, so its peak memory is the report's alone.
            ctx = mp.get_context("spawn")
            queue = ctx.Queue()
            proc = ctx.Process(target=render, args=(url, tmp, queue))
            proc.start()
            seconds, size, pages, total = _result(proc, queue)
            proc.join()
            peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"report of {args.trials:,d} trials: rendered in {seconds:.1f} s"
              f"{' (target < 30 s for 10,000 bare trials)' if args.bare else ''}, "
              f"peak memory {peak_mb:.0f} MB (target < 1024 MB); index.html {size / 1e6:.1f} MB, {pages:,d} trial pages"
              f" ({'no artifacts' if args.bare else f'{len(artifacts)} long sessions shared'}); whole report "
              f"{total / 1e6:.1f} MB ({total / max(pages, 1) / 1e3:.1f} KB per trial)"
              + (" (target < 50 MB at 2,000 trials)" if args.trials <= 2000 else ""))

if __name__ == "__main__":
    main()
