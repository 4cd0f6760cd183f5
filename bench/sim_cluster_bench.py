"""Benchmark one emulated cluster: an application (hotel-reservation by default) deployed, then
10 minutes of cluster time under its load with metrics, logs and traces recorded. Prints CPU
seconds and peak RSS (the issue's targets are for hotel-reservation).

    .venv/bin/python bench/sim_cluster_bench.py [--app hotel-reservation] [--minutes 10] [--seed 0]

Issue 14's reference for the CPU of 10 cluster-minutes is the cluster before kube-system's pods
(commit 27cfd47). The figure moves with the machine's load, so compare on the same machine, runs
interleaved; `--compare-with` does that: it extracts the commit (`git archive`) into a temporary
folder, runs its copy of this script and this checkout's alternately, each in a fresh process with
this interpreter and the same arguments, and prints every figure, the medians, the lows and their
ratios (this checkout over the commit):

    .venv/bin/python bench/sim_cluster_bench.py --compare-with 27cfd47 --runs 5 [--app social-network]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
_RUN_CPU = re.compile(r"under load: ([0-9.]+) s CPU")


def _run_cpu(script: Path, args: list[str]) -> float:
    """The CPU seconds one fresh run of `script` reports for the cluster time under load."""
    out = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0")}).stdout
    found = _RUN_CPU.search(out)
    if found is None:
        raise SystemExit(f"{script} printed no CPU figure:\n{out}")
    return float(found.group(1))


def compare(commit: str, runs: int, args: list[str]) -> None:
    """Alternate runs of `commit`'s copy of this bench and this checkout's; print the figures."""
    with tempfile.TemporaryDirectory(prefix="sim-bench-ref-") as ref:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", ref], input=archive, check=True)
        theirs, ours = Path(ref) / "bench" / Path(__file__).name, Path(__file__).resolve()
        ref_cpu: list[float] = []
        new_cpu: list[float] = []
        for i in range(runs):
            ref_cpu.append(_run_cpu(theirs, args))
            new_cpu.append(_run_cpu(ours, args))
            print(f"run {i + 1}: {commit} {ref_cpu[-1]:.3f} s, this checkout {new_cpu[-1]:.3f} s CPU", flush=True)
    med_ref, med_new = statistics.median(ref_cpu), statistics.median(new_cpu)
    print(f"{commit}: {' '.join(f'{v:.3f}' for v in ref_cpu)}  (median {med_ref:.3f}, low {min(ref_cpu):.3f})")
    print(f"this checkout: {' '.join(f'{v:.3f}' for v in new_cpu)}  (median {med_new:.3f}, low {min(new_cpu):.3f})")
    print(f"ratio this/{commit}: medians {med_new / med_ref:.3f}, lows {min(new_cpu) / min(ref_cpu):.3f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--app", default="hotel-reservation")
    ap.add_argument("--compare-with", metavar="COMMIT", help="alternate runs with this commit's copy of the bench")
    ap.add_argument("--runs", type=int, default=5, help="runs of each side with --compare-with")
    args = ap.parse_args()
    if args.compare_with:
        compare(args.compare_with, args.runs, ["--app", args.app, "--minutes", f"{args.minutes:g}", "--seed", str(args.seed)])
        return
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    from apps import load_application
    from kubesim.cluster import SimCluster

    rss_imports = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.process_time()
    cluster = SimCluster(seed=args.seed)
    app = load_application(args.app)
    cluster.apply_files(app.manifest_files(), app.namespace)

    def not_ready() -> list[str]:
        return [p["metadata"]["name"] for p in cluster.store.list("pods", app.namespace)
                if not any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))]

    # Up to ready, as deploy waits (train-ticket's Spring Boot services take minutes to start), at least 120 s.
    warmup = 0
    while warmup < 120 or (not_ready() and warmup < 900):
        cluster.advance(30)
        warmup += 30
    t_deploy = time.process_time() - t0
    still = not_ready()
    t1 = time.process_time()
    cluster.checkpoint("deployed")
    t_ckpt = time.process_time() - t1
    t1 = time.process_time()
    cluster.advance(args.minutes * 60)
    t_run = time.process_time() - t1
    counters = cluster.workload.state["counters"].items()
    ok = sum(v for (m, labels), v in counters if m == "wrk2_requests_total" and ("code", "200") in labels)
    ok += sum(v for (m, labels), v in counters if m == "locust_requests_num_requests" and ("name", "Aggregated") in labels)
    ok -= sum(v for (m, labels), v in counters if m == "locust_requests_num_failures" and ("name", "Aggregated") in labels)
    series = len(getattr(cluster.obs.tsdb, "_series", {}))
    t1 = time.process_time()
    cluster.restore("deployed")
    t_restore = time.process_time() - t1
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"deploy (bootstrap + {warmup} s cluster time): {t_deploy:.3f} s CPU; pods not ready: {still or 'none'}")
    print(f"{args.minutes:g} min of cluster time under load: {t_run:.3f} s CPU (target <= 0.3 s)")
    print(f"checkpoint {t_ckpt * 1000:.1f} ms, restore {t_restore * 1000:.1f} ms CPU")
    print(f"peak RSS: {rss / 1024:.1f} MB (imports alone {rss_imports / 1024:.1f} MB, interpreter {rss0 / 1024:.1f} MB; "
          f"target <= 150 MB)")
    print(f"recorded: {series} series, {ok:.0f} successful client requests")


if __name__ == "__main__":
    main()
