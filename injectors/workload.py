"""Shared pieces of faults that change a workload's pod template: where a container lives in
the object, env-list edits, and the restart annotation kubectl's `rollout restart` uses."""

from __future__ import annotations

from typing import Any

from clusters.kube import Obj
from injectors.fault import MISSING, Mutation, get_path
from injectors.objects import container_index

TEMPLATE = ["spec", "template", "spec"]
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


class ContainerMutation(Mutation):
    """A Mutation of one container of the workload named by params.service."""

    field: str = ""  # the container field this fault changes (env, image, command, resources, ...)

    def container_path(self, obj: Obj) -> list[Any]:
        spec = obj["spec"]["template"]["spec"]
        name = spec["containers"][container_index(spec, self.p.container)]["name"]
        return [*TEMPLATE, "containers", {"name": name}]

    def path(self, obj: Obj) -> list[Any]:
        return [*self.container_path(obj), self.field]

    def identity(self, obj: Obj, path: list[Any]) -> dict[str, Any]:
        spec = obj["spec"]["template"]["spec"]
        index = container_index(spec, self.p.container)
        return {"container_index": index, "container_image": spec["containers"][index].get("image")}

    def is_active(self, cluster: Any, injection: Any) -> bool:
        """The injected fragment in the faulted container, found by what identifies it (never by
        its place alone): its index at injection, its name, or its program (the image's
        repository, whatever the tag or registry spelling). Renaming, moving or re-tagging the
        container does not take the fault out of the template. An injected image is looked for in
        every container: the image is its own identity."""
        from clusters.kube import Kube

        _, obj = self._current(Kube.of(cluster), injection)
        if obj is None:
            return False
        containers = ((obj.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
        saved = injection.saved
        path = saved["path"]
        selector = path[len(TEMPLATE) + 1] if len(path) > len(TEMPLATE) + 1 else None
        name = selector.get("name") if isinstance(selector, dict) else None
        index = saved.get("container_index")
        image = saved.get("container_image")
        rest = path[len(TEMPLATE) + 2:]
        for i, c in enumerate(containers):
            same = self.field == "image" or i == index or c.get("name") == name or (
                bool(image) and repository(c.get("image") or "") == repository(image))
            if same and self.still_in_place(get_path(c, rest), injection):
                return True
        return False


def repository(image: str) -> str:
    """The program an image reference names: without its tag or digest, and with Docker Hub's
    implied registry and `library/` spelled out or not, the same."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)
    if ":" in last[-1]:
        name = name.rsplit(":", 1)[0]
    for prefix in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        name = name.removeprefix(prefix)
    return name.removeprefix("library/")


class TemplateMutation(Mutation):
    """A Mutation of one field of the pod template spec (dnsPolicy, affinity, volumes, ...)."""

    field: str = ""

    def path(self, obj: Obj) -> list[Any]:
        return [*TEMPLATE, self.field]


def env_list(before: Any) -> list[dict[str, Any]]:
    return [] if before == MISSING or before is None else list(before)


def env_value(env: Any, name: str) -> Any:
    """The effective value of `name` (the last definition wins, as in the kubelet)."""
    found: Any = MISSING
    for item in env_list(env):
        if item.get("name") == name:
            found = item.get("value", item.get("valueFrom"))
    return found


def restart_patch(when: str) -> Obj:
    return {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: when}}}}}
