"""Dispatch overhead per trial for a 10,000-trial sweep: expanding the spec into trial rows
(SQLite and PostgreSQL), marking them queued, and publishing claim messages to Redis.

    .venv/bin/python bench/dispatch_bench.py [--trials 10000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import sqlalchemy as sa  # noqa: E402


def make_spec(n_trials: int):  # type: ignore[no-untyped-def]
    from farm.problems.catalog import load_catalog
    from farm.spec import SweepSpec

    problems = [p for p in load_catalog().problems]
    seeds = max(1, n_trials // len(problems))
    spec = SweepSpec.model_validate({"name": "bench-dispatch", "problems": {"ids": [p.id for p in problems]},
                                     "agents": ["baseline"], "seeds": seeds})
    return spec, problems


def bench_db(label: str, url: str, spec, problems) -> list[str]:  # type: ignore[no-untyped-def]
    from farm import dispatcher
    from results.db import engine_for

    engine = engine_for(url)
    t0 = time.perf_counter()
    sub = dispatcher.submit(engine, spec, problems)
    t1 = time.perf_counter()
    dispatcher.mark_queued(engine, sub.to_run)
    t2 = time.perf_counter()
    again = dispatcher.submit(engine, spec, problems)
    t3 = time.perf_counter()
    n = sub.total
    print(f"{label:9s} trials={n:,d}  expand+insert {1e6 * (t1 - t0) / n:7.1f} µs/trial  "
          f"mark queued {1e6 * (t2 - t1) / n:6.1f} µs/trial  resubmit (no-op, {len(again.to_run)} to run) "
          f"{1e6 * (t3 - t2) / n:6.1f} µs/trial")
    engine.dispose()
    return sub.to_run


def bench_publish(trial_ids: list[str]) -> None:
    import redis

    prefix = f"bench-{uuid.uuid4().hex[:8]}:"
    os.environ["FARM_BROKER_URL"] = "redis://127.0.0.1:6379/9"
    os.environ["FARM_BROKER_KEYPREFIX"] = prefix
    from tasks.trial import send_claims

    t0 = time.perf_counter()
    send_claims(trial_ids)
    dt = time.perf_counter() - t0
    print(f"redis     publish {len(trial_ids):,d} claim messages {1e6 * dt / len(trial_ids):7.1f} µs/trial")
    client = redis.Redis.from_url("redis://127.0.0.1:6379/9")
    for key in client.scan_iter(match=f"{prefix}*", count=1000):
        client.delete(key)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=10_000)
    ap.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = ap.parse_args()
    spec, problems = make_spec(args.trials)
    with tempfile.TemporaryDirectory() as tmp:
        ids = bench_db("sqlite", f"sqlite:///{tmp}/bench.sqlite", spec, problems)
    name = f"farm_bench_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(args.pg, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        bench_db("postgres", args.pg.rsplit("/", 1)[0] + f"/{name}", spec, problems)
    finally:
        with admin.connect() as c:
            c.exec_driver_sql(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname='{name}'")
            c.exec_driver_sql(f'DROP DATABASE "{name}"')
    bench_publish(ids)


if __name__ == "__main__":
    main()
