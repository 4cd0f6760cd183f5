"""Statistics for repeated trials. A sweep runs each problem under several seeds, and those trials
are not independent samples of an agent's skill: they share the problem. So the farm reports,
beside the per-trial rate, pass@k and pass^k over a problem's seeds and intervals from a bootstrap
that resamples problems (clusters), not trials.

pass@k: the chance that at least one of k trials of a problem succeeds, by the unbiased estimator
1 - C(n-c, k) / C(n, k) over a problem's n trials with c successes (Chen et al. 2021), averaged
over the problems with at least k trials. pass^k: the chance that all k succeed, C(c, k) / C(n, k)
(tau-bench's reliability measure), averaged the same way."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

BOOTSTRAP_SAMPLES = 2000


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem with n trials and c successes (k <= n)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k of one problem: the chance that k of its trials drawn without replacement all pass."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass^k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    return math.comb(c, k) / math.comb(n, k)


def mean_over_problems(counts: Iterable[tuple[int, int]], k: int, estimator: str) -> float | None:
    """pass@k ("at") or pass^k ("hat") averaged over the problems (n, c) with at least k trials;
    None when no problem has k."""
    f = pass_at_k if estimator == "at" else pass_hat_k
    values = [f(n, c, k) for n, c in counts if n >= k]
    return sum(values) / len(values) if values else None


def common_k(counts: Iterable[tuple[int, int]]) -> int:
    """The largest k every problem of a group has trials for (its seeds, when all ran); 0 if none."""
    ns = [n for n, _ in counts if n > 0]
    return min(ns) if ns else 0


def cluster_bootstrap(clusters: Sequence[tuple[float, int]], seed: int = 0,
                      samples: int = BOOTSTRAP_SAMPLES) -> tuple[float | None, float | None]:
    """95% percentile interval of a rate sum(values) / sum(n) when whole clusters are resampled with
    replacement: each cluster is (sum of its trials' values, its number of trials), one per problem.
    Deterministic for a seed. None, None when there are no trials."""
    clusters = [(float(s), int(n)) for s, n in clusters if n > 0]
    if not clusters:
        return None, None
    if len(clusters) == 1:  # every resample is that one cluster: its rate, without drawing any
        rate = clusters[0][0] / clusters[0][1]
        return rate, rate
    import numpy as np

    sums = np.array([s for s, _ in clusters])
    ns = np.array([n for _, n in clusters], dtype=float)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(clusters), size=(samples, len(clusters)))
    rates = sums[picks].sum(axis=1) / ns[picks].sum(axis=1)
    lo, hi = np.percentile(rates, [2.5, 97.5])
    return float(lo), float(hi)
