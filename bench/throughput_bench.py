"""Trial throughput of the embedded farm with 1 and 2 local workers on emulated clusters.

    .venv/bin/python bench/throughput_bench.py [--trials 8]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def main() -> None:
    from farm import dispatcher
    from farm.problems.catalog import load_catalog
    from farm.runner import run_sweep
    from farm.spec import SweepSpec
    from results.db import engine_for

    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=8)
    args = ap.parse_args()
    hotel = [p.id for p in load_catalog().problems if p.app == "hotel-reservation" and p.layer == "application"]
    ids = hotel[: args.trials]
    for workers in (1, 2):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            url = f"sqlite:///{out / 'farm.sqlite'}"
            spec = SweepSpec.model_validate({"name": f"bench-{workers}", "problems": {"ids": ids},
                                             "agents": ["baseline"], "seeds": 1})
            engine = engine_for(url)
            sub = dispatcher.submit(engine, spec)
            t0 = time.perf_counter()
            counts = run_sweep(sub.sweep_id, url, out, workers)
            dt = time.perf_counter() - t0
            print(f"workers={workers} trials={sub.total} finished={counts.get('finished', 0)} "
                  f"wall={dt:.1f} s  throughput={sub.total / dt * 60:.1f} trials/min  ({dt / sub.total:.2f} s/trial)")


if __name__ == "__main__":
    main()
