"""Jaeger as the emulated cluster serves it: the span store the application models write to
(traces) and Jaeger's query HTTP API (api)."""

from kubesim.observability.jaeger.api import JaegerAPI
from kubesim.observability.jaeger.traces import DEFAULT_MAX_SPANS, TraceStore

__all__ = ["DEFAULT_MAX_SPANS", "JaegerAPI", "TraceStore"]
