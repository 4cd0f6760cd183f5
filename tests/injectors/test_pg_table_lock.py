"""postgres-table-locked's own checks, as strict as SREGym's PostgresLockMitigationOracle: the
fault holds until a read of the table succeeds; deleting the holder's Job (its backend sleeps on)
or an attempt by the application's own role is not a fix; ending the session in the database is,
and recovery leaves neither the Job nor its namespace behind."""

from __future__ import annotations

import pytest

from clusters.handle import ClusterHandle
from clusters.kube import Kube
from farm.pytest_plugin import SimClusters
from injectors.injector import faults
from injectors.jobs import exec_in

NS = "astronomy-shop"
pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(sim_clusters: SimClusters) -> ClusterHandle:
    return sim_clusters.served(NS, seed=7)


def psql(cluster: ClusterHandle, sql: str, user: str = "root") -> str:
    env = ["env", "PGPASSWORD=otelp"] if user != "root" else []
    host = ["-h", "localhost"] if user != "root" else []
    return exec_in(cluster, NS, "postgresql", [*env, "psql", *host, "-U", user, "-d", "otel", "-tA", "-c", sql])[1]


def test_only_ending_the_holding_session_in_the_database_fixes_it(cluster: ClusterHandle) -> None:
    kube = Kube.of(cluster)
    fault = faults.create("postgres-table-locked", database="postgresql", table="catalog.products")
    injection = fault.inject(cluster, NS)
    assert fault.is_active(cluster, injection) and fault.affects(cluster, injection)
    assert fault.read_status(cluster, NS) == "locked"
    holder = psql(cluster, "SELECT pid FROM pg_locks WHERE mode = 'AccessExclusiveLock'").strip()
    assert holder.isdigit()

    kube.delete("Job", "chaos-testing", "catalog-maintenance")
    cluster.advance(30)
    assert fault.affects(cluster, injection)  # its backend sleeps on in pg_sleep, the lock held

    assert "permission denied to terminate process" in psql(cluster, f"SELECT pg_terminate_backend({holder})", "otelu")
    assert fault.affects(cluster, injection)

    assert psql(cluster, f"SELECT pg_cancel_backend({holder})").strip() == "t"
    cluster.advance(10)
    assert not fault.affects(cluster, injection) and not fault.is_active(cluster, injection)

    fault.recover(cluster, injection)
    cluster.advance(10)
    assert kube.find("Namespace", "", "chaos-testing") is None
    assert fault.read_status(cluster, NS) == "ok"
