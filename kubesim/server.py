"""The emulated cluster as a process: `python -m kubesim.server --seed N --ready-file PATH
[--live --speed X] [--start T]` builds `SimCluster(seed)`, serves the Kubernetes API, Prometheus, Loki,
Jaeger and the clock-control API on their own loopback ports, and writes the ready file
{kubernetes, prometheus, loki, jaeger, control, admin_token, ca_cert} once all of them answer.
The Kubernetes API is https (client-go sends bearer tokens over TLS only), under a CA made at
start-up whose certificate is `ca_cert`; the other endpoints are plain http."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import secrets
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from kubesim.api import KubeAPI, Request, Response, serve_app, simple_app
from kubesim.api.metrics import ResourceMetrics
from kubesim.api.tls import make_serving_cert
from kubesim.observability.loki.tail import with_tail

DEFAULT_FACTORY = "kubesim.cluster:SimCluster"
LIVE_TICK_SECONDS = 0.25
API_PRIORITY_SECONDS = 0.5
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _json(status: int, obj: Any) -> Response:
    return Response(status, "application/json", json.dumps(obj).encode())


class SimServer:
    """Serves one cluster object (`store`, `clock`, `obs`, `advance`, `checkpoint`, `restore`)."""

    def __init__(self, cluster: Any, *, live: bool = False, speed: float = 1.0, host: str = "127.0.0.1") -> None:
        self.cluster = cluster
        self.store = cluster.store
        self.host = host
        self.live, self.speed = live, speed
        self.admin_token = secrets.token_urlsafe(32)
        self.api = KubeAPI(cluster.store, self.admin_token, read_log=getattr(cluster, "read_container_log", None),
                           exec_command=getattr(cluster, "exec", None),
                           forward_port=getattr(cluster, "port_forward", None),
                           attach=getattr(cluster, "attach", None),
                           follow_output=getattr(cluster, "follow_output", None),
                           resource_metrics=ResourceMetrics(cluster.store, cluster.obs,
                                                            getattr(cluster, "kubelet", None)))
        self.cert = make_serving_cert((host, "localhost"))
        # What a pod's service account volume holds: a token of its own account, and this CA.
        cluster.token_issuer = self.api.authn.bound_token
        cluster.api_ca_pem = self.cert.ca_pem.decode()
        self._servers: list[Any] = []
        self._stop = threading.Event()
        self.endpoints: dict[str, str] = {}

    def start(self) -> dict[str, str]:
        obs = self.cluster.obs
        apps = {"kubernetes": self._kubernetes, "prometheus": simple_app(obs.prometheus_app),
                "loki": with_tail(simple_app(obs.loki_app), obs.clock), "jaeger": simple_app(obs.jaeger_app),
                "control": self.control}
        for name, app in apps.items():
            tls = self.cert.server_context() if name == "kubernetes" else None
            server, url = serve_app(app, self.host, 0, tls)
            self._servers.append(server)
            self.endpoints[name] = url
        self.api.server_address = self.endpoints["kubernetes"].split("//", 1)[1]
        if self.live:
            threading.Thread(target=self._run_live, name="sim-live-clock", daemon=True).start()
        return dict(self.endpoints)

    def _kubernetes(self, req: Request) -> Response:
        """The API server, with the controllers acting on a write before its response leaves (a
        real controller's watch sees it within milliseconds): `kubectl rollout undo` right after
        `kubectl set env` then finds the new ReplicaSet, and a deleted pod's replacement exists."""
        if req.method not in _WRITES:
            return self.api(req)
        rv = self.store.resource_version
        resp = self.api(req)
        reconcile = getattr(self.cluster, "reconcile", None)
        # On a virtual clock the farm's own writes (injections, recoveries) wait for its next
        # advance: the catalog's timelines are defined that way (controllers acting inside a
        # multi-write injection shift what validation observes).
        farm = req.user is not None and req.user.is_admin and not self.live
        if reconcile is not None and not farm and resp.status < 400 and self.store.resource_version != rv:
            with self.store.lock:
                reconcile()
        return resp

    def stop(self) -> None:
        self._stop.set()
        for server in self._servers:
            server.shutdown()
            server.server_close()

    # -- the clock ---------------------------------------------------------------------------
    def advance(self, seconds: float) -> float:
        # The store's lock is not fair: an advance run back to back would starve API requests
        # waiting for it, so requests already in flight go first (for a bounded while).
        deadline = time.monotonic() + API_PRIORITY_SECONDS
        while self.api.in_flight and time.monotonic() < deadline:
            time.sleep(0.0005)
        with self.store.lock:
            self.cluster.advance(seconds)
            return self.cluster.clock.now()

    def _run_live(self) -> None:
        """Cluster time moves with wall time × speed; at speed 1 it also catches up with the
        host's clock when behind it (the cluster was built, or a tick ran late), so it reads as
        the host's `date` does. A jump ahead (/sim/advance) stays ahead."""
        last = time.monotonic()
        while True:
            now = time.monotonic()
            step = (now - last) * self.speed
            if self.speed == 1.0:
                step = max(step, time.time() - self.cluster.clock.now())
            if step > 0:
                self.advance(step)
            last = now
            if self._stop.wait(LIVE_TICK_SECONDS):
                return

    # -- control API -----------------------------------------------------------------------
    def control(self, req: Request) -> Response:
        try:
            body = json.loads(req.body or b"{}") if req.method == "POST" else {}
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
        except ValueError as exc:
            return _json(400, {"error": f"bad JSON body: {exc}"})
        route = (req.method, req.path.rstrip("/"))
        try:
            if route == ("GET", "/sim/now"):
                return _json(200, {"now": self.cluster.clock.now()})
            if route == ("GET", "/sim/health"):
                with self.store.lock:
                    objects = sum(1 for key in self.store.types for _ in self.store.iter_raw(key))
                    return _json(200, {"ok": True, "now": self.cluster.clock.now(), "objects": objects,
                                       "resourceVersion": self.store.resource_version, "live": self.live})
            if route == ("POST", "/sim/advance"):
                seconds = float(body.get("seconds", 0))
                if seconds < 0:
                    return _json(400, {"error": "seconds must be >= 0"})
                return _json(200, {"now": self.advance(seconds)})
            if route in (("POST", "/sim/checkpoint"), ("POST", "/sim/restore")):
                name = body.get("name")
                if not isinstance(name, str) or not name:
                    return _json(400, {"error": "field 'name' (a non-empty string) is required"})
                with self.store.lock:
                    if route[1] == "/sim/checkpoint":
                        self.cluster.checkpoint(name)
                    else:
                        self.cluster.restore(name)
                    return _json(200, {"name": name, "now": self.cluster.clock.now()})
        except KeyError as exc:
            return _json(404, {"error": str(exc.args[0]) if exc.args else "not found"})
        except (TypeError, ValueError) as exc:
            return _json(400, {"error": str(exc)})
        return _json(404, {"error": f"no control endpoint {req.method} {req.path}"})


def load_factory(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), attr or "SimCluster")
    except (ImportError, AttributeError) as exc:
        raise SystemExit(f"--cluster-factory {spec}: cannot load it: {exc}") from None


def _watch_parent(original_ppid: int) -> None:
    """Exit when the parent goes: stdin (a pipe from the provider) reaches EOF, or we are reparented."""

    def on_stdin() -> None:
        # os.read on the descriptor, not sys.stdin: a buffered reader held by a daemon thread
        # aborts the interpreter at exit.
        try:
            while os.read(0, 4096):
                pass
        except OSError:
            pass
        os._exit(0)

    def on_ppid() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != original_ppid:
                os._exit(0)

    threading.Thread(target=on_stdin, name="parent-stdin", daemon=True).start()
    threading.Thread(target=on_ppid, name="parent-pid", daemon=True).start()


def write_ready_file(path: Path, payload: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload))
    os.chmod(tmp, 0o600)  # it carries the admin token
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kubesim.server", description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ready-file", type=Path, required=True)
    parser.add_argument("--live", action="store_true", help="advance the clock with wall time × speed")
    parser.add_argument("--speed", type=float, default=1.0)
    parser.add_argument("--start", type=float, default=None,
                        help="cluster time at start-up, Unix seconds (default: the host's clock now)")
    parser.add_argument("--cluster-factory", default=DEFAULT_FACTORY,
                        help="module:callable building the cluster from a seed (default: %(default)s)")
    parser.add_argument("--die-with-parent", action="store_true",
                        help="exit when stdin closes or the parent process goes away")
    args = parser.parse_args(argv)
    if args.speed <= 0:
        parser.error("--speed must be > 0")
    if args.die_with_parent:
        _watch_parent(os.getppid())
    factory = load_factory(args.cluster_factory)
    cluster = factory(args.seed) if args.start is None else factory(args.seed, start=args.start)
    server = SimServer(cluster, live=args.live, speed=args.speed)
    endpoints = server.start()
    write_ready_file(args.ready_file, {**endpoints, "admin_token": server.admin_token,
                                       "ca_cert": server.cert.ca_pem.decode(), "pid": os.getpid(),
                                       "admin_client_cert": server.cert.client_cert_pem.decode(),
                                       "admin_client_key": server.cert.client_key_pem.decode(),
                                       "seed": args.seed, "live": args.live,
                                       "start": getattr(cluster.clock, "start", None)})
    # Nothing in the process outlives it (state is in memory only), so a stop is an immediate exit.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
