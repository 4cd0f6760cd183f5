"""Loki's `/loki/api/v1/tail`: a WebSocket on which the server sends, as they arrive, the entries
a log query matches (`{"streams": [...], "dropped_entries": null}` text frames), first those since
`start` (default an hour ago, at most `limit`), then every new one once it is `delay_for`
seconds old, until the client closes. `logcli query --tail` and Grafana's live view use it."""

from __future__ import annotations

import json
import select
from typing import Any

from kubesim.api.http import App, Request, Response
from kubesim.api.remotecommand import _ws_frame as ws_frame
from kubesim.api.remotecommand import websocket_accept
from kubesim.clock import VirtualClock
from kubesim.observability.formats import parse_loki_time
from kubesim.observability.httpapp import first
from kubesim.observability.loki.logs import to_ns

TAIL_PATH = "/loki/api/v1/tail"
POLL_SECONDS = 0.25  # wall time between looks at the log store
_TEXT, _CLOSE, _PING, _PONG = 0x1, 0x8, 0x9, 0xA


def _read_frame(rfile: Any) -> tuple[int, bytes] | None:
    head = rfile.read(2)
    if len(head) < 2:
        return None
    n = head[1] & 0x7F
    if n == 126:
        n = int.from_bytes(rfile.read(2), "big")
    elif n == 127:
        n = int.from_bytes(rfile.read(8), "big")
    mask = rfile.read(4) if head[1] & 0x80 else b""
    data = rfile.read(n)
    if mask:
        data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
    return head[0] & 0x0F, data


def with_tail(loki: App, clock: VirtualClock) -> App:
    """`loki` (the query API) with `/loki/api/v1/tail` served over WebSocket beside it."""

    def app(req: Request) -> Response:
        if req.path.rstrip("/") != TAIL_PATH:
            return loki(req)
        query = req.arg("query") or ""
        probe = loki(Request("GET", "/loki/api/v1/query_range", {"query": [query], "limit": ["1"]}, req.headers))
        if probe.status != 200:  # a bad query is refused before the upgrade, as Loki does
            return probe
        key = req.headers.get("Sec-WebSocket-Key")
        if (req.headers.get("Upgrade") or "").lower() != "websocket" or not key:
            return Response(400, "text/plain; charset=utf-8", b"websocket: the client is not using the websocket "
                                                              b"protocol: 'upgrade' token not found in 'Connection' header\n")
        return Response(101, "text/plain", headers={"Connection": "Upgrade", "Upgrade": "websocket",
                                                    "Sec-WebSocket-Accept": websocket_accept(key)},
                        takeover=lambda rf, wf, sock: _session(loki, clock, req, rf, wf, sock))

    return app


def _session(loki: App, clock: VirtualClock, req: Request, rfile: Any, wfile: Any, sock: Any) -> None:
    query = req.arg("query") or ""
    limit = int(req.arg("limit") or 100)
    delay_ns = int(float(req.arg("delay_for") or 0) * 1e9)
    now = to_ns(clock.now())
    start_raw = first(req.query, "start")
    since = to_ns(parse_loki_time(start_raw)) if start_raw else now - 3600 * 10**9
    first_batch = True
    while True:
        until = to_ns(clock.now()) - delay_ns
        if until >= since:
            params = {"query": [query], "start": [str(since)], "end": [str(until)], "limit": [str(limit)],
                      "direction": ["backward" if first_batch else "forward"]}
            resp = loki(Request("GET", "/loki/api/v1/query_range", params, req.headers))
            streams = json.loads(resp.body)["data"]["result"] if resp.status == 200 else []
            newest = max((int(v[0]) for s in streams for v in s["values"]), default=None)
            if streams:
                for s in streams:
                    s["values"].sort(key=lambda v: int(v[0]))
                wfile.write(ws_frame(_TEXT, json.dumps({"streams": streams, "dropped_entries": None}).encode()))
                wfile.flush()
            # the store keeps microseconds (and time params go through a float): step by one
            since = (newest + 1000) if newest is not None else until + 1000
            first_batch = False
        ready, _, _ = select.select([sock], [], [], POLL_SECONDS)
        if ready:
            frame = _read_frame(rfile)
            if frame is None or frame[0] == _CLOSE:
                try:
                    wfile.write(ws_frame(_CLOSE, (1000).to_bytes(2, "big")))
                    wfile.flush()
                except OSError:
                    pass
                return
            if frame[0] == _PING:
                wfile.write(ws_frame(_PONG, frame[1]))
                wfile.flush()
