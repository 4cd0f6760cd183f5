"""What the kubectl sandbox costs per call (target: at most 20 ms on top of kubectl's own start).

Runs the same kubectl commands against an emulated cluster with hotel-reservation deployed,
plain (the agent's kubeconfig, a private home) and through the bubblewrap sandbox the agent's
tool uses, alternating so both see the same cluster load, and prints the median and p90 wall
time per call of each and the median overhead. Wall time is all it can compare: the sandbox's
processes live in their own PID namespace, whose CPU time the caller's rusage never sees. On a
loaded machine the figures are noise; the load average is printed with them.

    .venv/bin/python bench/sandbox_bench.py [--calls 30]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

COMMANDS = (["version", "--client"], ["get", "pods"], ["get", "deploy", "geo", "-o", "json"])


def main() -> None:
    from apps import load_application
    from clusters.base import open_cluster
    from farm.deploy import deploy
    from farm.interface.kubectl import find_kubectl
    from farm.interface.sandbox import Sandbox

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30, help="calls per command and mode")
    args = parser.parse_args()
    app = load_application("hotel-reservation")
    binary = find_kubectl()
    cluster = open_cluster("sim", seed=1)
    home = tempfile.mkdtemp(prefix="kubectl-home-")
    try:
        deploy(cluster, app, app.namespace)
        kubeconfig = cluster.agent_kubeconfig(app.namespace)
        sandbox = Sandbox(binary, kubeconfig)
        plain_env = {"PATH": os.environ.get("PATH", "/usr/bin"), "HOME": home, "KUBECONFIG": str(kubeconfig)}
        print(f"kubectl {binary}, {args.calls} calls per command and mode")
        print(f"{'command':34} {'plain ms':>9} {'p90':>6} {'sandbox ms':>11} {'p90':>6} {'overhead ms':>12}")
        overheads = []
        for cmd in COMMANDS:
            plain: list[float] = []
            boxed: list[float] = []
            full = ["--request-timeout=30s", f"--namespace={app.namespace}", *cmd]
            for i in range(args.calls + 2):
                for argv, env, out in (([binary, *full], plain_env, plain), (sandbox.wrap(full), {}, boxed)):
                    t0 = time.perf_counter()
                    proc = subprocess.run(argv, env=env, capture_output=True, cwd=home, stdin=subprocess.DEVNULL)
                    took = (time.perf_counter() - t0) * 1000
                    if proc.returncode != 0:
                        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.decode()[:300]}")
                    if i >= 2:  # the first calls fill the discovery caches
                        out.append(took)
            p_med, b_med = statistics.median(plain), statistics.median(boxed)
            p90 = statistics.quantiles(plain, n=10)[-1]
            b90 = statistics.quantiles(boxed, n=10)[-1]
            overheads.append(b_med - p_med)
            print(f"{' '.join(cmd):34} {p_med:9.1f} {p90:6.1f} {b_med:11.1f} {b90:6.1f} {b_med - p_med:12.1f}")
        worst = max(overheads)
        print(f"sandbox overhead per call: median {statistics.median(overheads):.1f} ms, worst command {worst:.1f} ms "
              f"(target <= 20 ms): {'OK' if worst <= 20 else 'OVER'}; load average {os.getloadavg()[0]:.1f}")
        sandbox.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)
        cluster.close()


if __name__ == "__main__":
    main()
