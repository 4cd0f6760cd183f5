"""The emulated cluster's Kubernetes API server: discovery, verbs, patches, tables, watch, logs,
authentication and RBAC over kubesim/store.py, served by the stdlib ThreadingHTTPServer."""

from kubesim.api.handlers import KubeAPI, LogReader
from kubesim.api.http import Request, Response, serve_app, simple_app

__all__ = ["KubeAPI", "LogReader", "Request", "Response", "serve_app", "simple_app"]
