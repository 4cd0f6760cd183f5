"""The data store models (kubesim/apps/datastores.py, and MongoDB/memcached in stores.py) on an
emulated cluster: start-up failures with the images' own messages, the init scripts' users and
the refusals a client meets, the CLIs an SRE execs (psql, mysql, redis-cli, the Kafka tools),
disk faults under the data directory, consumer lag that emerges from offsets, a full Redis.

`serve()` and `authenticate()` are called the way the call-graph engine calls them; `tick()` runs
from the cluster's own fluid step."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesim.apps.model import image_lookup
from kubesim.apps.graph import Address, DataStore, StoreReply, store_model
from kubesim.cluster import SimCluster
from clusters.emulated import SimHandle
from farm.pytest_plugin import SimClusters
from tests.kubesim.apptools import promql, scalar

NS = "stores"
INIT_SQL = """-- the astronomy-shop demo's postgresql-init, abridged
CREATE USER otelu WITH PASSWORD 'otelp';
CREATE SCHEMA catalog AUTHORIZATION otelu;
CREATE SCHEMA accounting AUTHORIZATION otelu;
GRANT ALL PRIVILEGES ON DATABASE otel TO otelu;
CREATE TABLE catalog.products (
    id VARCHAR(16) PRIMARY KEY,
    name TEXT NOT NULL,
    price_units BIGINT NOT NULL
);
INSERT INTO catalog.products (id, name, price_units) VALUES ('OLJCESPC7Z', 'OLJCESPC7Z', 10);
INSERT INTO catalog.products (id, name, price_units) VALUES ('66VCHSJNUP', '66VCHSJNUP', 17);
CREATE TABLE accounting."order" (order_id TEXT PRIMARY KEY);
GRANT ALL ON ALL TABLES IN SCHEMA catalog, accounting TO otelu;
"""
REDIS_CONF = "io-threads 8\nio-threads-do-reads yes\nport 6379\ntls-port 0\n"
KAFKA_ENV = {"KAFKA_PROCESS_ROLES": "broker,controller", "KAFKA_NODE_ID": "1",
             "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://kafka:9092", "KAFKA_LISTENERS": "PLAINTEXT://:9092,CONTROLLER://:9093",
             "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER", "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@kafka:9093",
             "KAFKA_HEAP_OPTS": "-Xmx400M -Xms400M"}


def deployment(name: str, image: str, env: dict[str, str] | None = None, args: list[str] | None = None,
               ports: tuple[int, ...] = (), mounts: list[dict[str, Any]] | None = None,
               volumes: list[dict[str, Any]] | None = None, memory: str | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": image, "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
                                 "ports": [{"containerPort": p} for p in ports]}
    if args:
        container["args"] = args
    if mounts:
        container["volumeMounts"] = mounts
    if memory:
        container["resources"] = {"limits": {"memory": memory}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [container], "volumes": volumes or []}}}}


def service(name: str, *ports: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NS},
            "spec": {"selector": {"app": name}, "ports": [{"name": f"p{p}", "port": p, "targetPort": p} for p in ports]}}


def config_map(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS}, "data": data}


def store_objects() -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        config_map("postgresql-init", {"init.sql": INIT_SQL}),
        deployment("postgresql", "postgres:17.6", {"POSTGRES_USER": "root", "POSTGRES_PASSWORD": "otel", "POSTGRES_DB": "otel"},
                   ports=(5432,), memory="100Mi", mounts=[{"name": "init", "mountPath": "/docker-entrypoint-initdb.d"}],
                   volumes=[{"name": "init", "configMap": {"name": "postgresql-init"}}]),
        service("postgresql", 5432),
        deployment("nacos-mysql", "mysql:5.6.35", {"MYSQL_ROOT_PASSWORD": "Abcd1234#", "MYSQL_DATABASE": "nacos",
                                                   "MYSQL_USER": "nacos", "MYSQL_PASSWORD": "Abcd1234#"}, ports=(3306,)),
        service("nacos-mysql", 3306),
        config_map("home-timeline-redis", {"redis.conf": REDIS_CONF}),
        deployment("home-timeline-redis", "library/redis:6.2.4", args=["/social-network-microservices/config/redis.conf"],
                   ports=(6379,), mounts=[{"name": "conf", "mountPath": "/social-network-microservices/config/redis.conf",
                                           "subPath": "redis.conf"}],
                   volumes=[{"name": "conf", "configMap": {"name": "home-timeline-redis"}}]),
        service("home-timeline-redis", 6379),
        deployment("valkey-cart", "valkey/valkey:7.2-alpine", ports=(6379,), memory="20Mi"),
        service("valkey-cart", 6379),
        deployment("kafka", "ghcr.io/open-telemetry/demo:2.2.0-kafka", KAFKA_ENV, ports=(9092, 9093), memory="600Mi"),
        service("kafka", 9092, 9093),
        deployment("mongodb", "mongo:4.4.6", {"MONGO_INITDB_ROOT_USERNAME": "admin", "MONGO_INITDB_ROOT_PASSWORD": "admin"},
                   args=["--auth"], ports=(27017,)),
        service("mongodb", 27017),
        deployment("memcached", "memcached:1.6.7", ports=(11211,)),
        service("memcached", 11211),
    ]


@pytest.fixture(scope="module")
def base(sim_clusters: SimClusters) -> SimCluster:
    cluster = sim_clusters.in_process(seed=11)
    cluster.apply(store_objects())
    cluster.advance(40)
    cluster.checkpoint("up")
    return cluster


@pytest.fixture
def cluster(base: SimCluster) -> SimCluster:
    base.restore("up")
    return base


def pod(cluster: SimCluster, name: str) -> dict[str, Any]:
    pods = [p for p in cluster.store.list("pods", NS) if p["metadata"]["name"].rsplit("-", 2)[0] == name
            and not p["metadata"].get("deletionTimestamp")]
    assert pods, name
    return sorted(pods, key=lambda p: p["metadata"]["creationTimestamp"])[-1]


def store(cluster: SimCluster, name: str) -> tuple[Any, Any, DataStore]:
    p = pod(cluster, name)
    rt = cluster.kubelet.runtime(p)
    assert rt is not None
    c = rt.containers[name]
    assert c.state == "running", (name, c.state, c.reason)
    model = store_model(c)
    assert model is not None, name
    return rt, c, model


def log(cluster: SimCluster, name: str, previous: bool = False) -> str:
    return cluster.read_container_log(NS, pod(cluster, name)["metadata"]["name"], previous=previous)


def exec_(cluster: SimCluster, name: str, *cmd: str) -> tuple[int, str, str]:
    return cluster.exec(NS, pod(cluster, name)["metadata"]["name"], None, list(cmd))


def status(cluster: SimCluster, name: str) -> dict[str, Any]:
    return pod(cluster, name)["status"]["containerStatuses"][0]


def until_restarted(cluster: SimCluster, name: str) -> dict[str, Any]:
    """Advance second by second until the container has restarted once (its first life is `previous`)."""
    for _ in range(30):
        cluster.advance(1)
        st = status(cluster, name)
        if st["restartCount"] >= 1:
            return st
    raise AssertionError(f"{name} did not restart")


def chaos(cluster: SimCluster, kind: str, name: str, spec: dict[str, Any]) -> None:
    plural = {"IOChaos": "iochaos", "KernelChaos": "kernelchaos"}[kind]
    cluster.store.create(f"{plural}.chaos-mesh.org", {"apiVersion": "chaos-mesh.org/v1alpha1", "kind": kind,
                                                      "metadata": {"name": name, "namespace": NS}, "spec": spec})


PG = Address("postgresql", 5432, "otelu", "otelp", "otel", "postgres://otelu:otelp@postgresql/otel?sslmode=disable")


# -- start-up ---------------------------------------------------------------------------------------
def test_every_store_starts_healthy_with_its_real_start_up_lines(cluster: SimCluster) -> None:
    for name in ("postgresql", "nacos-mysql", "home-timeline-redis", "valkey-cart", "kafka", "mongodb", "memcached"):
        st = status(cluster, name)
        assert "running" in st["state"] and st["ready"] and st["restartCount"] == 0, (name, st)
    pg = log(cluster, "postgresql")
    assert "/usr/local/bin/docker-entrypoint.sh: running /docker-entrypoint-initdb.d/init.sql" in pg
    assert "CREATE ROLE\nCREATE SCHEMA\nCREATE SCHEMA\nGRANT\nCREATE TABLE\nINSERT 0 1" in pg
    assert "PostgreSQL init process complete; ready for start up." in pg
    assert "UTC [1] LOG:  starting PostgreSQL 17.6 (Debian 17.6-1.pgdg13+1)" in pg
    assert pg.rstrip().endswith("[1] LOG:  database system is ready to accept connections")
    my = log(cluster, "nacos-mysql")
    assert "1 [Note] mysqld: ready for connections.\nVersion: '5.6.35'  socket: '/var/run/mysqld/mysqld.sock'  " \
           "port: 3306  MySQL Community Server (GPL)" in my
    assert "Redis version=6.2.4" in log(cluster, "home-timeline-redis")
    assert "# WARNING overcommit_memory is set to 0! Background save may fail" in log(cluster, "home-timeline-redis")
    assert log(cluster, "home-timeline-redis").rstrip().endswith("* Ready to accept connections")
    assert log(cluster, "valkey-cart").rstrip().endswith("* Ready to accept connections tcp")
    kafka = log(cluster, "kafka")
    assert "INFO Awaiting socket connections on 0.0.0.0:9092. (kafka.network.DataPlaneAcceptor)" in kafka
    assert "INFO [KafkaRaftServer nodeId=1] Kafka Server started (kafka.server.KafkaRaftServer)" in kafka


def test_postgres_without_a_password_on_an_empty_data_dir_exits_with_the_entrypoint_error(cluster: SimCluster) -> None:
    cluster.apply([deployment("pg-nopass", "postgres:17.6", {"POSTGRES_USER": "root"}, ports=(5432,))])
    cluster.advance(60)
    st = status(cluster, "pg-nopass")
    assert st["restartCount"] >= 2 and st["lastState"]["terminated"]["exitCode"] == 1
    text = log(cluster, "pg-nopass", previous=True)
    assert "Error: Database is uninitialized and superuser password is not specified." in text
    assert 'You must specify POSTGRES_PASSWORD to a non-empty value for the' in text


def test_mysql_without_a_root_password_option_exits_with_the_entrypoint_error(cluster: SimCluster) -> None:
    cluster.apply([deployment("my-nopass", "mysql:5.6.35", {"MYSQL_DATABASE": "x"}, ports=(3306,)),
                   deployment("my57-nopass", "mysql:5.7", {"MYSQL_DATABASE": "x"}, ports=(3306,))])
    cluster.advance(60)
    assert status(cluster, "my-nopass")["lastState"]["terminated"]["exitCode"] == 1
    text = log(cluster, "my-nopass", previous=True)
    assert "error: database is uninitialized and password option is not specified" in text
    assert "You need to specify one of MYSQL_ROOT_PASSWORD, MYSQL_ALLOW_EMPTY_PASSWORD and MYSQL_RANDOM_ROOT_PASSWORD" in text
    assert "[ERROR] [Entrypoint]: Database is uninitialized and password option is not specified" in \
        log(cluster, "my57-nopass", previous=True)


def test_a_tag_the_registry_does_not_have_fails_to_pull() -> None:
    assert image_lookup("postgres:17.6")[1] is None and image_lookup("mysql:5.6.35")[1] is None
    assert image_lookup("valkey/valkey:9.0.1-alpine3.23")[1] is None and image_lookup("library/redis:6.2.4")[1] is None
    assert image_lookup("ghcr.io/open-telemetry/demo:2.2.0-kafka")[1] is None
    err = image_lookup("postgres:17.99")[1]
    assert err is not None and err.endswith("docker.io/library/postgres:17.99: not found")


def test_memory_limits_kill_a_kafka_whose_default_heap_does_not_fit(cluster: SimCluster) -> None:
    env = {k: v for k, v in KAFKA_ENV.items() if k != "KAFKA_HEAP_OPTS"}  # kafka-server-start.sh's -Xmx1G -Xms1G
    cluster.apply([deployment("kafka-big", "ghcr.io/open-telemetry/demo:2.2.0-kafka", env, ports=(9092, 9093),
                              memory="600Mi")])
    cluster.advance(40)
    st = status(cluster, "kafka-big")
    assert st["lastState"]["terminated"]["reason"] == "OOMKilled"
    _, c, model = store(cluster, "kafka")
    assert 400 * 2**20 < c.memory < 600 * 2**20  # -Xmx400M fits the chart's 600Mi
    _, c, _ = store(cluster, "postgresql")
    assert 20 * 2**20 < c.memory < 100 * 2**20


# -- PostgreSQL -------------------------------------------------------------------------------------------
def test_postgres_accepts_the_init_script_user_and_refuses_the_rest_like_the_server(cluster: SimCluster) -> None:
    rt, c, pg = store(cluster, "postgresql")
    assert pg.authenticate(c.instance, PG) is None
    wrong = Address("postgresql", 5432, "otelu", "nope", "otel")
    assert pg.authenticate(c.instance, wrong) == 'FATAL:  password authentication failed for user "otelu"'
    assert pg.authenticate(c.instance, Address("postgresql", 5432, "otelu", "otelp", "shop")) == \
        'FATAL:  database "shop" does not exist'
    assert pg.authenticate(c.instance, Address("postgresql", 5432, "ghost", "x", "otel")) == \
        'FATAL:  password authentication failed for user "ghost"'
    reply = pg.serve(cluster, rt, c, "SELECT catalog.products", False, 50.0, 5.0, PG)
    assert reply.ok == 1.0 and reply.error is None and 0 < reply.latency < 0.05
    cluster.advance(5)  # the fluid step writes what the server logged for those attempts
    text = log(cluster, "postgresql")
    assert 'FATAL:  password authentication failed for user "otelu"' in text
    assert ('DETAIL:  Connection matched file "/var/lib/postgresql/data/pg_hba.conf" line 128: '
            '"host all all all scram-sha-256"') in text
    assert 'DETAIL:  Role "ghost" does not exist.' in text


def test_psql_lists_roles_and_an_alter_user_is_the_password_clients_must_use(cluster: SimCluster) -> None:
    _, c, pg = store(cluster, "postgresql")
    code, out, err = exec_(cluster, "postgresql", "psql", "-U", "root", "-d", "otel", "-c", "\\du")
    assert code == 0, err
    assert out.splitlines()[0].strip() == "List of roles"
    assert " root      | Superuser, Create role, Create DB, Replication, Bypass RLS" in out and " otelu " in out
    code, out, _ = exec_(cluster, "postgresql", "psql", "-U", "root", "-d", "otel", "-c", "SELECT usename FROM pg_user")
    assert out == " usename \n---------\n root\n otelu\n(2 rows)\n\n"
    code, out, _ = exec_(cluster, "postgresql", "psql", "-U", "root", "otel", "-tA", "-c", "select count(*) from catalog.products")
    assert out == "2\n"
    # the superuser is `root`, so psql's defaults (role and database = the OS user) meet the server's refusals
    code, _, err = exec_(cluster, "postgresql", "psql", "-c", "SELECT 1")
    assert code == 2 and err == ('psql: error: connection to server on socket "/var/run/postgresql/.s.PGSQL.5432" failed: '
                                 'FATAL:  database "root" does not exist\n')
    code, _, err = exec_(cluster, "postgresql", "psql", "-U", "postgres")
    assert 'FATAL:  role "postgres" does not exist' in err
    code, _, err = exec_(cluster, "postgresql", "sh", "-c", "PGPASSWORD=bad psql -h postgresql -U otelu -d otel -c 'select 1'")
    assert code == 2 and 'failed: FATAL:  password authentication failed for user "otelu"' in err
    code, out, _ = exec_(cluster, "postgresql", "psql", "-U", "root", "-d", "otel", "-c", "ALTER USER otelu WITH PASSWORD 'rotated'")
    assert (code, out) == (0, "ALTER ROLE\n")
    assert pg.authenticate(c.instance, PG) == 'FATAL:  password authentication failed for user "otelu"'
    assert pg.authenticate(c.instance, Address("postgresql", 5432, "otelu", "rotated", "otel")) is None
    code, out, _ = exec_(cluster, "postgresql", "sh", "-c", "PGPASSWORD=rotated psql -h postgresql -U otelu -d otel -c 'SELECT 1'")
    assert code == 0 and out == " ?column? \n----------\n        1\n(1 row)\n\n"
    code, _, err = exec_(cluster, "postgresql", "psql", "-U", "otelu", "-d", "otel", "-c", "ALTER USER root WITH PASSWORD 'x'")
    assert code == 1 and err == "ERROR:  permission denied to alter role\n"
    assert exec_(cluster, "postgresql", "pg_isready")[1] == "/var/run/postgresql:5432 - accepting connections\n"


def test_iochaos_read_faults_on_pgdata_reach_clients_as_postgres_read_errors(cluster: SimCluster) -> None:
    rt, c, pg = store(cluster, "postgresql")
    cluster.advance(300)  # a warm cache: only the reads that still reach the disk can fail
    chaos(cluster, "IOChaos", "pg-eio", {"action": "fault", "mode": "all", "errno": 5, "percent": 100, "methods": ["read"],
                                         "volumePath": "/var/lib/postgresql/data", "path": "/var/lib/postgresql/data/**",
                                         "selector": {"labelSelectors": {"app": "postgresql"}}})
    cluster.advance(2)
    reply = pg.serve(cluster, rt, c, "SELECT catalog.products", False, 200.0, 5.0, PG)
    assert 0.0 < reply.ok < 1.0
    assert reply.error is not None and reply.error.startswith("ERROR:  could not read block ")
    assert reply.error.endswith('in file "base/16384/' + reply.error.split("base/16384/")[1].split('"')[0] + '": Input/output error')
    text = log(cluster, "postgresql")
    assert "ERROR:  could not read block" in text and "STATEMENT:  SELECT * FROM catalog.products WHERE id = $1" in text
    cluster.store.delete("iochaos.chaos-mesh.org", NS, "pg-eio")
    cluster.advance(2)
    assert pg.serve(cluster, rt, c, "SELECT catalog.products", False, 200.0, 5.0, PG) == \
        StoreReply(1.0, pg.serve(cluster, rt, c, "SELECT catalog.products", False, 0.0, 5.0, PG).latency, None)


def test_a_failed_wal_write_panics_postgres_and_recovery_fails_while_the_disk_does(cluster: SimCluster) -> None:
    rt, c, pg = store(cluster, "postgresql")
    chaos(cluster, "IOChaos", "pg-wal", {"action": "fault", "mode": "all", "errno": 5, "percent": 100, "methods": ["write"],
                                         "volumePath": "/var/lib/postgresql/data",
                                         "selector": {"labelSelectors": {"app": "postgresql"}}})
    cluster.advance(2)
    write = pg.serve(cluster, rt, c, "INSERT accounting.order", True, 20.0, 5.0, PG)
    assert write.ok == 0.0 and write.error is not None and write.error.startswith("server closed the connection unexpectedly")
    assert pg.authenticate(c.instance, PG) == "FATAL:  the database system is in recovery mode"
    st = until_restarted(cluster, "postgresql")  # the next fluid step retries recovery, which has to write too
    assert st["lastState"]["terminated"]["exitCode"] == 1
    first = log(cluster, "postgresql", previous=True)
    assert 'PANIC:  could not write to log file "000000010000000000000001" at offset 1687552, length 8192: ' \
           "Input/output error" in first
    assert "LOG:  all server processes terminated; reinitializing" in first
    assert "LOG:  database system was not properly shut down; automatic recovery in progress" in first
    assert first.rstrip().endswith("LOG:  database system is shut down")
    assert "LOG:  aborting startup due to startup process failure" in first
    cluster.store.delete("iochaos.chaos-mesh.org", NS, "pg-wal")
    cluster.advance(330)
    st = status(cluster, "postgresql")
    assert "running" in st["state"]
    assert log(cluster, "postgresql").rstrip().endswith("database system is ready to accept connections")


def test_latent_sector_errors_on_the_node_fail_postgres_reads_and_show_in_dmesg(cluster: SimCluster) -> None:
    rt, c, pg = store(cluster, "postgresql")
    node = pod(cluster, "postgresql")["spec"]["nodeName"]
    cluster.store.create("nodefaults.sim.farm.io", {"apiVersion": "sim.farm.io/v1alpha1", "kind": "NodeFault",
                                                    "metadata": {"name": "lse"},
                                                    "spec": {"nodeName": node, "disk": {"device": "sda", "errorPercent": 100,
                                                                                        "ops": ["read"],
                                                                                        "sectorStart": 1953792,
                                                                                        "sectorCount": 64}}})
    cluster.advance(2)
    reply = pg.serve(cluster, rt, c, "SELECT catalog.products", False, 100.0, 5.0, PG)
    assert reply.ok < 1.0 and reply.error is not None and "could not read block" in reply.error
    assert reply.error.endswith(": Input/output error")
    code, _, body = cluster.obs.loki_app("GET", "/loki/api/v1/query_range",
                                         {"query": [f'{{job="node-kernel", node_name="{node}"}} |= "I/O error"'],
                                          "limit": ["20"]}, b"")
    assert code == 200 and "blk_update_request: I/O error, dev sda, sector 1953792 op 0x0:(READ)" in body.decode()


def test_a_full_node_disk_makes_postgres_refuse_to_extend_tables(cluster: SimCluster) -> None:
    rt, c, pg = store(cluster, "postgresql")
    node = pod(cluster, "postgresql")["spec"]["nodeName"]
    cluster.store.create("nodefaults.sim.farm.io", {"apiVersion": "sim.farm.io/v1alpha1", "kind": "NodeFault",
                                                    "metadata": {"name": "full"}, "spec": {"nodeName": node,
                                                                                           "diskFullPercent": 100}})
    cluster.advance(1)
    reply = pg.serve(cluster, rt, c, "INSERT accounting.order", True, 10.0, 5.0, PG)
    assert reply.ok == 0.0 and reply.error is not None
    assert reply.error.startswith('ERROR:  could not extend file "base/16384/') and reply.error.endswith(
        ": No space left on device")
    assert "HINT:  Check free disk space." in log(cluster, "postgresql")


# -- MySQL ---------------------------------------------------------------------------------------------
def test_mysql_users_from_the_environment_and_the_refusals_clients_see(cluster: SimCluster) -> None:
    _, c, my = store(cluster, "nacos-mysql")
    assert my.authenticate(c.instance, Address("nacos-mysql", 3306, "nacos", "Abcd1234#", "nacos")) is None
    assert my.authenticate(c.instance, Address("nacos-mysql", 3306, "nacos", "bad", "nacos")).startswith(
        "Access denied for user 'nacos'@'")
    assert my.authenticate(c.instance, Address("nacos-mysql", 3306, "nacos", "bad", "nacos")).endswith(
        "(using password: YES)")
    assert my.authenticate(c.instance, Address("nacos-mysql", 3306, "root", "Abcd1234#", "shop")) == "Unknown database 'shop'"


def test_mysql_client_exec_shows_accounts_and_changes_a_password_the_5_6_way(cluster: SimCluster) -> None:
    _, c, my = store(cluster, "nacos-mysql")
    code, out, err = exec_(cluster, "nacos-mysql", "mysql", "-uroot", "-pAbcd1234#", "-e", "SELECT user,host FROM mysql.user")
    assert code == 0 and out == "user\thost\nnacos\t%\nroot\t%\n"
    assert err == "Warning: Using a password on the command line interface can be insecure.\n"
    code, _, err = exec_(cluster, "nacos-mysql", "mysql", "-unacos", "-pwrong", "-e", "select 1")
    assert code == 1 and "ERROR 1045 (28000): Access denied for user 'nacos'@'localhost' (using password: YES)" in err
    code, _, err = exec_(cluster, "nacos-mysql", "mysql", "-uroot", "-pAbcd1234#", "-e",
                         "ALTER USER 'nacos'@'%' IDENTIFIED BY 'n3w'")
    assert code == 1 and "ERROR 1064 (42000) at line 1: You have an error in your SQL syntax" in err  # 5.7.6+ syntax
    code, _, err = exec_(cluster, "nacos-mysql", "mysql", "-uroot", "-pAbcd1234#", "-e",
                         "SET PASSWORD FOR 'nacos'@'%' = PASSWORD('n3w'); FLUSH PRIVILEGES")
    assert code == 0, err
    assert my.authenticate(c.instance, Address("nacos-mysql", 3306, "nacos", "Abcd1234#", "nacos")) is not None
    assert my.authenticate(c.instance, Address("nacos-mysql", 3306, "nacos", "n3w", "nacos")) is None
    code, out, _ = exec_(cluster, "nacos-mysql", "mysql", "-unacos", "-pn3w", "nacos", "-N", "-e", "SHOW DATABASES")
    assert out == "information_schema\nnacos\n"
    assert exec_(cluster, "nacos-mysql", "mysqladmin", "-uroot", "-pAbcd1234#", "ping")[1] == "mysqld is alive\n"


def test_innodb_aborts_mysqld_when_its_data_file_write_fails(cluster: SimCluster) -> None:
    rt, c, my = store(cluster, "nacos-mysql")
    chaos(cluster, "IOChaos", "my-eio", {"action": "fault", "mode": "all", "errno": 5, "percent": 100, "methods": ["write"],
                                         "volumePath": "/var/lib/mysql", "selector": {"labelSelectors": {"app": "nacos-mysql"}}})
    cluster.advance(2)
    reply = my.serve(cluster, rt, c, "INSERT config_info", True, 20.0, 5.0, Address("nacos-mysql", 3306, "nacos", "Abcd1234#",
                                                                                         "nacos"))
    assert reply.ok == 0.0 and reply.error == "Lost connection to MySQL server during query"
    st = until_restarted(cluster, "nacos-mysql")
    assert st["lastState"]["terminated"]["exitCode"] == 134
    text = log(cluster, "nacos-mysql", previous=True)
    assert "[ERROR] InnoDB: Operating system error number 5 in a file operation." in text
    assert "[ERROR] InnoDB: Error number 5 means 'Input/output error'." in text and "mysqld got signal 6 ;" in text


# -- Redis / Valkey ------------------------------------------------------------------------------------------
def test_redis_cli_reads_and_sets_the_config_and_requirepass_is_enforced(cluster: SimCluster) -> None:
    _, c, rd = store(cluster, "home-timeline-redis")
    addr = Address("home-timeline-redis", 6379)
    assert exec_(cluster, "home-timeline-redis", "redis-cli", "PING") == (0, "PONG\n", "")
    code, out, _ = exec_(cluster, "home-timeline-redis", "redis-cli", "INFO", "memory")
    assert code == 0 and "# Memory\r\n" in out and "maxmemory:0\r\n" in out and "maxmemory_policy:noeviction\r\n" in out
    assert exec_(cluster, "home-timeline-redis", "redis-cli", "CONFIG", "GET", "io-threads")[1] == "io-threads\n8\n"
    assert exec_(cluster, "home-timeline-redis", "redis-cli", "CONFIG", "SET", "requirepass", "s3cret")[1] == "OK\n"
    assert rd.authenticate(c.instance, addr) == "NOAUTH Authentication required."
    assert rd.authenticate(c.instance, Address("home-timeline-redis", 6379, password="nope")) == \
        "WRONGPASS invalid username-password pair or user is disabled."
    assert rd.authenticate(c.instance, Address("home-timeline-redis", 6379, password="s3cret")) is None
    assert exec_(cluster, "home-timeline-redis", "redis-cli", "DBSIZE") == (0, "NOAUTH Authentication required.\n", "")
    code, out, err = exec_(cluster, "home-timeline-redis", "redis-cli", "-a", "s3cret", "DBSIZE")
    assert (code, out) == (0, "0\n")
    assert err == "Warning: Using a password with '-a' or '-u' option on the command line interface may not be safe.\n"
    code, out, _ = exec_(cluster, "valkey-cart", "valkey-cli", "CONFIG", "GET", "maxmemory")
    assert out == "maxmemory\n0\n"


def test_a_redis_at_maxmemory_refuses_writes_until_an_eviction_policy_lets_it_evict(cluster: SimCluster) -> None:
    rt, c, rd = store(cluster, "home-timeline-redis")
    addr = Address("home-timeline-redis", 6379)
    assert exec_(cluster, "home-timeline-redis", "redis-cli", "CONFIG", "SET", "maxmemory", "2mb")[1] == "OK\n"
    replies = []
    for _ in range(6):
        replies.append(rd.serve(cluster, rt, c, "ZADD", True, 400.0, 5.0, addr))
        cluster.advance(5)
    assert replies[0] == StoreReply(1.0, replies[0].latency, None)
    assert replies[-1].ok == 0.0 and replies[-1].error == "OOM command not allowed when used memory > 'maxmemory'."
    assert rd.serve(cluster, rt, c, "ZREVRANGE", False, 400.0, 5.0, addr).ok == 1.0  # reads still served
    out = exec_(cluster, "home-timeline-redis", "redis-cli", "INFO", "memory")[1]
    used = int(out.split("used_memory:")[1].split("\r")[0])
    assert 2 * 2**20 - 1000 <= used <= 2 * 2**20
    exec_(cluster, "home-timeline-redis", "redis-cli", "CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
    assert rd.serve(cluster, rt, c, "ZADD", True, 400.0, 5.0, addr).ok == 1.0
    stats = exec_(cluster, "home-timeline-redis", "redis-cli", "INFO", "stats")[1]
    assert int(stats.split("evicted_keys:")[1].split("\r")[0]) > 0


def test_a_failing_rdb_save_makes_redis_refuse_writes_with_misconf(cluster: SimCluster) -> None:
    rt, c, rd = store(cluster, "home-timeline-redis")
    addr = Address("home-timeline-redis", 6379)
    chaos(cluster, "IOChaos", "rdb", {"action": "fault", "mode": "all", "errno": 5, "percent": 100, "methods": ["write"],
                                      "volumePath": "/data", "selector": {"labelSelectors": {"app": "home-timeline-redis"}}})
    cluster.advance(2)
    for _ in range(15):  # 100 changes in 300 seconds: the save point that fires first
        rd.serve(cluster, rt, c, "ZADD", True, 1.0, 5.0, addr)
        cluster.advance(5)
    for _ in range(50):
        if not c.instance["bgsave_ok"]:
            break
        rd.serve(cluster, rt, c, "ZADD", True, 1.0, 5.0, addr)
        cluster.advance(5)
    text = log(cluster, "home-timeline-redis")
    assert "# Write error saving DB on disk: Input/output error" in text and "# Background saving error" in text
    reply = rd.serve(cluster, rt, c, "ZADD", True, 10.0, 5.0, addr)
    assert reply.ok == 0.0 and reply.error is not None and reply.error.startswith(
        "MISCONF Redis is configured to save RDB snapshots, but it is currently not able to persist on disk.")
    assert rd.serve(cluster, rt, c, "ZRANGE", False, 10.0, 5.0, addr).ok == 1.0
    assert "rdb_last_bgsave_status:err" in exec_(cluster, "home-timeline-redis", "redis-cli", "INFO", "persistence")[1]


# -- Kafka ------------------------------------------------------------------------------------------------
KAFKA = Address("kafka", 9092)


def drive(cluster: SimCluster, produce: float, consume: float, seconds: float) -> None:
    """One producer and one consumer of `orders`, as the call-graph engine calls the broker every 5 s."""
    for _ in range(int(seconds // 5)):
        rt, c, kafka = store(cluster, "kafka")
        kafka.serve(cluster, rt, c, "produce orders", True, produce, 5.0, KAFKA)
        kafka.serve(cluster, rt, c, "consume orders accounting", False, consume, 5.0, KAFKA)
        cluster.advance(5)


def test_consumer_lag_grows_while_the_consumer_is_slower_and_drains_when_it_catches_up(cluster: SimCluster) -> None:
    drive(cluster, produce=20.0, consume=100.0, seconds=60)
    cluster.advance(30)
    lag = 'kafka_consumergroup_lag{job="kafka-exporter",consumergroup="accounting",topic="orders",partition="0"}'
    assert scalar(cluster, lag) < 50
    assert scalar(cluster, 'kafka_brokers{job="kafka-exporter"}') == 1.0
    drive(cluster, produce=20.0, consume=5.0, seconds=240)  # a consumer that processes 5 records/s
    cluster.advance(30)
    grown = scalar(cluster, lag)
    assert 3000 < grown < 4000  # ~15 records/s for 240 s
    end = scalar(cluster, 'kafka_topic_partition_current_offset{topic="orders",partition="0"}')
    current = scalar(cluster, 'kafka_consumergroup_current_offset{consumergroup="accounting",topic="orders"}')
    assert end - current == pytest.approx(grown, abs=2)
    code, out, _ = exec_(cluster, "kafka", "/opt/kafka/bin/kafka-consumer-groups.sh", "--bootstrap-server", "localhost:9092",
                         "--describe", "--group", "accounting")
    row = next(line.split() for line in out.splitlines() if line.startswith("accounting"))
    assert code == 0 and row[:3] == ["accounting", "orders", "0"] and int(row[5]) == int(row[4]) - int(row[3]) > 3000
    drive(cluster, produce=20.0, consume=200.0, seconds=120)  # scaled up: it catches up
    cluster.advance(30)
    assert scalar(cluster, lag) < 50
    assert "[GroupCoordinator 1]: Stabilized group accounting generation 1" in log(cluster, "kafka")


def test_a_dead_consumer_leaves_the_group_and_its_lag_keeps_growing(cluster: SimCluster) -> None:
    drive(cluster, produce=10.0, consume=50.0, seconds=30)
    for _ in range(18):
        rt, c, kafka = store(cluster, "kafka")
        kafka.serve(cluster, rt, c, "produce orders", True, 10.0, 5.0, KAFKA)
        cluster.advance(5)
    cluster.advance(30)
    assert scalar(cluster, 'kafka_consumergroup_lag_sum{consumergroup="accounting",topic="orders"}') > 800
    assert scalar(cluster, 'kafka_consumergroup_members{consumergroup="accounting"}') == 0.0
    assert "in group accounting has failed, removing it from the group" in log(cluster, "kafka")
    code, out, _ = exec_(cluster, "kafka", "/opt/kafka/bin/kafka-consumer-groups.sh", "--bootstrap-server", "localhost:9092",
                         "--reset-offsets", "--group", "accounting", "--topic", "orders", "--to-latest", "--execute")
    assert code == 0 and "NEW-OFFSET" in out
    cluster.advance(30)
    assert scalar(cluster, 'kafka_consumergroup_lag_sum{consumergroup="accounting",topic="orders"}') < 100


def test_io_delay_on_the_log_dir_slows_produce_and_fetch(cluster: SimCluster) -> None:
    rt, c, kafka = store(cluster, "kafka")
    fast = kafka.serve(cluster, rt, c, "produce orders", True, 10.0, 5.0, KAFKA)
    chaos(cluster, "IOChaos", "slow-log", {"action": "latency", "mode": "all", "delay": "400ms", "percent": 100,
                                           "volumePath": "/tmp/kraft-combined-logs",
                                           "selector": {"labelSelectors": {"app": "kafka"}}})
    cluster.advance(2)
    slow = kafka.serve(cluster, rt, c, "produce orders", True, 10.0, 5.0, KAFKA)
    assert fast.latency < 0.01 and slow.latency > 0.4 and slow.ok == 1.0
    reply = kafka.serve(cluster, rt, c, "consume orders fraud-detection", False, 1000.0, 5.0, KAFKA)
    assert reply.latency > 0.4 and reply.read < 1000.0 * 0.8  # each poll waits on the disk


def test_a_write_error_on_the_log_dir_takes_it_offline_and_halts_the_broker(cluster: SimCluster) -> None:
    drive(cluster, produce=10.0, consume=10.0, seconds=10)
    chaos(cluster, "IOChaos", "kafka-eio", {"action": "fault", "mode": "all", "errno": 5, "percent": 100, "methods": ["write"],
                                            "volumePath": "/tmp/kraft-combined-logs",
                                            "selector": {"labelSelectors": {"app": "kafka"}}})
    cluster.advance(1)
    rt, c, kafka = store(cluster, "kafka")
    reply = kafka.serve(cluster, rt, c, "produce orders", True, 10.0, 5.0, KAFKA)
    assert reply.ok == 0.0 and reply.error == "KAFKA_STORAGE_ERROR: Disk error when trying to access log file on the disk."
    cluster.advance(5)
    st = status(cluster, "kafka")
    assert st["restartCount"] >= 1 and st["lastState"]["terminated"]["exitCode"] == 1
    text = cluster.read_container_log(NS, pod(cluster, "kafka")["metadata"]["name"], previous=True)
    assert ("ERROR Error while appending records to orders-0 in dir /tmp/kraft-combined-logs "
            "(org.apache.kafka.storage.internals.log.LogDirFailureChannel)") in text
    assert "java.io.IOException: Input/output error" in text
    assert ("ERROR [ReplicaManager broker=1] Shutdown broker because all log dirs in /tmp/kraft-combined-logs have failed "
            "(kafka.server.ReplicaManager)") in text
    cluster.advance(60)
    text = cluster.read_container_log(NS, pod(cluster, "kafka")["metadata"]["name"], previous=True)
    assert "KafkaStorageException: None of the specified log dirs from /tmp/kraft-combined-logs can be created or validated" \
        in text
    assert scalar(cluster, 'kafka_brokers{job="kafka-exporter"}') == 0.0
    assert promql(cluster, 'kafka_consumergroup_lag{consumergroup="accounting"}') == []


def test_an_advertised_listener_clients_cannot_resolve_breaks_produce(cluster: SimCluster) -> None:
    def edit(d: dict[str, Any]) -> None:
        env = d["spec"]["template"]["spec"]["containers"][0]["env"]
        for e in env:
            if e["name"] == "KAFKA_ADVERTISED_LISTENERS":
                e["value"] = "PLAINTEXT://kafka-broker:9092"
    cluster.store.mutate("deployments.apps", NS, "kafka", edit)
    cluster.advance(60)
    rt, c, kafka = store(cluster, "kafka")
    reply = kafka.serve(cluster, rt, c, "produce orders", True, 10.0, 5.0, KAFKA)
    assert reply.ok == 0.0 and reply.error == "dial tcp: lookup kafka-broker on 10.96.0.10:53: no such host"


def test_the_kafka_tools_live_in_opt_kafka_bin(cluster: SimCluster) -> None:
    drive(cluster, produce=5.0, consume=5.0, seconds=10)
    code, _, err = exec_(cluster, "kafka", "kafka-topics.sh", "--bootstrap-server", "localhost:9092", "--list")
    assert code == 126 and 'exec: "kafka-topics.sh": executable file not found in $PATH' in err
    code, out, _ = exec_(cluster, "kafka", "/opt/kafka/bin/kafka-topics.sh", "--bootstrap-server", "localhost:9092", "--list")
    assert (code, out) == (0, "__consumer_offsets\norders\n")
    out = exec_(cluster, "kafka", "/opt/kafka/bin/kafka-topics.sh", "--bootstrap-server", "localhost:9092", "--describe",
                "--topic", "orders")[1]
    assert "PartitionCount: 1\tReplicationFactor: 1" in out and "\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1" in out


# -- MongoDB and memcached as DataStores --------------------------------------------------------------------
def test_mongodb_and_memcached_answer_the_call_graph_like_hotel_reservation_sees_them(cluster: SimCluster) -> None:
    rt, c, mongo = store(cluster, "mongodb")
    admin = Address("mongodb", 27017, "admin", "admin", "", "mongodb://admin:admin@mongodb:27017/?authSource=admin")
    assert mongo.authenticate(c.instance, admin) is None
    bad = Address("mongodb", 27017, "admin", "x", "", "mongodb://admin:x@mongodb:27017")
    assert "(AuthenticationFailed) Authentication failed." in (mongo.authenticate(c.instance, bad) or "")
    assert mongo.serve(cluster, rt, c, "find post.post", False, 100.0, 5.0, admin).ok == 1.0
    anon = mongo.serve(cluster, rt, c, "insert post.post", True, 10.0, 5.0, Address("mongodb", 27017))
    assert anon.ok == 0.0 and anon.error == "(Unauthorized) command insert requires authentication"
    rt, c, memc = store(cluster, "memcached")
    assert memc.authenticate(c.instance, Address("memcached", 11211)) is None
    assert memc.serve(cluster, rt, c, "set", True, 100.0, 5.0, Address("memcached", 11211)).ok == 1.0
    assert c.instance["items"] == 250.0


# -- through a real kubectl ------------------------------------------------------------------------------------
KUBECTL = Path(__file__).resolve().parents[2] / ".tools" / "kubectl-root" / "usr" / "bin" / "kubectl"


@pytest.fixture(scope="module")
def sim(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served(seed=12)


def kubectl(handle: Any, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KUBECTL), "--kubeconfig", str(handle.kubeconfig), "-n", NS, *args], input=stdin,
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": f"{KUBECTL.parent}:/usr/bin:/bin", "HOME": "/tmp"})


@pytest.mark.kubectl
@pytest.mark.slow
@pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl 1.20 is installed by the test setup in .tools")
def test_kubectl_exec_psql_and_mysql_as_an_sre_would(sim: Any) -> None:
    docs = [d for d in store_objects() if d["metadata"]["name"] in (NS, "postgresql-init", "postgresql", "nacos-mysql")]
    created = kubectl(sim, "create", "-f", "-", stdin=yaml.safe_dump_all(docs))
    assert created.returncode == 0, created.stderr
    sim.advance(40)
    pods = kubectl(sim, "get", "pods", "-o", "name").stdout.split()
    pg = next(p for p in pods if "postgresql" in p)
    my = next(p for p in pods if "nacos-mysql" in p)
    out = kubectl(sim, "exec", pg, "--", "psql", "-U", "root", "-d", "otel", "-c", "SELECT usename FROM pg_user")
    assert out.returncode == 0 and out.stdout == " usename \n---------\n root\n otelu\n(2 rows)\n\n"
    out = kubectl(sim, "exec", pg, "--", "psql", "-U", "root", "-d", "otel", "-c", "ALTER USER otelu WITH PASSWORD 'x'")
    assert out.stdout == "ALTER ROLE\n"
    out = kubectl(sim, "exec", pg, "--", "sh", "-c", "PGPASSWORD=otelp psql -h postgresql -U otelu -d otel -c 'select 1'")
    assert out.returncode != 0 and 'FATAL:  password authentication failed for user "otelu"' in out.stderr
    out = kubectl(sim, "exec", my, "--", "mysql", "-uroot", "-pAbcd1234#", "-e", "SELECT user,host FROM mysql.user")
    assert out.returncode == 0 and out.stdout == "user\thost\nnacos\t%\nroot\t%\n"
    logs = kubectl(sim, "logs", pg).stdout
    assert 'FATAL:  password authentication failed for user "otelu"' in logs
