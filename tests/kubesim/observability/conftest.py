"""Fixtures for the observability back ends: an Observability on a virtual clock, and HTTP
clients that talk to its three apps mounted on a real loopback ThreadingHTTPServer."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from kubesim.clock import VirtualClock
from kubesim.observability import AppServer, Observability

T0 = 1767603600.0  # the virtual clock's epoch, 2026-01-05T09:00:00Z


class Client:
    """Plain urllib against one served app; `get`/`post` return (status, parsed body)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def request(self, method: str, path: str, params: dict[str, Any] | list[tuple[str, str]] | None = None,
                form: dict[str, Any] | None = None) -> tuple[int, Any, str]:
        qs = urllib.parse.urlencode(params or {}, doseq=True)
        data = urllib.parse.urlencode(form, doseq=True).encode() if form is not None else None
        req = urllib.request.Request(self.url + path + (f"?{qs}" if qs else ""), data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/x-www-form-urlencoded")
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                status, ctype, raw = resp.status, resp.headers.get("Content-Type", ""), resp.read()
        except urllib.error.HTTPError as e:
            status, ctype, raw = e.code, e.headers.get("Content-Type", ""), e.read()
        text = raw.decode()
        body = json.loads(text) if "json" in ctype else text
        return status, body, ctype

    def get(self, path: str, **params: Any) -> tuple[int, Any]:
        status, body, _ = self.request("GET", path, params)
        return status, body

    def post(self, path: str, **form: Any) -> tuple[int, Any]:
        status, body, _ = self.request("POST", path, None, form)
        return status, body


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(T0)


@pytest.fixture
def obs(clock: VirtualClock) -> Observability:
    return Observability(clock)


def _serve(app: Any) -> Iterator[Client]:
    with AppServer(app) as server:
        yield Client(server.url)


@pytest.fixture
def prom(obs: Observability) -> Iterator[Client]:
    yield from _serve(obs.prometheus_app)


@pytest.fixture
def loki(obs: Observability) -> Iterator[Client]:
    yield from _serve(obs.loki_app)


@pytest.fixture
def jaeger(obs: Observability) -> Iterator[Client]:
    yield from _serve(obs.jaeger_app)
