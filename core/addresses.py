"""Where a program finds its peers: host:port, a URL with credentials and a database, or a key=value
DSN, parsed the way the client libraries read them. The emulated cluster dials what it parses; the
fault injectors read the same addresses out of an application's manifests to know which workload a
service's variable points at."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

DEFAULT_PORTS = {"postgres": 5432, "mysql": 3306, "redis": 6379, "kafka": 9092, "mongo": 27017, "memcached": 11211,
                 "http": 80, "grpc": 80, "thrift": 9090}


@dataclass(frozen=True)
class Address:
    host: str
    port: int
    user: str = ""
    password: str = ""
    database: str = ""
    raw: str = ""
    client: str = ""  # the dialling pod's IP, as the server sees it (MySQL's 'user'@'10.244.1.7')

    def entry(self) -> dict[str, Any]:
        """The address as a container's instance keeps it (`peers`): instances are plain data,
        checkpointed with the cluster; `Address(**entry, client=...)` reads it back."""
        return {"host": self.host, "port": self.port, "user": self.user, "password": self.password,
                "database": self.database, "raw": self.raw}


def parse_address(value: str, protocol: str) -> Address | None:
    """host:port, scheme://[user:pass@]host[:port][/db], or the key=value DSNs of libpq
    (`host=… user=…`) and Npgsql (`Host=…;Username=…`). None when nothing usable is in it."""
    value = value.strip()
    if not value:
        return None
    default = DEFAULT_PORTS.get(protocol, 80)
    if "=" in value and "://" not in value:
        pairs = dict(
            (k.strip().lower(), v.strip())
            for k, _, v in (part.partition("=") for part in re.split(r"[;\s]+", value) if "=" in part))
        host = pairs.get("host") or pairs.get("server") or ""
        if not host:
            return None
        port = pairs.get("port", "")
        return Address(host, int(port) if port.isdigit() else default, pairs.get("user") or pairs.get("username") or "",
                       pairs.get("password", ""), pairs.get("dbname") or pairs.get("database") or "", value)
    if "://" in value:
        u = urlparse(value)
        if not u.hostname:
            return None
        try:
            port = u.port or (443 if u.scheme == "https" else default)
        except ValueError:
            return None
        db = u.path.lstrip("/").split("/")[0]
        q = parse_qs(u.query)
        return Address(u.hostname, port, unquote(u.username or ""), unquote(u.password or ""),
                       db or (q.get("dbname") or [""])[0], value)
    host, _, port = value.rpartition(":")
    if not host:
        return Address(value, default, raw=value) if re.match(r"^[A-Za-z0-9.-]+$", value) else None
    if not port.isdigit():
        return None
    return Address(host or "localhost", int(port), raw=value)


__all__ = ["DEFAULT_PORTS", "Address", "parse_address"]
