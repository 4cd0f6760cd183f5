"""One emulated cluster in a process: the object store, the controllers that make symptoms emerge
(scheduler, kubelet, workload controllers, chaos), the application models under an open-loop
workload, and the telemetry they emit, all on one virtual clock and one seeded random source.

`advance(seconds)` runs controllers on 1 s ticks (only when something changed or a timer is due),
the fluid workload every 5 s and the Prometheus scrape every 15 s. Same seed → same observations.
"""

from __future__ import annotations

import copy
import functools
import gc
import heapq
import math
import pickle
import random
from collections.abc import Callable
from typing import Any

from kubesim.clock import VirtualClock, wall_start
from kubesim.store import Obj, ResourceType, Store, StoreError

CONTROLLER_TICK = 1.0
BOOTSTRAP_SECONDS = 30.0
FLUID_STEP = 5.0
SCRAPE_INTERVAL = 30.0  # between the prometheus chart default (1m) and kube-prometheus (30s)
RULE_EVERY = 2  # alerting rules every second scrape: the chart's evaluation_interval of 1m
EVENT_TTL = 3600.0  # kube-apiserver --event-ttl default

# Types this package needs beyond A1's registry (farm-only fault resources live in a group the
# agent's namespaced credentials never reach).
EXTRA_TYPES = (
    ResourceType("nodefaults", "NodeFault", "sim.farm.io", "v1alpha1", namespaced=False, subresources=("status",),
                 singular="nodefault"),
)


def register_types(store: Store) -> None:
    """Register every resource type: A1's `kubesim.resources.register_all` when present, then
    whatever this package needs that is still missing."""
    try:
        from kubesim import resources
    except ImportError:  # A1's registry not there yet: fall back to ours
        resources = None  # type: ignore[assignment]
    if resources is not None and hasattr(resources, "register_all"):
        resources.register_all(store)
    for rt in _fallback_types() + EXTRA_TYPES:
        if rt.key not in store.types:
            store.register(rt)


def _fallback_types() -> tuple[ResourceType, ...]:
    core = [("namespaces", "Namespace", False), ("pods", "Pod", True), ("services", "Service", True),
            ("endpoints", "Endpoints", True), ("configmaps", "ConfigMap", True), ("secrets", "Secret", True),
            ("events", "Event", True), ("nodes", "Node", False), ("resourcequotas", "ResourceQuota", True),
            ("limitranges", "LimitRange", True), ("persistentvolumes", "PersistentVolume", False),
            ("persistentvolumeclaims", "PersistentVolumeClaim", True), ("serviceaccounts", "ServiceAccount", True)]
    grp = [("apps", "v1", "deployments", "Deployment"), ("apps", "v1", "replicasets", "ReplicaSet"),
           ("apps", "v1", "statefulsets", "StatefulSet"), ("apps", "v1", "daemonsets", "DaemonSet"),
           ("batch", "v1", "jobs", "Job"), ("batch", "v1", "cronjobs", "CronJob"),
           ("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy")]
    out = [ResourceType(p, k, namespaced=n, subresources=("status",)) for p, k, n in core]
    out += [ResourceType(p, k, g, v, subresources=("status", "scale")) for g, v, p, k in grp]
    out.append(ResourceType("storageclasses", "StorageClass", "storage.k8s.io", "v1", namespaced=False))
    for plural, kind in (("podchaos", "PodChaos"), ("networkchaos", "NetworkChaos"), ("iochaos", "IOChaos"),
                         ("stresschaos", "StressChaos"), ("timechaos", "TimeChaos"), ("kernelchaos", "KernelChaos")):
        out.append(ResourceType(plural, kind, "chaos-mesh.org", "v1alpha1", subresources=("status",)))
    return tuple(out)


class EventRecorder:
    """core/v1 Events as kubectl describe shows them: repeats of the same (object, type, reason,
    message, source) raise `count` and `lastTimestamp` instead of creating a new Event."""

    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster
        self.state: dict[str, Any] = {"index": {}, "seq": 0}

    def record(self, obj: Obj, type_: str, reason: str, message: str, component: str,
               host: str | None = None, field_path: str | None = None) -> None:
        store, now = self.cluster.store, self.cluster.clock.now()
        meta = obj.get("metadata", {})
        ns = meta.get("namespace") or "default"
        key = (meta.get("uid", ""), type_, reason, message, component, host or "", field_path or "")
        index = self.state["index"]
        stamp = self.cluster.clock.rfc3339(now)
        existing = index.get(key)
        if existing is not None:
            def bump(ev: Obj) -> None:
                ev["count"] = int(ev.get("count", 1)) + 1
                ev["lastTimestamp"] = stamp
            try:
                store.mutate("events", existing[0], existing[1], bump)
                return
            except StoreError:
                index.pop(key, None)
        self.state["seq"] += 1
        name = f"{meta.get('name', 'unknown')}.{int(now * 1e9) + self.state['seq']:x}"
        involved = {"kind": obj.get("kind", ""), "namespace": meta.get("namespace", ""), "name": meta.get("name", ""),
                    "uid": meta.get("uid", ""), "apiVersion": obj.get("apiVersion", "v1"),
                    "resourceVersion": meta.get("resourceVersion", "")}
        if not meta.get("namespace"):
            involved.pop("namespace")
        if field_path:
            involved["fieldPath"] = field_path
        event = {"metadata": {"name": name, "namespace": ns}, "involvedObject": involved, "reason": reason,
                 "message": message, "source": {"component": component, **({"host": host} if host else {})},
                 "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1, "type": type_,
                 "eventTime": None, "reportingComponent": component, "reportingInstance": host or ""}
        try:
            store.create("events", event, namespace=ns)
        except StoreError:
            return  # namespace terminating: the real recorder drops the event too
        index[key] = (ns, name)

    def expire(self, now: float) -> None:
        store = self.cluster.store
        from kubesim.clock import rfc3339
        cutoff = rfc3339(now - EVENT_TTL)
        with store.lock:
            stale = [(e["metadata"]["namespace"], e["metadata"]["name"]) for e in store.iter_raw("events")
                     if (e.get("lastTimestamp") or "") < cutoff]
        for ns, name in stale:
            try:
                store.delete("events", ns, name)
            except StoreError:
                pass
        live = {(ns, n) for ns, n in self.state["index"].values()} - set(stale)
        self.state["index"] = {k: v for k, v in self.state["index"].items() if v in live}


class ContainerLogs:
    """Container log files (current and previous instance, for `kubectl logs [-p]`) and their copy
    shipped to Loki with the labels promtail's kubernetes-pods job sets."""

    MAX_LINES = 4000

    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster
        self.state: dict[str, Any] = {"files": {}, "labels": {}}

    def _labels(self, pod: Obj, container: str) -> dict[str, str]:
        meta = pod["metadata"]
        key = (meta["namespace"], meta["name"], container)
        labels = self.state["labels"].get(key)
        if labels is None:
            pl = meta.get("labels") or {}
            owner = (meta.get("ownerReferences") or [{}])[0].get("name", "")
            if owner and (meta.get("ownerReferences") or [{}])[0].get("kind") == "ReplicaSet":
                owner = owner.rsplit("-", 1)[0]
            app = pl.get("app.kubernetes.io/name") or pl.get("app") or owner or meta["name"]
            labels = {"namespace": meta["namespace"], "pod": meta["name"], "container": container, "app": app,
                      "job": f"{meta['namespace']}/{app}", "node_name": pod.get("spec", {}).get("nodeName", ""),
                      "stream": "stdout",
                      "filename": f"/var/log/pods/{meta['namespace']}_{meta['name']}_{meta.get('uid', '')}/{container}/0.log"}
            if pl.get("app.kubernetes.io/instance"):
                labels["instance"] = pl["app.kubernetes.io/instance"]
            if pl.get("app.kubernetes.io/component"):
                labels["component"] = pl["app.kubernetes.io/component"]
            self.state["labels"][key] = labels
        return labels

    def write(self, pod: Obj, container: str, lines: str | list[str], t: float | None = None,
              stream: str = "stdout") -> None:
        if isinstance(lines, str):
            lines = [lines]
        if not lines:
            return
        t = self.cluster.clock.now() if t is None else t
        meta = pod["metadata"]
        key = (meta["namespace"], meta["name"], container)
        f = self.state["files"].setdefault(key, {"current": [], "previous": []})
        labels = self._labels(pod, container)
        if stream != "stdout":
            labels = {**labels, "stream": stream}
        append = self.cluster.obs.logs.append
        for i, line in enumerate(lines):
            ts = t + i * 1e-4
            f["current"].append((ts, line))
            append(labels, ts, line)
        if len(f["current"]) > self.MAX_LINES:
            del f["current"][: len(f["current"]) - self.MAX_LINES]

    def rotate(self, namespace: str, pod: str, container: str) -> None:
        f = self.state["files"].setdefault((namespace, pod, container), {"current": [], "previous": []})
        f["previous"], f["current"] = f["current"], []

    def read(self, namespace: str, pod: str, container: str, previous: bool = False) -> list[tuple[float, str]]:
        f = self.state["files"].get((namespace, pod, container))
        if f is None:
            return []
        return list(f["previous" if previous else "current"])

    def drop_pod(self, namespace: str, pod: str) -> None:
        for key in [k for k in self.state["files"] if k[0] == namespace and k[1] == pod]:
            del self.state["files"][key]
            self.state["labels"].pop(key, None)


def _frozen(state: Any) -> Any:
    """A private copy of model state for a checkpoint: pickled (restored ~4x faster than a deep
    copy), or deep-copied when something in it does not pickle."""
    try:
        return pickle.dumps(state, pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return copy.deepcopy(state)


def _thawed(frozen: Any) -> Any:
    return pickle.loads(frozen) if isinstance(frozen, bytes) else copy.deepcopy(frozen)


class SimCluster:
    """The emulated cluster. `store`, `clock`, `rng`, `obs`, `nodes`, `advance()`, `checkpoint()`."""

    def __init__(self, seed: int = 0, clock: VirtualClock | None = None, workers: int = 3,
                 start: float | None = None) -> None:
        from kubesim.api.admission import install_admission
        from kubesim.apps.model import StartContext
        from kubesim.chaos import ChaosController
        from kubesim.controllers import build_controllers
        from kubesim.controllers.crds import install_crd_registry
        from kubesim.controllers.kubelet import Kubelet
        from kubesim.controllers.network import Network
        from kubesim.controllers.telemetry import Telemetry
        from kubesim.nodes import NodeFleet
        from kubesim.observability import Observability
        from kubesim.view import ControlPlane
        from kubesim.workload import Workload

        self.seed = seed
        # `start` (default: the host's clock now) is the cluster time once it is built: the
        # bootstrap below runs in the BOOTSTRAP_SECONDS before it (clock.start is their origin).
        if clock is None:
            clock = VirtualClock((wall_start() if start is None else float(start)) - BOOTSTRAP_SECONDS)
        self.clock = clock
        self.store = Store(self.clock)
        register_types(self.store)
        self.rng = random.Random(seed)
        self.obs = Observability(self.clock)
        self.events = EventRecorder(self)
        self.control = ControlPlane(self.store, self.clock, self.rng, self.events, self.wake_at, self.touch,
                                    self.touched)
        self.logs = ContainerLogs(self)
        self.nodes = NodeFleet(self.control, self.obs.logs, workers=workers)
        self.network = Network(self)
        self.workload = Workload(self)
        # The containers it starts are the applications' models, which see the whole cluster (DNS,
        # the other pods, the node's disks): the kubelet itself gets only how to start them.
        self.kubelet = Kubelet(self.control, self.nodes, self.logs, self.workload.forget_pod,
                               functools.partial(StartContext, self))
        self.nodes.kubelet = self.kubelet
        self.chaos = ChaosController(self.control, self.kubelet, self.nodes)
        self.telemetry = Telemetry(self)
        self.controllers = build_controllers(self)
        self._ran_at: dict[int, int] = {}  # store-driven controller → resourceVersion its last run started at
        self._timers: list[float] = []
        self._dirty = True
        self._next_fluid = self.clock.now() + FLUID_STEP
        self._next_scrape = self.clock.now()
        self._checkpoints: dict[str, Any] = {}
        self._scrapes = 0
        self.store.hooks.append(self._on_change)
        install_admission(self.store, defaulting=False)  # on once the API server serves the store
        self._resync_custom_types = install_crd_registry(self)
        self.nodes.bootstrap()
        from kubesim.controllers.bootstrap import bootstrap_cluster
        bootstrap_cluster(self)
        self.advance(BOOTSTRAP_SECONDS)  # system pods (CoreDNS) come up before anyone looks

    # -- scheduling of work ----------------------------------------------------------------
    def _on_change(self, verb: str, key: str, old: Obj | None, new: Obj | None) -> None:
        if key != "events":
            self._dirty = True

    def touch(self) -> None:
        """Something the controllers read changed outside the store (a container started or
        exited): run another pass."""
        self._dirty = True

    def touched(self) -> bool:
        """Whether something changed since this controller pass began."""
        return self._dirty

    def wake_at(self, t: float) -> None:
        """Ask for a controller pass at cluster time `t` (rounded up to the controller tick)."""
        t = math.ceil(t / CONTROLLER_TICK - 1e-9) * CONTROLLER_TICK
        heapq.heappush(self._timers, t)

    def reconcile(self) -> None:
        """Run every controller until none of them writes anything (at most 25 passes). A
        controller marked `store_driven` is skipped while the store has not changed since its last
        run began (a pass woken by a probe's timer changes nothing it reads)."""
        now = self.clock.now()
        for _ in range(25):
            self._dirty = False
            rv = self.store.resource_version
            for controller in self.controllers:
                if getattr(controller, "store_driven", False):
                    start = self.store.resource_version
                    if self._ran_at.get(id(controller)) == start:
                        continue
                    self._ran_at[id(controller)] = start
                controller(now)
            if self.store.resource_version == rv and not self._dirty:
                break
        self._dirty = False

    def advance(self, seconds: float) -> None:
        end = self.clock.now() + max(0.0, float(seconds))
        while True:
            now = self.clock.now()
            due = False
            while self._timers and self._timers[0] <= now + 1e-9:
                heapq.heappop(self._timers)
                due = True
            if self._dirty or due:
                self.reconcile()
            if now + 1e-9 >= self._next_fluid:
                self.workload.step(now, FLUID_STEP)
                self._next_fluid += FLUID_STEP
                if self._dirty:
                    self.reconcile()
            if now + 1e-9 >= self._next_scrape:
                self.telemetry.scrape(now)
                self._scrapes += 1
                if self._scrapes % RULE_EVERY == 0:
                    self.obs.evaluate_rules(now)
                self._next_scrape += SCRAPE_INTERVAL
            nxt = min(self._next_fluid, self._next_scrape, self._timers[0] if self._timers else math.inf)
            if self._dirty:
                nxt = min(nxt, now + CONTROLLER_TICK)
            if nxt > end + 1e-9:
                self.clock.set(end)
                if self._dirty:
                    self.reconcile()
                return
            self.clock.set(max(nxt, now))

    def now(self) -> float:
        return self.clock.now()

    def scan(self, key: str, namespace: str | None = None) -> list[Obj]:
        """Stored objects without copying, for read-only controller loops: never mutate them."""
        return self.store.scan(key, namespace)

    def raw(self, key: str, namespace: str, name: str) -> Obj | None:
        """One stored object without copying (read-only)."""
        return self.store.raw(key, namespace, name)

    # -- helpers used by controllers and the API server ---------------------------------------
    def exec(self, namespace: str, pod: str, container: str | None, command: list[str],
             stdin: str = "") -> tuple[int, str, str]:
        """`kubectl exec`: run `command` in a running container's userland; (exit code, stdout, stderr)."""
        return self.kubelet.exec(namespace, pod, container, command, stdin)

    def attach(self, namespace: str, pod: str, container: str | None, stdin: str | None) -> tuple[int, str, str] | None:
        """`kubectl attach`: an interactive shell runs `stdin` and exits (see Kubelet.attach)."""
        return self.kubelet.attach(namespace, pod, container, stdin)

    def follow_output(self, namespace: str, pod: str, container: str | None, since: float) -> tuple[str, int | None, float]:
        """What a container printed after `since` (for `kubectl attach`), its exit code once it
        has stopped (else None), and the time to continue from."""
        obj = self.store.get("pods", namespace, pod)
        name = container or obj["spec"]["containers"][0]["name"]
        rt = self.kubelet.runtime(obj)
        ctr = rt.containers.get(name) if rt is not None else None
        entries = [(t, line) for t, line in self.logs.read(namespace, pod, name) if t > since]
        text = "".join(line + "\n" for _, line in entries)
        last = max([since] + [t for t, _ in entries])
        if ctr is None or ctr.state != "running":
            return text, (ctr.exit_code if ctr is not None else 0), last
        return text, None, last

    def port_forward(self, namespace: str, pod: str, port: int, request: bytes) -> tuple[bytes, str | None]:
        """`kubectl port-forward`: what the pod's process on `port` answers to `request`."""
        from kubesim.userland.net import forward
        return forward(self, self.store.get("pods", namespace, pod), port, request)

    def read_container_log(self, namespace: str, pod: str, container: str | None = None, previous: bool = False,
                           timestamps: bool = False, tail: int | None = None, since_seconds: float | None = None) -> str:
        """The text `GET pods/NAME/log` returns; raises StoreError like the real API does."""
        obj = self.store.get("pods", namespace, pod)
        names = [c["name"] for c in obj["spec"].get("containers", [])]
        ephemeral = [c["name"] for c in obj["spec"].get("ephemeralContainers") or []]
        if container is None:
            if len(names) != 1:
                raise StoreError(400, "BadRequest", f"a container name must be specified for pod {pod}, choose one of: [{' '.join(names)}]")
            container = names[0]
        init_names = [c["name"] for c in obj["spec"].get("initContainers", []) or []]
        if container not in names and container not in init_names and container not in ephemeral:
            raise StoreError(400, "BadRequest", f"container {container} is not valid for pod {pod}")
        statuses = {s["name"]: s for s in (obj.get("status", {}).get("containerStatuses") or [])
                    + (obj.get("status", {}).get("initContainerStatuses") or [])
                    + (obj.get("status", {}).get("ephemeralContainerStatuses") or [])}
        st = statuses.get(container, {})
        if previous and not st.get("lastState", {}).get("terminated"):
            raise StoreError(400, "BadRequest", f'previous terminated container "{container}" in pod "{pod}" not found')
        if not previous and "waiting" in st.get("state", {}) and not st.get("lastState", {}).get("terminated") \
                and not self.logs.read(namespace, pod, container):
            reason = st["state"]["waiting"].get("reason", "ContainerCreating")
            raise StoreError(400, "BadRequest", f'container "{container}" in pod "{pod}" is waiting to start: '
                             + ("trying and failing to pull image" if reason in ("ErrImagePull", "ImagePullBackOff")
                                else "ContainerCreating" if reason == "ContainerCreating" else reason))
        entries = self.logs.read(namespace, pod, container, previous)
        if since_seconds is not None:
            cutoff = self.clock.now() - since_seconds
            entries = [e for e in entries if e[0] >= cutoff]
        if tail is not None and tail >= 0:
            entries = entries[-tail:] if tail else []
        if timestamps:
            from datetime import UTC, datetime
            return "".join(f"{datetime.fromtimestamp(t, UTC).strftime('%Y-%m-%dT%H:%M:%S.%f')}000Z {line}\n"
                           for t, line in entries)
        return "".join(line + "\n" for _, line in entries)

    def apply(self, docs: list[Obj], namespace: str | None = None) -> list[Obj]:
        """Create (or replace) plain manifest documents, as `kubectl apply` would, without HTTP."""
        out = []
        for doc in docs:
            if not doc:
                continue
            rt = self.store.type_by_kind(doc.get("apiVersion", "v1"), doc["kind"])
            ns = (namespace or doc.get("metadata", {}).get("namespace") or "default") if rt.namespaced else None
            if ns and self.store.try_get("namespaces", "", ns) is None:
                self.store.create("namespaces", {"metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}},
                                                 "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
            cur = self.store.try_get(rt.key, ns or "", doc["metadata"]["name"])
            if cur is None:
                out.append(self.store.create(rt.key, doc, namespace=ns))
            else:
                new = copy.deepcopy(doc)
                new["metadata"] = {**cur["metadata"], **new["metadata"]}
                new["metadata"].pop("resourceVersion", None)
                out.append(self.store.replace(rt.key, new, check_rv=False))
        return out

    def apply_files(self, paths: list[Any], namespace: str | None = None) -> list[Obj]:
        import yaml
        docs: list[Obj] = []
        for path in paths:
            with open(path) as f:
                docs += [d for d in yaml.load_all(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d]
        return self.apply(docs, namespace)

    @classmethod
    def with_app(cls, app: str = "hotel-reservation", seed: int = 0, settle: float = 120.0,
                 start: float | None = None) -> SimCluster:
        """A cluster with `app` applied from apps/<app>/manifests and `settle` s of cluster time
        behind it (the embedded stand-in for farm.deploy); checkpointed as "deployed"."""
        from apps import load_application
        spec = load_application(app)
        cluster = cls(seed=seed, start=start)
        cluster.apply_files(spec.manifest_files(), spec.namespace)
        cluster.advance(settle)
        cluster.checkpoint("deployed")
        return cluster

    # -- checkpoints ---------------------------------------------------------------------------
    def _model_state(self) -> dict[str, Any]:
        return {"events": self.events.state, "logs": self.logs.state, "nodes": self.nodes.state,
                "kubelet": self.kubelet.state, "workload": self.workload.state, "telemetry": self.telemetry.state,
                "chaos": self.chaos.state, "network": self.network.state}

    def checkpoint(self, name: str) -> None:
        """Remember store, model state, clock and random state under `name`."""
        self._checkpoints[name] = (
            self.store.checkpoint(), _frozen(self._model_state()), self.rng.getstate(),
            self.clock.now(), list(self._timers), self._next_fluid, self._next_scrape, self.obs.checkpoint(),
            self._scrapes)
        # A checkpoint lives as long as the cluster and is only ever copied: keep the collector from
        # walking it (and what is alive now) on every full collection.
        gc.freeze()

    def restore(self, name: str) -> None:
        """Return to checkpoint `name`, clock included: the cluster is then exactly as it was at
        that moment. Rewinding keeps every timestamp consistent (objects, events, samples, log
        lines, spans and model timers all end at "now", with no telemetry gap) and makes what
        follows independent of what ran since the checkpoint; moving the clock forward instead
        would leave the telemetry ending before "now"."""
        try:
            store_state, model, rng, t0, timers, nf, ns_, obs_state, scrapes = self._checkpoints[name]
        except KeyError:
            raise KeyError(f"no checkpoint named '{name}' (known: {', '.join(sorted(self._checkpoints)) or 'none'})") from None
        self.store.restore(store_state)
        self._resync_custom_types()
        model = _thawed(model)
        self.events.state = model["events"]
        self.logs.state = model["logs"]
        self.nodes.state = model["nodes"]
        self.kubelet.state = model["kubelet"]
        self.workload.state = model["workload"]
        self.telemetry.state = model["telemetry"]
        self.chaos.state = model["chaos"]
        self.network.state = model["network"]
        self.rng.setstate(rng)
        self.obs.restore(obs_state)
        self.clock.rewind(t0)
        self._timers = list(timers)
        heapq.heapify(self._timers)
        self._next_fluid, self._next_scrape, self._scrapes = nf, ns_, scrapes
        # Controllers keep retry and back-off times per uid; uids replay after a restore, so
        # times from the abandoned timeline must not delay the objects of this one.
        from kubesim.controllers import build_controllers
        self.controllers = build_controllers(self)
        self._ran_at = {}
        self._dirty = True
        self.reconcile()

    def on(self, hook: Callable[[str, str, Obj | None, Obj | None], None]) -> None:
        self.store.hooks.append(hook)
