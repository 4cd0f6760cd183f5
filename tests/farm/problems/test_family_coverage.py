"""Every fault family the issue asks for has at least one catalog problem that validates on the
emulated cluster (not marked needs_real_cluster), so none goes unvalidated."""

from __future__ import annotations

from farm.problems.catalog import load_catalog
from injectors.injector import faults

AUDITED = ("certificate-expired", "image-buggy-version", "node-taint-no-toleration", "rbac-role-rule-dropped",
           "rbac-rolebinding-removed", "requests-too-small", "secret-rotated-stale-pods", "stress-memory",
           "network-loss", "container-kill", "container-args-changed", "kubelet-crash", "node-failure",
           "node-disk-fill", "eviction-threshold-misconfigured")


def test_every_audited_family_has_an_emulated_problem() -> None:
    catalog = load_catalog()
    assert not catalog.errors, catalog.errors[:3]
    covered: dict[str, list[str]] = {}
    for problem in catalog.problems:
        if problem.needs_real_cluster:
            continue
        for spec in problem.faults:
            covered.setdefault(spec.injector, []).append(problem.id)
    missing = [name for name in AUDITED if not covered.get(name)]
    assert not missing, f"no emulated problem for {missing}"
    assert all(name in faults for name in AUDITED)


def test_nothing_needs_a_real_cluster_any_more() -> None:
    real_only = [n for n in faults.names() if getattr(faults.factory(n), "needs_real_cluster", False)]
    assert real_only == []
    # Every problem of the catalog validates on the emulated cluster: none is left to real clusters only.
    marked = [p.id for p in load_catalog().problems if p.needs_real_cluster]
    assert marked == [], marked
