"""The emulated cluster's Kubernetes API server: discovery, verbs, patches, tables, watch, logs,
authentication and RBAC over clusters/sim/store.py, served by the stdlib ThreadingHTTPServer."""

from clusters.sim.api.handlers import KubeAPI, LogReader
from clusters.sim.api.http import Request, Response, serve_app, simple_app

__all__ = ["KubeAPI", "LogReader", "Request", "Response", "serve_app", "simple_app"]
