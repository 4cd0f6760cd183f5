"""Latency of the SRE commands that go through the emulated cluster's streams: exec into the
images' userlands, exec -i, cp, a debug pod, port-forward then an HTTP GET, per kubectl version.

Deploys hotel-reservation on an emulated cluster process and runs each command with kubectl 1.20
(SPDY) and 1.33 (WebSocket); prints, per command and version, the median wall time of `--repeat`
runs and the emulated cluster process's CPU time per run. No target: the figures are to watch.

    .venv/bin/python bench/exec_bench.py [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KUBECTLS = {"1.20": ROOT / ".tools" / "kubectl-root" / "usr" / "bin" / "kubectl", "1.33": ROOT / ".tools" / "kubectl-v33" / "kubectl"}
NS = "hotel-reservation"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from catalog_bench import process_cpu  # noqa: E402  (one reading of another process's CPU for the benches)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="one JSON line per command and version")
    args = parser.parse_args()
    from apps import load_application
    from clusters.handle import open_cluster
    from farm.deploy import deploy

    handle = open_cluster("sim", seed=1)
    try:
        deploy(handle, load_application("hotel-reservation"))
        handle.advance(180)  # type: ignore[attr-defined]
        pid = handle.process.pid  # type: ignore[attr-defined]
        base = [str(KUBECTLS["1.20"]), "--kubeconfig", str(handle.kubeconfig), "-n", NS]  # type: ignore[attr-defined]
        names = subprocess.run(base + ["get", "pods", "-o", "name"], capture_output=True, text=True, check=True).stdout.split()

        def pod(prefix: str) -> str:
            return next(n.split("/", 1)[1] for n in names if n.split("/", 1)[1].startswith(prefix + "-"))
        subprocess.run(base + ["run", "bench-debug", "--image=busybox", "--", "sleep", "3600"], capture_output=True, check=True)
        handle.advance(15)  # type: ignore[attr-defined]
        fe, geo = pod("frontend"), pod("mongodb-geo")
        commands: list[tuple[str, list[str], str | None]] = [
            ("exec cat /etc/hosts", ["exec", fe, "--", "cat", "/etc/hosts"], None),
            ("exec sh -c 'env | grep MONGO'", ["exec", fe, "--", "sh", "-c", "env | grep MONGO"], None),
            ("exec ps aux", ["exec", fe, "--", "ps", "aux"], None),
            ("exec nslookup (busybox)", ["exec", "bench-debug", "--", "nslookup", "mongodb-geo"], None),
            ("exec wget frontend (busybox)", ["exec", "bench-debug", "--", "wget", "-qO-", "http://frontend:5000/"], None),
            ("exec mongo --eval db.stats()", ["exec", geo, "--", "mongo", "geo-db", "-u", "admin", "-p", "admin",
                                              "--authenticationDatabase", "admin", "--eval", "db.stats()"], None),
            ("exec -i sh (stdin script)", ["exec", "-i", fe, "--", "sh"], "hostname; df -h | head -2\n"),
            ("cp pod:/etc/resolv.conf", ["cp", f"{fe}:/etc/resolv.conf", "/tmp/exec-bench-resolv.conf"], None),
        ]
        rows = []
        for version, kubectl in KUBECTLS.items():
            if not kubectl.exists():
                print(f"kubectl {version}: not installed ({kubectl}); run ./scripts/setup.sh --dev", file=sys.stderr)
                continue
            cmd0 = [str(kubectl), "--kubeconfig", str(handle.kubeconfig), "-n", NS]  # type: ignore[attr-defined]
            for label, argv, stdin in commands:
                walls, cpus = [], []
                for _ in range(args.repeat):
                    cpu0, t0 = process_cpu(pid), time.perf_counter()
                    out = subprocess.run(cmd0 + argv, capture_output=True, text=True, input=stdin, timeout=60)
                    walls.append(time.perf_counter() - t0)
                    cpus.append(process_cpu(pid) - cpu0)
                    if out.returncode != 0:
                        print(f"{label} [{version}] failed: {out.stderr.strip()}", file=sys.stderr)
                rows.append({"command": label, "kubectl": version, "wall_s": statistics.median(walls),
                             "cluster_cpu_s": statistics.median(cpus)})
            walls = []
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            proc = subprocess.Popen(cmd0 + ["port-forward", f"pod/{fe}", f"{port}:5000"], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            try:
                assert proc.stdout is not None
                t0 = time.perf_counter()
                proc.stdout.readline()
                ready = time.perf_counter() - t0
                for _ in range(args.repeat):
                    t1 = time.perf_counter()
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=20) as resp:
                        resp.read()
                    walls.append(time.perf_counter() - t1)
            finally:
                proc.terminate()
                proc.wait(timeout=10)
            rows.append({"command": "port-forward: ready", "kubectl": version, "wall_s": ready, "cluster_cpu_s": 0.0})
            rows.append({"command": "port-forward: HTTP GET /", "kubectl": version, "wall_s": statistics.median(walls),
                         "cluster_cpu_s": 0.0})
    finally:
        handle.close()
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    print(f"{'command':<34} {'kubectl':>7} {'wall ms':>8} {'cluster CPU ms':>15}")
    for row in rows:
        print(f"{row['command']:<34} {row['kubectl']:>7} {1000 * row['wall_s']:>8.0f} {1000 * row['cluster_cpu_s']:>15.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
