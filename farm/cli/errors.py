"""What `farm` prints when a service it needs fails: one line naming the service, its address and
what to do, instead of a traceback (`--debug`, or FARM_DEBUG=1, shows the traceback). The foreign
exceptions (SQLAlchemy and its drivers, kombu and redis, botocore) are recognised here, at the
command line's edge; the farm's own errors already say what went wrong in one sentence."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

DEBUG_FLAG = "--debug"


def debug_requested(argv: list[str]) -> bool:
    """True when `--debug` is anywhere in argv (removed from it, so every command takes it) or
    FARM_DEBUG is set."""
    found = DEBUG_FLAG in argv
    while DEBUG_FLAG in argv:
        argv.remove(DEBUG_FLAG)
    return found or os.environ.get("FARM_DEBUG", "") not in ("", "0")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _first_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)  # SQLAlchemy wraps the driver's error
    text = str(orig if orig is not None else exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _option(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _database(exc: BaseException, argv: list[str]) -> str:
    from results.db import redact_url

    url = _option(argv, "--db") or os.environ.get("FARM_DATABASE_URL")
    if url:
        where = redact_url(url)
    else:
        at = re.search(r'server at "([^"]+)"(?:\s*\([^)]*\))?, port (\d+)', str(exc))
        where = f"{at.group(1)}:{at.group(2)}" if at else "farm-out/farm.sqlite"
    return (f"the database {where} cannot be reached ({_first_line(exc)}): start it, or point FARM_DATABASE_URL "
            "at one that is up")


def _broker(exc: BaseException) -> str:
    from results.db import redact_url

    url = redact_url(os.environ.get("FARM_BROKER_URL", "redis://127.0.0.1:6379/0"))
    return (f"the broker {url} cannot be reached ({_first_line(exc)}): start Redis or RabbitMQ there, or point "
            "FARM_BROKER_URL at one that is up")


def _s3(exc: BaseException) -> str:
    endpoint = (getattr(exc, "kwargs", {}) or {}).get("endpoint_url") or os.environ.get("AWS_ENDPOINT_URL") or "AWS S3"
    target = os.environ.get("FARM_ARTIFACTS", "")
    return (f"the artifact store {target + ' at ' if target else ''}{endpoint} cannot be reached ({_first_line(exc)}): "
            "start it, or point AWS_ENDPOINT_URL (and FARM_ARTIFACTS) at one that is up")


def explain(exc: BaseException, argv: list[str]) -> str | None:
    """One line for an error a person can act on, or None for a bug (which keeps its traceback)."""
    for e in _chain(exc):
        module = type(e).__module__.split(".")[0]
        name = type(e).__name__
        if module == "sqlalchemy" and name in ("OperationalError", "InterfaceError"):
            return _database(e, argv)
        if module in ("kombu", "amqp", "redis") and ("Connection" in name or name == "OperationalError"):
            return _broker(e)
        if module in ("botocore", "boto3") and name in ("EndpointConnectionError", "ConnectTimeoutError",
                                                        "ReadTimeoutError", "NoCredentialsError", "ConnectionClosedError"):
            return _s3(e)
    from core.errors import FarmError

    for e in _chain(exc):
        if isinstance(e, FarmError):
            return str(e)
    return None


def interrupted(argv: list[str]) -> str:
    """What Ctrl-C left behind and how to go on."""
    words = [a for a in argv[1:] if not a.startswith("-")]
    if words[:1] == ["run"] and len(words) > 1:
        out = _option(argv, "--out") or _option(argv, "-o")
        again = f"farm run {words[1]}" + (f" --out {out}" if out else "")
        return (f"interrupted: finished trials are kept; `{again}` runs the rest (a trial cut short runs again "
                "once its lease lapses, within a minute)")
    if words[:2] == ["sweep", "status"]:
        return "stopped watching; the sweep goes on"
    return "interrupted"
