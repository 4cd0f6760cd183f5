"""What a trial's artifact step costs the worker (issue 29 item 3): one real trial of the baseline
agent on an emulated cluster with hotel-reservation, run up to its record step; then the record
step's artifact save (every artifact encoded, scrubbed and written, the cluster snapshot read)
repeated into fresh folders, timed as CPU of the saving thread (the emulator's side of the
snapshot is its own process's). Printed: the median CPU per save, its cluster snapshot and the
scrubbing of its JSON apart, and the bytes written.

    .venv/bin/python bench/artifacts_bench.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

PROBLEM = "hr-frontend-service-targetport-wrong"


def _cpu_ms(fn: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.thread_time()
        fn()  # type: ignore[operator]
        times.append((time.thread_time() - t0) * 1000)
    return statistics.median(times)


def main() -> None:
    from core.secrets import scrub
    from farm import dispatcher
    from farm.owner import ClusterOwner
    from farm.spec import SweepSpec
    from farm.trial import PHASES, StepOutcome, begin, step
    from farm.trial.artifacts import AttemptArtifacts
    from results import ledger
    from results.artifact_store import LocalArtifactStore
    from results.db import engine_for

    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--keep", type=Path, help="copy the first save's artifacts into this folder")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        engine = engine_for(f"sqlite:///{out / 'farm.sqlite'}")
        store = LocalArtifactStore(out / "artifacts")
        spec = SweepSpec.model_validate({"name": "artifacts-bench", "problems": {"ids": [PROBLEM]},
                                         "agents": ["baseline"], "seeds": 1, "limits": {"wall_time_s": 300}})
        sub = dispatcher.submit(engine, spec)
        owner = ClusterOwner("w-bench", "sim", engine, store, lease_s=120, reap=False)
        cluster = owner.open()
        try:
            claim = ledger.claim_next(engine, sub.sweep_id, owner.name, cluster.ref, owner.lease_s)
            assert claim is not None, "the bench's trial could not be claimed"
            run = begin(owner, claim)
            assert run is not None, "the bench's trial could not be set up"
            for phase in PHASES[:-1]:
                outcome = step(run, phase, owner)
                if outcome is not StepOutcome.NEXT:
                    raise SystemExit(f"the bench's trial ended in {phase}: {outcome}")
            counter = iter(range(10**6))

            def save() -> None:
                run.artifacts = AttemptArtifacts(store, f"bench/save-{next(counter)}")
                run.artifacts.save(run)

            save()  # warm: imports, the first connection
            if args.keep:
                shutil.copytree(out / "artifacts" / "bench" / "save-0", args.keep, dirs_exist_ok=True)
            files = sorted((out / "artifacts" / "bench" / "save-0").iterdir())
            written = sum(p.stat().st_size for p in files)
            biggest = max(files, key=lambda p: p.stat().st_size)
            biggest_size = biggest.stat().st_size
            text = json.dumps(run.cluster.snapshot(run.namespace), indent=1, sort_keys=True)
            save_ms = _cpu_ms(save, args.repeat)
            snap_ms = _cpu_ms(lambda: run.cluster.snapshot(run.namespace), args.repeat)
            scrub_ms = _cpu_ms(lambda: scrub(text), args.repeat)
            small = '{"role": "tool", "output": "NAME READY STATUS RESTARTS AGE"}'
            small_us = _cpu_ms(lambda: [scrub(small) for _ in range(100)], args.repeat) * 10
            step(run, "record", owner)
        finally:
            owner.close()
    print(f"artifacts written per save: {len(files)} files, {written / 1024:.0f} KiB "
          f"(largest {biggest.name}, {biggest_size / 1024:.0f} KiB)")
    print(f"artifact step CPU per trial: {save_ms:.1f} ms (median of {args.repeat} saves)")
    print(f"  of which cluster snapshot read: {snap_ms:.1f} ms; scrub of the snapshot's JSON "
          f"({len(text) / 1024:.0f} KiB): {scrub_ms:.1f} ms")
    print(f"  scrub of one short tool output: {small_us:.1f} µs")


if __name__ == "__main__":
    main()
