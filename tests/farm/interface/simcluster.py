"""Helpers for the agent-interface, oracle and baseline tests (no tests here): the real emulated
cluster with hotel-reservation deployed and a checkpoint to go back to, and an interface with a
real MCP client over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from apps import load_application
from clusters.base import ClusterHandle, open_cluster
from farm.interface import AgentInterface
from farm.interface.client import ToolClient

APP = "hotel-reservation"
DEPLOYED = "e1-deployed"
WARMUP_S = 180.0  # cluster time after deploy, so every signal has a few scrapes of history


@contextmanager
def deployed_cluster(tmp: Path, seed: int = 11) -> Iterator[ClusterHandle]:
    """An emulated cluster with hotel-reservation up and warmed, checkpointed as DEPLOYED."""
    from farm.deploy import deploy

    app = load_application(APP)
    cluster = open_cluster("sim", seed=seed, workdir=tmp)
    try:
        deploy(cluster, app, app.namespace)
        cluster.advance(WARMUP_S)
        # The agent's credentials are part of the checkpoint, so a restore keeps them valid.
        cluster.agent_kubeconfig(app.namespace)
        cluster.checkpoint(DEPLOYED)  # type: ignore[attr-defined]
        yield cluster
    finally:
        cluster.close()


def back_to_deployed(cluster: ClusterHandle) -> None:
    cluster.restore(DEPLOYED)  # type: ignore[attr-defined]


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
