"""The farm's pytest plugin: emulated clusters for tests, the project's and a plugin author's alike
(registered through the `pytest11` entry point, so installing the package is enough).

Every emulated cluster a test uses comes from `sim_clusters`, built on first use, shared by the
tests of one module and closed when the module ends. Each cluster is checkpointed right after it
is built and every call restores that checkpoint, so a test starts from the cluster as built
without paying for the build (deploying an application costs seconds; a restore, milliseconds).

Two kinds, one factory:
- `sim_clusters.in_process(app, seed=...)`: the emulator as a library object (`SimCluster`), for
  tests of the emulator itself: its store, controllers and models are at hand.
- `sim_clusters.served(app, seed=...)`: the emulator as its own process behind the real
  Kubernetes, Prometheus, Loki and Jaeger APIs (`open_cluster("sim")`), the application deployed
  by farm.deploy as a trial deploys it: for everything that reaches a cluster through its handle.
  `live=True` serves it on a live clock (cluster time follows wall time, as on a kind or EKS
  cluster, for tools that wait in wall time such as `helm --wait` or `kubectl delete`); without it
  the clock moves only when the test advances it. `cluster_factory="module:Callable"` serves
  another cluster object in the emulator's place (e.g. a stand-in with a store and no controllers,
  to test the API server's own semantics), as `open_cluster("sim", cluster_factory=...)` does.

`as_built(cluster)` goes back to that checkpoint in the middle of a test.

Shortcuts: `sim_cluster` (bare, in process), `sim_app` (a factory: `sim_app("astronomy-shop")`),
`sim_api` (bare, served). No fallback: an emulator that fails to build fails the test.

Nothing of the emulator is imported before a fixture asks for it, so the plugin costs nothing at
pytest start-up and a broken emulator breaks only the tests that use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from clusters.emulated import SimHandle
    from kubesim.cluster import SimCluster

BUILT = "as-built"  # the checkpoint every shared cluster is restored to on each call


def as_built(cluster: SimCluster | SimHandle) -> None:
    """Return a cluster of `sim_clusters` to the moment it was built, in the middle of a test or in
    a fixture of wider scope that holds on to it."""
    cluster.restore(BUILT)


class SimClusters:
    """The emulated clusters of one test module, keyed by how they were built (a context manager
    outside pytest: a bench script builds its clusters the way the tests do)."""

    def __init__(self, workdir: Callable[[str], Path]) -> None:
        """`workdir(name)`: a new folder for a served cluster's files (kubeconfigs, server log)."""
        self._workdir = workdir
        self._in_process: dict[tuple[Any, ...], SimCluster] = {}
        self._served: dict[tuple[Any, ...], SimHandle] = {}

    def in_process(self, app: str | None = None, *, seed: int = 0, settle: float = 120.0,
                   start: float | None = None) -> SimCluster:
        """The in-process emulator with `app` applied from its manifests and `settle` s of cluster
        time behind it (nothing deployed and no settling when `app` is None), as built."""
        key = (app, seed, settle, start)
        cluster = self._in_process.get(key)
        if cluster is None:
            cluster = self._in_process[key] = self.new(app, seed=seed, settle=settle, start=start)
            cluster.checkpoint(BUILT)
        else:
            cluster.restore(BUILT)
        return cluster

    @staticmethod
    def new(app: str | None = None, *, seed: int = 0, settle: float = 120.0,
            start: float | None = None) -> SimCluster:
        """A new in-process emulator that nobody shares (to compare two builds, or to read the
        clock a build starts at)."""
        from kubesim.cluster import SimCluster

        if app is None:
            return SimCluster(seed=seed, start=start)
        return SimCluster.with_app(app, seed=seed, settle=settle, start=start)

    def served(self, app: str | None = None, *, seed: int = 0, warmup: float = 180.0,
               agent: bool = False, start: float | None = None, live: bool = False,
               cluster_factory: str | None = None) -> SimHandle:
        """The emulator as a process behind the real APIs, with `app` deployed by farm.deploy and
        `warmup` s of cluster time behind it (so every signal has a few scrapes of history), as
        built. `agent` creates the agent's account in the application's namespace before the
        checkpoint, so its kubeconfig stays valid across restores. `live`: the clock follows wall
        time instead of waiting for `advance`. `cluster_factory`: the cluster object the process
        serves instead of the emulator (`module:Callable`, called with the seed)."""
        from clusters.emulated import SimHandle
        from clusters.handle import open_cluster

        key = (app, seed, warmup, agent, start, live, cluster_factory)
        handle = self._served.get(key)
        if handle is not None:
            handle.restore(BUILT)
            return handle
        opened = open_cluster("sim", seed=seed, start=start, live=live, cluster_factory=cluster_factory,
                              workdir=self._workdir(f"sim-{seed}"))
        assert isinstance(opened, SimHandle)
        try:
            if app is not None:
                from apps import load_application
                from farm.deploy import deploy

                spec = load_application(app)
                deploy(opened, spec, spec.namespace)
                if agent:  # with the deploy, as a trial makes it (farm/trial/run.py)
                    opened.agent_kubeconfig(spec.namespace)
                opened.advance(warmup)
            opened.checkpoint(BUILT)
        except BaseException:
            opened.close()
            raise
        self._served[key] = opened
        return opened

    def close(self) -> None:
        for handle in self._served.values():
            handle.close()
        self._served.clear()
        self._in_process.clear()

    def __enter__(self) -> SimClusters:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture(scope="module")
def sim_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimClusters]:
    """The factory of this module's emulated clusters; they are closed when the module ends."""
    clusters = SimClusters(tmp_path_factory.mktemp)
    try:
        yield clusters
    finally:
        clusters.close()


@pytest.fixture
def sim_cluster(sim_clusters: SimClusters) -> SimCluster:
    """A bare in-process emulated cluster (seed 0, nothing deployed), as built."""
    return sim_clusters.in_process()


@pytest.fixture
def sim_app(sim_clusters: SimClusters) -> Callable[..., SimCluster]:
    """`sim_app(app="hotel-reservation", seed=11, settle=120.0)`: an in-process emulated cluster
    with `app` deployed and settled, as built."""

    def deployed(app: str = "hotel-reservation", seed: int = 11, settle: float = 120.0,
                 start: float | None = None) -> SimCluster:
        return sim_clusters.in_process(app, seed=seed, settle=settle, start=start)

    return deployed


@pytest.fixture
def sim_api(sim_clusters: SimClusters) -> SimHandle:
    """A bare emulated cluster served over the real APIs (seed 3, nothing deployed), as built."""
    return sim_clusters.served(seed=3)
