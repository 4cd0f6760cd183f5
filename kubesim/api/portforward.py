"""`pods/portforward` over SPDY/3.1 with the portforward.k8s.io protocol (kubectl <= 1.30's
transport, and what newer ones fall back to), and the same SPDY tunnelled through a WebSocket
("SPDY/3.1+portforward.k8s.io", kubectl >= 1.31's default). Each local connection kubectl
accepts opens an error and a data stream naming the pod port in their headers; the bytes that
arrive on the data stream go to what listens on that port in the cluster's model, and its
answer comes back on the same stream, which is then closed as the server closes it."""

from __future__ import annotations

import select
import time
import zlib
from collections.abc import Callable
from typing import Any, BinaryIO

from kubesim.api.remotecommand import _control, _data, _read_exact, _ws_frame, read_ws_frame

PROTOCOL = "portforward.k8s.io"
TUNNEL_PROTOCOL = "SPDY/3.1+portforward.k8s.io"
# port, the request bytes → (the response bytes, an error for the error stream or None); b"" with
# no error: the server closed the connection without answering.
ForwardFn = Callable[[int, bytes], tuple[bytes, str | None]]
PodForwardFn = Callable[[str, str, int, bytes], tuple[bytes, str | None]]
_SYN_STREAM, _SYN_REPLY, _RST_STREAM, _PING, _GOAWAY = 1, 2, 3, 6, 7
_FLAG_FIN = 0x01
_IDLE_SECONDS = 300.0

# The SPDY/3 header compression dictionary (draft-mbelshe-httpbis-spdy-00 section 2.6.10.1):
# length-prefixed header names, then a run of common values.
_NAMES = (
    'options', 'head', 'post', 'put', 'delete', 'trace', 'accept', 'accept-charset', 'accept-encoding',
    'accept-language', 'accept-ranges', 'age', 'allow', 'authorization', 'cache-control', 'connection',
    'content-base', 'content-encoding', 'content-language', 'content-length', 'content-location', 'content-md5',
    'content-range', 'content-type', 'date', 'etag', 'expect', 'expires', 'from', 'host', 'if-match',
    'if-modified-since', 'if-none-match', 'if-range', 'if-unmodified-since', 'last-modified', 'location',
    'max-forwards', 'pragma', 'proxy-authenticate', 'proxy-authorization', 'range', 'referer', 'retry-after',
    'server', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'user-agent', 'vary', 'via', 'warning',
    'www-authenticate', 'method', 'get', 'status', '200 OK', 'version', 'HTTP/1.1', 'url', 'public', 'set-cookie',
    'keep-alive', 'origin',
)
_TAIL = (
    '100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505203 Non-Au'
    'thoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized403 Forbidd'
    'en404 Not Found500 Internal Server Error501 Not Implemented503 Service UnavailableJan Feb Mar Apr Ma'
    'y Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,imag'
    'e/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,text/javascript,publicpri'
    'vatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.'
)
SPDY_DICT = b"".join(len(n).to_bytes(4, "big") + n.encode() for n in _NAMES) + _TAIL.encode()


def _headers(block: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    if len(block) < 4:
        return out
    count = int.from_bytes(block[:4], "big")
    i = 4
    for _ in range(count):
        n = int.from_bytes(block[i:i + 4], "big")
        name = block[i + 4:i + 4 + n].decode(errors="replace")
        i += 4 + n
        n = int.from_bytes(block[i:i + 4], "big")
        out[name.lower()] = block[i + 4:i + 4 + n].decode(errors="replace")
        i += 4 + n
    return out


class _WebSocketStream:
    """The byte stream of a WebSocket's binary messages (client frames are masked), and a writer
    that sends each write as one binary message: SPDY runs over it unchanged."""

    def __init__(self, rfile: BinaryIO, wfile: BinaryIO) -> None:
        self.rfile, self.wfile = rfile, wfile
        self.buf = b""
        self.closed = False

    def read(self, n: int) -> bytes:
        while len(self.buf) < n and not self.closed:
            frame = read_ws_frame(self.rfile)
            if frame is None:
                self.closed = True
                break
            opcode, payload = frame
            if opcode == 8:
                self.closed = True
            elif opcode == 9:
                self.wfile.write(_ws_frame(10, payload))
                self.wfile.flush()
            elif opcode in (0, 2):
                self.buf += payload
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def write(self, data: bytes) -> None:
        self.wfile.write(_ws_frame(2, data))

    def flush(self) -> None:
        self.wfile.flush()


def spdy_session(rfile: Any, wfile: Any, sock: Any, forward: ForwardFn, *, websocket: bool = False) -> None:
    """Serve port-forward streams until the client hangs up (or stays idle too long)."""
    if websocket:
        rfile = wfile = _WebSocketStream(rfile, wfile)
    inflate = zlib.decompressobj(zdict=SPDY_DICT)
    deflate = zlib.compressobj(zdict=SPDY_DICT)
    streams: dict[int, dict[str, str]] = {}
    pending: dict[int, bytes] = {}
    errors: dict[str, int] = {}  # request id → error stream id
    last = time.monotonic()
    while time.monotonic() - last < _IDLE_SECONDS:
        if not websocket or not rfile.buf:  # type: ignore[union-attr]
            ready, _, _ = select.select([sock], [], [], 1.0)
            if not ready:
                continue
        head = _read_exact(rfile, 8)
        if head is None or len(head) < 8:
            return
        last = time.monotonic()
        first = int.from_bytes(head[:4], "big")
        flags, length = head[4], int.from_bytes(head[5:8], "big")
        payload = _read_exact(rfile, length) if length else b""
        if payload is None:
            return
        if first & 0x80000000:
            kind = first & 0xFFFF
            if kind == _SYN_STREAM:
                sid = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
                try:
                    hdrs = _headers(inflate.decompress(payload[10:]))
                except zlib.error:
                    return
                streams[sid] = hdrs
                reply = sid.to_bytes(4, "big") + deflate.compress(b"\0\0\0\0") + deflate.flush(zlib.Z_SYNC_FLUSH)
                wfile.write(_control(_SYN_REPLY, 0, reply))
                wfile.flush()
                if hdrs.get("streamtype") == "error":
                    errors[hdrs.get("requestid", "")] = sid
            elif kind == _PING:
                wfile.write(_control(_PING, 0, payload))
                wfile.flush()
            elif kind == _GOAWAY:
                return
            continue
        sid = first & 0x7FFFFFFF
        hdrs = streams.get(sid, {})
        if hdrs.get("streamtype") != "data":
            continue
        pending[sid] = pending.get(sid, b"") + payload
        if not _complete(pending[sid]) and not flags & _FLAG_FIN:
            continue
        try:
            port = int(hdrs.get("port", "0"))
        except ValueError:
            port = 0
        answer, error = forward(port, pending.pop(sid))
        err_sid = errors.get(hdrs.get("requestid", ""))
        if error and err_sid is not None:
            wfile.write(_data(err_sid, 0, error.encode()))
        if answer:
            wfile.write(_data(sid, 0, answer))
        wfile.write(_data(sid, _FLAG_FIN, b""))
        if err_sid is not None:
            wfile.write(_data(err_sid, _FLAG_FIN, b""))
        wfile.flush()


def _complete(data: bytes) -> bool:
    """A whole HTTP/1.x request (head and Content-Length body), or bytes that are no HTTP/1 at all."""
    if not data[:8].isascii() or data.startswith(b"PRI * HTTP/2"):
        return True
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return False
    head = data[:end].decode(errors="replace").lower()
    for line in head.split("\r\n"):
        if line.startswith("content-length:"):
            try:
                return len(data) - end - 4 >= int(line.split(":", 1)[1])
            except ValueError:
                return True
    return True


# kubelet's WebSocket port-forward (pkg/kubelet/cri/streaming/portforward/websocket.go), what
# clients other than kubectl speak: one connection per forwarded connection, the ports in the query
CHANNEL_PROTOCOL = "v4.channel.k8s.io"
_COPY_BUFFER = 32 * 1024


def websocket_ports(query: dict[str, list[str]]) -> list[int]:
    """The `ports` query parameter(s), as the kubelet parses them; ValueError naming the bad one."""
    raw = [p.strip() for v in query.get("ports") or [] for p in v.split(",") if p.strip()]
    if not raw:
        raise ValueError('query parameter "port" is required')
    ports = []
    for p in raw:
        if not p.isdigit() or not 0 < int(p) < 65536:
            raise ValueError(f'unable to parse "{p}" as a port: port must be in the range 1-65535')
        ports.append(int(p))
    return ports


def channel_session(rfile: Any, wfile: Any, sock: Any, forward: ForwardFn, ports: list[int]) -> None:
    """Channel 2i carries port i's bytes both ways, 2i+1 its errors; the first frame the server
    sends on each channel is the port, 2 bytes little-endian. The connection to the port stays
    open across requests (an HTTP client's keep-alive); the server hanging up closes the socket."""
    for i, port in enumerate(ports):
        for channel in (2 * i, 2 * i + 1):
            wfile.write(_ws_frame(2, bytes([channel]) + port.to_bytes(2, "little")))
    wfile.flush()
    pending = [b""] * len(ports)
    while True:
        frame = read_ws_frame(rfile)
        if frame is None:
            return
        opcode, payload = frame
        if opcode == 8:
            break
        if opcode == 9:
            wfile.write(_ws_frame(10, payload))
            wfile.flush()
            continue
        if opcode not in (0, 2) or not payload or payload[0] % 2 or payload[0] // 2 >= len(ports):
            continue
        i = payload[0] // 2
        pending[i] += payload[1:]
        if not _complete(pending[i]):
            continue
        answer, error = forward(ports[i], pending[i])
        pending[i] = b""
        if error:
            wfile.write(_ws_frame(2, bytes([2 * i + 1]) + error.encode()))
        # one frame per io.Copy buffer, as the kubelet relays it (and under clients' message limits)
        for at in range(0, len(answer), _COPY_BUFFER):
            wfile.write(_ws_frame(2, bytes([2 * i]) + answer[at:at + _COPY_BUFFER]))
        wfile.flush()
        if error or not answer:
            break
    wfile.write(_ws_frame(8, (1000).to_bytes(2, "big")))
    wfile.flush()
