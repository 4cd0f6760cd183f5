"""What the agent must never see in telemetry: the farm's own namespaces and the Chaos Mesh
machinery that planted the fault. Queries that name them are refused; every query is scoped to
the session's namespaces (farm/interface/scope.py); every result is filtered once more before the
agent sees it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from core.errors import ToolError

HIDDEN_NAMESPACES = ("chaos-mesh", "chaos-testing", "farm-system")
HIDDEN_NAMESPACE_PATTERN = "chaos-mesh|chaos-testing|farm-.*"
_CHAOS = re.compile(r"chaos|farm-system|farm-worker", re.I)
NAMESPACE_LABELS = ("namespace", "exported_namespace", "kubernetes_namespace", "k8s_namespace_name",
                    "k8s.namespace.name", "service_namespace")


def mentions_hidden(text: str) -> bool:
    return bool(_CHAOS.search(text)) or any(ns in text for ns in HIDDEN_NAMESPACES)


def refuse_hidden_query(query: str) -> None:
    if mentions_hidden(query):
        raise ToolError("refused: the query names resources outside this incident's application "
                        "(the farm's namespaces and fault-injection machinery are not observable)")


def labels_hidden(labels: dict[str, Any]) -> bool:
    for key in NAMESPACE_LABELS:
        value = labels.get(key)
        if isinstance(value, str) and value and re.fullmatch(HIDDEN_NAMESPACE_PATTERN, value):
            return True
    return any(isinstance(v, str) and _CHAOS.search(v) for v in labels.values()) or any(
        _CHAOS.search(str(k)) for k in labels
    )


def filter_series(result: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Prometheus vector/matrix results, or Loki streams/series: drop the hidden ones."""
    out = []
    for item in result:
        labels = item.get("metric") if "metric" in item else item.get("stream", {})
        if not labels_hidden(labels or {}):
            out.append(item)
    return out


def filter_lines(values: list[list[str]]) -> list[list[str]]:
    return [v for v in values if not (len(v) > 1 and mentions_hidden(str(v[1])))]


def span_hidden(span: dict[str, Any], processes: dict[str, Any]) -> bool:
    process = span.get("process") or processes.get(span.get("processID", ""), {}) or {}
    if mentions_hidden(str(process.get("serviceName", ""))):
        return True
    tags = {t.get("key"): t.get("value") for t in process.get("tags") or [] if isinstance(t, dict)}
    tags.update({t.get("key"): t.get("value") for t in span.get("tags") or [] if isinstance(t, dict)})
    return labels_hidden({k: v for k, v in tags.items() if isinstance(k, str)})
