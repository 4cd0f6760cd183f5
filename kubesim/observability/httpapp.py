"""The small HTTP-app contract the three query back ends share: `(method, path, query, body) ->
(status, content_type, body)`, plus a loopback ThreadingHTTPServer that mounts one such app (for
tests, benches and `farm sim up`; the emulated cluster's server mounts the apps itself)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

Response = tuple[int, str, bytes]
App = Callable[[str, str, dict[str, list[str]], bytes], Response]

JSON = "application/json"


def json_response(status: int, payload: Any) -> Response:
    return status, JSON, json.dumps(payload, separators=(",", ":"), allow_nan=False).encode()


def text_response(status: int, text: str) -> Response:
    return status, "text/plain; charset=utf-8", text.encode()


def form_params(query: dict[str, list[str]], body: bytes) -> dict[str, list[str]]:
    """Query-string parameters merged with a form-encoded POST body, as Prometheus reads both."""
    merged = {k: list(v) for k, v in query.items()}
    if body:
        try:
            extra = parse_qs(body.decode(), keep_blank_values=True)
        except UnicodeDecodeError:
            extra = {}
        for k, v in extra.items():
            merged.setdefault(k, []).extend(v)
    return merged


def first(params: dict[str, list[str]], name: str, default: str | None = None) -> str | None:
    vals = params.get(name)
    return vals[0] if vals else default


class AppServer:
    """Serves one app on 127.0.0.1 (random port by default) in a background thread."""

    def __init__(self, app: App, host: str = "127.0.0.1", port: int = 0) -> None:
        self.app = app
        handler = _handler_for(app)
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        # A short poll interval makes stop() quick; the server is idle-cheap either way.
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="obs-http", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> AppServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> AppServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _handler_for(app: App) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            query = parse_qs(parts.query, keep_blank_values=True)
            try:
                status, ctype, payload = app(self.command, parts.path, query, body)
            except Exception as e:  # a bug in a back end must not kill the connection silently
                status, ctype, payload = 500, "text/plain; charset=utf-8", f"internal error: {e!s}".encode()
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
