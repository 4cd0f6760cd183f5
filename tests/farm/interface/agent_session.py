"""Helpers for the agent-interface, oracle and baseline tests (no tests here): an interface on an
emulated cluster with a real MCP client over HTTP, and a deployment read back through the API."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from apps import load_application
from clusters.handle import ClusterHandle
from farm.interface import AgentInterface
from farm.interface.client import ToolClient

APP = "hotel-reservation"


@contextmanager
def agent_session(cluster: ClusterHandle, mode: str = "raw", trial_id: str = "t-5f2c9a7e") -> Iterator[tuple[AgentInterface, ToolClient]]:
    namespace = load_application(APP).namespace
    iface = AgentInterface(cluster, namespace, trial_id, mode=mode)  # type: ignore[arg-type]
    url, token = iface.start()
    try:
        with ToolClient(url, token) as client:
            yield iface, client
    finally:
        iface.stop()


def deployment(cluster: ClusterHandle, namespace: str, name: str) -> dict[str, Any]:
    from kubernetes import client

    api = cluster.api_client()
    return api.sanitize_for_serialization(client.AppsV1Api(api).read_namespaced_deployment(name, namespace))
