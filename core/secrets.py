"""Keeping secrets out of artifacts, logs and the database: values of secret-looking environment
variables, well-known API key shapes and secrets the farm registers (an admin token) are
replaced before anything is recorded or shown to an agent; so are the farm's own folders (the
repository and catalog, the artifacts folder, a worker's cluster folder), which an agent must
not learn the layout of."""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit

_SECRET_ENV = re.compile(r"(API_KEY|_TOKEN|SECRET|PASSWORD|ACCESS_KEY)", re.I)
_KEY_SHAPES = re.compile(
    r"(sk-[A-Za-z0-9_-]{16,}|sk-ant-[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|ghp_[A-Za-z0-9]{20,}|"
    r"xox[baprs]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{30,})"
)
REDACTED = "[REDACTED]"
PATH_REDACTED = "[farm path]"
# Registered at run time by the code that holds them (the admin token of a cluster, its folder).
_HIDDEN_SECRETS: set[str] = set()
_HIDDEN_PATHS: set[str] = set()
_PATH_ENV = ("FARM_ARTIFACTS", "FARM_STATE_DIR", "FARM_LIMITS_DIR")


def hide_secret(value: str) -> None:
    """Scrub `value` from every later text (long values only: a short one would eat words)."""
    if value and len(value) >= 8:
        _HIDDEN_SECRETS.add(value)


def hide_path(path: str | os.PathLike[str]) -> None:
    """Scrub a farm folder (and its resolved form) from every later text."""
    text = os.fspath(path)
    for form in {text, os.path.realpath(text)}:
        form = form.rstrip("/")
        if len(form) > 4:  # never "/" or "/tmp"-short prefixes of everything
            _HIDDEN_PATHS.add(form)


def private_paths() -> list[str]:
    """The farm's folders, longest first: the repository (code and catalog), the folders its
    environment names, and those registered with hide_path."""
    found = set(_HIDDEN_PATHS)
    root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    if len(root) > 4:
        found.add(root)
    for name in _PATH_ENV:
        value = os.environ.get(name, "")
        if value.startswith("/") and len(value.rstrip("/")) > 4:
            found.add(value.rstrip("/"))
    db = os.environ.get("FARM_DATABASE_URL", "")
    if db.startswith("sqlite:///") and len(db) > len("sqlite:///") + 4:
        found.add(os.path.dirname(db[len("sqlite:///"):]) or db)
    return sorted(found, key=len, reverse=True)


_URL_ENV = re.compile(r"(_URL|_URI|_DSN)$", re.I)


def secret_values() -> list[str]:
    vals = [v for k, v in os.environ.items() if _SECRET_ENV.search(k) and len(v) >= 8]
    vals += _HIDDEN_SECRETS
    for k, v in os.environ.items():
        # Credentials inside the farm's own connection URLs (FARM_DATABASE_URL, FARM_BROKER_URL):
        # the `user:password@` part always goes; the bare password too when it is long enough not
        # to be an ordinary word.
        if _URL_ENV.search(k) and "://" in v:
            try:
                url = urlsplit(v)
                password = url.password
            except ValueError:
                continue
            if password:
                vals.append(f"{url.username or ''}:{password}@")
                if len(password) >= 8:
                    vals.append(password)
    return sorted(set(vals), key=len, reverse=True)


def scrub(text: str) -> str:
    for value in secret_values():
        text = text.replace(value, REDACTED)
    for path in private_paths():
        text = text.replace(path, PATH_REDACTED)
    return _KEY_SHAPES.sub(REDACTED, text)
