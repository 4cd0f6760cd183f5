"""The scripted SRE incident session (kubesim/sre_session.py) against hotel-reservation on
the emulated cluster as a process: per-command wall latency, with each kubectl found (1.20 from
.tools/kubectl-root, 1.33 from .tools/kubectl-v33, or those given), and whether each step passed.

    .venv/bin/python bench/sre_session_bench.py [--kubectl PATH ...] [--seed 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_KUBECTLS = [ROOT / ".tools" / "kubectl-root" / "usr" / "bin" / "kubectl", ROOT / ".tools" / "kubectl-v33" / "kubectl"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kubectl", action="append", type=Path, help="a kubectl binary (repeatable)")
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()
    kubectls = [k for k in (args.kubectl or DEFAULT_KUBECTLS) if k.exists()]
    if not kubectls:
        print("no kubectl found: run ./scripts/setup.sh --dev, or pass --kubectl PATH", file=sys.stderr)
        return 2
    from apps import load_application
    from clusters.handle import open_cluster
    from farm.deploy import deploy
    from kubesim.sre_session import INCIDENT, SESSION, SessionRunner

    handle = open_cluster("sim", seed=args.seed)
    failures = 0
    try:
        deploy(handle, load_application("hotel-reservation"))
        handle.advance(180)  # type: ignore[attr-defined]
        handle.checkpoint("deployed")  # type: ignore[attr-defined]
        for kubectl in kubectls:
            handle.restore("deployed")  # type: ignore[attr-defined]
            runner = SessionRunner(handle, kubectl)
            runner.run(INCIDENT)
            results = runner.run(SESSION)
            print(f"\n== {kubectl.relative_to(ROOT) if kubectl.is_relative_to(ROOT) else kubectl}")
            print(f"{'ms':>8}  {'ok':3} {'tool':16} command")
            for r in results:
                if r.step.tool == "advance":
                    continue
                print(f"{r.seconds * 1000:8.1f}  {'ok' if r.ok else 'NO':3} {r.step.tool:16} {r.step.command[:100]}")
            timed = [r for r in results if r.step.tool != "advance"]
            failures += sum(not r.ok for r in timed)
            for tool in sorted({r.step.tool.split(':')[0] for r in timed}):
                ms = [r.seconds * 1000 for r in timed if r.step.tool.split(":")[0] == tool]
                print(f"{tool:10} n={len(ms):3}  median {statistics.median(ms):7.1f} ms  max {max(ms):7.1f} ms")
            print(f"{len(timed)} commands, {sum(r.ok for r in timed)} passed, "
                  f"{sum(r.seconds for r in timed):.2f} s in all")
    finally:
        handle.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
