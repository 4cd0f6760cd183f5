"""Dispatch overhead per trial for a sweep of exactly 10,000 trials: expanding the spec into trial
rows (SQLite and PostgreSQL), marking them queued, and publishing claim messages to Redis; then the
total per trial (submit + mark queued + publish) for each database.

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
    """A baseline sweep of exactly `n_trials` trials: as many catalog problems as divide it
    evenly (at most the catalog), times the seeds that make up the rest."""
    from farm.problems.catalog import load_catalog
    from farm.spec import SweepSpec

    catalog = list(load_catalog().problems)
    n_problems = max(d for d in range(1, min(len(catalog), n_trials) + 1) if n_trials % d == 0)
    problems = catalog[:n_problems]
    spec = SweepSpec.model_validate({"name": "bench-dispatch", "problems": {"ids": [p.id for p in problems]},
                                     "agents": ["baseline"], "seeds": n_trials // n_problems})
    return spec, problems


def bench_db(label: str, url: str, spec, problems, n_trials: int) -> tuple[list[str], float]:  # type: ignore[no-untyped-def]
    """Submit and mark queued; returns the trial ids and the seconds both took."""
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
    if n != n_trials or len(sub.to_run) != n_trials:
        raise SystemExit(f"{label}: the sweep has {n} trials ({len(sub.to_run)} to run), not {n_trials}")
    print(f"{label:9s} trials={n:,d}  expand+insert {1e6 * (t1 - t0) / n:7.1f} µs/trial  "
          f"mark queued {1e6 * (t2 - t1) / n:6.1f} µs/trial  resubmit (no-op, {len(again.to_run)} to run) "
          f"{1e6 * (t3 - t2) / n:6.1f} µs/trial")
    engine.dispose()
    return sub.to_run, t2 - t0


def bench_publish(trial_ids: list[str]) -> float:
    """Publish one claim message per trial; returns the seconds it took."""
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
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=10_000)
    ap.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = ap.parse_args()
    n = args.trials
    spec, problems = make_spec(n)
    print(f"sweep: {len(problems)} problems × {len(spec.seeds)} seeds × baseline = {n:,d} trials")
    with tempfile.TemporaryDirectory() as tmp:
        ids, sqlite_s = bench_db("sqlite", f"sqlite:///{tmp}/bench.sqlite", spec, problems, n)
    name = f"farm_bench_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(args.pg, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        _, pg_s = bench_db("postgres", args.pg.rsplit("/", 1)[0] + f"/{name}", spec, problems, n)
    finally:
        with admin.connect() as c:
            c.exec_driver_sql(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname='{name}'")
            c.exec_driver_sql(f'DROP DATABASE "{name}"')
    pub_s = bench_publish(ids)
    for label, db_s in (("sqlite", sqlite_s), ("postgres", pg_s)):
        total = db_s + pub_s
        print(f"total     {label:8s} submit + mark queued + publish: {1e6 * total / n:7.1f} µs/trial "
              f"({total:.2f} s for {n:,d} trials)")


if __name__ == "__main__":
    main()
