"""PostgreSQL table locks in the emulated astronomy-shop: a psql session in another namespace that
takes ACCESS EXCLUSIVE on catalog.products and sleeps in its transaction queues every read of the
table behind it (product-catalog's calls run into their deadline while every pod stays Running);
pg_stat_activity and pg_locks show holder and waiters; pg_terminate_backend ends it."""

from __future__ import annotations

import functools
import json

import pytest

from clusters.emulated import SimHandle
from farm.pytest_plugin import SimClusters
from tests.kubesim.apptools import NEEDS_KUBECTL, prom, run_kubectl

NS = "astronomy-shop"
pytestmark = [*NEEDS_KUBECTL, pytest.mark.slow]
kubectl = functools.partial(run_kubectl, namespace=NS)
PSQL = ["exec", "deploy/postgresql", "--", "psql", "-U", "root", "-d", "otel"]
HOLDER = ('until PGPASSWORD=otel psql -h postgresql.astronomy-shop.svc.cluster.local -U root -d otel -c "SELECT 1" '
          '>/dev/null 2>&1; do sleep 2; done\nPGPASSWORD=otel psql -h postgresql.astronomy-shop.svc.cluster.local '
          '-U root -d otel -c "BEGIN; LOCK TABLE catalog.products IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(86400);"')


@pytest.fixture
def sim(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served(NS, seed=7)


def catalog_errors(handle: object) -> float:
    q = (f'sum(rate(traces_span_metrics_calls_total{{namespace="{NS}",service_name="product-catalog",'
         f'status_code="STATUS_CODE_ERROR"}}[1m])) or vector(0)')
    return prom(handle, q)[""]


def hold_lock(sim: SimHandle) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "catalog-maintenance", "namespace": "khaos"},
           "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "containers": [
               {"name": "maintenance", "image": "postgres:17.6", "command": ["sh", "-c"], "args": [HOLDER]}]}}}}
    run_kubectl(sim, "create", "namespace", "khaos", namespace="default")
    run_kubectl(sim, "apply", "-f", "-", namespace="khaos", stdin=json.dumps(job))
    sim.advance(90)


def test_a_held_access_exclusive_lock_stalls_catalog_reads_until_its_backend_is_terminated(sim: SimHandle) -> None:
    hold_lock(sim)
    assert "Running" in run_kubectl(sim, "get", "pods", namespace="khaos"), \
        run_kubectl(sim, "logs", "job/catalog-maintenance", namespace="khaos", check=False)
    activity = kubectl(sim, *PSQL, "-c", "SELECT pid, state, wait_event_type, wait_event, query FROM pg_stat_activity")
    assert "PgSleep" in activity and "LOCK TABLE catalog.products IN ACCESS EXCLUSIVE MODE" in activity
    assert "| Lock            | relation" in activity, activity  # product-catalog's reads queue behind it
    locks = kubectl(sim, *PSQL, "-tA", "-c", "SELECT pid, mode, granted FROM pg_locks WHERE relation::regclass = "
                                             "'catalog.products'")
    holder = next(line.split("|")[0] for line in locks.splitlines() if "AccessExclusiveLock|t" in line)
    assert "AccessShareLock|f" in locks
    probe = kubectl(sim, *PSQL, "-c", "SET lock_timeout = 3000", "-c", "SELECT 1 FROM catalog.products LIMIT 1",
                    check=False)
    assert "ERROR:  canceling statement due to lock timeout" in probe
    assert catalog_errors(sim) > 0.5  # its calls run into their deadline; no pod restarts
    assert "context deadline exceeded" in kubectl(sim, "logs", "deploy/product-catalog", "--tail", "50")
    assert "canceling statement due to user request" in kubectl(sim, "logs", "deploy/postgresql", "--tail", "50")

    # deleting the holder's pod leaves its backend asleep in pg_sleep, the lock held
    run_kubectl(sim, "delete", "job", "catalog-maintenance", "--wait=false", namespace="khaos")
    sim.advance(30)
    assert "AccessExclusiveLock|t" in kubectl(sim, *PSQL, "-tA", "-c", "SELECT pid, mode, granted FROM pg_locks")

    # the application's role may not end a superuser's session; the superuser may
    denied = kubectl(sim, "exec", "deploy/postgresql", "--", "env", "PGPASSWORD=otelp", "psql", "-h", "localhost",
                     "-U", "otelu", "-d", "otel", "-c", f"SELECT pg_terminate_backend({holder})", check=False)
    assert "permission denied to terminate process" in denied
    assert "\n t\n" in kubectl(sim, *PSQL, "-c", f"SELECT pg_terminate_backend({holder})")
    sim.advance(90)
    assert "1" in kubectl(sim, *PSQL, "-tA", "-c", "SET lock_timeout = 3000", "-c", "SELECT 1 FROM catalog.products")
    assert catalog_errors(sim) < 0.05
    assert "terminating connection due to administrator command" in kubectl(sim, "logs", "deploy/postgresql")
