"""Loki as the emulated cluster serves it: the log store every container, node and component
writes to (logs), LogQL parsed and evaluated as Loki 3.x does (logql, logql_eval, with Go's
text/template for line_format: gotemplate), live tailing over a websocket (tail), and the HTTP API
(api)."""

from kubesim.observability.loki.api import LokiAPI
from kubesim.observability.loki.logs import DEFAULT_MAX_LINES, DEFAULT_MAX_LINES_PER_STREAM, LogStore

__all__ = ["DEFAULT_MAX_LINES", "DEFAULT_MAX_LINES_PER_STREAM", "LogStore", "LokiAPI"]
