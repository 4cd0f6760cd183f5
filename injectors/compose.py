"""A problem's faults as one unit, and its noises driven by the cluster clock.

`ProblemInjection` plants every fault of a problem (concurrent, correlated or metastable: the
sustaining faults first, then the triggers, which are over when their inject returns), recovers
them in reverse order, reports each one's own check, and replays the triggers for the
mitigation oracle. `NoiseRunner` plans seeded noise events and fires them as cluster time
passes: on the emulated cluster it splits every `advance` at event boundaries, so the same seed
gives the same disturbances at the same cluster times; on real clusters a thread ticks too.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable
from typing import Any

from clusters.handle import ClusterHandle
from clusters.kube import KubeError
from core.errors import InjectionError
from core.problem import GroundTruth, NoiseSpec, Problem, fill_placeholders
from injectors.injector import Injection, Injector, faults, noises


class ProblemInjection:
    """The faults of one problem on one cluster."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.faults: list[Injector] = [faults.create(f.injector, **f.params) for f in problem.faults]
        self.injectors: list[tuple[Injector, Injection]] = []
        self.namespace: str | None = None

    @staticmethod
    def _is_trigger(injector: Injector) -> bool:
        return bool(getattr(injector, "trigger", False))

    def inject(self, cluster: ClusterHandle, namespace: str) -> list[Injection]:
        if self.injectors:
            raise InjectionError(f"problem {self.problem.id} is already injected")
        self.namespace = namespace
        order = sorted(range(len(self.faults)), key=lambda i: self._is_trigger(self.faults[i]))
        done: dict[int, Injection] = {}
        try:
            for i in order:
                done[i] = self.faults[i].inject(cluster, namespace)
                self.injectors.append((self.faults[i], done[i]))
        except Exception as exc:
            self.recover(cluster)
            if isinstance(exc, InjectionError):
                raise
            raise InjectionError(f"problem {self.problem.id}: injecting {self.problem.faults[i].injector}: {exc}") from exc
        # Report injections in the problem's own fault order (the oracle and the judge index by it).
        self.injectors = [(self.faults[i], done[i]) for i in range(len(self.faults))]
        return [inj for _, inj in self.injectors]

    def recover(self, cluster: ClusterHandle) -> None:
        errors = []
        for injector, injection in reversed(self.injectors):
            try:
                injector.recover(cluster, injection)
            except Exception as exc:  # recover the others before reporting
                errors.append(f"{injection.injector}: {exc}")
        self.injectors = []
        if errors:
            raise InjectionError(f"problem {self.problem.id}: recovery failed: " + "; ".join(errors))

    def recover_one(self, cluster: ClusterHandle, index: int) -> None:
        """Undo fault number `index` only (a reference mitigation step `recover: N`)."""
        injector, injection = self.injectors[index]
        injector.recover(cluster, injection)

    def active(self, cluster: ClusterHandle) -> list[bool]:
        """Each fault's own check (does it still affect what runs?), in the problem's fault order
        (triggers never do)."""
        return [self._affects(cluster, injector, injection) for injector, injection in self.injectors]

    @staticmethod
    def _affects(cluster: ClusterHandle, injector: Injector, injection: Injection) -> bool:
        try:
            return bool(injector.affects(cluster, injection))
        except (InjectionError, KubeError):
            # What the check reads is gone (the agent deleted the workload): nothing of the fault
            # runs; the oracle's presence checks judge the deletion.
            return False

    def restart_targets(self) -> list[str]:
        """The workloads a lasting fix must survive one restart of ("Kind/namespace/name")."""
        out: list[str] = []
        for injector, injection in self.injectors:
            if self._is_trigger(injector):
                continue
            out += [t for t in injector.restart_targets(injection) if t not in out]
        return out

    def replay_trigger(self, cluster: ClusterHandle, namespace: str, duration: float) -> None:
        """Replays every trigger of the problem for `duration` seconds of cluster time, then
        removes it: a fixed system recovers, a metastable one stays down."""
        for injector, _ in self.injectors:
            if not self._is_trigger(injector):
                continue
            if hasattr(injector, "replay"):
                injector.replay(cluster, namespace, duration)
            else:
                injection = injector.inject(cluster, namespace)
                cluster.advance(duration)
                injector.recover(cluster, injection)

    def records(self) -> list[dict[str, Any]]:
        return [inj.model_dump() for _, inj in self.injectors]

    def ground_truth(self) -> GroundTruth:
        """The problem's ground truth with what only injection decides filled in: `{node}` is the
        node a node-level fault landed on. Give this to the judge rather than the raw one."""
        nodes = self._nodes()
        return self.problem.ground_truth.filled(node=nodes[0]) if nodes else self.problem.ground_truth

    def _nodes(self) -> list[str]:
        return [inj.saved["node"] for _, inj in self.injectors if isinstance(inj.saved.get("node"), str)]

    def fill(self, value: Any) -> Any:
        """`value` (text, or lists and mappings of it) with `{node}` replaced by the node the
        problem's node-level fault landed on: a reference mitigation's `cordon {node}` names the
        node an agent finds with `get pods -o wide`."""
        nodes = self._nodes()
        return fill_placeholders(value, node=nodes[0]) if nodes else value


def fault_components(problem: Problem) -> list[str]:
    """The components the problem breaks (its own and its concurrent root causes') and the
    workloads its faults act on: noise never disturbs them, so it can add misleading evidence but
    never take the fault's away. A chaos experiment holds the pods it selected at its start, on
    both its ends: a rollout of a partition's far end would bring up pods the partition misses."""
    if problem.no_fault:
        return []  # a control breaks nothing: noise may land anywhere
    truths = [problem.ground_truth, *problem.ground_truth.also]
    acted_on = [v for f in problem.faults for key in ("service", "target")
                if isinstance(v := f.params.get(key), str) and v]
    return list(dict.fromkeys([*(t.component for t in truths), *acted_on]))


def ambient_noises(problem: Problem, level: str) -> list[NoiseSpec]:
    """The noises of a trial a sweep runs at `level`: "<intensity>" (low, medium, high, or a
    number in [0, 1]) optionally followed by ":<kind>+<kind>" to run only those kinds. Without
    kinds, the problem's own noises and every confounder (injectors.noise.CONFOUNDERS), all at
    that intensity. Confounders aim at the fault's call-graph neighbours and fire within the
    first AMBIENT_WINDOW_S after the injection, overlapping the fault in time and in place."""
    from injectors.noise import AMBIENT_WINDOW_S, CONFOUNDERS, level_intensity

    raw, _, kinds_text = level.partition(":")
    intensity = level_intensity(raw)
    kinds = [k for k in kinds_text.split("+") if k]
    own = [s for s in problem.noises if not kinds or s.kind in kinds]
    timing = {"window_seconds": AMBIENT_WINDOW_S, "start_after_seconds": 0.0}
    out = [NoiseSpec(kind=s.kind, intensity=intensity, params={**s.params, **timing}) for s in own]
    topology_app = problem.app
    # a node fault has no call-graph place: its neighbours are those of the first workload it hurts
    if problem.no_fault:
        # A control has no fault to gather around: the noise gathers around the entry service (never
        # on it), where an on-call engineer would first look, as it does around a fault's component.
        from apps.application import load_application

        near = load_application(problem.app).entrypoint
    else:
        near = next((c for c in fault_components(problem) if "/" not in c),
                    (problem.ground_truth.affected or [problem.ground_truth.component])[0])
    for kind in kinds or CONFOUNDERS:
        out.append(NoiseSpec(kind=kind, intensity=intensity, params={"near": near, "app": topology_app, **timing}))
    return out


class NoiseRunner:
    """Seeded noise for one trial. `start` plans every noise; `stop` ends them all."""

    TICK_SECONDS = 1.0  # real clusters: how often the background thread looks at the clock

    def __init__(self, noise_specs: Iterable[NoiseSpec], seed: int, avoid: Iterable[str] = ()) -> None:
        self.specs = list(noise_specs)
        self.seed = seed
        self.avoid = list(avoid)
        self.running: list[tuple[Any, Injection]] = []
        self._cluster: ClusterHandle | None = None
        self._hooked = False
        self._thread: threading.Thread | None = None
        self._halt = threading.Event()
        self._lock = threading.RLock()
        self.errors: list[str] = []
        self._stopped: list[dict[str, Any]] = []
        # Validate now, so a bad noise spec fails before any cluster work.
        self.noises = [noises.create(s.kind, **self._params(s)) for s in self.specs]

    def _params(self, spec: NoiseSpec) -> dict[str, Any]:
        params = dict(spec.params)
        if self.avoid and "targets" not in params:
            params["avoid"] = sorted(set(params.get("avoid", [])) | set(self.avoid))
        return params

    def start(self, cluster: ClusterHandle, namespace: str) -> None:
        if not self.specs:
            return
        self._cluster = cluster
        self._gather(cluster, namespace)
        for index, (spec, noise) in enumerate(zip(self.specs, self.noises, strict=True)):
            rng = random.Random(f"{self.seed}:{index}:{spec.kind}")
            self.running.append((noise, noise.start(cluster, namespace, rng, spec.intensity)))
        # Events fire at their own cluster times: the clock stops at each boundary to tick.
        cluster.add_clock_hook(self)
        self._hooked = True
        self.tick()
        if not cluster.capabilities.virtual_clock:
            self._thread = threading.Thread(target=self._loop, name="noise", daemon=True)
            self._thread.start()

    def _gather(self, cluster: ClusterHandle, namespace: str) -> None:
        """Give the confounders aimed at one component's neighbours a shared focus, one of those
        neighbours drawn from the trial's seed (unless a spec names its focus or its targets)."""
        from clusters.kube import Kube
        from injectors.noise import ScheduledNoise

        kube, chosen = Kube.of(cluster), {}
        rng = random.Random(f"{self.seed}:focus")
        for noise in self.noises:
            if not isinstance(noise, ScheduledNoise):
                continue
            p = noise.p
            if not p.near or p.focus or p.targets:
                continue
            if p.near not in chosen:
                chosen[p.near] = rng.choice(noise.candidates(kube, namespace))
            p.focus = chosen[p.near]

    def boundaries(self) -> list[float]:
        with self._lock:
            return [b for noise, inj in self.running for b in noise.boundaries(inj)]

    def tick(self) -> None:
        if self._cluster is None:
            return
        with self._lock:
            now = self._cluster.now()
            for noise, injection in self.running:
                try:
                    noise.tick(self._cluster, injection, now)
                except Exception as exc:  # a failed disturbance never ends a trial
                    self.errors.append(f"{injection.injector}: {exc}")

    def _loop(self) -> None:
        while not self._halt.wait(self.TICK_SECONDS):
            self.tick()

    def stop(self, cluster: ClusterHandle) -> None:
        """End every disturbance and remove what the noises created (before the oracles)."""
        self._halt.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._hooked:
            cluster.remove_clock_hook(self)
            self._hooked = False
        errors = []
        with self._lock:
            for noise, injection in self.running:
                try:
                    noise.stop(cluster, injection)
                except Exception as exc:
                    errors.append(f"{injection.injector}: {exc}")
            self._stopped = [inj.model_dump() for _, inj in self.running]
            self.running = []
        self._cluster = None
        if errors:
            raise InjectionError("stopping noise failed: " + "; ".join(errors))

    def records(self) -> list[dict[str, Any]]:
        """What each noise planned and did (also after stop, for the attempt's artifact)."""
        if self.running:
            return [inj.model_dump() for _, inj in self.running]
        return list(self._stopped)
