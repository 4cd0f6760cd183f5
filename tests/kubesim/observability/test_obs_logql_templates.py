"""LogQL as Loki 3.x has it, over real HTTP: line_format and label_format with Go templates
(__line__, __timestamp__, the function map, if/else, trim markers), the pattern parser's last
capture, decolorize, template errors, and /loki/api/v1/tail over a WebSocket."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest
import websocket

from kubesim.api.http import serve_app, simple_app
from kubesim.clock import VirtualClock
from kubesim.observability import Observability
from kubesim.observability.loki.tail import with_tail

from .conftest import T0, Client

GEO = {"namespace": "hotel-reservation", "pod": "geo-7d9c6b8f5-x2kqp", "container": "hotel-reserv-geo", "app": "geo"}
T1 = T0 + 10.25


@pytest.fixture
def logs(obs: Observability, clock: VirtualClock) -> None:
    obs.logs.append(GEO, T1, '2026-01-05T09:00:10Z INF cmd/geo/main.go:40 > Read target port: 8083 path="/hotels a"')
    obs.logs.append({**GEO, "app": "color"}, T1 + 1, "\x1b[31mERROR\x1b[0m \x1b[1;33mdial tcp 10.0.0.7:27017\x1b[0m")
    clock.set(T0 + 60)


def one_line(loki: Client, query: str) -> str:
    status, body = loki.get("/loki/api/v1/query_range", query=query, start=str(int(T0 * 1e9)),
                            end=str(int((T0 + 60) * 1e9)))
    assert status == 200, body
    (stream,) = body["data"]["result"]
    return str(stream["values"][0][1])


SEL = '{app="geo"} | pattern "<ts> <level> <file> > <msg>"'


@pytest.mark.parametrize(("template", "expected"), [
    ("{{ __line__ | trunc 20 }}", "2026-01-05T09:00:10Z"),
    ("{{ .level | ToLower }}/{{ .level | lower }}/{{ ToUpper .file | trunc 3 }}", "inf/inf/CMD"),
    ("{{ __timestamp__ }}", "2026-01-05 09:00:10.25 +0000 UTC"),
    ('{{ __timestamp__ | date "2006-01-02T15:04:05.000Z07:00" }}', "2026-01-05T09:00:10.250Z"),
    ("{{ __timestamp__ | unixEpoch }}", str(int(T1))),
    ('{{ .msg | replace "Read target" "RTP" | substr 0 8 }}', "RTP port"),
    ('{{ regexReplaceAll "port: (\\\\d+)" .msg "p=${1}" }}', 'Read target p=8083 path="/hotels a"'),
    ('{{ default "none" .missing }}|{{ .missing }}', "none|<no value>"),
    ('{{ printf "%-4s|%5.1f|%03d" .level 2.25 7 }}', "INF |  2.2|007"),
    ('{{ if contains "8083" .msg }}geo-port{{ else if eq .level "ERR" }}err{{ else }}other{{ end }}', "geo-port"),
    ('{{- .level -}}   |   {{- len .file }}', "INF|18"),
    ('{{ trimPrefix "cmd/" .file | trimSuffix ".go:40" }}', "geo/main"),
    ('{{ toDate "2006-01-02T15:04:05Z07:00" .ts | unixEpoch }}', str(int(T0 + 10))),
    ("{{ .file | b64enc | b64dec | upper }}", "CMD/GEO/MAIN.GO:40"),
    ("{{ add 1 2 | mul 3 }} {{ divf 1 4 }}", "9 0.25"),
])
def test_line_format_runs_go_templates(loki: Client, logs: None, template: str, expected: str) -> None:
    assert one_line(loki, f"{SEL} | line_format `{template}`") == expected


def test_pattern_last_capture_takes_the_rest_of_the_line(loki: Client, logs: None) -> None:
    assert one_line(loki, f"{SEL} | line_format `[{{{{.msg}}}}]`") == '[Read target port: 8083 path="/hotels a"]'
    # a pattern that ends with text stops there
    assert one_line(loki, '{app="geo"} | pattern "<_> <level> " | line_format "{{.level}}"') == "INF"


def test_label_format_templates_and_decolorize(loki: Client, logs: None) -> None:
    status, body = loki.get("/loki/api/v1/query_range", query=f'{SEL} | label_format where=`{{{{ .file | upper }}}}`',
                            start=str(int(T0 * 1e9)), end=str(int((T0 + 60) * 1e9)))
    assert body["data"]["result"][0]["stream"]["where"] == "CMD/GEO/MAIN.GO:40"
    assert one_line(loki, '{app="color"} | decolorize') == "ERROR dial tcp 10.0.0.7:27017"
    assert one_line(loki, '{app="color"} | decolorize | line_format "{{ __line__ | lower }}"') == "error dial tcp 10.0.0.7:27017"


def test_template_errors_read_like_lokis(loki: Client, logs: None) -> None:
    status, body = loki.get("/loki/api/v1/query_range", query='{app="geo"} | line_format "{{ nosuch .msg }}"')
    assert status == 400 and 'function "nosuch" not defined' in body
    status, body = loki.get("/loki/api/v1/query_range", query='{app="geo"} | line_format "{{ if .x }}a"')
    assert status == 400 and "unexpected EOF" in body
    # a call that fails on one line flags that line instead of failing the query
    status, body = loki.get("/loki/api/v1/query_range", query='{app="geo"} | line_format `{{ toDate "2006" __line__ }}`',
                            start=str(int(T0 * 1e9)), end=str(int((T0 + 60) * 1e9)))
    assert status == 200 and body["data"]["result"][0]["stream"]["__error__"] == "TemplateFormatErr"


@pytest.fixture
def tail_url(obs: Observability, clock: VirtualClock) -> Iterator[str]:
    server, url = serve_app(with_tail(simple_app(obs.loki_app), clock))
    try:
        yield url.replace("http://", "ws://") + "/loki/api/v1/tail"
    finally:
        server.shutdown()
        server.server_close()


def test_tail_streams_past_then_new_entries_over_a_websocket(obs: Observability, clock: VirtualClock, logs: None,
                                                             tail_url: str) -> None:
    ws = websocket.create_connection(f"{tail_url}?query=%7Bapp%3D%22geo%22%7D&start={int(T0 * 1e9)}", timeout=10)
    try:
        first = json.loads(ws.recv())
        assert first["dropped_entries"] is None
        assert [v[1][:20] for s in first["streams"] for v in s["values"]] == ["2026-01-05T09:00:10Z"]
        assert first["streams"][0]["stream"]["app"] == "geo"
        done = threading.Event()

        def later() -> None:
            with obs.lock:
                obs.logs.append(GEO, T0 + 61, "new line one")
                obs.logs.append(GEO, T0 + 62, "new line two")
                clock.set(T0 + 70)
            done.set()
        threading.Timer(0.3, later).start()
        got: list[str] = []
        while len(got) < 2:
            got += [v[1] for s in json.loads(ws.recv())["streams"] for v in s["values"]]
        assert done.is_set() and got == ["new line one", "new line two"]
    finally:
        ws.close()


def test_tail_refuses_a_bad_query_and_a_plain_request(tail_url: str) -> None:
    with pytest.raises(websocket.WebSocketBadStatusException) as bad:
        websocket.create_connection(f"{tail_url}?query=%7Bapp%3D", timeout=10)
    assert bad.value.status_code == 400
    plain = Client(tail_url.replace("ws://", "http://").removesuffix("/loki/api/v1/tail"))
    status, body = plain.get("/loki/api/v1/tail", query='{app="geo"}')
    assert status == 400 and "websocket" in body
