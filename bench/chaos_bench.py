"""The farm under chaos: a sweep of emulated trials on 4 `farm worker` processes, run once
undisturbed and once while workers are SIGKILLed and SIGTERMed (and restarted), Redis is killed
and started empty, PostgreSQL is restarted and the S3 endpoint goes down for a while, all on a
schedule set as fractions of the undisturbed run's wall time. Redis, PostgreSQL and moto are the
bench's own, on free loopback ports. Prints, for both runs: trials, finished, recorded exactly
once, duplicates, lost, stranded, missing artifacts, and the wall times.

    .venv/bin/python bench/chaos_bench.py [--problems 4 --seeds 16 --workers 4 --s3-down 0.3]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _schedule(farm, redis, pg, s3, s3_down: float, log: Callable[[str], None]):
    """(fraction of the undisturbed wall time, what happens) in order; one worker at a time."""

    def kill(name: str, sig: int) -> Callable[[], None]:
        def act() -> None:
            proc = farm.workers.pop(name)
            if sig == signal.SIGTERM:
                proc.send_signal(sig)  # Celery's main process: a warm shutdown
            else:
                os.killpg(proc.pid, sig)  # the main process and its pool child at once
            proc.wait(timeout=120)
            farm.start_worker(name)
            log(f"{name} {signal.Signals(sig).name} (exit {proc.returncode}), restarted")
        return act

    def redis_flush() -> None:
        redis.restart(down_s=1.0)
        log("redis killed and started empty")

    def pg_restart() -> None:
        pg.restart(down_s=2.0)
        log("postgresql restarted (immediate stop)")

    def s3_stop() -> None:
        s3.stop()
        log("s3 endpoint down")

    def s3_start() -> None:
        s3.start()
        log("s3 endpoint back")

    return [
        (0.10, kill("w0", signal.SIGKILL)),
        (0.20, redis_flush),
        (0.35, pg_restart),
        (0.45, s3_stop),
        (0.55, kill("w1", signal.SIGTERM)),
        (0.45 + s3_down, s3_start),
        (0.70, kill("w2", signal.SIGKILL)),
    ]


def _run(label: str, services, args, base_s: float | None, folder: Path):
    from farm.testing.harness import Farm, audit, hotel_problems, wait_spools, write_spec

    redis, pg, s3 = services
    db_url = pg.create_database(f"chaos_{label}_{uuid.uuid4().hex[:6]}")
    farm = Farm(folder / label, redis.url, db_url, s3.endpoint)
    farm.folder.mkdir(parents=True)
    farm.make_bucket()
    for i in range(args.workers):
        farm.start_worker(f"w{i}")
    ready = farm.wait_workers([f"w{i}" for i in range(args.workers)], 180)
    sweep = f"chaos-{label}"
    total = args.problems * args.seeds
    spec = write_spec(farm.folder, sweep, hotel_problems(args.problems), seeds=args.seeds)
    started = time.time()

    def log(msg: str) -> None:
        print(f"  [{label} +{time.time() - started:5.1f} s] {msg}", flush=True)

    events = _schedule(farm, redis, pg, s3, args.s3_down, log) if base_s else []

    def tick(elapsed: float) -> None:
        while events and elapsed >= events[0][0] * (base_s or 0):
            events.pop(0)[1]()

    farm.submit(spec)
    farm.wait_settled(sweep, total, args.timeout, tick=tick)
    while events:  # the run finished before the schedule did: play the rest (S3 must come back)
        events.pop(0)[1]()
    wait_spools(farm, 120)
    wall = time.time() - started
    result = audit(farm, sweep)
    farm.stop_all(signal.SIGTERM)
    print(f"  [{label}] workers up in {ready:.1f} s; sweep settled, spools drained in {wall:.1f} s", flush=True)
    return result, wall


def main() -> None:
    from farm.testing.services import MotoS3, PostgresServer, RedisServer

    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", type=int, default=4, help="hotel-reservation problems")
    ap.add_argument("--seeds", type=int, default=16, help="seeds per problem (trials = problems x seeds)")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--s3-down", type=float, default=0.3, help="S3 outage, as a fraction of the undisturbed run")
    ap.add_argument("--timeout", type=float, default=1200)
    args = ap.parse_args()
    os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"})
    with tempfile.TemporaryDirectory(prefix="farm-chaos-") as tmp:
        folder = Path(tmp)
        redis = RedisServer(folder / "redis").start()
        pg = PostgresServer().start()
        s3 = MotoS3().start()
        try:
            services = (redis, pg, s3)
            print(f"undisturbed: {args.problems * args.seeds} trials on {args.workers} workers", flush=True)
            calm, calm_s = _run("calm", services, args, None, folder)
            print(f"disturbed: the same sweep, with the chaos schedule over {calm_s:.0f} s", flush=True)
            chaos, chaos_s = _run("chaos", services, args, calm_s, folder)
        finally:
            s3.stop() if s3.server is not None else None
            pg.destroy()
            redis.stop()
    cols = ["trials", "finished", "recorded_once", "duplicates", "lost", "stranded", "artifacts_missing",
            "attempts", "attempts_lost"]
    print()
    print(f"{'run':<12}" + "".join(f"{c:>18}" for c in cols) + f"{'wall s':>10}")
    for name, res, wall in (("undisturbed", calm, calm_s), ("disturbed", chaos, chaos_s)):
        row = res.row()
        print(f"{name:<12}" + "".join(f"{row[c]:>18}" for c in cols) + f"{wall:>10.1f}")
    print(f"\ndisturbed / undisturbed wall time: {chaos_s / calm_s:.2f}x (target <= 1.5x)")
    print(f"targets: 0 duplicates, 0 lost, 0 stranded, every artifact present: "
          f"{'met' if chaos.ok() and calm.ok() else 'NOT met'}")


if __name__ == "__main__":
    main()
