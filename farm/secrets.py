"""Keeping secrets out of artifacts, logs and the database: values of secret-looking environment
variables and well-known API key shapes are replaced before anything is recorded."""

from __future__ import annotations

import os
import re

_SECRET_ENV = re.compile(r"(API_KEY|_TOKEN|SECRET|PASSWORD|ACCESS_KEY)", re.I)
_KEY_SHAPES = re.compile(
    r"(sk-[A-Za-z0-9_-]{16,}|sk-ant-[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|ghp_[A-Za-z0-9]{20,}|"
    r"xox[baprs]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{30,})"
)
REDACTED = "[REDACTED]"


def secret_values() -> list[str]:
    vals = [v for k, v in os.environ.items() if _SECRET_ENV.search(k) and len(v) >= 8]
    return sorted(set(vals), key=len, reverse=True)


def scrub(text: str) -> str:
    for value in secret_values():
        text = text.replace(value, REDACTED)
    return _KEY_SHAPES.sub(REDACTED, text)
