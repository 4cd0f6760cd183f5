"""Leaderboard query time on 100k and 1M synthetic trial rows, on SQLite and PostgreSQL.

    .venv/bin/python bench/leaderboard_bench.py [--rows 100000 1000000] [--pg postgresql://postgres@127.0.0.1/postgres]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sqlalchemy as sa  # noqa: E402
from sqlmodel import SQLModel  # noqa: E402

from results import leaderboard  # noqa: E402
from results.models import Sweep, Trial  # noqa: E402


def fill(engine: sa.Engine, n: int) -> None:
    rng = random.Random(1)
    SQLModel.metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(sa.insert(Sweep), [{"id": "bench", "spec_json": "{}", "created_at": 0, "updated_at": 0,
                                         "cancelled": False}])
    agents = [("baseline", "-"), ("react", "openai/gpt-4o"), ("react", "anthropic/claude"), ("stratus", "openai/gpt-4o")]
    batch = []
    for i in range(n):
        agent, model = agents[i % 4]
        d, m = rng.random() < 0.5, rng.random() < 0.6
        batch.append({
            "id": f"t{i}", "sweep_id": "bench", "key": str(i), "problem_id": f"p{i % 130}", "app": "hotel-reservation",
            "layer": ("application", "operator", "os", "hardware")[i % 4], "composition": "single",
            "agent": agent, "model": model, "seed": i % 5, "noise": bool(i % 2),
            "state": "finished" if i % 50 else "infra_failed", "current_attempt": 1, "infra_attempts": 0,
            "diagnosis_passed": d, "mitigation_passed": m, "e2e_passed": d and m, "judge_offline": False,
            "tokens_in": rng.randint(1000, 90000), "tokens_out": rng.randint(100, 9000), "cost_usd": rng.random(),
            "time_to_diagnosis_s": rng.uniform(10, 900), "time_to_mitigation_s": rng.uniform(10, 900),
        })
        if len(batch) == 20000:
            with engine.begin() as conn:
                conn.execute(sa.insert(Trial), batch)
            batch = []
    if batch:
        with engine.begin() as conn:
            conn.execute(sa.insert(Trial), batch)


def measure(label: str, engine: sa.Engine, n: int) -> None:
    t0 = time.perf_counter()
    fill(engine, n)
    fill_s = time.perf_counter() - t0
    for by in ("agent,model", "layer", "problem"):
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            rows = leaderboard.compute(engine, "bench", by)
            times.append(time.perf_counter() - t0)
        print(f"{label:10s} rows={n:>8,d} by={by:12s} groups={len(rows):4d} "
              f"query best={min(times) * 1000:8.1f} ms  (fill {fill_s:.1f} s)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--no-pg", action="store_true")
    args = ap.parse_args()
    for n in args.rows:
        with tempfile.TemporaryDirectory() as tmp:
            measure("sqlite", sa.create_engine(f"sqlite:///{tmp}/bench.sqlite"), n)
        if not args.no_pg:
            name = f"farm_bench_{uuid.uuid4().hex[:8]}"
            admin = sa.create_engine(args.pg, isolation_level="AUTOCOMMIT")
            with admin.connect() as c:
                c.exec_driver_sql(f'CREATE DATABASE "{name}"')
            engine = sa.create_engine(args.pg.rsplit("/", 1)[0] + f"/{name}")
            try:
                measure("postgres", engine, n)
            finally:
                engine.dispose()
                with admin.connect() as c:
                    c.exec_driver_sql(f'DROP DATABASE "{name}"')


if __name__ == "__main__":
    main()
