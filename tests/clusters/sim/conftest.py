"""The in-process emulated cluster most modules here work on: hotel-reservation deployed once per
module (seed 11) and restored to that checkpoint for every test. A module that needs another
application, seed or checkpoint defines its own `base` and `cluster`."""

from __future__ import annotations

import pytest

from clusters.sim.cluster import SimCluster


@pytest.fixture(scope="module")
def base() -> SimCluster:
    return SimCluster.with_app("hotel-reservation", seed=11)


@pytest.fixture
def cluster(base: SimCluster) -> SimCluster:
    base.restore("deployed")
    return base
