"""Keeping secrets out of artifacts, logs and the database: values of secret-looking environment
variables and well-known API key shapes are replaced before anything is recorded."""

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


_URL_ENV = re.compile(r"(_URL|_URI|_DSN)$", re.I)


def secret_values() -> list[str]:
    vals = [v for k, v in os.environ.items() if _SECRET_ENV.search(k) and len(v) >= 8]
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
    return _KEY_SHAPES.sub(REDACTED, text)
