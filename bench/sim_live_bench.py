"""Live emulated clusters against the host's clock: start N live clusters (each its own process,
as N Celery workers would own them), each with an application deployed, then sample every
cluster's time against the host's clock for a while. Prints per sample round the worst and mean
|cluster time - host time| (target: within 1 s with 32 clusters on 2 cores) and, for one
cluster, how long a write takes to be acted on (a Deployment scaled up: its ReplicaSet's
replicas follow; target < 100 ms).

    .venv/bin/python bench/sim_live_bench.py [--clusters 32] [--seconds 60] [--app hotel-reservation]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

APP_ENV = "SIM_LIVE_BENCH_APP"


def app_cluster(seed: int, start: float | None = None):  # noqa: ANN201 -- a cluster factory for the server
    """A cluster with the bench's application deployed, built so that it ends at the host's clock."""
    import os

    from kubesim.cluster import SimCluster

    settle = 60.0
    return SimCluster.with_app(os.environ.get(APP_ENV, "hotel-reservation"), seed=seed, settle=settle,
                               start=(time.time() - settle) if start is None else start)


def write_reaction_s(handle) -> float:  # noqa: ANN001
    """Wall seconds from a scale write to the ReplicaSet the deployment controller scaled (at
    most the write's round trip when the first read after it already shows it)."""
    from kubernetes import client

    apps = client.AppsV1Api(handle.api_client())
    ns = "hotel-reservation"
    dep = apps.list_namespaced_deployment(ns).items[0]
    want = (dep.spec.replicas or 1) + 1
    first = True
    t0 = time.perf_counter()
    apps.patch_namespaced_deployment_scale(dep.metadata.name, ns, {"spec": {"replicas": want}})
    answered = time.perf_counter()
    while time.perf_counter() - t0 < 5.0:
        rss = apps.list_namespaced_replica_set(ns, label_selector=",".join(
            f"{k}={v}" for k, v in dep.spec.selector.match_labels.items())).items
        if any(rs.spec.replicas == want for rs in rss):
            # Seen on the first read after the write's response: acted on before that response left.
            return (answered if first else time.perf_counter()) - t0
        first = False
        time.sleep(0.005)
    return float("inf")


def main() -> int:
    import os

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clusters", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--app", default="hotel-reservation")
    args = ap.parse_args()
    os.environ[APP_ENV] = args.app
    from clusters.handle import open_cluster

    handles = []
    t0 = time.perf_counter()
    try:
        for i in range(args.clusters):
            handles.append(open_cluster(f"sim:live{i}", seed=i, live=True,
                                        cluster_factory="bench.sim_live_bench:app_cluster"))
        print(f"{len(handles)} live clusters with {args.app} up in {time.perf_counter() - t0:.1f} s", flush=True)
        worst_all: list[float] = []
        end = time.perf_counter() + args.seconds
        while time.perf_counter() < end:
            offsets = []
            for h in handles:
                offsets.append(abs(h.now() - time.time()))
            worst_all.append(max(offsets))
            print(f"t+{args.seconds - (end - time.perf_counter()):5.1f}s  |cluster - host|: worst {max(offsets):6.3f} s  "
                  f"mean {statistics.mean(offsets):6.3f} s", flush=True)
            time.sleep(2.0)
        reaction = write_reaction_s(handles[0]) * 1000
        print(f"worst |cluster - host| over the run: {max(worst_all):.3f} s (target <= 1 s); "
              f"median of the rounds' worst: {statistics.median(worst_all):.3f} s")
        print(f"write → controller reaction (scale → ReplicaSet): {reaction:.1f} ms (target < 100 ms)")
    finally:
        for h in handles:
            h.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
