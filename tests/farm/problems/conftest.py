"""The validator on the full emulated cluster, one per test module that asks for it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from farm.problems.validate import Validator
from farm.pytest_plugin import SimClusters


@pytest.fixture(scope="module")
def validator(sim_clusters: SimClusters) -> Iterator[Validator]:
    with Validator(sim_clusters.served(seed=1)) as v:
        yield v
