"""A minimal stand-in for SimCluster (a store, a clock, observability apps, container logs,
checkpoints, no controllers) so the API server's own semantics are tested apart from the
controllers: the API tests serve it with `sim_clusters.served(cluster_factory=STANDIN)`."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes import client

from kubesim.clock import VirtualClock
from kubesim.observability import Observability
from kubesim.resources import register_all
from kubesim.store import Obj, ResourceType, Store, StoreError

STANDIN = "tests.kubesim.standin:StandInCluster"  # for --cluster-factory


def namespace_for(request: pytest.FixtureRequest, api: client.ApiClient) -> str:
    """A namespace named after the running test, created through `api` (each API test works in
    its own)."""
    name = request.node.name.replace("_", "-")[:50].strip("-").lower()
    client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    return name


class StandInCluster:
    """What the API server needs of a cluster: store, clock, obs, advance, checkpoint/restore,
    read_container_log. Logs are written with `write_log`, or from a pod annotation
    `standin.test/log` (newline-separated lines) so a test in another process can plant them."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.clock = VirtualClock()
        self.store = Store(self.clock)
        register_all(self.store)
        # SimCluster's own fault resources live in a farm-only group; so do the stand-in's.
        self.store.register(ResourceType("nodefaults", "NodeFault", "sim.farm.io", "v1alpha1", namespaced=False))
        self.obs = Observability(self.clock)
        self._logs: dict[tuple[str, str, str, int], list[tuple[float, str]]] = {}
        self._checkpoints: dict[str, Any] = {}
        self._cpu: dict[tuple[str, str, str], float] = {}
        for ns in ("default", "kube-system"):
            self.store.create("namespaces", {"metadata": {"name": ns}})
        self.store.create("nodes", {"metadata": {"name": "worker-1", "labels": {"kubernetes.io/hostname": "worker-1"}},
                                    "status": {"conditions": [{"type": "Ready", "status": "True"}],
                                               "nodeInfo": {
                                                   "kubeletVersion": "v1.28.15", "kubeProxyVersion": "v1.28.15",
                                                   "architecture": "amd64", "bootID": "b", "machineID": "m",
                                                   "systemUUID": "s", "containerRuntimeVersion": "containerd://1.7.13",
                                                   "kernelVersion": "6.1.0", "operatingSystem": "linux",
                                                   "osImage": "Debian GNU/Linux 12 (bookworm)"}}})
        self.store.hooks.append(self._annotation_logs)

    def _annotation_logs(self, verb: str, key: str, old: Obj | None, new: Obj | None) -> None:
        if key == "pods" and new is not None:
            text = (new["metadata"].get("annotations") or {}).get("standin.test/log")
            if text:
                for c in new["spec"].get("containers", []):
                    self._logs[(new["metadata"]["namespace"], new["metadata"]["name"], c["name"], 0)] = [
                        (self.clock.now(), line) for line in text.split("\n")]

    def advance(self, seconds: float) -> None:
        """Move the clock; running pods annotated `standin.test/cpu` (cores) and `standin.test/memory`
        (bytes) get cAdvisor samples every 15 s, like a scrape of the kubelet."""
        end = self.clock.now() + seconds
        while self.clock.now() + 15 <= end:
            self.clock.set(self.clock.now() + 15)
            self._scrape()
        self.clock.set(end)

    def _scrape(self) -> None:
        t = self.clock.now()
        for pod in self.store.iter_raw("pods"):
            ann = pod["metadata"].get("annotations") or {}
            if (pod.get("status") or {}).get("phase") != "Running" or "standin.test/cpu" not in ann:
                continue
            for c in pod["spec"]["containers"]:
                labels = {"namespace": pod["metadata"]["namespace"], "pod": pod["metadata"]["name"],
                          "container": c["name"], "image": c["image"], "job": "kubernetes-cadvisor"}
                key = (pod["metadata"]["namespace"], pod["metadata"]["name"], c["name"])
                self._cpu[key] = self._cpu.get(key, 0.0) + 15 * float(ann["standin.test/cpu"])
                self.obs.tsdb.append("container_cpu_usage_seconds_total", labels, t, self._cpu[key])
                self.obs.tsdb.append("container_memory_working_set_bytes", labels, t, float(ann["standin.test/memory"]))

    def write_log(self, namespace: str, pod: str, container: str, line: str, restart: int = 0) -> None:
        self._logs.setdefault((namespace, pod, container, restart), []).append((self.clock.now(), line))

    def read_container_log(self, namespace: str, pod: str, container: str | None = None, previous: bool = False,
                           timestamps: bool = False, tail: int | None = None,
                           since_seconds: float | None = None) -> str:
        obj = self.store.get("pods", namespace, pod)
        names = [c["name"] for c in obj["spec"]["containers"]]
        if container is None:
            if len(names) != 1:
                raise StoreError(400, "BadRequest", f"a container name must be specified for pod {pod}, "
                                 f"choose one of: [{' '.join(names)}]")
            container = names[0]
        if container not in names:
            raise StoreError(400, "BadRequest", f"container {container} is not valid for pod {pod}")
        restart = 1 if previous else 0
        lines = self._logs.get((namespace, pod, container, restart), [])
        if previous and not lines:
            raise StoreError(400, "BadRequest", f'previous terminated container "{container}" in pod "{pod}" not found')
        if since_seconds is not None:
            lines = [x for x in lines if x[0] >= self.clock.now() - since_seconds]
        if tail is not None:
            lines = lines[-tail:] if tail else []
        return "".join((f"{self.clock.rfc3339(t)} {s}\n" if timestamps else f"{s}\n") for t, s in lines)

    def exec(self, namespace: str, pod: str, container: str | None, command: list[str]) -> tuple[int, str, str]:
        """`echo ARGS` prints them, `fail N` exits N with a message on stderr, anything else is not found."""
        self.store.get("pods", namespace, pod)
        if command[0] == "echo":
            return 0, " ".join(command[1:]) + "\n", ""
        if command[0] == "fail":
            return int(command[1]), "", f"failing with {command[1]}\n"
        return 127, "", f"sh: {command[0]}: not found\n"

    def checkpoint(self, name: str) -> None:
        self._checkpoints[name] = (self.store.checkpoint(), copy.deepcopy(self._logs))

    def restore(self, name: str) -> None:
        state, logs = self._checkpoints[name]
        self.store.restore(state)
        self._logs = copy.deepcopy(logs)
