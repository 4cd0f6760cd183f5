"""flagd (ghcr.io/open-feature/flagd), the OpenFeature flag daemon astronomy-shop and train-ticket
read their fault flags from. It loads its flag file (`--uri file:…`, JSON or YAML) once at start, so
an edited config map takes effect only when flagd restarts; services that cannot reach it fall back
to their code defaults (off). `flag_value` is how the applications' models evaluate a flag."""

from __future__ import annotations

import json
from typing import Any

import yaml

from kubesim.apps.model import AppModel, Exited, StartContext, Started, app_model, register_image

FLAGD = "ghcr.io/open-feature/flagd"
register_image(FLAGD, tags=("v0.11.1", "v0.12.9"), size=30_000_000, executables=("/flagd-build", "flagd"), shell=False)


def _zap(t: float, level: str, caller: str, msg: str, **fields: Any) -> str:
    return json.dumps({"level": level, "ts": round(t, 3), "caller": caller, "msg": msg, **fields}, separators=(",", ":"))


@app_model
class Flagd(AppModel):
    name = "flagd"
    images = (FLAGD,)
    memory_base = 22 * 2**20

    def start(self, ctx: StartContext) -> Started | Exited:
        argv = ctx.argv
        t = ctx.app_time()
        uri = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("--uri", "-f")), "")
        if not uri:
            return Exited(1, [_zap(t, "fatal", "cmd/start.go:186", "no sync provider configured: use --uri")], after=0.2)
        path = uri.removeprefix("file:")
        if not path.startswith("/"):
            path = "/" + path.lstrip("./")  # relative to the image's working directory, /
        text = ctx.files.get(path)
        if text is None:
            return Exited(1, [_zap(t, "fatal", "cmd/start.go:186",
                                   f"error creating sync for {uri}: open {path}: no such file or directory")], after=0.3)
        try:
            doc = yaml.safe_load(text) if path.endswith((".yaml", ".yml")) else json.loads(text)
            flags = doc.get("flags", {})
        except (ValueError, AttributeError, yaml.YAMLError) as exc:
            return Exited(1, [_zap(t, "fatal", "cmd/start.go:186",
                                   f"unable to parse flag configuration from {uri}: {exc}")], after=0.3)
        values = {}
        for name, flag in flags.items():
            if isinstance(flag, dict) and flag.get("state", "ENABLED") == "ENABLED":
                values[name] = (flag.get("variants") or {}).get(flag.get("defaultVariant", ""))
        port = int(next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("--port", "-p")), "8013"))
        lines = [_zap(t, "info", "flag-sync/sync_service.go:65", f"starting sync service for {uri}"),
                 _zap(t, "info", "store/flags.go:212", "configuration updated", source=path,
                      flags=sorted(values)),
                 _zap(t, "info", "flagd/main.go:116", f"Flag IResolver listening at [::]:{port}")]
        return Started(lines, {port, 8016, 8014}, {"kind": "flagd", "flags": values, "uri": uri}, ready_after=1.0)


def flag_value(cluster: Any, namespace: str, name: str) -> Any:
    """The value a service in `namespace` gets for flag `name`: flagd's loaded default variant, or
    None (the code default) when no flagd runs there."""
    kubelet = cluster.kubelet
    # Every request asks for flags: remember where flagd runs while that container still does
    # (a restart, an eviction or a restore replaces the runtime objects, and the scan runs again).
    cache = kubelet.__dict__.setdefault("_flagd_by_namespace", {})
    hit = cache.get(namespace)
    if hit is not None:
        rt, c = hit
        if kubelet.state["pods"].get((rt.namespace, rt.name)) is rt and c.state == "running" and c.stage == "run":
            return c.instance["flags"].get(name)
    for rt, c in kubelet.running():
        inst = c.instance
        if rt.namespace == namespace and isinstance(inst, dict) and inst.get("kind") == "flagd":
            cache[namespace] = (rt, c)
            return inst["flags"].get(name)
    cache.pop(namespace, None)
    return None
