"""CPU time to validate the problem catalog on the emulated cluster, non-fixes included
(target: the whole catalog under 3 minutes of CPU: validator + emulated cluster process + kubectl).

Validates every problem of the catalog (or of the applications given) and prints, per problem,
per application, per validation step and in total, this process's CPU time, the emulated
cluster process's CPU time, kubectl's, wall time and cluster time, and how many problems passed.

    .venv/bin/python bench/catalog_bench.py [--app hotel-reservation] [--limit N] [--json] [--kubectl PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def process_cpu(pid: int) -> float:
    """utime + stime of another process, from /proc (Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _children_cpu() -> float:
    """CPU of this process's finished children: the kubectl processes (the emulated cluster's
    process runs until the end, so it is not among them before)."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return kids.ru_utime + kids.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app", action="append", help="application (repeatable); default: every one of the catalog")
    parser.add_argument("--limit", type=int, default=0, help="validate only the first N problems")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="one JSON line per problem")
    parser.add_argument("--kubectl", help="the kubectl binary the reference mitigations run with "
                                          "(default: FARM_KUBECTL, else the first on PATH)")
    args = parser.parse_args()

    from clusters.handle import open_cluster
    from farm.problems.catalog import load_catalog
    from farm.problems.validate import Validator

    problems = sorted(load_catalog().select(apps=args.app), key=lambda p: (p.app, p.id))
    if args.limit:
        problems = problems[: args.limit]
    wall0, cpu0 = time.perf_counter(), time.process_time()
    kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open_cluster("sim", seed=args.seed) as cluster:
        pid = cluster.process.pid  # type: ignore[attr-defined]
        sim0 = process_cpu(pid)
        per_step: dict[str, list[float]] = {}  # step → [count, validator s, sim s, kubectl s]
        last = [time.process_time(), process_cpu(pid), _children_cpu()]

        def on_step(_problem: str, outcome: object) -> None:
            now = [time.process_time(), process_cpu(pid), _children_cpu()]
            row = per_step.setdefault(outcome.name, [0, 0.0, 0.0, 0.0])  # type: ignore[attr-defined]
            row[0] += 1
            row[1] += now[0] - last[0]
            row[2] += now[1] - last[1]
            row[3] += now[2] - last[2]
            last[:] = now

        validator = Validator(cluster, on_step=on_step, kubectl=args.kubectl)
        passed = skipped = 0
        cluster_s = 0.0
        per_app: dict[str, list[float]] = {}  # app → [problems, passed, validator s, sim s, kubectl s]
        for problem in problems:
            sim_before, cpu_before, wall_before = process_cpu(pid), time.process_time(), time.perf_counter()
            last[:] = [cpu_before, sim_before, _children_cpu()]
            kids_before = resource.getrusage(resource.RUSAGE_CHILDREN)
            result = validator.validate(problem)
            cluster_s += result.cluster_seconds
            passed += result.passed
            skipped += any(s.skipped for s in result.steps)
            failed = next((s for s in result.steps if not s.ok), None)
            row = {"id": problem.id, "passed": result.passed,
                   "failed_step": failed.name if failed else None,
                   "detail": failed.detail[:160] if failed else "",
                   "cpu_s": round(time.process_time() - cpu_before, 3),
                   "sim_cpu_s": round(process_cpu(pid) - sim_before, 3),
                   "wall_s": round(time.perf_counter() - wall_before, 3),
                   "cluster_s": round(result.cluster_seconds, 1)}
            kids_after = resource.getrusage(resource.RUSAGE_CHILDREN)
            kubectl_s = max(0.0, (kids_after.ru_utime + kids_after.ru_stime) - (kids_before.ru_utime + kids_before.ru_stime))
            app = per_app.setdefault(problem.app, [0, 0, 0.0, 0.0, 0.0])
            app[0] += 1
            app[1] += result.passed
            app[2] += row["cpu_s"]
            app[3] += row["sim_cpu_s"]
            app[4] += kubectl_s
            mark = "PASS" if row["passed"] else ("SKIP" if any(s.skipped for s in result.steps) else "FAIL")
            print(json.dumps(row) if args.json else
                  f"{mark} {row['id']:<50} cpu {row['cpu_s']:6.2f}s "
                  f"sim {row['sim_cpu_s']:6.2f}s wall {row['wall_s']:6.2f}s"
                  + (f"  [{row['failed_step']}] {row['detail']}" if failed else ""), flush=True)
        validator.close()
        sim_cpu = process_cpu(pid) - sim0
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    own_cpu = time.process_time() - cpu0
    kubectl_cpu = (kids.ru_utime + kids.ru_stime) - (kids0.ru_utime + kids0.ru_stime) - sim_cpu
    total = own_cpu + sim_cpu + max(0.0, kubectl_cpu)
    for name, (n, ok, own, sim, kubectl) in per_app.items():
        print(f"  {name:<18} {n:3.0f} problems, {ok:3.0f} passed: validator {own:5.1f}s + emulated cluster {sim:5.1f}s "
              f"+ kubectl {kubectl:4.1f}s = {own + sim + kubectl:5.1f}s ({(own + sim + kubectl) / n:.2f}s a problem)")
    for name, (n, own, sim, kubectl) in per_step.items():
        print(f"  step {name:<16} {n:4.0f}x: validator {own:5.1f}s + emulated cluster {sim:5.1f}s + kubectl {kubectl:4.1f}s "
              f"= {own + sim + kubectl:5.1f}s")
    print(f"problems: {len(problems)}  passed: {passed}  skipped (real cluster only): {skipped}")
    print(f"CPU: validator {own_cpu:.1f}s + emulated cluster {sim_cpu:.1f}s + kubectl {max(0.0, kubectl_cpu):.1f}s "
          f"= {total:.1f}s (target < 180s)")
    print(f"wall: {time.perf_counter() - wall0:.1f}s  cluster time: {cluster_s / 60:.1f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
