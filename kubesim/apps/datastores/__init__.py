"""Data stores the call-graph applications dial, as `DataStore` models (kubesim/apps/graph.py):
PostgreSQL, MySQL, Redis/Valkey and Kafka, one module each; MongoDB and memcached live in stores.py.

Store commands `serve()` understands (a call graph's `Call.op` for a store peer):
- postgres / mysql: an SQL statement or `<VERB> <table>` (`SELECT catalog.products`, `INSERT accounting.order`);
- redis: a command name, optionally with a key (`GET`, `HSET cart`, `ZADD`...); writes by `write=True` or verb;
- kafka: `produce <topic>` (rate = messages/s produced) and `consume <topic> <group>` (rate = what the
  consumer can process per second; the reply is a `ConsumeReply` whose `read` is what it got, per second).
"""

from kubesim.apps.datastores.common import ConsumeReply, StoreModel
from kubesim.apps.datastores.kafka import Kafka
from kubesim.apps.datastores.mysql import MySQL, mysql_login
from kubesim.apps.datastores.postgres import PostgreSQL, pg_login
from kubesim.apps.datastores.redis import Redis

__all__ = ["ConsumeReply", "Kafka", "MySQL", "PostgreSQL", "Redis", "StoreModel", "mysql_login", "pg_login"]
