"""The model the farm serves itself (local/smollm2-135m, llama-cpp-python on loopback) on this box:

1. tokens/s of the server (--threads threads; by default the farm's, half the cores): prompt
   processing (a fresh ~1,500-token prompt each round, so no cached prefix helps) and generation;
2. seconds per react session step: one react session on the real stack (a live emulated cluster
   with hotel-reservation and hr-geo-image-tag-wrong injected, the MCP agent interface, kubectl in
   its sandbox), the wall time of the session over its model calls;
3. how many such LLM-paced sessions run at once before the clusters' clock lags: for 1, 2, 4, ...
   sessions, each in its own process with its own live cluster (as Celery workers would be), all
   sharing the host's one model server, every cluster's |cluster time - host time| sampled each
   second while the sessions run; it stops at the first count whose worst lag passes 1 s.

    .venv/bin/python bench/local_llm_bench.py [--threads 1] [--sessions 1,2,4,8] [--seconds 90]

The server is this run's own (a private state folder), so --threads is what it runs with.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

NAME = "smollm2-135m"
MODEL = f"local/{NAME}"
NS = "hotel-reservation"
PROBLEM = "hr-geo-image-tag-wrong"
LAG_TARGET_S = 1.0


def throughput(url: str, rounds: int) -> tuple[float, float]:
    """(prompt tokens/s, generated tokens/s), each the median over `rounds` requests."""
    import httpx

    filler = " ".join(f"pod-{i} restarted {i % 7} times on node-{i % 3}." for i in range(160))
    prompt_tps, gen_tps = [], []
    for _ in range(rounds):
        nonce = uuid.uuid4().hex  # first in the prompt: no cached prefix is reused
        body = {"model": NAME, "max_tokens": 1, "temperature": 0.0,
                "messages": [{"role": "user", "content": f"{nonce} {filler} Which pod restarted most?"}]}
        t0 = time.perf_counter()
        usage = httpx.post(f"{url}/chat/completions", json=body, timeout=600).json()["usage"]
        prompt_tps.append(usage["prompt_tokens"] / (time.perf_counter() - t0))
        body = {"model": NAME, "max_tokens": 128, "temperature": 0.7,
                "messages": [{"role": "user", "content": f"{nonce[:6]}: write a long incident report about a "
                                                         "Kubernetes outage, step by step."}]}
        t0 = time.perf_counter()
        usage = httpx.post(f"{url}/chat/completions", json=body, timeout=600).json()["usage"]
        gen_tps.append(usage["completion_tokens"] / (time.perf_counter() - t0))
    return statistics.median(prompt_tps), statistics.median(gen_tps)


def session_worker(index: int, seconds: float, max_steps: int, ready, go, out) -> None:  # noqa: ANN001
    """One worker: its own live cluster with the fault injected, then one react session on the
    local model while a thread samples the cluster's clock against the host's each second."""
    import logging

    logging.disable(logging.WARNING)
    from clusters.handle import open_cluster
    from farm.agents.agent import AgentContext, AgentLimits
    from farm.agents.react import ReactAgent
    from farm.interface import AgentInterface
    from farm.problems.catalog import load_catalog
    from injectors.compose import ProblemInjection

    handle = open_cluster(f"sim:llmbench{index}", seed=index, live=True,
                          cluster_factory="bench.sim_live_bench:app_cluster")
    try:
        ProblemInjection(load_catalog().get(PROBLEM)).inject(handle, NS)
        iface = AgentInterface(handle, NS, f"bench-{index}", mode="raw")
        url, token = iface.start()
        ready.put(index)
        go.wait()
        lags: list[float] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(1.0):
                lags.append(abs(handle.now() - time.time()))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        t0 = time.perf_counter()
        try:
            ctx = AgentContext(trial_id=f"bench-{index}", namespace=NS, mcp_url=url, mcp_token=token, model=MODEL,
                               limits=AgentLimits(max_steps=max_steps, wall_time_s=seconds),
                               options={"temperature": 0.0})
            result = ReactAgent().run(ctx)
        finally:
            wall = time.perf_counter() - t0
            stop.set()
            sampler.join()
            iface.stop()
        out.put({"index": index, "steps": result.steps, "wall": wall, "end": result.end_reason,
                 "tool_calls": result.tool_calls, "tokens_in": result.tokens_in, "tokens_out": result.tokens_out,
                 "error": result.error, "lags": lags})
    finally:
        handle.close()


def run_level(n: int, seconds: float, max_steps: int) -> list[dict]:
    ctx = mp.get_context("spawn")
    ready, out, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=session_worker, args=(i, seconds, max_steps, ready, go, out), daemon=True)
             for i in range(n)]
    for p in procs:
        p.start()
    for _ in range(n):
        ready.get(timeout=600)  # every cluster built and injected before any session starts
    go.set()
    rows = [out.get(timeout=seconds + 600) for _ in range(n)]
    for p in procs:
        p.join(timeout=60)
    return sorted(rows, key=lambda r: r["index"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None, help="the model server's threads (default: the farm's)")
    ap.add_argument("--sessions", default="1,2,4,8", help="session counts to try, in order")
    ap.add_argument("--seconds", type=float, default=90.0, help="wall time of each session")
    ap.add_argument("--max-steps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3, help="throughput requests of each kind")
    args = ap.parse_args()
    os.environ["FARM_LOCAL_LLM_DIR"] = tempfile.mkdtemp(prefix="local-llm-bench-")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from farm.llm import local_server

    if args.threads is not None:
        os.environ["FARM_LOCAL_LLM_THREADS"] = str(args.threads)
    threads = local_server.default_threads()

    t0 = time.perf_counter()
    url = local_server.ensure(NAME)
    print(f"{MODEL}: server up in {time.perf_counter() - t0:.1f} s at {url} ({threads} threads, "
          f"{os.cpu_count()} cores on the box)", flush=True)
    prompt_tps, gen_tps = throughput(url, args.rounds)
    print(f"tokens/s: prompt {prompt_tps:.0f}, generation {gen_tps:.1f} (median of {args.rounds})", flush=True)
    for n in (int(x) for x in args.sessions.split(",")):
        rows = run_level(n, args.seconds, args.max_steps)
        lags = [lag for r in rows for lag in r["lags"]]
        per_step = [r["wall"] / r["steps"] for r in rows if r["steps"]]
        for r in rows:
            print(f"  session {r['index']}: {r['end']:<16} steps {r['steps']:>3}  tools {r['tool_calls']:>3}  "
                  f"in {r['tokens_in']:>7}  out {r['tokens_out']:>5}  {r['wall']:6.1f} s"
                  + (f"  ({r['error'][:80]})" if r["error"] else ""), flush=True)
        worst = max(lags) if lags else float("nan")
        print(f"{n} sessions at once: {sum(r['steps'] for r in rows)} model steps, "
              f"{statistics.median(per_step) if per_step else float('nan'):.1f} s per react step (median), "
              f"clock lag worst {worst:.3f} s, median {statistics.median(lags) if lags else float('nan'):.3f} s "
              f"over {len(lags)} samples", flush=True)
        if not lags or worst > LAG_TARGET_S:
            print(f"clock lag passed {LAG_TARGET_S:g} s at {n} sessions", flush=True)
            break
    local_server.release(NAME)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
