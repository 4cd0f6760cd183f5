"""Where a file a container writes lands and how much room it has: the container's own layer (the
node's disk), a volume, an emptyDir in memory (tmpfs sized as the kubelet sizes it), or the pod
sandbox's /dev/shm, which containerd makes a 64 MiB tmpfs unless a volume is mounted there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubesim.quantity import parse_quantity

if TYPE_CHECKING:
    from kubesim.apps.model import StartContext

SANDBOX_SHM_BYTES = 64 * 2**20  # containerd's (and Docker's) default shm size for a pod sandbox
SHM_PATH = "/dev/shm"
DISK_FREE_BYTES = 80 * 2**30  # what the container's layer and disk-backed volumes offer


@dataclass
class Landing:
    """The filesystem under a path: its mount point, what backs it, its size, and the record of the
    bytes written there (kept with the pod, so a restarted container finds them again)."""

    mount: str
    backing: str  # "shm" (the sandbox's default tmpfs), "memory" (emptyDir medium Memory), "disk", "read-only"
    capacity: float
    written: dict[str, float]

    @property
    def memory_backed(self) -> bool:
        """tmpfs pages count against the writer's memory cgroup."""
        return self.backing in ("shm", "memory")

    @property
    def used(self) -> float:
        return sum(self.written.values())


def _pod_memory_limit(pod: dict[str, Any]) -> float:
    """The pod cgroup's memory limit: the sum of its containers' limits, or none (0) unless every
    container has one (the kubelet's ResourceConfigForPod)."""
    total = 0.0
    for c in (pod.get("spec") or {}).get("containers") or []:
        limit = ((c.get("resources") or {}).get("limits") or {}).get("memory")
        if not limit:
            return 0.0
        total += parse_quantity(limit)
    return total


def memory_volume_size(ctx: StartContext, volume: dict[str, Any]) -> float:
    """The size of an emptyDir with medium Memory (SizeMemoryBackedVolumes, on since 1.22): the
    node's allocatable memory, else the pod's memory limit when smaller, else the volume's
    sizeLimit when smaller still."""
    node = ctx.cluster.nodes.get(ctx.node)
    size = float(node.memory) if node is not None else 16.0 * 2**30
    pod_limit = _pod_memory_limit(ctx.pod)
    if 0 < pod_limit <= size:
        size = pod_limit
    limit = parse_quantity((volume.get("emptyDir") or {}).get("sizeLimit")) if (volume.get("emptyDir") or {}).get("sizeLimit") else 0.0
    if 0 < limit <= size:
        size = limit
    return size


def landing(ctx: StartContext, path: str) -> Landing:
    """The filesystem a write to `path` in this container goes to."""
    mount, volume = "", None
    volumes = {v.get("name"): v for v in (ctx.pod.get("spec") or {}).get("volumes") or []}
    for m in ctx.container.get("volumeMounts") or []:
        point = (m.get("mountPath") or "").rstrip("/") or "/"
        if (path == point or path.startswith(point.rstrip("/") + "/")) and len(point) > len(mount):
            mount, volume = point, volumes.get(m.get("name"))
    if volume is not None:
        data = ctx.volume_for(path)
        written = data.setdefault("bytes_written", {}) if data is not None else {}
        if any(k in volume for k in ("configMap", "secret", "projected", "downwardAPI")) or any(
                m.get("readOnly") for m in ctx.container.get("volumeMounts") or [] if m.get("mountPath", "").rstrip("/") == mount):
            return Landing(mount, "read-only", 0.0, written)
        if (volume.get("emptyDir") or {}).get("medium") == "Memory":
            return Landing(mount, "memory", memory_volume_size(ctx, volume), written)
        return Landing(mount, "disk", DISK_FREE_BYTES, written)
    if path == SHM_PATH or path.startswith(SHM_PATH + "/"):
        uid = (ctx.pod.get("metadata") or {}).get("uid", "")
        data = ctx.cluster.kubelet.volume_data(f"shm/{uid}")
        return Landing(SHM_PATH, "shm", float(SANDBOX_SHM_BYTES), data.setdefault("bytes_written", {}))
    return Landing("/", "disk", DISK_FREE_BYTES, {})
