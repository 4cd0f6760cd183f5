"""Provider "kind": a local multi-node cluster per worker, through the `kind` CLI.

`open(name)` reuses a cluster of that name (`kind get clusters`) or creates one from a written
config (one control plane + N workers), fetches its kubeconfig, preloads images and installs the
stack. Clusters are deleted only on explicit request (`farm cluster delete kind:NAME`).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from clusters.handle import ClusterProvider, providers
from clusters.real import KubeconfigClusterHandle
from clusters.stack.tools import require_tool, run_tool
from core.errors import ClusterUnavailable, ConfigurationError

NODE_IMAGE = "kindest/node:v1.30.0"  # the node image kind v0.23.0 ships with
NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def kind_config(name: str, workers: int) -> dict[str, Any]:
    return {
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "name": name,
        "nodes": [{"role": "control-plane"}] + [{"role": "worker"} for _ in range(workers)],
    }


def images_of(apps: list[str]) -> list[str]:
    """Every container image the named applications' manifests use, in a stable order, for
    preloading into the nodes (so no trial waits on, or fails at, an image pull)."""
    from apps import load_application

    images: dict[str, None] = {}
    for name in apps:
        for path in load_application(name).manifest_files():
            for doc in yaml.safe_load_all(path.read_text()):
                spec = ((doc or {}).get("spec") or {}).get("template", {}).get("spec") or {}
                for container in spec.get("initContainers", []) + spec.get("containers", []):
                    images.setdefault(container["image"], None)
    return list(images)


def _state_dir(name: str) -> Path:
    root = Path(os.environ.get("FARM_STATE_DIR") or Path(tempfile.gettempdir()) / "sre-farm")
    path = root / "kind" / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def _env_options() -> dict[str, Any]:
    """Defaults a worker started as `farm worker --cluster kind:NAME` takes from its environment:
    FARM_KIND_WORKERS, FARM_KIND_NODE_IMAGE, FARM_KIND_PRELOAD (comma-separated images),
    FARM_STACK=0 to skip installing the stack, FARM_KIND_INTERNAL=1 for a worker in a container on
    the `kind` Docker network (the kubeconfig then names the control plane's container, not
    127.0.0.1)."""
    options: dict[str, Any] = {}
    if workers := os.environ.get("FARM_KIND_WORKERS"):
        try:
            options["workers"] = int(workers)
        except ValueError:
            raise ConfigurationError(f"FARM_KIND_WORKERS must be an integer, not '{workers}'") from None
    if image := os.environ.get("FARM_KIND_NODE_IMAGE"):
        options["node_image"] = image
    if preload := os.environ.get("FARM_KIND_PRELOAD"):
        options["preload_images"] = [i.strip() for i in preload.split(",") if i.strip()]
    if os.environ.get("FARM_STACK", "1").strip().lower() in ("0", "false", "no", "off"):
        options["install_stack"] = False
    if os.environ.get("FARM_KIND_INTERNAL", "0").strip().lower() in ("1", "true", "yes", "on"):
        options["internal"] = True
    return options


@providers.register("kind")
class KindProvider(ClusterProvider):
    def __init__(self, kind: str = "kind", helm: str = "helm", docker: str = "docker", retries: int = 3,
                 backoff: float = 2.0) -> None:
        self.kind, self.helm, self.docker = kind, helm, docker
        self.retries, self.backoff = retries, backoff

    def open(self, name: str, **options: Any) -> KubeconfigClusterHandle:  # type: ignore[override]
        """Arguments win over the environment's defaults (see `_env_options`)."""
        return self._open(name, **{**_env_options(), **options})

    def _run(self, *args: str, what: str) -> str:
        return run_tool([self.kind, *args], what=what, retries=self.retries, backoff=self.backoff).stdout

    def clusters(self) -> list[str]:
        out = self._run("get", "clusters", what="listing kind clusters")
        return [line.strip() for line in out.splitlines() if line.strip()]

    def _open(
        self,
        name: str,
        *,
        workers: int = 2,
        node_image: str = NODE_IMAGE,
        create: bool = True,
        preload_images: list[str] | None = None,
        install_stack: bool = True,
        stack_options: dict[str, Any] | None = None,
        internal: bool = False,
        workdir: Path | None = None,
        **handle_options: Any,
    ) -> KubeconfigClusterHandle:
        if not NAME.match(name):
            raise ConfigurationError(f"kind cluster name '{name}' must be lowercase letters, digits and '-'")
        if workers < 0:
            raise ConfigurationError(f"kind:{name}: workers must be 0 or more, not {workers}")
        workdir = Path(workdir) if workdir else _state_dir(name)
        workdir.mkdir(parents=True, exist_ok=True)
        if name not in self.clusters():
            if not create:
                raise ClusterUnavailable(f"kind cluster '{name}' does not exist (create it with "
                                         f"`farm cluster create kind:{name}`)")
            self.create(name, workers=workers, node_image=node_image, workdir=workdir)
        kubeconfig = workdir / "kubeconfig"
        args = ["get", "kubeconfig", "--name", name] + (["--internal"] if internal else [])
        text = self._run(*args, what=f"reading the kubeconfig of kind:{name}")
        fd = os.open(kubeconfig, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(text)
        if preload_images:
            self.preload(name, preload_images)
        try:
            handle = KubeconfigClusterHandle("kind", name, kubeconfig, workdir=workdir, **handle_options)
        except ClusterUnavailable as exc:
            if "cannot reach" not in str(exc) and "Unreachable" not in str(exc):
                raise
            raise ClusterUnavailable(
                f"{exc}; kind:{name} exists but its API server does not answer: its node containers may be "
                f"stopped (`docker start {name}-control-plane`, and its workers), or delete and recreate it"
            ) from exc
        if install_stack:
            from clusters.stack import install_stack as install

            try:
                install(handle, helm=self.helm, retry_backoff=self.backoff, **(stack_options or {}))
            except Exception:
                handle.close()
                raise
            handle.mark_baseline()
        return handle

    def create(self, name: str, *, workers: int = 2, node_image: str = NODE_IMAGE,
               workdir: Path | None = None) -> Path:
        """Create the cluster; returns the config file it was created from."""
        workdir = Path(workdir) if workdir else _state_dir(name)
        config = workdir / "kind-config.yaml"
        config.write_text(yaml.safe_dump(kind_config(name, workers), sort_keys=False))
        self._run("create", "cluster", "--name", name, "--config", str(config), "--image", node_image,
                  "--wait", "5m", what=f"creating kind cluster '{name}'")
        return config

    def preload(self, name: str, images: list[str]) -> None:
        """Load images into every node (no pulls during trials). `kind load` reads only the local
        Docker daemon, so images it lacks are pulled first, one by one: a failure names its image."""
        for image in images:
            if not self._local_image(image):
                run_tool([self.docker, "pull", image], what=f"pulling image {image} for kind:{name}",
                         retries=self.retries, backoff=self.backoff)
        self._run("load", "docker-image", *images, "--name", name,
                  what=f"loading {len(images)} image(s) into kind:{name}")

    def _local_image(self, image: str) -> bool:
        """Whether the local Docker daemon holds `image`; a daemon that cannot answer is an error,
        not a missing image (pulling would fail the same way, with a less clear message)."""
        docker = require_tool(self.docker)
        try:
            done = subprocess.run([docker, "image", "inspect", "--format", "{{.Id}}", image],
                                  capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired as exc:
            raise ClusterUnavailable(f"asking the local Docker daemon for image {image} timed out") from exc
        if done.returncode == 0:
            return True
        stderr = done.stderr.strip() or f"exit status {done.returncode}"
        if "no such image" in stderr.lower():
            return False
        raise ClusterUnavailable(f"asking the local Docker daemon for image {image} failed: {stderr[-1000:]}")

    def delete(self, name: str) -> None:
        self._run("delete", "cluster", "--name", name, what=f"deleting kind cluster '{name}'")
