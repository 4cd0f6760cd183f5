"""Keeping secrets out of artifacts, logs and the database: values of secret-looking environment
variables, well-known API key shapes and secrets the farm registers (an admin token) are
replaced before anything is recorded or shown to an agent; so are the farm's own folders (the
repository and catalog, the artifacts folder, a worker's cluster folder), which an agent must
not learn the layout of."""

from __future__ import annotations

import os
import re
from typing import Any
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
_registered = 0  # how many values were registered: a new one builds the matcher again
_PATH_ENV = ("FARM_ARTIFACTS", "FARM_STATE_DIR", "FARM_LIMITS_DIR")
# The repository's folder, resolved once: realpath is a system call per component.
_ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def hide_secret(value: str) -> None:
    """Scrub `value` from every later text (long values only: a short one would eat words)."""
    global _registered
    if value and len(value) >= 8 and value not in _HIDDEN_SECRETS:
        _HIDDEN_SECRETS.add(value)
        _registered += 1


def hide_path(path: str | os.PathLike[str]) -> None:
    """Scrub a farm folder (and its resolved form) from every later text."""
    global _registered
    text = os.fspath(path)
    for form in {text, os.path.realpath(text)}:
        form = form.rstrip("/")
        if len(form) > 4 and form not in _HIDDEN_PATHS:  # never "/" or "/tmp"-short prefixes of everything
            _HIDDEN_PATHS.add(form)
            _registered += 1


def private_paths() -> list[str]:
    """The farm's folders, longest first: the repository (code and catalog), the folders its
    environment names, and those registered with hide_path."""
    found = set(_HIDDEN_PATHS)
    root = _ROOT
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


class Scrubber:
    """One compiled matcher over the secrets and folders known when it was built: a text is
    scrubbed in one pass over its known values (secrets before folders, each longest first, as
    they were replaced one after another before) and one over the key shapes."""

    def __init__(self, secrets: list[str], paths: list[str]) -> None:
        self._replacement = {path: PATH_REDACTED for path in paths}
        self._replacement.update((value, REDACTED) for value in secrets)
        # Alternatives are tried in order at each position: a secret wins over a folder there.
        literals = [*secrets, *(p for p in paths if p not in secrets)]
        self._literals = re.compile("|".join(map(re.escape, literals))) if literals else None

    def _replace(self, match: re.Match[str]) -> str:
        return self._replacement[match.group()]

    def __call__(self, text: str) -> str:
        if self._literals is not None:
            text = self._literals.sub(self._replace, text)
        return _KEY_SHAPES.sub(REDACTED, text)


_current: tuple[object, Scrubber] | None = None


def current_scrubber() -> Scrubber:
    """The scrubber for what is known now, built again only when the environment or the
    registered secrets and folders changed since the last text (a worker's stay the same for a
    whole trial: every string of it is scrubbed by one matcher)."""
    global _current
    # The environment's raw items: comparing them costs microseconds, where reading the secrets
    # out of it (a pattern per variable, URLs parsed) cost tens for every string scrubbed.
    env: Any = getattr(os.environ, "_data", os.environ)
    key = (tuple(env.items()), _registered)
    cached = _current
    if cached is not None and cached[0] == key:
        return cached[1]
    scrubber = Scrubber(secret_values(), private_paths())
    _current = (key, scrubber)
    return scrubber


def scrub(text: str) -> str:
    return current_scrubber()(text)
