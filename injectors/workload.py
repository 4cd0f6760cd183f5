"""Shared pieces of faults that change a workload's pod template: where a container lives in
the object, env-list edits, and the restart annotation kubectl's `rollout restart` uses."""

from __future__ import annotations

from typing import Any

from injectors.fault import MISSING, Mutation
from injectors.kube import Obj, container_index

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


class TemplateMutation(Mutation):
    """A Mutation of one field of the pod template spec (dnsPolicy, affinity, volumes, ...)."""

    field: str = ""

    def path(self, obj: Obj) -> list[Any]:
        return [*TEMPLATE, self.field]


def env_list(before: Any) -> list[dict[str, Any]]:
    return [] if before == MISSING or before is None else list(before)


def env_value(env: Any, name: str) -> Any:
    """The effective value of `name` (the last definition wins, as in the kubelet)."""
    found = MISSING
    for item in env_list(env):
        if item.get("name") == name:
            found = item.get("value", item.get("valueFrom"))
    return found


def restart_patch(when: str) -> Obj:
    return {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: when}}}}}
