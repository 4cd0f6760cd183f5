"""TLS contexts shared by the whole process: building one loads a CA bundle (~30 ms of CPU), which
every session, client or request would otherwise pay again. A context is read-only once made, so
threads share it."""

from __future__ import annotations

import hashlib
import os
import ssl
import tempfile
import threading
from pathlib import Path

_CONTEXTS: dict[str, ssl.SSLContext] = {}
_LOCK = threading.Lock()


def ssl_context(ca_pem: bytes | str | None = None, cert_pem: bytes | None = None,
                key_pem: bytes | None = None) -> ssl.SSLContext:
    """The process's context trusting `ca_pem` (without one: the CA bundle httpx trusts by
    default, certifi's), presenting the client identity `cert_pem`/`key_pem` if given."""
    ca = ca_pem.encode() if isinstance(ca_pem, str) else ca_pem
    key = hashlib.sha256(b"\0".join(x or b"" for x in (ca, cert_pem, key_pem))).hexdigest()
    with _LOCK:
        ctx = _CONTEXTS.get(key)
        if ctx is None:
            ctx = _make(ca, cert_pem, key_pem)
            _CONTEXTS[key] = ctx
        return ctx


def _make(ca: bytes | None, cert_pem: bytes | None, key_pem: bytes | None) -> ssl.SSLContext:
    if ca:
        ctx = ssl.create_default_context(cadata=ca.decode())
    else:
        import certifi

        ctx = ssl.create_default_context(cafile=certifi.where())
    if cert_pem and key_pem:
        # ssl loads a client identity only from files: written privately, removed at once
        with tempfile.TemporaryDirectory(prefix="tls-identity-") as tmp:
            cert, private = Path(tmp) / "cert", Path(tmp) / "key"
            for path, data in ((cert, cert_pem), (private, key_pem)):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
            ctx.load_cert_chain(cert, private)
    return ctx
