"""The whole catalog validates with Debian's kubectl 1.20 (catalog_validation.py)."""

from tests.farm.problems.catalog_validation import catalog_test

test_every_modelled_problem_validates_on_the_emulated_cluster = catalog_test("1.20")
