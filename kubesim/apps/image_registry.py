"""Every image the farm's own application manifests (apps/*/manifests) name is in the
emulated registry with exactly the tags named there, so an unknown tag still fails to pull. Images
without a dedicated model run as a generic server (listening on the ports the container declares)
until their application gets a behaviour model; Locust load generators get a client model."""

from __future__ import annotations

from typing import Any

import yaml

from apps.application import APPS_DIR
from kubesim.apps.model import (
    IMAGES,
    AppModel,
    Exited,
    StartContext,
    Started,
    app_model,
    normalize_image,
    register_image,
)

APPS = APPS_DIR
LOCUST_IMAGES = ("locustio/locust", "ghcr.io/open-telemetry/demo")


def _containers(doc: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if isinstance(doc, dict):
        for key in ("containers", "initContainers"):
            if isinstance(doc.get(key), list):
                out += [c for c in doc[key] if isinstance(c, dict) and c.get("image")]
        for v in doc.values():
            out += _containers(v)
    elif isinstance(doc, list):
        for v in doc:
            out += _containers(v)
    return out


REQUIRED: dict[tuple[str, str], list[str]] = {}
SERVICE_NAMES: set[str] = set()  # Services the farm's manifests define: the only peers a generic model depends on  # (image repository, container name) → *_ADDR variables


def farm_images() -> dict[str, set[str]]:
    images: dict[str, set[str]] = {}
    for path in sorted(APPS.glob("*/manifests/*.yaml")):
        try:
            docs = list(yaml.load_all(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
        except (OSError, yaml.YAMLError):
            continue  # the app's own validation reports a broken manifest
        SERVICE_NAMES.update(d["metadata"]["name"] for d in docs if isinstance(d, dict) and d.get("kind") == "Service"
                             and isinstance(d.get("metadata"), dict) and d["metadata"].get("name"))
        for c in _containers(docs):
            repo, tag, _ = normalize_image(str(c["image"]))
            images.setdefault(repo, set()).add(tag)
            # the demo's services read their peers' addresses from *_ADDR and refuse to start without them
            names = [e.get("name", "") for e in c.get("env") or [] if isinstance(e, dict)]
            REQUIRED[(repo, c.get("name", ""))] = [n for n in names if n.endswith("_ADDR") and not n.startswith("OTEL_")]
    return images


GENERIC: set[str] = set()
for _repo, _tags in farm_images().items():
    if _repo in IMAGES:
        info = IMAGES[_repo]
        if info.tags:
            register_image(_repo, tuple(sorted(set(info.tags) | _tags)), info.size, info.executables, info.shell)
        continue
    register_image(_repo, tuple(sorted(_tags)), size=120_000_000)
    GENERIC.add(_repo)


@app_model
class GenericServer(AppModel):
    """A process that serves on its declared container ports once started (no call graph yet)."""

    name = "generic-server"
    memory_base = 60 * 2**20

    def matches(self, container: dict[str, Any]) -> bool:
        from kubesim.apps.graph import identify
        return normalize_image(container.get("image", ""))[0] in GENERIC and identify(container) is None

    def start(self, ctx: StartContext) -> Started | Exited:
        import re
        repo = normalize_image(ctx.container.get("image", ""))[0]
        for var in REQUIRED.get((repo, ctx.container.get("name", "")), []):
            if not ctx.env.get(var):
                return Exited(2, [], after=0.2, stderr=[f'panic: environment variable "{var}" not set', "",
                                                         "goroutine 1 [running]:", "main.mustMapEnv(...)"])
        deps: list[list[Any]] = []  # [host, port]
        for var, value in ctx.env.items():
            if not var.endswith("_ADDR") or var.startswith("OTEL_"):
                continue
            m = re.match(r"^(?:[a-z]+://)?([A-Za-z0-9.-]+):(\d+)", value)
            if m and "collector" not in m.group(1) and "jaeger" not in m.group(1):
                deps.append([m.group(1), int(m.group(2))])
        for var, value in ctx.env.items():  # envoy-style pairs: FRONTEND_HOST + FRONTEND_PORT
            if var.endswith("_HOST") and not var.startswith(("OTEL_", "LOCUST_")) and value and "collector" not in value:
                port = ctx.env.get(var[:-5] + "_PORT", "")
                if port.isdigit() and re.match(r"^[A-Za-z0-9.-]+$", value):
                    deps.append([value, int(port)])
        deps = [d for d in deps if d[0].split(".")[0] in SERVICE_NAMES]
        argv = ctx.argv
        if argv and argv[0].rsplit("/", 1)[-1] in ("sh", "bash", "ash") and len(argv) >= 3:
            from kubesim.apps.generic import shell_outcome
            outcome = shell_outcome(ctx, argv, IMAGES.get(normalize_image(ctx.container["image"])[0]))
            if isinstance(outcome, Exited) or not ctx.container.get("ports"):
                return outcome
        ports = {int(p["containerPort"]) for p in ctx.container.get("ports") or [] if p.get("containerPort")}
        if not ports and ctx.container.get("name", "").startswith(("init", "copy", "wait")):
            return Exited(0, [], after=1.0)
        from kubesim.quantity import parse_quantity
        limit = ((ctx.container.get("resources") or {}).get("limits") or {}).get("memory")
        mem = min(float(self.memory_base), 0.5 * parse_quantity(limit)) if limit else float(self.memory_base)
        return Started([], ports, {"kind": "generic", "mem": mem, "deps": deps}, ready_after=2.0)

    def memory(self, instance: Any, load_rps: float) -> float:
        return float((instance or {}).get("mem", self.memory_base))


@app_model
class Locust(AppModel):
    """Locust in headless/autostart mode: LOCUST_USERS users against LOCUST_HOST, ~1 request per
    user-second; its results reach Prometheus through the locust_exporter sidecar."""

    name = "locust"
    memory_base = 90 * 2**20

    def matches(self, container: dict[str, Any]) -> bool:
        repo, tag, _ = normalize_image(container.get("image", ""))
        return repo == "docker.io/locustio/locust" or (repo == "ghcr.io/open-telemetry/demo" and tag.endswith("load-generator"))

    def start(self, ctx: StartContext) -> Started | Exited:
        import re
        host = ctx.env.get("LOCUST_HOST", "")
        m = re.match(r"https?://([^/:]+)(?::(\d+))?", host)
        if not m:
            return Exited(1, ["locust: error: No host specified (use -H or LOCUST_HOST)"], after=1.0)
        try:
            users = float(ctx.env.get("LOCUST_USERS", "1") or 1)
        except ValueError:
            users = 1.0
        port = int(ctx.env.get("LOCUST_WEB_PORT", "8089") or 8089)
        lines = [f"[{ctx.pod_name}/INFO/locust.main] Starting web interface at http://0.0.0.0:{port}",
                 f"[{ctx.pod_name}/INFO/locust.main] Starting Locust 2.14.2",
                 f"[{ctx.pod_name}/INFO/locust.runners] Ramping to {int(users)} users at a rate of "
                 f"{ctx.env.get('LOCUST_SPAWN_RATE', '1')} per second"]
        return Started(lines, {port}, {"kind": "locust", "host": m.group(1), "port": int(m.group(2) or 80),
                                       "users": users, "rate": users * 1.0}, ready_after=1.0)
