"""The in-process emulated cluster most modules here work on: hotel-reservation deployed once per
module (seed 11), as deployed for every test (farm.pytest_plugin restores it). A module that needs
another application, seed or set-up defines its own `cluster`."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kubesim.cluster import SimCluster


@pytest.fixture
def cluster(sim_app: Callable[..., SimCluster]) -> SimCluster:
    return sim_app("hotel-reservation", seed=11)
