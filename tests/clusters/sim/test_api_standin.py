"""Test helpers for the API server tests (no tests here): a minimal stand-in for SimCluster (a
store, a clock, observability apps, container logs, checkpoints, no controllers) so the API's own
semantics are tested apart from the controllers, and a helper that runs a server for real."""

from __future__ import annotations

import base64
import copy
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from clusters.sim.clock import VirtualClock
from clusters.sim.observability import Observability
from clusters.sim.resources import register_all
from clusters.sim.store import Obj, ResourceType, Store, StoreError

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
KUBECTL = ROOT / ".tools" / "kubectl-root" / "usr" / "bin" / "kubectl"


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


def start_server_process(tmp: Path, factory: str = "test_api_standin:StandInCluster",
                         extra: list[str] | None = None) -> tuple[subprocess.Popen, dict[str, Any]]:
    """Run `python -m clusters.sim.server` with the stand-in; returns the process and its ready file."""
    ready = tmp / "ready.json"
    ready.unlink(missing_ok=True)
    env = {"PYTHONPATH": f"{ROOT}:{HERE}", "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen([sys.executable, "-m", "clusters.sim.server", "--seed", "0", "--ready-file", str(ready),
                             "--cluster-factory", factory, "--die-with-parent", *(extra or [])],
                            cwd=ROOT, env=env, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"server did not start: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
        time.sleep(0.01)
    return proc, json.loads(ready.read_text())


def kubeconfig_for(path: Path, server: str, token: str, ca_pem: str, namespace: str = "default") -> Path:
    ca = base64.b64encode(ca_pem.encode()).decode()
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "sim",
        "clusters": [{"name": "sim", "cluster": {"server": server, "certificate-authority-data": ca}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "u", "namespace": namespace}}],
    }))
    return path
