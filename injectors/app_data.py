"""Data-plane faults inside a data store's own state: a session holding a table lock."""

from __future__ import annotations

from pydantic import Field

from clusters.handle import ClusterHandle
from clusters.kube import Kube, Obj
from core.errors import InjectionError
from injectors.fault import Creation, Params
from injectors.injector import Injection, faults
from injectors.jobs import POLL_SECONDS, exec_in

LOCK_CONFIRM_S = 180.0


class TableLockParams(Params):
    database: str = "postgresql"  # the PostgreSQL Deployment and Service
    table: str = "catalog.products"
    mode: str = Field("ACCESS EXCLUSIVE", pattern="^(ACCESS EXCLUSIVE|EXCLUSIVE|SHARE ROW EXCLUSIVE|SHARE)$")
    user: str = "root"  # a superuser: only a superuser may end its session
    password: str = "otel"
    db: str = "otel"
    holder: str = "catalog-maintenance"  # the Job whose psql holds the lock
    # Out of the agent's view (the farm hides it, as SREGym's khaos namespace): the fix has to be
    # made in the database.
    holder_namespace: str = "chaos-testing"
    image: str = "postgres:17.6"
    hold_seconds: int = Field(86400, gt=3600)


@faults.register("postgres-table-locked")
class PostgresTableLocked(Creation):
    """A stuck maintenance session: psql opens a transaction, takes a lock on the table and sleeps
    in it. Every conflicting statement queues behind the lock; the application's pods stay
    Running and the server healthy, the cause shows only in pg_stat_activity / pg_locks. Deleting
    the holder's pod does not release it (the backend sleeps on, never noticing its client is gone);
    pg_terminate_backend on the holder, or restarting the server, does."""

    Params = TableLockParams

    def objects(self, kube: Kube, namespace: str) -> list[tuple[str, str, Obj]]:
        p = self.p
        host = f"{p.database}.{namespace}.svc.cluster.local"
        conn = f"PGPASSWORD={p.password} psql -h {host} -U {p.user} -d {p.db}"
        script = (f'until {conn} -c "SELECT 1" >/dev/null 2>&1; do sleep 2; done\n'
                  f'{conn} -c "BEGIN; LOCK TABLE {p.table} IN {p.mode} MODE; SELECT pg_sleep({p.hold_seconds});"')
        labels = {"app": p.holder}
        body = {
            "metadata": {"name": p.holder, "labels": dict(labels)},
            "spec": {
                "backoffLimit": 0,  # once its session is ended, nothing takes the lock again
                "template": {
                    "metadata": {"labels": dict(labels)},
                    "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False,
                             "containers": [{"name": "maintenance", "image": p.image, "command": ["sh", "-c"],
                                             "args": [script]}]},
                },
            },
        }
        return [("Job", p.holder_namespace, body)]

    def _psql(self, *commands: str) -> list[str]:
        argv = ["psql", "-U", self.p.user, "-d", self.p.db, "-tA"]
        for c in commands:
            argv += ["-c", c]
        return argv

    def read_status(self, cluster: ClusterHandle, namespace: str) -> str:
        """SREGym's probe: a read of the table with a 3 s lock_timeout. 'ok', 'locked' or 'other'."""
        code, out = exec_in(cluster, namespace, self.p.database,
                            self._psql("SET lock_timeout = 3000", f"SELECT 1 FROM {self.p.table} LIMIT 1"))
        if code == 0 and out.strip().splitlines()[-1:] == ["1"]:
            return "ok"
        return "locked" if "lock timeout" in out.lower() else "other"

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        """Returns once a read of the table is blocked (SREGym's injector fails loudly otherwise):
        the holder's pod has to start and its psql to connect first."""
        injection = super().inject(cluster, namespace)
        waited = 0.0
        while self.read_status(cluster, namespace) != "locked":
            if waited >= LOCK_CONFIRM_S:
                raise InjectionError(f"{self.name}: no lock on {self.p.table} within {LOCK_CONFIRM_S:.0f}s "
                                     f"(Job {self.p.holder_namespace}/{self.p.holder})")
            cluster.advance(POLL_SECONDS)
            waited += POLL_SECONDS
        return injection

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        super().recover(cluster, injection)
        # The holder's backend outlives its pod: end every session holding a lock on the table.
        exec_in(cluster, injection.namespace, self.p.database, self._psql(
            "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE relation::regclass = "
            f"'{self.p.table}' AND granted = 't' AND mode <> 'AccessShareLock'"))

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        return self.read_status(cluster, injection.namespace) == "locked"

    def affects(self, cluster: ClusterHandle, injection: Injection) -> bool:
        """The table is not readable (SREGym's PostgresLockMitigationOracle; the farm's own check of
        the application's service level stands in for its product-API probe)."""
        return self.read_status(cluster, injection.namespace) != "ok"
