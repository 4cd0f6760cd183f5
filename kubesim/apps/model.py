"""The interface every container behaviour model implements, the registry that finds a model
from what a manifest says (image, command, args), and the image registry the kubelet pulls from."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kubesim.runtime import Exited, Started
from kubesim.store import Obj

if TYPE_CHECKING:
    from kubesim.runtime import Conn
    from kubesim.view import ClusterView


def normalize_image(ref: str) -> tuple[str, str, str]:
    """`mongo:4.4.6` → ("docker.io/library/mongo", "4.4.6", "docker.io/library/mongo:4.4.6")."""
    ref = ref.strip()
    digest = ""
    if "@" in ref:
        ref, digest = ref.split("@", 1)
    name, tag = ref, "latest"
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = ref.rsplit(":", 1)
    first = name.split("/", 1)[0]
    if "/" not in name:
        name = f"docker.io/library/{name}"
    elif "." not in first and ":" not in first and first != "localhost":
        name = f"docker.io/{name}"
    full = f"{name}:{tag}" + (f"@{digest}" if digest else "")
    return name, tag, full


@dataclass
class ImageInfo:
    repository: str
    tags: tuple[str, ...]  # () = every tag exists
    size: int = 50_000_000
    executables: tuple[str, ...] = ()  # binaries on PATH (besides a shell)
    shell: bool = True


IMAGES: dict[str, ImageInfo] = {}


def register_image(repository: str, tags: tuple[str, ...] = (), size: int = 50_000_000,
                   executables: tuple[str, ...] = (), shell: bool = True) -> None:
    name = normalize_image(repository + ":x")[0]
    IMAGES[name] = ImageInfo(name, tags, size, executables, shell)


def image_lookup(ref: str) -> tuple[ImageInfo | None, str | None]:
    """(info, None) if the image can be pulled, else (None, the containerd error)."""
    if not ref or ref != ref.strip() or any(c.isupper() for c in ref.split("@")[0].rsplit(":", 1)[0]):
        return None, "InvalidImageName"
    name, tag, full = normalize_image(ref)
    info = IMAGES.get(name)
    if info is None:
        return None, (f'rpc error: code = Unknown desc = failed to pull and unpack image "{full}": failed to resolve '
                      f'reference "{full}": pull access denied, repository does not exist or may require authorization: '
                      "server message: insufficient_scope: authorization failed")
    if info.tags and tag not in info.tags:
        return None, (f'rpc error: code = NotFound desc = failed to pull and unpack image "{full}": failed to resolve '
                      f'reference "{full}": {full}: not found')
    return info, None


@dataclass
class StartContext:
    """What a starting container sees: its pod, env, mounted files, volumes and the network."""

    cluster: ClusterView
    pod: Obj
    container: dict[str, Any]
    env: dict[str, str]
    files: dict[str, str]
    volumes: dict[str, dict[str, Any]]  # mount path → persistent data dict (PVC or emptyDir)
    now: float

    @property
    def namespace(self) -> str:
        return self.pod["metadata"]["namespace"]

    @property
    def pod_name(self) -> str:
        return self.pod["metadata"]["name"]

    @property
    def node(self) -> str:
        return self.pod.get("spec", {}).get("nodeName", "")

    @property
    def pod_ip(self) -> str:
        return self.pod.get("status", {}).get("podIP", "")

    @property
    def argv(self) -> list[str]:
        return list(self.container.get("command") or []) + list(self.container.get("args") or [])

    def clock_offset(self) -> float:
        return self.cluster.nodes.clock_offset(self.node) + self.cluster.chaos.time_offset(self.pod, self.container["name"])

    def app_time(self, dt: float = 0.0) -> float:
        return self.now + dt + self.clock_offset()

    def connect(self, host: str, port: int) -> Conn:
        return self.cluster.network.connect(self.pod, host, port)

    def write_file(self, path: str, text: str) -> None:
        """Persist a file written under a volume mount (an emptyDir an init container fills), so
        the pod's other containers see it at their own mount path."""
        best = None
        for mount in self.volumes:
            if path.startswith(mount.rstrip("/") + "/") and (best is None or len(mount) > len(best)):
                best = mount
        if best is not None:
            self.volumes[best].setdefault("files", {})[path[len(best.rstrip("/")) + 1:]] = text

    def volume_for(self, path: str) -> dict[str, Any] | None:
        best = None
        for mount in self.volumes:
            if path == mount or path.startswith(mount.rstrip("/") + "/"):
                if best is None or len(mount) > len(best):
                    best = mount
        return self.volumes[best] if best is not None else None


class AppModel:
    """One container image's behaviour. Subclasses set `name`, `images` and override hooks."""

    name = "generic"
    images: tuple[str, ...] = ()
    memory_base = 20 * 2**20

    def matches(self, container: dict[str, Any]) -> bool:
        repo = normalize_image(container.get("image", ""))[0]
        return repo in {normalize_image(i + ":x")[0] for i in self.images}

    def start(self, ctx: StartContext) -> Started | Exited:
        return Started([], set())

    def memory(self, instance: Any, load_rps: float) -> float:
        return float(self.memory_base)

    def exec(self, ctx: StartContext, instance: Any, command: list[str]) -> tuple[int, str, str]:
        return 126, "", f'OCI runtime exec failed: exec failed: unable to start container process: exec: "{command[0]}": executable file not found in $PATH: unknown'

    def on_stop(self, ctx: StartContext, instance: Any) -> None:
        """The process is going away (graceful or not)."""


models: list[AppModel] = []
# Per-step work of models whose state spans pods (a database's membership, a client's rounds):
# each is called as fn(cluster, now, dt) once per fluid step, after the workload's own pass.
fluid_ticks: list[Callable[[ClusterView, float, float], None]] = []


def app_model(cls: type[AppModel]) -> type[AppModel]:
    """Register a model class (instantiated once); later registrations win on overlap."""
    models.insert(0, cls())
    return cls


_by_name: dict[str, AppModel] = {}
_by_name_of: list[int] = [-1]  # how many models `_by_name` was built from


def model_named(name: str) -> AppModel | None:
    """The registered model of that name (the first in `models` order), without a scan per call:
    the workload asks for every running container every step."""
    if _by_name_of[0] != len(models):
        _by_name.clear()
        _by_name.update({m.name: m for m in reversed(models)})
        _by_name_of[0] = len(models)
    return _by_name.get(name)


def find_model(container: dict[str, Any]) -> AppModel | None:
    _load_builtin()
    for m in models:
        if m.matches(container):
            return m
    return None


_loaded = False


def _load_builtin() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        import importlib
        for module in ("generic", "hotel", "infra", "stores", "flagd", "graph", "astronomy", "trainticket", "social", "tidb", "k8stools", "kubesystem", "image_registry",
                       "datastores"):
            # image_registry last: it takes the farm manifests' images that no dedicated model registered
            importlib.import_module(f"kubesim.apps.{module}")


# -- log line formats the real programs print ------------------------------------------------
def zerolog(t: float, level: str, caller: str, msg: str) -> str:
    """The Go services' zerolog console format: `2026-01-05T09:00:00Z INF cmd/geo/main.go:38 > msg`."""
    return f"{datetime.fromtimestamp(t, UTC).strftime('%Y-%m-%dT%H:%M:%SZ')} {level} {caller} > {msg}"


def mongo_log(t: float, severity: str, component: str, id_: int, ctx: str, msg: str,
              attr: dict[str, Any] | None = None) -> str:
    """mongod 4.4 structured log line."""
    stamp = datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int((t % 1) * 1000):03d}+00:00"
    rec: dict[str, Any] = {"t": {"$date": stamp}, "s": severity, "c": component, "id": id_, "ctx": ctx, "msg": msg}
    if attr is not None:
        rec["attr"] = attr
    return json.dumps(rec, separators=(",", ":"))


def env_float(env: dict[str, str], key: str, default: float) -> float:
    try:
        return float(env.get(key, default))
    except (TypeError, ValueError):
        return default


Validator = Callable[[StartContext], str | None]
