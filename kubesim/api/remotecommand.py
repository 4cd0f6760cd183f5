"""`pods/exec` over the two transports clients use: SPDY/3.1 (kubectl) and WebSocket (the Python
client's `kubernetes.stream`), both with the v4.channel.k8s.io protocol: stdout and stderr
streams, then a metav1.Status on the error stream carrying the exit code.

The command runs to completion in the cluster's model before the connection is upgraded
(exec(namespace, pod, container, command) -> (exit code, stdout, stderr)); stdin is not read."""

from __future__ import annotations

import base64
import hashlib
import json
import select
import time
import zlib
from collections.abc import Callable
from typing import Any, BinaryIO

ExecFn = Callable[..., tuple[int, str, str]]  # (namespace, pod, container, command[, stdin]) -> (code, out, err)
class Follow:
    """A running process's output as it comes (`kubectl attach` without stdin): `poll()` gives
    (new stdout text, the exit code once the process has ended, else None)."""

    def __init__(self, poll: Callable[[], tuple[str, int | None]], interval: float = 0.5) -> None:
        self.poll, self.interval = poll, interval


# What a session serves: the outcome, (with stdin) the function of stdin's text giving it, or a Follow.
Result = tuple[int, str, str] | Callable[[str], tuple[int, str, str]] | Follow
PROTOCOL = "v4.channel.k8s.io"
# v5 (kubectl >= 1.30's WebSocket default) adds channel 255, the client closing a stream; the
# server's side of an exec is v4's.
WEBSOCKET_PROTOCOLS = ("v5.channel.k8s.io", PROTOCOL, "base64.channel.k8s.io")
_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_CHUNK = 32 * 1024


def exit_status(code: int, command: list[str]) -> dict[str, Any]:
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {"metadata": {}, "status": "Failure",
            "message": f"command terminated with non-zero exit code: error executing command {command}, exit code {code}",
            "reason": "NonZeroExitCode", "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}


def _offered(header: str | None) -> list[str]:
    return [p.strip() for p in (header or "").split(",") if p.strip()]


# -- SPDY/3.1 ------------------------------------------------------------------------------
_SYN_STREAM, _SYN_REPLY, _RST_STREAM, _PING, _GOAWAY = 1, 2, 3, 6, 7
_FLAG_FIN = 0x01


def _control(type_: int, flags: int, payload: bytes) -> bytes:
    return (0x8003).to_bytes(2, "big") + type_.to_bytes(2, "big") + bytes([flags]) + len(payload).to_bytes(3, "big") + payload


def _data(stream_id: int, flags: int, payload: bytes) -> bytes:
    return stream_id.to_bytes(4, "big") + bytes([flags]) + len(payload).to_bytes(3, "big") + payload


def _read_exact(rfile: BinaryIO, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = rfile.read(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def spdy_session(rfile: BinaryIO, wfile: BinaryIO, sock: Any, *, streams: list[str], result: Result,
                 command: list[str], timeout: float = 30.0, stdin_timeout: float = 300.0) -> None:
    """Serve one exec over SPDY. `streams` are the stream types the client opens, in the order
    client-go's v4 protocol creates them (error, stdin, stdout, stderr, resize): stream ids are
    assigned in that order, so the (compressed) SYN_STREAM headers need not be decoded. With a
    stdin stream, `result` is called with what the client sent once it closes that stream."""
    compressor = zlib.compressobj()
    empty_headers = compressor.compress(b"\x00\x00\x00\x00") + compressor.flush(zlib.Z_SYNC_FLUSH)
    ids: dict[str, int] = {}
    stdin: list[bytes] = []
    stdin_open = "stdin" in streams
    deadline = time.monotonic() + timeout
    # SPDY header blocks share one zlib stream: each reply continues the previous one.
    while (len(ids) < len(streams) or stdin_open) and time.monotonic() < deadline:
        head = _read_exact(rfile, 8)
        if head is None:
            return
        first = int.from_bytes(head[:4], "big")
        length = int.from_bytes(head[5:8], "big")
        payload = _read_exact(rfile, length) if length else b""
        if payload is None:
            return
        if not first & 0x80000000:
            if first & 0x7FFFFFFF == ids.get("stdin"):
                stdin.append(payload)
                if head[4] & _FLAG_FIN:
                    stdin_open = False
            continue
        type_ = first & 0xFFFF
        if type_ == _SYN_STREAM:
            stream_id = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
            ids[streams[len(ids)]] = stream_id
            reply = stream_id.to_bytes(4, "big") + empty_headers
            wfile.write(_control(_SYN_REPLY, 0, reply))
            wfile.flush()
            empty_headers = compressor.compress(b"\x00\x00\x00\x00") + compressor.flush(zlib.Z_SYNC_FLUSH)
            if len(ids) == len(streams):
                deadline = time.monotonic() + stdin_timeout
        elif type_ == _PING:
            wfile.write(_control(_PING, 0, payload))
            wfile.flush()
        elif type_ == _RST_STREAM and int.from_bytes(payload[:4], "big") & 0x7FFFFFFF == ids.get("stdin"):
            stdin_open = False
        elif type_ == _GOAWAY:
            return
    if len(ids) < len(streams):
        return
    if isinstance(result, Follow):
        code = _spdy_follow(rfile, wfile, sock, ids, result)
        if code is None:
            return
        result = (code, "", "")
    code, out, err = _outcome(result, b"".join(stdin).decode("utf-8", "surrogateescape"))
    for kind, text in (("stdout", out), ("stderr", err)):
        if kind in ids:
            data = text.encode("utf-8", "surrogateescape")
            for i in range(0, len(data), _CHUNK):
                wfile.write(_data(ids[kind], 0, data[i:i + _CHUNK]))
    wfile.write(_data(ids["error"], 0, json.dumps(exit_status(code, command)).encode()))
    for kind in ("stdout", "stderr", "error"):
        if kind in ids:
            wfile.write(_data(ids[kind], _FLAG_FIN, b""))
    wfile.flush()
    # The client hangs up once it has read everything; give it a moment, answering pings.
    end = time.monotonic() + 5.0
    while time.monotonic() < end:
        ready, _, _ = select.select([sock], [], [], 0.2)
        if not ready:
            continue
        head = _read_exact(rfile, 8)
        if head is None:
            return
        length = int.from_bytes(head[5:8], "big")
        payload = _read_exact(rfile, length) if length else b""
        if payload is None:
            return
        first = int.from_bytes(head[:4], "big")
        if first & 0x80000000 and first & 0xFFFF == _PING:
            wfile.write(_control(_PING, 0, payload))
            wfile.flush()


def _spdy_follow(rfile: BinaryIO, wfile: BinaryIO, sock: Any, ids: dict[str, int], follow: Follow) -> int | None:
    """Send the process's output as it comes until it exits (its code) or the client goes (None)."""
    while True:
        text, code = follow.poll()
        if text and "stdout" in ids:
            wfile.write(_data(ids["stdout"], 0, text.encode("utf-8", "surrogateescape")))
            wfile.flush()
        if code is not None:
            return code
        ready, _, _ = select.select([sock], [], [], follow.interval)
        if not ready:
            continue
        head = _read_exact(rfile, 8)
        if head is None:
            return None
        length = int.from_bytes(head[5:8], "big")
        payload = _read_exact(rfile, length) if length else b""
        first = int.from_bytes(head[:4], "big")
        if payload is None or (first & 0x80000000 and first & 0xFFFF == _GOAWAY):
            return None
        if first & 0x80000000 and first & 0xFFFF == _PING:
            wfile.write(_control(_PING, 0, payload))
            wfile.flush()


def _ws_follow(rfile: BinaryIO, wfile: BinaryIO, sock: Any, follow: Follow, base64_mode: bool) -> int | None:
    while True:
        text, code = follow.poll()
        if text:
            part = text.encode("utf-8", "surrogateescape")
            wfile.write(_ws_frame(1, b"1" + base64.b64encode(part)) if base64_mode else _ws_frame(2, b"\x01" + part))
            wfile.flush()
        if code is not None:
            return code
        ready, _, _ = select.select([sock], [], [], follow.interval)
        if ready:
            frame = read_ws_frame(rfile)
            if frame is None or frame[0] == 8:
                return None
            if frame[0] == 9:
                wfile.write(_ws_frame(10, frame[1]))
                wfile.flush()


def spdy_streams(stdin: bool, stdout: bool, stderr: bool, tty: bool) -> list[str]:
    kinds = ["error"]
    if stdin:
        kinds.append("stdin")
    if stdout:
        kinds.append("stdout")
    if stderr and not tty:
        kinds.append("stderr")
    if tty:
        kinds.append("resize")
    return kinds


# -- WebSocket -----------------------------------------------------------------------------
def websocket_accept(key: str) -> str:
    return base64.b64encode(hashlib.sha1((key + _WS_GUID).encode()).digest()).decode()


def _ws_frame(opcode: int, payload: bytes) -> bytes:
    head = bytes([0x80 | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([n])
    elif n < 65536:
        head += bytes([126]) + n.to_bytes(2, "big")
    else:
        head += bytes([127]) + n.to_bytes(8, "big")
    return head + payload


def read_ws_frame(rfile: BinaryIO) -> tuple[int, bytes] | None:
    """One client frame (masked, as clients must send them): (opcode, payload), None at EOF."""
    head = _read_exact(rfile, 2)
    if head is None:
        return None
    opcode, n, masked = head[0] & 0x0F, head[1] & 0x7F, head[1] & 0x80
    if n == 126:
        ext = _read_exact(rfile, 2)
        n = int.from_bytes(ext or b"\0\0", "big")
    elif n == 127:
        ext = _read_exact(rfile, 8)
        n = int.from_bytes(ext or bytes(8), "big")
    mask = _read_exact(rfile, 4) if masked else b"\0\0\0\0"
    payload = _read_exact(rfile, n) if n else b""
    if mask is None or payload is None:
        return None
    if masked:
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return opcode, payload


# How long a non-tty WebSocket exec that asked for stdin waits for its first stdin frame before
# the command runs with an empty stdin. Clients such as lightkube always ask for stdin and send
# nothing when they have none: the real process (`ls /`) runs and exits without reading it.
STDIN_SILENCE = 1.5


def _ws_stdin(rfile: BinaryIO, wfile: BinaryIO, sock: Any, protocol: str, timeout: float,
              tty: bool = False) -> str:
    """Stdin of a WebSocket exec: channel 0 until v5's close signal (channel 255) or the close
    frame; v4 cannot half-close, so there a second without data ends it. Without a tty, a client
    that sends no stdin frame for STDIN_SILENCE s gives the command an empty stdin."""
    data: list[bytes] = []
    base64_mode = protocol.startswith("base64.")
    v5 = protocol.startswith("v5.")
    start = time.monotonic()
    deadline = start + timeout
    seen_stdin = False
    while time.monotonic() < deadline:
        ready, _, _ = select.select([sock], [], [], 0.5)
        if not ready:
            if data and not v5:
                break
            if not tty and not seen_stdin and time.monotonic() - start >= STDIN_SILENCE:
                break
            continue
        frame = read_ws_frame(rfile)
        if frame is None or frame[0] == 8:
            break
        opcode, payload = frame
        if opcode == 9:
            wfile.write(_ws_frame(10, payload))
            wfile.flush()
            continue
        if not payload:
            continue
        if base64_mode:
            channel, body = payload[:1], base64.b64decode(payload[1:]) if len(payload) > 1 else b""
            chan = int(channel) if channel.isdigit() else -1
        else:
            chan, body = payload[0], payload[1:]
        if chan == 255 and body[:1] == b"\x00":
            break
        if chan == 0:
            seen_stdin = True
            data.append(body)
    return b"".join(data).decode("utf-8", "surrogateescape")


def _outcome(result: Result, stdin: str) -> tuple[int, str, str]:
    if isinstance(result, Follow):
        return 0, "", ""
    if not callable(result):
        return result
    from kubesim.store import StoreError
    try:
        return result(stdin)
    except StoreError as exc:
        return 1, "", f"error: {exc}\n"


def websocket_session(rfile: BinaryIO, wfile: BinaryIO, sock: Any, *, result: Result,
                      command: list[str], protocol: str, stdin_timeout: float = 300.0,
                      tty: bool = False) -> None:
    base64_mode = protocol.startswith("base64.")
    if isinstance(result, Follow):
        followed = _ws_follow(rfile, wfile, sock, result, base64_mode)
        if followed is None:
            return
        result = (followed, "", "")
    stdin = _ws_stdin(rfile, wfile, sock, protocol, stdin_timeout, tty) if callable(result) else ""
    code, out, err = _outcome(result, stdin)
    for channel, text in ((1, out), (2, err)):
        data = text.encode("utf-8", "surrogateescape")
        for i in range(0, len(data), _CHUNK):
            part = data[i:i + _CHUNK]
            if base64_mode:
                wfile.write(_ws_frame(1, str(channel).encode() + base64.b64encode(part)))
            else:
                wfile.write(_ws_frame(2, bytes([channel]) + part))
    status = json.dumps(exit_status(code, command)).encode()
    wfile.write(_ws_frame(1, b"3" + base64.b64encode(status)) if base64_mode else _ws_frame(2, b"\x03" + status))
    wfile.write(_ws_frame(8, (1000).to_bytes(2, "big")))
    wfile.flush()
    # Wait briefly for the client's close frame, then hang up.
    select.select([sock], [], [], 2.0)


def choose_protocol(offered: str | None, supported: tuple[str, ...]) -> str | None:
    for proto in _offered(offered):
        if proto in supported:
            return proto
    return None
