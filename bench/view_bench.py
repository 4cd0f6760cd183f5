"""`farm view` on 100,000 trials in PostgreSQL: a real server process, timed page by page.

Synthetic rows (a sweep of `--trials` trials, one attempt each, a few infrastructure failures and
lost attempts, artifacts on disk for the trials whose pages are opened) go into a database of the
bench's own, created and dropped. Prints each page's best and median time over `--repeat` loads
and the server's peak resident memory. Targets: sweep page and drill-downs under 1 s, a trial page
under 300 ms, the server under 500 MB.

    .venv/bin/python bench/view_bench.py [--trials 100000] [--pg postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
import sqlalchemy as sa  # noqa: E402

from bench.scratch_db import scratch_database  # noqa: E402
from farm.testing.view_rows import farm_view, write_artifacts  # noqa: E402
from results.artifact_store import LocalArtifactStore  # noqa: E402
from results.db import engine_for  # noqa: E402
from results.models import Attempt, InfraEvent, Sweep, Trial  # noqa: E402

AGENTS = [("baseline", "-"), ("react", "openai/gpt-4o"), ("react", "anthropic/claude"), ("stratus", "openai/gpt-4o")]
LAYERS = ("application", "operator", "os", "hardware")
SWEEP = "bench"


def fill(engine: sa.Engine, n: int, store: LocalArtifactStore, opened: int) -> list[str]:
    """n trials with one attempt each; returns the ids of the `opened` trials given artifacts."""
    rng = random.Random(1)
    now = time.time()
    with engine.begin() as conn:
        conn.execute(sa.insert(Sweep), [{"id": SWEEP, "spec_json": "{}", "created_at": now - 3600, "updated_at": now - 3600,
                                         "cancelled": False, "cost_cap_usd": 50_000.0}])
    trials, attempts, with_artifacts = [], [], []
    for i in range(n):
        agent, model = AGENTS[i % 4]
        tid = f"t{i:07d}"
        state = "finished" if i % 50 else "infra_failed"
        if i % 997 == 0:
            state = "running"
        d, m = rng.random() < 0.5, rng.random() < 0.6
        done = state == "finished"
        uri = None
        if done and len(with_artifacts) < opened and i % 1000 == 1:
            uri = write_artifacts(store, SWEEP, tid, 1, d, m, "The geo deployment runs an image tag that does not exist.")
            with_artifacts.append(tid)
        result = {"diagnosis_passed": d if done else None, "mitigation_passed": m if done else None,
                  "e2e_passed": (d and m) if done else None, "judge_offline": True, "diagnosis_score": 0.9 if d else 0.2,
                  "diagnosis_pass_rule": "localized-and-mechanism-v2", "tokens_in": rng.randint(1000, 90000),
                  "tokens_out": rng.randint(100, 9000), "cost_usd": rng.random() / 10, "end_reason": "submitted",
                  "time_to_diagnosis_s": rng.uniform(10, 900) if d else None,
                  "time_to_mitigation_s": rng.uniform(10, 900) if m else None,
                  "error": "cluster sim-3 down: connection refused" if state == "infra_failed" else None}
        trials.append({"id": tid, "sweep_id": SWEEP, "key": f"p{i % 130:03d}|{agent}|{model}|{i // 520}|{'noise' if i % 2 else 'quiet'}",
                       "problem_id": f"p{i % 130:03d}", "app": "hotel-reservation", "layer": LAYERS[(i // 4) % 4],
                       "composition": "single", "agent": agent, "model": model, "seed": i // 520, "noise": bool(i % 2),
                       "state": state, "current_attempt": 1, "infra_attempts": int(state == "infra_failed"),
                       "finished_at": now - rng.uniform(0, 3000) if done else None, "final_attempt": 1 if done else None,
                       **(result if done else dict.fromkeys(result) | {"error": result["error"]})})
        attempts.append({"trial_id": tid, "token": 1, "worker": f"w{i % 16}", "cluster": f"sim:{i % 16}",
                         "state": {"finished": "recorded", "infra_failed": "infra_error", "running": "running"}[state],
                         "phase": "record" if done else "deploy", "started_at": now - 3000 + i * 0.01,
                         "ended_at": None if state == "running" else now - 2990 + i * 0.01,
                         "error_phase": "deploy" if state == "infra_failed" else None, "artifacts_uri": uri,
                         "judge": "offline", **(result if done else dict.fromkeys(result) | {"error": result["error"]})})
        if len(trials) == 10_000:
            _flush(engine, trials, attempts)
    _flush(engine, trials, attempts)
    with engine.begin() as conn:
        conn.execute(sa.insert(InfraEvent), [{"kind": "reset_failed", "at": now - k, "sweep_id": SWEEP,
                                              "trial_id": f"t{k * 7:07d}", "worker": "w1", "cluster": "sim:1"}
                                             for k in range(1, 40)])
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE")
    return with_artifacts


def _flush(engine: sa.Engine, trials: list[dict], attempts: list[dict]) -> None:
    # (an executemany takes its columns from the first row: every row names the same keys)
    if trials:
        with engine.begin() as conn:
            conn.execute(sa.insert(Trial), trials)
            conn.execute(sa.insert(Attempt), attempts)
    trials.clear()
    attempts.clear()


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def timed(http: httpx.Client, path: str, repeat: int) -> tuple[float, float, str]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = http.get(path)
        times.append(time.perf_counter() - t0)
        assert r.status_code == 200, f"{path}: {r.status_code} {r.text[-500:]}"
    import re

    listed = re.search(r'<p id="count"><b>([\d,]+)</b>', r.text)
    return min(times), statistics.median(times), f"{len(r.content) / 1024:.0f} KiB" + (
        f", {listed.group(1)} trials listed" if listed else "")


def run(url: str, n: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        engine = engine_for(url)
        t0 = time.perf_counter()
        opened = fill(engine, n, LocalArtifactStore(Path(tmp) / "artifacts"), 10)
        print(f"filled {n:,d} trials and attempts in {time.perf_counter() - t0:.1f} s")
        react = {"agent": "react", "model": "openai/gpt-4o"}
        pages = [
            ("sweep list", "/", 1.0),
            ("sweep page (progress, leaderboard, heatmap)", f"/sweeps/{SWEEP}", 1.0),
            ("leaderboard by problem", f"/sweeps/{SWEEP}?by=problem", 1.0),
            ("leaderboard by agent,model,noise, layer=os", f"/sweeps/{SWEEP}?by=agent,model,noise&layer=os", 1.0),
            ("drill-down: n of react/gpt-4o", f"/sweeps/{SWEEP}/trials?{urlencode({**react, 'state': 'finished'})}", 1.0),
            ("drill-down: diagnosed of react/gpt-4o", f"/sweeps/{SWEEP}/trials?{urlencode({**react, 'state': 'finished', 'diagnosis': 'pass'})}", 1.0),
            ("drill-down: heatmap cell", f"/sweeps/{SWEEP}/trials?{urlencode({**react, 'problem': 'p005', 'state': 'finished'})}", 1.0),
            ("drill-down: sorted by cost, desc", f"/sweeps/{SWEEP}/trials?state=finished&sort=cost_usd&desc=1", 1.0),
            ("drill-down: search 'p043|stratus'", f"/sweeps/{SWEEP}/trials?q=p043%7Cstratus", 1.0),
            ("drill-down: page 900 of all trials", f"/sweeps/{SWEEP}/trials?page=900", 1.0),
            ("errors view", f"/sweeps/{SWEEP}/errors", 1.0),
            ("live progress fragment", f"/sweeps/{SWEEP}/live", 1.0),
            ("compare: the sweep against itself, by agent,model", f"/compare?{urlencode({'a': SWEEP, 'b': SWEEP})}", 1.0),
        ] + [(f"trial page {tid}", f"/trials/{tid}?{urlencode(react)}", 0.3) for tid in opened[:3]] + [
            ("trial page, transcript searched", f"/trials/{opened[0]}?find=get_alerts", 0.3)]
        with farm_view(url) as address:
            from farm.testing import view_rows

            pid = view_rows.last_pid
            http = httpx.Client(base_url=address, timeout=120)
            print(f"{'page':52s} {'best':>9s} {'median':>9s} {'target':>8s}  size")
            worst = {}
            for name, path, target in pages:
                best, median, size = timed(http, path, repeat)
                worst[name] = (median, target)
                print(f"{name:52s} {best * 1000:7.0f}ms {median * 1000:7.0f}ms {target * 1000:6.0f}ms  {size}"
                      + ("" if median < target else "  OVER"))
            rss = peak_rss_mb(pid)
            print(f"server peak resident memory {rss:.0f} MB (target 500 MB)")
            over = [k for k, (m, t) in worst.items() if m >= t]
            print("all pages within their targets" if not over and rss < 500 else f"over target: {over or 'memory'}")
        engine.dispose()
        engine_for.cache_clear()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = ap.parse_args()
    with scratch_database(args.pg, "farm_viewbench") as url:
        run(url, args.trials, args.repeat)

if __name__ == "__main__":
    main()
