"""pass@k, pass^k and the problem-clustered bootstrap, against values computed by hand."""

from __future__ import annotations

import itertools
import math

import pytest

from results.stats import cluster_bootstrap, common_k, mean_over_problems, pass_at_k, pass_hat_k


def _by_enumeration(n: int, c: int, k: int, all_pass: bool) -> float:
    """The probability, over every k-subset of n trials with c successes, that any (all) pass."""
    trials = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    hits = sum((all if all_pass else any)(trials[i] for i in s) for s in subsets)
    return hits / len(subsets)


@pytest.mark.parametrize("n,c,k", [(3, 0, 1), (3, 1, 1), (3, 1, 2), (3, 2, 2), (5, 2, 3), (5, 5, 5), (4, 1, 4)])
def test_pass_at_k_and_pass_hat_k_are_the_subset_probabilities(n: int, c: int, k: int) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(_by_enumeration(n, c, k, all_pass=False))
    assert pass_hat_k(n, c, k) == pytest.approx(_by_enumeration(n, c, k, all_pass=True))


def test_hand_values() -> None:
    # 3 seeds, 1 success: pass@1 = 1/3, pass@2 = 1 - C(2,2)/C(3,2) = 2/3, pass^2 = 0
    assert pass_at_k(3, 1, 1) == pytest.approx(1 / 3)
    assert pass_at_k(3, 1, 2) == pytest.approx(2 / 3)
    assert pass_hat_k(3, 1, 2) == 0.0
    assert pass_hat_k(3, 3, 3) == 1.0
    # averaged over problems with at least k trials: (2/3 + 1) / 2; the 1-trial problem is left out
    assert mean_over_problems([(3, 1), (3, 3), (1, 1)], 2, "at") == pytest.approx((2 / 3 + 1) / 2)
    assert mean_over_problems([(1, 1)], 2, "at") is None
    assert common_k([(3, 1), (2, 2), (0, 0)]) == 2


@pytest.mark.parametrize("n,c,k", [(2, 3, 1), (3, 1, 0), (3, 1, 4), (3, -1, 1)])
def test_impossible_counts_are_refused(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)


def test_the_clustered_interval_is_wider_when_seeds_agree_within_a_problem() -> None:
    # 20 problems, 5 seeds each, rate 0.5 overall. Perfectly correlated seeds (a problem is all
    # pass or all fail) carry the information of 20 samples, not 100: the interval must be wider
    # than for the same rate spread evenly within problems.
    correlated = [(5.0, 5) if i % 2 else (0.0, 5) for i in range(20)]
    spread = [(2.5, 5) for _ in range(20)]
    lo_c, hi_c = cluster_bootstrap(correlated, seed=3)
    lo_s, hi_s = cluster_bootstrap(spread, seed=3)
    assert lo_c is not None and hi_c is not None and lo_s is not None and hi_s is not None
    assert lo_c < 0.5 < hi_c
    assert hi_s - lo_s == pytest.approx(0.0)  # every problem has the same rate: nothing varies
    # about the binomial spread of 20 independent samples, ±1.96·sqrt(.25/20) ≈ ±0.22
    assert 0.3 < hi_c - lo_c < 0.6
    half = 1.96 * math.sqrt(0.25 / 100)  # what treating the 100 trials as independent would claim
    assert hi_c - lo_c > 2 * half


def test_the_bootstrap_is_deterministic_for_a_seed_and_empty_without_trials() -> None:
    clusters = [(float(i % 3), 3) for i in range(15)]
    assert cluster_bootstrap(clusters, seed=1) == cluster_bootstrap(clusters, seed=1)
    assert cluster_bootstrap([], seed=1) == (None, None)
    assert cluster_bootstrap([(0.0, 0)], seed=1) == (None, None)
