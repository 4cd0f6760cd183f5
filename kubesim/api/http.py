"""The HTTP side: a ThreadingHTTPServer (HTTP/1.1 keep-alive, chunked streaming) that turns each
request into a `Request` for an app callable and writes back its `Response`."""

from __future__ import annotations

import select
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: Any  # email.message.Message: case-insensitive get()
    body: bytes = b""
    alive: Callable[[], bool] = lambda: True
    user: Any = None  # set by the app once it has authenticated the request
    warnings: list[str] = field(default_factory=list)  # answered as Warning headers
    # (common name, organizations) of the client certificate the TLS handshake verified, if any
    client_cert: tuple[str, tuple[str, ...]] | None = None

    def arg(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default


@dataclass
class Response:
    status: int
    content_type: str = "application/json"
    body: bytes = b""
    stream: Iterator[bytes] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # For 101 Switching Protocols: called with (rfile, wfile, socket) once the headers are out.
    takeover: Callable[[Any, Any, Any], None] | None = None


App = Callable[[Request], Response]


def simple_app(fn: Callable[[str, str, dict[str, list[str]], bytes], tuple[int, str, bytes]]) -> App:
    """Adapt a `(method, path, query, body) -> (status, content_type, body)` callable."""

    def app(req: Request) -> Response:
        status, ctype, body = fn(req.method, req.path, req.query, req.body)
        return Response(status, ctype, body)

    return app


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    timeout = 900  # an idle keep-alive connection is dropped after this many seconds
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        pass

    def _alive(self) -> bool:
        """False once the client closed a streaming connection (it sends nothing else meanwhile)."""
        sock = self.connection
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            if not readable:
                return True
            sock.setblocking(False)
            try:
                return sock.recv(1) != b""
            finally:
                sock.setblocking(True)
        except (ssl.SSLWantReadError, BlockingIOError):
            return True
        except OSError:
            return False

    def _client_cert(self) -> tuple[str, tuple[str, ...]] | None:
        """The subject of the client certificate the handshake verified against the cluster's CA
        (the TLS context asks for one and refuses one it cannot verify)."""
        getpeercert = getattr(self.connection, "getpeercert", None)
        cert = getpeercert() if getpeercert is not None else None
        if not cert:
            return None
        attrs = [a for rdn in cert.get("subject", ()) for a in rdn]
        cn = next((v for k, v in attrs if k == "commonName"), "")
        return cn, tuple(v for k, v in attrs if k == "organizationName")

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _dispatch(self) -> None:
        url = urlsplit(self.path)
        req = Request(self.command, unquote(url.path), parse_qs(url.query, keep_blank_values=True),
                      self.headers, self._read_body(), self._alive, client_cert=self._client_cert())
        resp = self.server.app(req)
        phrase = HTTPStatus(resp.status).phrase if resp.status in HTTPStatus._value2member_map_ else ""
        head = [f"HTTP/1.1 {resp.status} {phrase}", f"Content-Type: {resp.content_type}"]
        if "Cache-Control" not in resp.headers:
            head.append("Cache-Control: no-cache, private")
        head += [f"{k}: {v}" for k, v in resp.headers.items()]
        if resp.takeover is not None:
            self.close_connection = True
            self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode())
            try:
                resp.takeover(self.rfile, self.wfile, self.connection)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        if resp.stream is None:
            head.append(f"Content-Length: {len(resp.body)}")
            self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode() + (resp.body if self.command != "HEAD" else b""))
            return
        # Kept alive, as Go's server keeps a watch's connection: a client stops a watch by shutting
        # its socket, which http.client only keeps for a connection that is not closing.
        head.append("Transfer-Encoding: chunked")
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode())
        try:
            for chunk in resp.stream:
                if chunk:
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
        finally:
            close = getattr(resp.stream, "close", None)
            if close:
                close()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _dispatch


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], app: App) -> None:
        self.app = app
        super().__init__(address, _Handler)


def serve_app(app: App, host: str = "127.0.0.1", port: int = 0,
              tls: ssl.SSLContext | None = None) -> tuple[ThreadingHTTPServer, str]:
    """Start serving `app` on a background thread (https when `tls` is given); returns the server
    and its base URL."""
    server = _Server((host, port), app)
    if tls is not None:
        # The handshake happens on the handler's thread, so one slow client never stalls accept().
        server.socket = tls.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                              name=f"http-{server.server_address[1]}", daemon=True)
    thread.start()
    scheme = "https" if tls is not None else "http"
    return server, f"{scheme}://{host}:{server.server_address[1]}"
