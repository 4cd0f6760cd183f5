"""The whole catalog on the full emulated cluster: every problem that needs no real cluster must
validate, its reference mitigation run with each kubectl an agent may bring (clients differ in what
they send). One test module per kubectl version, because the suite's processes take whole modules
(pytest-xdist's --dist loadfile, biggest first): two modules of 163 problems go one to each process,
where one of 326 kept one process busy long after the other had finished everything else."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from farm.problems.catalog import load_catalog
from tests.conftest import KUBECTLS

# sorted by application, so that each deploys once per module
PROBLEMS = [p.id for p in sorted(load_catalog().select(), key=lambda p: (p.app, p.id)) if not p.needs_real_cluster]


def catalog_test(version: str) -> Callable[..., None]:
    """The test of every problem, with kubectl `version`."""
    kubectl = KUBECTLS[version]

    @pytest.mark.slow
    @pytest.mark.skipif(not kubectl.exists(), reason=f"no kubectl {version} in .tools (./scripts/setup.sh --dev)")
    @pytest.mark.parametrize("problem_id", PROBLEMS)
    def test_every_modelled_problem_validates_on_the_emulated_cluster(validator: Any, problem_id: str) -> None:
        result = validator.validate(load_catalog().get(problem_id), kubectl=str(kubectl))
        failed = [f"{s.name}: {s.detail[:300]}" for s in result.steps if not s.ok]
        assert result.passed, failed

    return test_every_modelled_problem_validates_on_the_emulated_cluster
