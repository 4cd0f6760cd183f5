"""Fixtures of the problem tests."""

from tests.injectors.simcluster import api_cluster  # noqa: F401  (a fixture)
