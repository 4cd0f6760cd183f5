"""The wait tool on a cluster whose clock is the wall (kind, EKS): a KubeconfigClusterHandle over
the emulated cluster's admin kubeconfig with no virtual clock, so advance() really sleeps. A
wait longer than the ordinary tool timeout must still succeed (its deadline is the wait plus a
margin), and a wait that overruns that deadline is still cut off."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from clusters.handle import ClusterHandle
from clusters.real import KubeconfigClusterHandle
from clusters.emulated import SimHandle
from farm.interface import AgentInterface
from farm.interface.client import ToolClient
from farm.pytest_plugin import SimClusters

NS = "wait-wall-clock"


@pytest.fixture(scope="module")
def sim(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served()


class _SlowClock(KubeconfigClusterHandle):
    """A real-cluster handle whose waits overrun what was asked (a stalled node, a hung call)."""

    def _advance(self, seconds: float) -> None:
        time.sleep(seconds * 3)


def _wall_handle(sim: ClusterHandle, tmp: Path, cls: type[KubeconfigClusterHandle] = KubeconfigClusterHandle
                 ) -> KubeconfigClusterHandle:
    handle = cls("kind", "wall-clock", sim.kubeconfig, workdir=tmp, app_namespaces={NS}, reset_timeout=30,
                 finalizer_grace=1.0, poll_interval=0.5,
                 urls={"prometheus": sim.endpoints.prometheus, "loki": sim.endpoints.loki,
                       "jaeger": sim.endpoints.jaeger})
    if NS not in handle._namespaces():
        handle.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                       "metadata": {"name": NS}})
    return handle


def test_a_wait_longer_than_the_tool_timeout_succeeds_on_a_wall_clock(sim: ClusterHandle, tmp_path: Path) -> None:
    handle = _wall_handle(sim, tmp_path)
    try:
        assert not handle.capabilities.virtual_clock
        iface = AgentInterface(handle, NS, "t-wallwait", tool_timeout_s=1.0, max_wait_s=3.0)
        url, token = iface.start()
        try:
            with ToolClient(url, token) as tools:
                t0, c0 = time.monotonic(), handle.now()
                text, is_error = tools.call("wait", seconds=2)
                elapsed = time.monotonic() - t0
                assert not is_error, text
                assert "waited 2 s" in text and elapsed >= 2.0 and handle.now() - c0 >= 2.0
                # max_wait_s still bounds what may be asked, and the refusal is immediate.
                t0 = time.monotonic()
                text, is_error = tools.call("wait", seconds=5)
                assert is_error and "between 0 and 3" in text and time.monotonic() - t0 < 1.0
                # The ordinary timeout still holds for everything else.
                assert not tools.call("get_alerts")[1]
        finally:
            iface.stop()
        assert [c.error is None for c in iface.record.tool_calls] == [True, False, True]
        assert iface.record.tool_calls[0].wall_s >= 2.0
    finally:
        handle.reset()
        handle.close()


def test_a_wait_that_overruns_its_own_deadline_is_cut_off(sim: ClusterHandle, tmp_path: Path) -> None:
    handle = _wall_handle(sim, tmp_path, _SlowClock)
    try:
        iface = AgentInterface(handle, NS, "t-slowwait", tool_timeout_s=1.0, max_wait_s=3.0)
        url, token = iface.start()
        try:
            with ToolClient(url, token) as tools:
                t0 = time.monotonic()
                text, is_error = tools.call("wait", seconds=1)  # deadline 1 + 1 s; the sleep takes 3 s
                elapsed = time.monotonic() - t0
                assert is_error and "did not finish within 2 s" in text, text
                assert 1.9 <= elapsed < 2.9
                assert not tools.call("submit_diagnosis", text="still here")[1]  # the session goes on
        finally:
            iface.stop()
    finally:
        handle.reset()
        handle.close()
