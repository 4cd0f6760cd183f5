"""How often the metadata spy (tests/security/metadata_spy.py) names the faulted component from
change metadata alone (generation, managedFields times, creation times), against chance, over
the problems of an application of the catalog on the emulated cluster.

For each problem: the application as deployed (the agent's account made with the deploy, as a
trial makes it), the problem injected, a minute of cluster time, then the spy reads the namespace
with the agent's kubeconfig through kubectl and names a component. Prints per problem and in
total: hits, the spy's abstentions, and chance (the mean of 1/candidates).

    .venv/bin/python bench/metadata_spy_bench.py [--app hotel-reservation] [--limit N] [--kubectl PATH]
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app", default="hotel-reservation")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument("--kubectl", default=shutil.which("kubectl"))
    args = parser.parse_args()

    from apps import load_application
    from farm.problems.catalog import load_catalog
    from farm.pytest_plugin import SimClusters, as_built
    from farm.testing import metadata_spy
    from injectors.compose import ProblemInjection

    problems = sorted(load_catalog().select(apps=[args.app]), key=lambda p: p.id)
    if args.limit:
        problems = problems[: args.limit]
    namespace = load_application(args.app).namespace
    root = Path(tempfile.mkdtemp(prefix="spy-bench-"))
    numbers = itertools.count()
    hits = abstained = 0
    chance = 0.0
    with SimClusters(lambda name: root / f"{name}-{next(numbers)}") as sims:
        cluster = sims.served(args.app, seed=args.seed, agent=True)
        kubeconfig = cluster.agent_kubeconfig(namespace)
        for problem in problems:
            as_built(cluster)
            ProblemInjection(problem).inject(cluster, namespace)
            cluster.advance(60)
            named, candidates = metadata_spy.guess(metadata_spy.read_objects(args.kubectl, kubeconfig, namespace))
            truth = problem.ground_truth.component
            hit = named == truth
            hits += hit
            abstained += named is None
            chance += 1 / max(1, len(candidates))
            print(f"{problem.id:55s} truth={truth:28s} named={named!s:28s} {'HIT' if hit else ''}", flush=True)
    n = len(problems)
    print(f"\n{args.app}: the spy named the faulted component in {hits} of {n} problems "
          f"({hits / n:.1%}); chance {chance / n:.1%}; abstained in {abstained}")
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
