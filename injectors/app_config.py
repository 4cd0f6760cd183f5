"""Application and configuration faults: env vars, config maps, services, images, commands,
probes, init containers and sidecars."""

from __future__ import annotations

import copy
import json
from typing import Any, ClassVar

from pydantic import Field

from clusters.handle import ClusterHandle
from clusters.kube import Kube, Obj
from core.errors import InjectionError
from injectors.fault import (
    MISSING,
    ConfigMapKeyMutation,
    Mutation,
    NamedObjectMutation,
    Params,
    Removal,
    WorkloadParams,
    appended,
    contains,
    get_path,
    has_run,
    require,
)
from injectors.injector import Injection, faults
from injectors.objects import Ref
from injectors.workload import TEMPLATE, ContainerMutation, env_list, env_value

# -- environment variables ------------------------------------------------------------------


class EnvParams(WorkloadParams):
    var: str


class EnvValueParams(EnvParams):
    value: str


@faults.register("env-var-missing")
class EnvVarMissing(ContainerMutation):
    """Removes an env var the service needs to start or to reach a dependency."""

    Params = EnvParams
    field = "env"

    def mutate(self, before: Any, obj: Obj) -> Any:
        env = env_list(before)
        require(any(e.get("name") == self.p.var for e in env), f"env var {self.p.var} is not set")
        return [e for e in env if e.get("name") != self.p.var]

    def still_in_place(self, current: Any, injection: Any) -> bool:
        return env_value(current, self.p.var) is MISSING or env_value(current, self.p.var) == MISSING


@faults.register("env-var-wrong")
class EnvVarWrong(ContainerMutation):
    """Sets an env var to a wrong value (adds it when the image's default was in use)."""

    Params = EnvValueParams
    field = "env"

    def mutate(self, before: Any, obj: Obj) -> Any:
        env = copy.deepcopy(env_list(before))
        for item in env:
            if item.get("name") == self.p.var:
                item.pop("valueFrom", None)
                item["value"] = self.p.value
                return env
        return [*env, {"name": self.p.var, "value": self.p.value}]

    def still_in_place(self, current: Any, injection: Any) -> bool:
        return env_value(current, self.p.var) == self.p.value


@faults.register("env-var-shadowed")
class EnvVarShadowed(ContainerMutation):
    """Appends a second definition of an env var; the later one wins, so the right value the
    manifest shows first is silently shadowed."""

    Params = EnvValueParams
    field = "env"

    def mutate(self, before: Any, obj: Obj) -> Any:
        env = env_list(before)
        require(any(e.get("name") == self.p.var for e in env), f"env var {self.p.var} is not set")
        return [*env, {"name": self.p.var, "value": self.p.value}]

    def still_in_place(self, current: Any, injection: Any) -> bool:
        return env_value(current, self.p.var) == self.p.value


# -- config maps ----------------------------------------------------------------------------


class ConfigMapParams(Params):
    configmap: str


class ConfigMapDriftParams(ConfigMapParams):
    key: str
    # Either a whole new value, or a textual replacement inside the current one, or a JSON
    # pointer-like path into a JSON document stored under the key.
    value: str | None = None
    replace: dict[str, str] | None = None
    json_path: list[str | int] | None = None
    json_value: Any = None


@faults.register("configmap-missing")
class ConfigMapMissing(Removal):
    """Deletes a config map a workload mounts or reads."""

    Params = ConfigMapParams

    def removed(self, kube: Kube, namespace: str) -> Ref:
        return Ref("ConfigMap", namespace, self.p.configmap)


@faults.register("configmap-drift")
class ConfigMapDrift(ConfigMapKeyMutation):
    """Changes one key of a config map (a port, an address, a password in an init script)."""

    Params = ConfigMapDriftParams

    def rewrite(self, text: str) -> str:
        if self.p.value is not None:
            return self.p.value
        if self.p.replace:
            out = text
            for old, new in self.p.replace.items():
                require(old in out, f"'{old}' not found in {self.p.configmap}/{self.p.key}")
                out = out.replace(old, new)
            return out
        if self.p.json_path:
            doc = json.loads(text)
            node = doc
            for key in self.p.json_path[:-1]:
                node = node[key]
            node[self.p.json_path[-1]] = self.p.json_value
            return json.dumps(doc, indent=2)
        raise InjectionError("configmap-drift needs value, replace or json_path")

    def still_in_place(self, current: Any, injection: Any) -> bool:
        """The drifted setting is still in the text, however the rest was edited or reformatted:
        a replaced-in string more often than before, the JSON value at its path, the whole value
        up to white space."""
        if not isinstance(current, str):
            return False
        before = injection.saved["before"] if isinstance(injection.saved["before"], str) else ""
        if self.p.replace:
            return any(current.count(new) > before.count(new) for new in self.p.replace.values())
        if self.p.json_path:
            try:
                node: Any = json.loads(current)
                for key in self.p.json_path:
                    node = node[key]
            except (ValueError, KeyError, IndexError, TypeError):
                return False
            return bool(node == self.p.json_value)
        return " ".join(current.split()) == " ".join(str(self.p.value).split())


# -- services -------------------------------------------------------------------------------


class ServiceParams(Params):
    service: str


class ServicePortParams(ServiceParams):
    port_index: int = Field(0, ge=0)
    port: int = Field(ge=1, le=65535)


class ServiceSelectorParams(ServiceParams):
    key: str
    value: str


class ServiceMutation(NamedObjectMutation):
    object_kind = "Service"
    name_param = "service"


@faults.register("service-missing")
class ServiceMissing(Removal):
    """Deletes a Service: its name no longer resolves for the callers."""

    Params = ServiceParams

    def removed(self, kube: Kube, namespace: str) -> Ref:
        return Ref("Service", namespace, self.p.service)


class ServicePortMutation(ServiceMutation):
    """One field of one Service port, planted at `port_index` and from then on found by what
    identifies a port (its number and its name), never by its place in the list: a port
    inserted before it, or the list reordered, neither moves nor hides the fault."""

    Params = ServicePortParams
    field: ClassVar[str] = ""

    def path(self, obj: Obj) -> list[Any]:
        return ["spec", "ports", self.p.port_index, self.field]

    def mutate(self, before: Any, obj: Obj) -> Any:
        return self.p.port

    def identity(self, obj: Obj, path: list[Any]) -> dict[str, Any]:
        """The other ports as they were, so that one which had the injected value all along (a
        second port of the Service) is not taken for the fault."""
        ports = obj["spec"]["ports"]
        return {"other_ports": [_port_key(p) | {self.field: p.get(self.field)}
                                for i, p in enumerate(ports) if i != self.p.port_index]}

    def _planted(self, ports: list[Obj], injection: Injection) -> list[Obj]:
        """The ports that carry the injected value and did not carry it before the injection."""
        had = [{k: v for k, v in o.items() if k != self.field} for o in injection.saved.get("other_ports", [])
               if str(o.get(self.field)) == str(self.p.port)]
        return [p for p in ports if str(p.get(self.field)) == str(self.p.port) and _port_key(p) not in had]

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        _, obj = self._current(Kube.of(cluster), injection)
        if obj is None:
            return False
        return bool(self._planted((obj.get("spec") or {}).get("ports") or [], injection))

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        kube = Kube.of(cluster)
        ref, obj = self._current(kube, injection)
        if obj is None:
            return
        planted = self._planted((obj.get("spec") or {}).get("ports") or [], injection)
        if not planted:
            return
        for port in planted:
            if injection.saved["before"] == MISSING:
                port.pop(self.field, None)
            else:
                port[self.field] = injection.saved["before"]
        self._write(kube, ref, obj)


def _port_key(port: Obj) -> dict[str, Any]:
    return {"name": port.get("name") or "", "port": port.get("port"), "protocol": port.get("protocol") or "TCP"}


@faults.register("service-wrong-port")
class ServiceWrongPort(ServicePortMutation):
    """The Service's port no longer matches what clients dial. In place while a port carries the
    wrong number, or none carries the number the clients dial."""

    field = "port"

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        if super().is_active(cluster, injection):
            return True
        _, obj = self._current(Kube.of(cluster), injection)
        ports = ((obj or {}).get("spec") or {}).get("ports") or []
        return obj is not None and not any(p.get("port") == injection.saved["before"] for p in ports)


@faults.register("service-wrong-target-port")
class ServiceWrongTargetPort(ServicePortMutation):
    """The Service forwards to a port the pods do not listen on."""

    field = "targetPort"


@faults.register("service-wrong-selector")
class ServiceWrongSelector(ServiceMutation):
    """The Service selects no pods (a typo in a selector value), so it has no endpoints."""

    Params = ServiceSelectorParams

    def path(self, obj: Obj) -> list[Any]:
        return ["spec", "selector"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        sel = dict(before) if before != MISSING else {}
        sel[self.p.key] = self.p.value
        return sel


# -- images and commands ----------------------------------------------------------------------


class ImageTagParams(WorkloadParams):
    tag: str


class ImageParams(WorkloadParams):
    image: str


class CommandParams(WorkloadParams):
    command: list[str] = Field(min_length=1)


@faults.register("image-wrong-tag")
class ImageWrongTag(ContainerMutation):
    """Points the container at an image tag that does not exist in the registry."""

    Params = ImageTagParams
    field = "image"

    def mutate(self, before: Any, obj: Obj) -> Any:
        repo = before.split("@")[0]
        if ":" in repo.rsplit("/", 1)[-1]:
            repo = repo.rsplit(":", 1)[0]
        return f"{repo}:{self.p.tag}"


@faults.register("image-buggy-version")
class ImageBuggyVersion(ContainerMutation):
    """Rolls the container onto a known-buggy image version (it runs, but misbehaves)."""

    Params = ImageParams
    field = "image"

    def mutate(self, before: Any, obj: Obj) -> Any:
        return self.p.image


@faults.register("command-wrong-binary")
class CommandWrongBinary(ContainerMutation):
    """Starts the wrong binary of a multi-binary image (e.g. geo's pod runs `profile`). Changes
    the container's command, or its args when the manifest names the binary there."""

    Params = CommandParams

    def path(self, obj: Obj) -> list[Any]:
        container = get_path(obj, self.container_path(obj))
        uses_args = "command" not in container and bool(container.get("args"))
        return [*self.container_path(obj), "args" if uses_args else "command"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        return list(self.p.command)

    def still_in_place(self, current: Any, injection: Any) -> bool:
        """The wrong binary still starts: the injected words begin the list, whatever follows."""
        run = list(injection.saved["after"])
        return isinstance(current, list) and current[:len(run)] == run


class ArgsParams(WorkloadParams):
    args: list[str]
    append: bool = True  # add to the current args rather than replace them


@faults.register("container-args-changed")
class ContainerArgsChanged(ContainerMutation):
    """Adds (or replaces) container arguments, e.g. a database flag that changes its behaviour."""

    Params = ArgsParams
    field = "args"

    def mutate(self, before: Any, obj: Obj) -> Any:
        current = [] if before == MISSING else list(before)
        return [*current, *self.p.args] if self.p.append else list(self.p.args)

    def still_in_place(self, current: Any, injection: Any) -> bool:
        """The injected arguments, in their order, anywhere among the current ones."""
        return has_run(current, appended(injection))


# -- probes -----------------------------------------------------------------------------------


class ProbeParams(WorkloadParams):
    probe: str = Field("livenessProbe", pattern="^(livenessProbe|readinessProbe|startupProbe)$")
    port: int | None = Field(None, ge=1, le=65535)  # default: the container's first port
    path: str | None = None  # HTTP GET path; TCP probe when absent
    initial_delay_seconds: int = Field(0, ge=0)
    period_seconds: int = Field(10, ge=1)
    timeout_seconds: int = Field(1, ge=1)
    failure_threshold: int = Field(3, ge=1)
    # As SREGym's readiness fault (`kubectl delete deployment` then `apply`): the workload's old
    # ReplicaSets go with their pods, so no old pod keeps serving behind the stuck rollout.
    recreate: bool = False


@faults.register("probe-misconfigured")
class ProbeMisconfigured(ContainerMutation):
    """A probe against the wrong port or path: the kubelet restarts (liveness) or withholds
    traffic from (readiness) a healthy container."""

    Params = ProbeParams

    def path(self, obj: Obj) -> list[Any]:
        return [*self.container_path(obj), self.p.probe]

    def _port(self, obj: Obj) -> int:
        if self.p.port:
            return self.p.port
        spec = obj["spec"]["template"]["spec"]
        from injectors.objects import container_index

        ports = spec["containers"][container_index(spec, self.p.container)].get("ports", [])
        require(bool(ports), "the container declares no port; give the probe a port")
        return ports[0]["containerPort"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        port = self._port(obj)
        action = {"httpGet": {"path": self.p.path, "port": port}} if self.p.path else {"tcpSocket": {"port": port}}
        return {
            **action,
            "initialDelaySeconds": self.p.initial_delay_seconds,
            "periodSeconds": self.p.period_seconds,
            "timeoutSeconds": self.p.timeout_seconds,
            "failureThreshold": self.p.failure_threshold,
        }

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        from injectors.app_resources import drop_replica_sets

        injection = super().inject(cluster, namespace)
        if self.p.recreate:
            drop_replica_sets(Kube.of(cluster), injection)
        return injection

    def still_in_place(self, current: Any, injection: Any) -> bool:
        """The probe still checks the wrong port or path, whatever its timings are now."""
        after = injection.saved["after"]
        action = {k: after[k] for k in ("httpGet", "tcpSocket") if k in after}
        return isinstance(current, dict) and contains(current, action)


# -- init containers and sidecars ------------------------------------------------------------


class InitHangParams(WorkloadParams):
    wait_for: str  # a host the init container waits for, which never answers
    port: int = Field(27017, ge=1, le=65535)
    image: str = "busybox:1.36"
    container_name: str = "wait-for-deps"


@faults.register("init-container-hang")
class InitContainerHang(Mutation):
    """Adds an init container that waits forever for a host:port that never answers."""

    Params = InitHangParams

    def path(self, obj: Obj) -> list[Any]:
        return [*TEMPLATE, "initContainers"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        current = [] if before == MISSING else list(before)
        target = f"{self.p.wait_for} {self.p.port}"
        script = f"until nc -z {target}; do echo waiting for {self.p.wait_for}:{self.p.port}; sleep 2; done"
        return [
            *current,
            {"name": self.p.container_name, "image": self.p.image, "command": ["sh", "-c", script]},
        ]

    def still_in_place(self, current: Any, injection: Any) -> bool:
        """An init container still waits for the host that never answers: by its name, or by what
        it runs, whatever it is called now."""
        target = (f"{self.p.wait_for} {self.p.port}", f"{self.p.wait_for}:{self.p.port}")
        for c in current if isinstance(current, list) else []:
            words = " ".join(str(w) for w in [*(c.get("command") or []), *(c.get("args") or [])])
            if c.get("name") == self.p.container_name or any(t in words for t in target):
                return True
        return False


class SidecarParams(WorkloadParams):
    port: int | None = Field(None, ge=1, le=65535)  # default: the app container's first port
    sidecar_name: str = "metrics-exporter"
    image: str = "prom/statsd-exporter:v0.26.0"


@faults.register("sidecar-port-conflict")
class SidecarPortConflict(Mutation):
    """Adds a sidecar that binds the application's own port first, so the app fails to bind."""

    Params = SidecarParams

    def path(self, obj: Obj) -> list[Any]:
        return [*TEMPLATE, "containers"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        port = self.p.port
        if port is None:
            ports = before[0].get("ports", [])
            require(bool(ports), "the app container declares no port; give the sidecar a port")
            port = ports[0]["containerPort"]
        sidecar = {
            "name": self.p.sidecar_name,
            "image": self.p.image,
            "args": [f"--web.listen-address=:{port}"],
            "ports": [{"containerPort": port, "name": "metrics"}],
        }
        return [*before, sidecar]

    def still_in_place(self, current: Any, injection: Any) -> bool:
        """The sidecar is still in the pod: by its name, or by what it runs (its image's
        repository, or the listen address that takes the application's port)."""
        from injectors.workload import repository

        sidecar = injection.saved["after"][-1]
        for c in current if isinstance(current, list) else []:
            if c.get("name") == sidecar["name"] or repository(c.get("image") or "") == repository(sidecar["image"]) \
                    or has_run(c.get("args") or [], sidecar["args"]):
                return True
        return False
