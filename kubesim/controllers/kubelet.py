"""The kubelet of every node: volumes, image pulls (unknown tags fail with containerd's errors and
back off), env resolution (CreateContainerConfigError), container start checked against the
application model, probes, OOM kills against memory limits, restarts with CrashLoopBackOff's
10 s → 5 min back-off, container statuses and the Events kubectl describe shows.

Runtime state (one record per pod and container) lives in `state`, out of the store, so a
checkpoint copies it; the pod's `status` is rendered from it after every pass."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kubesim.apps.generic import BASE_MEMORY
from kubesim.apps.model import StartContext, find_model, image_lookup, normalize_image
from kubesim.clock import parse_time
from kubesim.controllers.common import set_condition
from kubesim.lifecycle import PULL_FAILURES, PullFailure
from kubesim.quantity import parse_quantity
from kubesim.runtime import KUBELET, Ctr, Exited, PodRt, Started
from kubesim.store import Obj, StoreError
from kubesim.view import ContainerLogsView, ControlPlane, NodeFleetView

if TYPE_CHECKING:
    from kubesim.controllers.volumes import VolumeBinder

BACKOFF_START, BACKOFF_MAX = 10.0, 300.0
BACKOFF_RESET = 600.0  # a container that ran this long starts its back-off afresh
STOP_SECONDS = 1.0  # from SIGTERM to exit for a process that handles it (drains, flushes, closes)
PAUSE_IMAGES = ("gcr.io/google-containers/pause", "registry.k8s.io/pause", "k8s.gcr.io/pause")


class _MissingEnvSource(Exception):
    """A ConfigMap, Secret or key a container's environment needs is missing (and not optional)."""


def _decoded(value: str) -> str:
    return base64.b64decode(value).decode(errors="replace")


# A container's environment from ConfigMaps and Secrets: (envFrom reference, valueFrom reference,
# resource, its name in "not found" errors, its kind in missing-key errors, how a data value reads)
_ENV_SOURCES: tuple[tuple[str, str, str, str, str, Callable[[str], str]], ...] = (
    ("configMapRef", "configMapKeyRef", "configmaps", "configmap", "ConfigMap", str),
    ("secretRef", "secretKeyRef", "secrets", "secret", "Secret", _decoded),
)


class Kubelet:
    # Set by kubesim.controllers.build_controllers, which rebuilds the binder on a restore.
    volumes: VolumeBinder

    def __init__(self, cp: ControlPlane, nodes: NodeFleetView, logs: ContainerLogsView,
                 forget_pod: Callable[[str, str], None], start_context: Callable[..., StartContext]) -> None:
        """`forget_pod(namespace, name)`: the workload's records of a pod it removed;
        `start_context(pod, container, env, files, volumes, now)`: what a container it starts sees
        of the cluster (the application models are programs in it, not controllers)."""
        self.store, self.clock, self.events, self.wake_at, self.touch = \
            cp.store, cp.clock, cp.events, cp.wake_at, cp.touch
        self.nodes, self.logs, self.forget_pod, self.start_context = nodes, logs, forget_pod, start_context
        self.state: dict[str, Any] = {"pods": {}, "images": {}, "volumes": {}, "seq": 0}
        self._limits: dict[Any, float] = {}

    # -- public helpers ---------------------------------------------------------------------
    def runtime(self, pod: Obj) -> PodRt | None:
        return self.state["pods"].get((pod["metadata"]["namespace"], pod["metadata"]["name"]))

    def listening(self, pod: Obj) -> set[int]:
        rt = self.runtime(pod)
        if rt is None or rt.uid != pod["metadata"].get("uid"):
            return set()
        out: set[int] = set()
        for c in rt.containers.values():
            if c.state == "running" and c.stage == "run":
                out |= c.ports
        return out

    def running(self) -> list[tuple[PodRt, Ctr]]:
        return [(rt, c) for rt in self.state["pods"].values() for c in rt.containers.values()
                if c.state == "running" and c.stage == "run"]

    def volume_data(self, key: str) -> dict[str, Any]:
        return self.state["volumes"].setdefault(key, {})

    def shift_time(self, shift: float) -> None:
        for rt in self.state["pods"].values():
            rt.start += shift
            rt.mount_next += shift
            for c in rt.containers.values():
                c.next_at += shift
                c.started_at = c.started_at + shift if c.started_at is not None else None
                c.ready_at = c.ready_at + shift if c.ready_at is not None else None
                c.probe_next = {k: v + shift for k, v in c.probe_next.items()}

    def terminate(self, namespace: str, pod: str, container: str, code: int, reason: str = "",
                  lines: list[str] | None = None, stderr: list[str] | None = None) -> None:
        """The process in `container` exits now (a crash seen by the workload, OOM, chaos kill)."""
        rt = self.state["pods"].get((namespace, pod))
        if rt is None or container not in rt.containers:
            return
        c = rt.containers[container]
        if c.state != "running":
            return
        obj = self.store.try_get("pods", namespace, pod)
        if obj is None:
            return
        if lines:
            self.logs.write(obj, container, lines)
        if stderr:
            self.logs.write(obj, container, stderr, stream="stderr")
        self._exit(obj, rt, c, Exited(code, [], reason=reason or ("Completed" if code == 0 else "Error")),
                   self.clock.now())
        self.touch()

    def exec(self, namespace: str, pod: str, container: str | None, command: list[str],
             stdin: str = "") -> tuple[int, str, str]:
        """`kubectl exec`: `command` in the container's userland (kubesim/userland)."""
        obj = self.store.get("pods", namespace, pod)
        rt = self.runtime(obj)
        names = [c["name"] for c in obj["spec"].get("containers", [])]
        container = container or names[0]
        if rt is None or container not in rt.containers or rt.containers[container].state != "running":
            raise StoreError(400, "BadRequest", f"container {container} is not running in pod {pod}" if rt else
                             f"pod {pod} does not have a host assigned")
        c = rt.containers[container]
        spec = next(s for s in obj["spec"]["containers"] + (obj["spec"].get("ephemeralContainers") or [])
                    if s["name"] == container)
        model = self._model_by_name(c.model)
        ctx = self._context(obj, rt, spec, self.clock.now())
        from kubesim.userland import run_exec
        result = run_exec(ctx, rt, c, model, command, stdin)
        self.touch()
        return result

    def attach(self, namespace: str, pod: str, container: str | None, stdin: str | None) -> tuple[int, str, str] | None:
        """`kubectl attach`: what an interactive shell (stdin: true) does with `stdin` before it
        exits at its end: (code, stdout, stderr), also written to its log. None when the
        container's process does not read stdin (the client then follows its output)."""
        obj = self.store.get("pods", namespace, pod)
        spec, c, rt = self._attach_target(obj, container)
        inst = c.instance
        if stdin is None or not isinstance(inst, dict) or inst.get("kind") != "interactive":
            return None
        from kubesim.userland import run_exec
        ctx = self._context(obj, rt, spec, self.clock.now())
        argv = list(inst.get("argv") or []) or ["sh"]
        code, out, err = run_exec(ctx, rt, c, None, argv, stdin)
        if out:
            self.logs.write(obj, c.name, out.splitlines())
        if err:
            self.logs.write(obj, c.name, err.splitlines(), stream="stderr")
        self.terminate(namespace, pod, c.name, code)
        self.touch()
        return code, out, err

    def _attach_target(self, obj: Obj, container: str | None) -> tuple[dict[str, Any], Ctr, PodRt]:
        rt = self.runtime(obj)
        specs = obj["spec"].get("containers", []) + (obj["spec"].get("ephemeralContainers") or [])
        name = container or specs[0]["name"]
        spec = next((s for s in specs if s["name"] == name), None)
        if spec is None:
            raise StoreError(400, "BadRequest", f"container {name} is not valid for pod {obj['metadata']['name']}")
        if rt is None or name not in rt.containers or rt.containers[name].state != "running":
            raise StoreError(400, "BadRequest", f"container {name} is not running in pod {obj['metadata']['name']}")
        return spec, rt.containers[name], rt

    # -- the sync loop -------------------------------------------------------------------------
    def reconcile(self, now: float) -> None:
        store = self.store
        with store.lock:
            bound = [(p["metadata"]["namespace"], p["metadata"]["name"], p["metadata"].get("uid"))
                     for p in store.iter_raw("pods") if (p.get("spec") or {}).get("nodeName")]
        live = set()
        nodes = self.nodes
        for ns, name, uid in bound:
            live.add((ns, name))
            rt0 = self.state["pods"].get((ns, name))
            node = rt0.node if rt0 is not None else (self.store.raw("pods", ns, name) or {}).get("spec", {}).get("nodeName")
            if nodes.kubelet_stopped(node):
                if nodes.powered_off(node) and rt0 is not None:
                    for c in rt0.containers.values():
                        c.ports = set()
                continue  # nobody syncs this node's pods
            raw = self.store.raw("pods", ns, name)
            # Read only: _render builds a new status (conditions copied) and writes it through the
            # store, and nothing else here edits the pod; a copy per pod per pass cost ~15 %.
            pod = raw
            if pod is None:
                continue
            rt = self.state["pods"].get((ns, name))
            if rt is not None and rt.uid != uid:
                self._forget(rt)
                rt = None
            if rt is None:
                rt = self._admit(pod, now)
                if rt is None:
                    continue
            self._sync(pod, rt, now)
        for key in [k for k in self.state["pods"] if k not in live]:
            self._forget(self.state["pods"][key])

    def _forget(self, rt: PodRt) -> None:
        for c in rt.containers.values():
            if c.state == "running" and c.instance is not None:
                model = self._model_by_name(c.model)
                if model is not None:
                    try:
                        model.on_stop(None, c.instance)  # type: ignore[arg-type]
                    except Exception:
                        pass
        self.forget_pod(rt.namespace, rt.name)
        self.state["pods"].pop((rt.namespace, rt.name), None)
        # the sandbox's /dev/shm and the pod's emptyDirs go with the pod
        for key in [k for k in self.state["volumes"] if k == f"shm/{rt.uid}" or k.startswith(f"pod/{rt.uid}/")]:
            del self.state["volumes"][key]
        self.logs.drop_pod(rt.namespace, rt.name)

    def _model_by_name(self, name: str) -> Any:
        from kubesim.apps.model import model_named
        return model_named(name)

    def _admit(self, pod: Obj, now: float) -> PodRt | None:
        spec = pod["spec"]
        node = spec["nodeName"]
        node_state = self.nodes.get(node)
        if node_state is None:
            return None
        ip = node_state.ip if spec.get("hostNetwork") else self.nodes.allocate_pod_ip(node)
        rt = PodRt(pod["metadata"]["namespace"], pod["metadata"]["name"], pod["metadata"]["uid"], node, ip, now)
        for c in spec.get("initContainers") or []:
            rt.containers[c["name"]] = Ctr(c["name"], True, c.get("image", ""), reason="PodInitializing", next_at=now,
                                           sidecar=c.get("restartPolicy") == "Always")
            rt.init_order.append(c["name"])
        for c in spec.get("containers") or []:
            waiting = "PodInitializing" if rt.init_order else "ContainerCreating"
            rt.containers[c["name"]] = Ctr(c["name"], False, c.get("image", ""), reason=waiting, next_at=now)
        self.state["pods"][(rt.namespace, rt.name)] = rt
        return rt

    def evict(self, pod: Obj, message: str) -> None:
        """Kubelet eviction: stop every container, phase Failed, reason Evicted (the pod object stays)."""
        rt = self.runtime(pod)
        if rt is None or rt.evicted:
            return
        now = self.clock.now()
        for c in rt.containers.values():
            if c.state == "running":
                self._event(pod, "Normal", "Killing", f"Stopping container {c.name}", c.name)
                self._exit(pod, rt, c, Exited(137, [], reason="Error"), now)
            c.stage = "done"
        rt.evicted = message
        self._event(pod, "Warning", "Evicted", message)
        self.touch()

    def _sync(self, pod: Obj, rt: PodRt, now: float) -> None:
        if rt.evicted:
            if (pod.get("status") or {}).get("reason") != "Evicted":
                msg = rt.evicted

                def put(o: Obj) -> None:
                    st = o.setdefault("status", {})
                    st.update(phase="Failed", reason="Evicted", message=msg)
                    for cs in st.get("containerStatuses") or []:
                        cs["ready"] = False
                        cs["started"] = False
                        if "running" in cs.get("state", {}):
                            cs["state"] = {"terminated": {"exitCode": 137, "reason": "Error",
                                                          "startedAt": cs["state"]["running"]["startedAt"],
                                                          "finishedAt": self.clock.rfc3339(now)}}
                    for c in st.get("conditions") or []:
                        if c["type"] in ("Ready", "ContainersReady"):
                            c["status"] = "False"
                self.store.mutate("pods", rt.namespace, rt.name, put, subresource="status", manager=KUBELET)
            return
        if pod["metadata"].get("deletionTimestamp"):
            self._terminate(pod, rt, now)
            return
        if not rt.mount_ok:
            if now + 1e-9 >= rt.mount_next:
                self._mount(pod, rt, now)
            if not rt.mount_ok:
                self._render(pod, rt, now)
                return
        specs = {c["name"]: c for c in (pod["spec"].get("initContainers") or []) + pod["spec"].get("containers", [])}
        # init containers run one at a time, in order
        for name in rt.init_order:
            c = rt.containers[name]
            if c.stage == "done":
                continue
            self._step(pod, rt, c, specs[name], now)
            if c.sidecar and c.state == "running" and c.started_probe_ok:
                c.sidecar_started = True
            if not self._initialized(c):
                self._render(pod, rt, now)
                return
        for ec in pod["spec"].get("ephemeralContainers") or []:
            specs[ec["name"]] = ec
            if ec["name"] not in rt.containers:
                rt.containers[ec["name"]] = Ctr(ec["name"], False, ec.get("image", ""), next_at=now, ephemeral=True)
        for name, c in rt.containers.items():
            if not c.init and name in specs:
                self._step(pod, rt, c, specs[name], now)
        self._stop_sidecars(pod, rt, now)
        self._render(pod, rt, now)

    @staticmethod
    def _initialized(c: Ctr) -> bool:
        """An init container has done its part: exited successfully, or, a native sidecar, started
        (its startup probe passed) at least once."""
        return c.stage == "done" or c.sidecar_started

    def _stop_sidecars(self, pod: Obj, rt: PodRt, now: float) -> None:
        """Once every regular container of a pod that does not restart them has exited, the
        native sidecars get SIGTERM (in reverse order of start), and are killed at the end of the
        grace period if they do not exit: the pod can then complete. A regular container that
        never exits keeps them, and the pod, running."""
        sidecars = [rt.containers[n] for n in rt.init_order if rt.containers[n].sidecar]
        if not sidecars or pod["spec"].get("restartPolicy", "Always") == "Always":
            return
        regular = [c for c in rt.containers.values() if not c.init and not c.ephemeral]
        if not regular or any(c.stage != "done" for c in regular):
            return
        specs = {c["name"]: c for c in pod["spec"].get("initContainers") or []}
        grace = float(pod["spec"].get("terminationGracePeriodSeconds", 30))
        for c in reversed(sidecars):
            if c.stage == "done":
                continue
            if c.state != "running":
                c.stage = "done"  # between restarts: nothing to stop, and no restart comes
            elif c.stage != "stopping":
                self._event(pod, "Normal", "Killing", f"Stopping container {c.name}", c.name)
                c.stage, c.ready = "stopping", False
                c.next_at = now + (STOP_SECONDS if self._handles_sigterm(c, specs.get(c.name) or {}) else grace)
                self.wake_at(c.next_at)
            elif now + 1e-9 >= c.next_at:
                graceful = self._handles_sigterm(c, specs.get(c.name) or {})
                self._exit(pod, rt, c, Exited(0, [], reason="Completed") if graceful else Exited(137, [], reason="Error"),
                           now, stop=True)

    def _terminate(self, pod: Obj, rt: PodRt, now: float) -> None:
        """Graceful termination as the kubelet runs it: SIGTERM to every running container, which
        exits about STOP_SECONDS later (a shell or `sleep` as PID 1 has no handler and is killed
        when the grace period ends, at deletionTimestamp); once none runs, the pod object goes
        (a delete with no grace; finalizers still hold it)."""
        deadline = parse_time(pod["metadata"]["deletionTimestamp"])
        specs = {c["name"]: c for c in (pod["spec"].get("initContainers") or []) + pod["spec"].get("containers", [])
                 + (pod["spec"].get("ephemeralContainers") or [])}
        for c in rt.containers.values():
            if c.state != "running":
                c.stage = "done"
            elif c.stage != "stopping":
                self._event(pod, "Normal", "Killing", f"Stopping container {c.name}", c.name)
                c.stage, c.ready = "stopping", False
                c.next_at = min(deadline, now + STOP_SECONDS) if self._handles_sigterm(c, specs.get(c.name) or {}) else deadline
                self.wake_at(c.next_at)
            elif now + 1e-9 >= c.next_at:
                graceful = now + 1e-9 < deadline
                self._exit(pod, rt, c, Exited(0, [], reason="Completed") if graceful else Exited(137, [], reason="Error"),
                           now, stop=True)
        self._render(pod, rt, now, terminating=True)
        if all(c.state != "running" for c in rt.containers.values()) and pod["metadata"].get("deletionGracePeriodSeconds"):
            try:
                self.store.delete("pods", rt.namespace, rt.name)
            except StoreError:
                pass

    @staticmethod
    def _handles_sigterm(c: Ctr, spec: dict[str, Any]) -> bool:
        if c.model != "generic-shell" or c.image.startswith(PAUSE_IMAGES):
            return True  # the modelled servers (and pause) shut down on SIGTERM
        return not (spec.get("command") or spec.get("args"))  # an image's own entrypoint (nginx) does; `sh -c`/`sleep` as PID 1 does not

    # -- volumes ---------------------------------------------------------------------------------
    def _mount(self, pod: Obj, rt: PodRt, now: float) -> None:
        store, ns = self.store, rt.namespace
        errors = []
        unattached = False
        rt.volumes = {}
        vols = {v["name"]: v for v in pod["spec"].get("volumes") or []}
        for v in vols.values():
            if "configMap" in v:
                ref = v["configMap"]
                if not ref.get("optional") and store.try_get("configmaps", ns, ref.get("name", "")) is None:
                    errors.append((v["name"], f'configmap "{ref.get("name")}" not found'))
            elif "secret" in v:
                ref = v["secret"]
                if not ref.get("optional") and store.try_get("secrets", ns, ref.get("secretName", "")) is None:
                    errors.append((v["name"], f'secret "{ref.get("secretName")}" not found'))
            elif "persistentVolumeClaim" in v:
                claim = store.try_get("persistentvolumeclaims", ns, v["persistentVolumeClaim"].get("claimName", ""))
                if claim is None or claim.get("status", {}).get("phase") != "Bound":
                    errors.append((v["name"], "unbound"))
                    continue
                pv = store.try_get("persistentvolumes", "", (claim.get("spec") or {}).get("volumeName", ""))
                if pv is not None and self.volumes.network_attached(pv) and \
                        not self.volumes.attached_to(pod, rt.node, pv, now):
                    unattached = True
        if unattached and not errors:
            rt.mount_next = now + 1.0
            return
        if errors:
            rt.mount_backoff = min(122.0, max(1.0, rt.mount_backoff * 2 or 1.0))
            rt.mount_next = now + rt.mount_backoff
            self.wake_at(rt.mount_next)
            if rt.mount_failed_since is None:
                rt.mount_failed_since = now
            for vname, msg in errors:
                if msg != "unbound":
                    self._event(pod, "Warning", "FailedMount", f'MountVolume.SetUp failed for volume "{vname}" : {msg}')
            if now - rt.mount_failed_since >= 120.0:
                bad = sorted(n for n, _ in errors)
                self._event(pod, "Warning", "FailedMount",
                            f"Unable to attach or mount volumes: unmounted volumes=[{' '.join(bad)}], unattached "
                            f"volumes=[{' '.join(sorted(vols))}]: timed out waiting for the condition")
            return
        for v in vols.values():
            if "persistentVolumeClaim" in v:
                claim = store.get("persistentvolumeclaims", ns, v["persistentVolumeClaim"]["claimName"])
                key = f"pv/{claim['spec'].get('volumeName', claim['metadata']['uid'])}"
            elif "hostPath" in v:
                key = f"host/{rt.node}/{v['hostPath'].get('path', '')}"
            else:
                key = f"pod/{rt.uid}/{v['name']}"
            for c in (pod["spec"].get("containers") or []) + (pod["spec"].get("initContainers") or []):
                for m in c.get("volumeMounts") or []:
                    if m.get("name") == v["name"]:
                        rt.volumes[f"{c['name']}:{m.get('mountPath', '')}"] = key
        rt.mount_ok = True

    def _files(self, pod: Obj, spec: dict[str, Any]) -> dict[str, str]:
        """Files the container sees from config map / secret volumes (key → path)."""
        store, ns = self.store, pod["metadata"]["namespace"]
        vols = {v["name"]: v for v in pod["spec"].get("volumes") or []}
        out: dict[str, str] = {}
        for m in spec.get("volumeMounts") or []:
            v = vols.get(m.get("name"))
            if v is None:
                continue
            data: dict[str, str] = {}
            items = None
            if "configMap" in v:
                cm = store.try_get("configmaps", ns, v["configMap"].get("name", "")) or {}
                data = dict(cm.get("data") or {})
                items = v["configMap"].get("items")
            elif "secret" in v:
                sec = store.try_get("secrets", ns, v["secret"].get("secretName", "")) or {}
                data = {k: _decoded(val) for k, val in (sec.get("data") or {}).items()}
                data.update(sec.get("stringData") or {})
                items = v["secret"].get("items")
            else:
                continue
            if items:
                data = {it.get("path", it["key"]): data[it["key"]] for it in items if it.get("key") in data}
            base = m.get("mountPath", "").rstrip("/")
            sub = m.get("subPath")
            if sub:
                if sub in data:
                    out[base] = data[sub]
            else:
                for k, val in data.items():
                    out[f"{base}/{k}"] = val
        return out

    def _env(self, pod: Obj, spec: dict[str, Any]) -> tuple[dict[str, str], str | None]:
        """The container's environment, and why it cannot be made (CreateContainerConfigError)."""
        env: dict[str, str] = {}
        try:
            self._fill_env(env, pod, spec)
        except _MissingEnvSource as e:
            return env, str(e)
        return env, None

    def _fill_env(self, env: dict[str, str], pod: Obj, spec: dict[str, Any]) -> None:
        store, ns = self.store, pod["metadata"]["namespace"]

        def source(ref: dict[str, Any], resource: str, kind: str) -> Obj | None:
            """The ConfigMap or Secret `ref` names; None when it is missing but optional."""
            obj = store.try_get(resource, ns, ref.get("name", ""))
            if obj is None and not ref.get("optional"):
                raise _MissingEnvSource(f'{kind} "{ref.get("name")}" not found')
            return obj

        for src in spec.get("envFrom") or []:
            prefix = src.get("prefix", "")
            for ref_field, _, resource, kind, _, value in _ENV_SOURCES:
                if ref_field not in src:
                    continue
                found = source(src[ref_field], resource, kind)
                if found is None:
                    break
                for k, v in (found.get("data") or {}).items():
                    env[prefix + k] = value(v)
        for e in spec.get("env") or []:
            name = e.get("name", "")
            if "value" in e or "valueFrom" not in e:
                env[name] = self._expand(str(e.get("value", "")), env)
                continue
            vf = e["valueFrom"]
            keyed = next((src for src in _ENV_SOURCES if src[1] in vf), None)
            if keyed is not None:
                _, ref_field, resource, kind, kind_name, value = keyed
                ref = vf[ref_field]
                found = source(ref, resource, kind)
                data = (found or {}).get("data") or {}
                if ref.get("key") in data:
                    env[name] = value(data[ref["key"]])
                elif found is not None and not ref.get("optional"):
                    raise _MissingEnvSource(f"couldn't find key {ref.get('key')} in {kind_name} {ns}/{ref.get('name')}")
            elif "fieldRef" in vf:
                path = vf["fieldRef"].get("fieldPath", "")
                rt = self.runtime(pod)
                env[name] = {"metadata.name": pod["metadata"]["name"], "metadata.namespace": ns,
                             "spec.nodeName": pod["spec"].get("nodeName", ""), "status.podIP": rt.ip if rt else "",
                             "status.hostIP": host.ip if (host := self.nodes.get(pod["spec"].get("nodeName", ""))) else "",
                             "spec.serviceAccountName": pod["spec"].get("serviceAccountName", "default"),
                             "metadata.uid": pod["metadata"].get("uid", "")}.get(path, "")
            elif "resourceFieldRef" in vf:
                res = vf["resourceFieldRef"].get("resource", "")
                kind, _, r = res.partition(".")
                val = ((spec.get("resources") or {}).get(kind) or {}).get(r)
                env[name] = str(int(parse_quantity(val))) if val is not None else "0"

    @staticmethod
    def _expand(value: str, env: dict[str, str]) -> str:
        import re
        return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), value)

    def _context(self, pod: Obj, rt: PodRt, spec: dict[str, Any], now: float,
                 env: dict[str, str] | None = None) -> StartContext:
        pod = dict(pod)
        pod["status"] = dict(pod.get("status") or {}, podIP=rt.ip)
        volumes = {}
        for key, data_key in rt.volumes.items():
            cname, _, path = key.partition(":")
            if cname == spec["name"]:
                volumes[path] = self.volume_data(data_key)
        if env is None:
            env, _ = self._env(pod, spec)
        files = self._files(pod, spec)
        for path, data in volumes.items():  # what other containers of the pod wrote there
            for rel, text in (data.get("files") or {}).items():
                files.setdefault(f"{path.rstrip('/')}/{rel}", text)
        return self.start_context(pod, spec, env, files, volumes, now)

    # -- one container's state machine ---------------------------------------------------------
    def _step(self, pod: Obj, rt: PodRt, c: Ctr, spec: dict[str, Any], now: float) -> None:
        for _ in range(6):
            before = (c.stage, c.state, c.reason)
            self._advance(pod, rt, c, spec, now)
            if (c.stage, c.state, c.reason) == before:
                break

    def _advance(self, pod: Obj, rt: PodRt, c: Ctr, spec: dict[str, Any], now: float) -> None:
        image = spec.get("image", "")
        if c.stage == "run" and image != c.image:
            self._event(pod, "Normal", "Killing", f"Container {c.name} definition changed, will be restarted", c.name)
            self._exit(pod, rt, c, Exited(137 if not c.image.startswith(PAUSE_IMAGES) else 2, [], reason="Error"),
                       now, restart_now=True)
            return
        if now + 1e-9 < c.next_at:
            return
        if c.stage == "pull":
            c.image = image
            info, err = image_lookup(image)
            node_images = self.state["images"].setdefault(rt.node, [])
            full = normalize_image(image)[2] if err != "InvalidImageName" else image
            policy = spec.get("imagePullPolicy", "IfNotPresent")
            if err == "InvalidImageName":
                self._pull_failed(pod, c, PULL_FAILURES["InvalidImageName"], image, "", now)
                return
            if policy == "Never" or (policy == "IfNotPresent" and full in node_images):
                if full not in node_images:
                    self._pull_failed(pod, c, PULL_FAILURES["ErrImageNeverPull"], image, "", now)
                    return
                self._event(pod, "Normal", "Pulled", f'Container image "{image}" already present on machine', c.name)
                c.stage = "create"
                return
            self._event(pod, "Normal", "Pulling", f'Pulling image "{image}"', c.name)
            c.stage = "pulling"
            size = info.size if info else 0
            c.next_at = now + (1.0 if err else round(1.0 + size / 60e6, 0))
            self.wake_at(c.next_at)
            return
        if c.stage == "pulling":
            info, err = image_lookup(image)
            if err:
                c.pull_backoff = min(BACKOFF_MAX, c.pull_backoff * 2 if c.pull_backoff else BACKOFF_START)
                c.stage = "pullbackoff"
                self._pull_failed(pod, c, PULL_FAILURES["ErrImagePull"], image, err, now)
                return
            full = normalize_image(image)[2]
            node_images = self.state["images"].setdefault(rt.node, [])
            if full not in node_images:
                node_images.append(full)
            took = max(0.5, c.next_at - (c.next_at - 1.0 - (info.size if info else 0) / 60e6))
            self._event(pod, "Normal", "Pulled", f'Successfully pulled image "{image}" in {took:.3f}s '
                        f"({took:.3f}s including waiting). Image size: {info.size if info else 0} bytes.", c.name)
            c.pull_backoff = 0.0
            c.stage = "create"
            return
        if c.stage == "pullbackoff":
            if c.reason == "ErrImagePull":
                self._pull_failed(pod, c, PULL_FAILURES["ImagePullBackOff"], image, "", now)
                return
            c.stage = "pull"
            return
        if c.stage == "create":
            self._create(pod, rt, c, spec, now)
            return
        if c.stage == "run":
            if c.pending_exit is not None and now + 1e-9 >= c.next_at:
                ex = c.pending_exit
                c.pending_exit = None
                if ex.lines:
                    self.logs.write(pod, c.name, ex.lines)
                if ex.stderr:
                    self.logs.write(pod, c.name, ex.stderr, stream="stderr")
                self._exit(pod, rt, c, ex, now)
                return
            if not c.ready and c.ready_at is not None and now + 1e-9 >= c.ready_at and not spec.get("readinessProbe"):
                c.ready = True
            self._probe(pod, rt, c, spec, now)
            return
        if c.stage == "backoff":
            c.restarts += 1
            self.logs.rotate(rt.namespace, rt.name, c.name)
            c.stage = "pull"
            return

    def _pull_failed(self, pod: Obj, c: Ctr, failure: PullFailure, image: str, error: str, now: float) -> None:
        """Leave the container waiting as `failure` says (kubesim/lifecycle.py) and wake to try again."""
        c.message, events = failure.render(image, error)
        c.state, c.reason = "waiting", failure.reason
        for type_, reason, message in events:
            self._event(pod, type_, reason, message, c.name)
        c.next_at = now + (failure.retry if failure.retry is not None else c.pull_backoff)
        self.wake_at(c.next_at)

    def _create(self, pod: Obj, rt: PodRt, c: Ctr, spec: dict[str, Any], now: float) -> None:
        env, err = self._env(pod, spec)
        err = err or self._non_root_violation(pod, rt, spec)
        if err:
            c.state, c.reason, c.message = "waiting", "CreateContainerConfigError", err
            self._event(pod, "Warning", "Failed", f"Error: {err}", c.name)
            c.next_at = now + 10.0
            self.wake_at(c.next_at)
            return
        if self.nodes.pid_exhausted(rt.node):
            c.state, c.reason = "waiting", "RunContainerError"
            c.message = ("failed to create containerd task: failed to create shim task: OCI runtime create failed: "
                         "runc create failed: unable to start container process: unable to init seccomp: "
                         "fork/exec /proc/self/exe: resource temporarily unavailable: unknown")
            self._event(pod, "Warning", "Failed", f"Error: {c.message}", c.name)
            self._crash_backoff(pod, rt, c, now, start_error=True)
            return
        self.state["seq"] += 1
        c.container_id = "containerd://" + hashlib.sha256(f"{rt.uid}/{c.name}/{self.state['seq']}".encode()).hexdigest()
        self._event(pod, "Normal", "Created", f"Created container {c.name}", c.name)
        info, _ = image_lookup(c.image)
        argv = list(spec.get("command") or []) + list(spec.get("args") or [])
        model = None if c.image.startswith(PAUSE_IMAGES) else find_model(spec)
        ctx = self._context(pod, rt, spec, now, env)
        if c.image.startswith(PAUSE_IMAGES):
            argv = []  # pause ignores the command it is given
        if argv and info is not None and model is None:
            from kubesim.apps.generic import executable_in
            missing = executable_in(info, argv[0])
            if missing:
                self._start_error(pod, rt, c, missing, now)
                return
        if model is not None:
            missing = getattr(model, "missing_executable", lambda s, i: None)(spec, info)
            if missing:
                self._start_error(pod, rt, c, missing, now)
                return
        self._event(pod, "Normal", "Started", f"Started container {c.name}", c.name)
        c.state, c.reason, c.message = "running", "", ""
        c.stage = "run"
        c.started_at = now
        c.ready, c.ready_at = False, None
        c.probe_fail, c.probe_next = {}, {}
        c.started_probe_ok = not spec.get("startupProbe")
        if model is None:
            from kubesim.apps.generic import shell_outcome
            from kubesim.userland.exec import interactive_shell, run_to_completion
            if spec.get("stdin") and interactive_shell(c.image, argv):
                # a shell reading the stdin `kubectl run -i` / `kubectl debug -i` attaches to
                outcome: Started | Exited = Started([], set(), {"kind": "interactive", "argv": argv})
            else:
                outcome = shell_outcome(ctx, argv, info)
                if c.ephemeral and isinstance(outcome, Exited):
                    # a debug command runs to the end in the image's userland: its output is its log
                    outcome = run_to_completion(ctx, rt, c, argv)
            c.model = "generic-shell"
        else:
            outcome = model.start(ctx)
            c.model = model.name
        self._outcome(pod, rt, c, outcome, now, model)

    @staticmethod
    def _non_root_violation(pod: Obj, rt: PodRt, spec: dict[str, Any]) -> str | None:
        """kubelet's verifyRunAsNonRoot: runAsNonRoot with an explicit runAsUser 0 (the container's
        securityContext overriding the pod's) never starts."""
        pod_sc = pod["spec"].get("securityContext") or {}
        ctr_sc = spec.get("securityContext") or {}
        non_root = ctr_sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
        user = ctr_sc.get("runAsUser", pod_sc.get("runAsUser"))
        if non_root and user is not None and int(user) == 0:
            return (f"container's runAsUser breaks non-root policy (pod: \"{rt.name}_{rt.namespace}({rt.uid})\", "
                    f"container: {spec.get('name', '')})")
        return None

    def _outcome(self, pod: Obj, rt: PodRt, c: Ctr, outcome: Started | Exited, now: float, model: Any) -> None:
        if isinstance(outcome, Started):
            self.logs.write(pod, c.name, outcome.lines, now)
            if outcome.stderr:
                self.logs.write(pod, c.name, outcome.stderr, now, stream="stderr")
            c.ports = set(outcome.ports)
            c.instance = outcome.instance
            c.ready_at = now + outcome.ready_after
            if outcome.ready_after > 0:
                self.wake_at(c.ready_at)
            c.memory = model.memory(outcome.instance, 0.0) if model is not None else BASE_MEMORY + outcome.memory
            self._check_memory_at_start(pod, rt, c, now)
        else:
            c.ports = set()
            c.instance = None
            if outcome.after <= 0:
                self.logs.write(pod, c.name, outcome.lines, now)
                if outcome.stderr:
                    self.logs.write(pod, c.name, outcome.stderr, now, stream="stderr")
                self._exit(pod, rt, c, outcome, now)
            else:
                # a command running until it exits (`sleep 3600`) is ready meanwhile when it has no
                # readiness probe (the run stage waits for next_at, so readiness is decided here); a
                # modelled program's delayed exit is a crash at start-up and never serves
                c.pending_exit = outcome
                c.next_at = now + outcome.after
                if model is None:
                    c.ready_at = now
                    c.ready = not c.init and not c.ephemeral and not any(
                        s.get("readinessProbe") for s in pod["spec"].get("containers", []) if s.get("name") == c.name)
                self.wake_at(c.next_at)

    def _check_memory_at_start(self, pod: Obj, rt: PodRt, c: Ctr, now: float) -> None:
        limit = self.memory_limit(pod, c.name)
        if limit and c.memory > limit:
            c.pending_exit = Exited(137, [], after=1.0, reason="OOMKilled")
            c.next_at = now + 1.0
            self.wake_at(c.next_at)
            self.oom_kernel_lines(rt, c, limit)

    def memory_limit(self, pod: Obj, container: str) -> float:
        key = (pod["metadata"].get("uid"), pod["metadata"].get("resourceVersion"), container)
        hit = self._limits.get(key)
        if hit is not None:
            return hit
        value = self._memory_limit(pod, container)
        if len(self._limits) > 5000:
            self._limits.clear()
        self._limits[key] = value
        return value

    def _memory_limit(self, pod: Obj, container: str) -> float:
        for s in pod["spec"].get("containers", []) + (pod["spec"].get("initContainers") or []):
            if s["name"] == container:
                lim = ((s.get("resources") or {}).get("limits") or {}).get("memory")
                return parse_quantity(lim) if lim else 0.0
        return 0.0

    def oom_kernel_lines(self, rt: PodRt, c: Ctr, limit: float) -> None:
        comm = (c.model.split("/")[-1] or "app")[:15]
        pid = 4000 + (int(hashlib.sha256(c.container_id.encode()).hexdigest()[:4], 16) % 60000)
        kb = int(c.memory // 1024)
        c.oom_events += 1
        self.nodes.kernel_log(rt.node, [
            f"{comm} invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=999",
            f"Memory cgroup out of memory: Killed process {pid} ({comm}) total-vm:{kb * 3}kB, anon-rss:{kb}kB, "
            f"file-rss:1200kB, shmem-rss:0kB, UID:0 pgtables:{max(100, kb // 400)}kB oom_score_adj:999",
            f"oom_reaper: reaped process {pid} ({comm}), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB"])

    def _start_error(self, pod: Obj, rt: PodRt, c: Ctr, message: str, now: float) -> None:
        msg = ("failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create "
               f"failed: unable to start container process: {message}: unknown")
        self._event(pod, "Warning", "Failed", f"Error: {msg}", c.name)
        c.last = {"terminated": {"exitCode": 128, "reason": "StartError", "message": msg,
                                 "startedAt": "1970-01-01T00:00:00Z", "finishedAt": self.clock.rfc3339(now),
                                 "containerID": c.container_id}}
        c.state, c.reason, c.message = "terminated", "StartError", msg
        c.exit_code = 128
        self._after_exit(pod, rt, c, now, 128)

    def _exit(self, pod: Obj, rt: PodRt, c: Ctr, ex: Exited, now: float, restart_now: bool = False,
              stop: bool = False) -> None:
        """The process in `c` ended: restarted now (`restart_now`), never (`stop`: the pod is
        going away), or as the restart policy says."""
        model = self._model_by_name(c.model)
        if model is not None and c.instance is not None:
            try:
                model.on_stop(None, c.instance)  # type: ignore[arg-type]
            except Exception:
                pass
        c.state, c.reason, c.exit_code = "terminated", ex.reason, ex.code
        c.finished_at = now
        c.ports, c.ready, c.instance, c.pending_exit = set(), False, None, None
        if ex.reason == "OOMKilled":
            c.oom_events += 1
        c.last = {"terminated": {"exitCode": ex.code, "reason": ex.reason,
                                 "startedAt": self.clock.rfc3339(c.started_at or now),
                                 "finishedAt": self.clock.rfc3339(now), "containerID": c.container_id}}
        if restart_now:
            c.restarts += 1
            self.logs.rotate(rt.namespace, rt.name, c.name)
            c.stage, c.state, c.reason = "pull", "waiting", "ContainerCreating"
            c.next_at = now
            return
        if stop:
            c.stage = "done"
            return
        self._after_exit(pod, rt, c, now, ex.code)

    def _after_exit(self, pod: Obj, rt: PodRt, c: Ctr, now: float, code: int) -> None:
        policy = pod["spec"].get("restartPolicy", "Always")
        if c.ephemeral:
            c.stage = "done"
            return
        if c.sidecar:
            self._crash_backoff(pod, rt, c, now)
            return
        if c.init:
            if code == 0:
                c.stage = "done"
                return
            if policy == "Never":
                c.stage = "failed"
                return
        elif policy == "Never" or (policy == "OnFailure" and code == 0):
            c.stage = "done"
            return
        self._crash_backoff(pod, rt, c, now)

    def _crash_backoff(self, pod: Obj, rt: PodRt, c: Ctr, now: float, start_error: bool = False) -> None:
        ran = (c.finished_at or now) - (c.started_at or now)
        if ran >= BACKOFF_RESET:
            c.backoff = 0.0
            c.crashes = 0
        c.crashes += 1
        if c.crashes == 1 and not start_error:
            delay = 0.0
        else:
            c.backoff = min(BACKOFF_MAX, c.backoff * 2 if c.backoff else BACKOFF_START)
            delay = c.backoff
        c.stage = "backoff"
        c.next_at = now + max(delay, 1.0)
        self.wake_at(c.next_at)
        if delay > 0:
            c.state, c.reason = "waiting", "CrashLoopBackOff"
            c.message = (f"back-off {int(delay) // 60}m{int(delay) % 60}s" if delay >= 60 else f"back-off {int(delay)}s") \
                + f" restarting failed container={c.name} pod={rt.name}_{rt.namespace}({rt.uid})"
            self._event(pod, "Warning", "BackOff",
                        f"Back-off restarting failed container {c.name} in pod {rt.name}_{rt.namespace}({rt.uid})", c.name)

    # -- probes ----------------------------------------------------------------------------------
    def _probe(self, pod: Obj, rt: PodRt, c: Ctr, spec: dict[str, Any], now: float) -> None:
        for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
            probe = spec.get(kind)
            if not probe:
                continue
            if kind != "startupProbe" and not c.started_probe_ok:
                continue
            if kind == "startupProbe" and c.started_probe_ok:
                continue
            due = c.probe_next.get(kind)
            if due is None:
                due = (c.started_at or now) + float(probe.get("initialDelaySeconds", 0))
                c.probe_next[kind] = due
                self.wake_at(due)
            if now + 1e-9 < due:
                continue
            period = float(probe.get("periodSeconds", 10))
            c.probe_next[kind] = now + period
            self.wake_at(now + period)
            ok, msg = self._run_probe(pod, rt, c, spec, probe)
            word = {"startupProbe": "Startup", "livenessProbe": "Liveness", "readinessProbe": "Readiness"}[kind]
            if ok:
                c.probe_fail[kind] = 0
                if kind == "readinessProbe":
                    succ = int(probe.get("successThreshold", 1))
                    c.ready = succ <= 1 or c.ready or True
                if kind == "startupProbe":
                    c.started_probe_ok = True
                continue
            c.probe_fail[kind] = c.probe_fail.get(kind, 0) + 1
            self._event(pod, "Warning", "Unhealthy", f"{word} probe failed: {msg}", c.name)
            if c.probe_fail[kind] >= int(probe.get("failureThreshold", 3)):
                if kind == "readinessProbe":
                    c.ready = False
                else:
                    self._event(pod, "Normal", "Killing",
                                f"Container {c.name} failed {word.lower()} probe, will be restarted", c.name)
                    c.probe_fail[kind] = 0
                    self._exit(pod, rt, c, Exited(137, [], reason="Error"), now, restart_now=False)
                    return

    def _run_probe(self, pod: Obj, rt: PodRt, c: Ctr, spec: dict[str, Any], probe: dict[str, Any]) -> tuple[bool, str]:
        def port_of(p: Any) -> int:
            if isinstance(p, str) and not p.isdigit():
                for cp in spec.get("ports") or []:
                    if cp.get("name") == p:
                        return int(cp["containerPort"])
                return -1
            return int(p)
        model = self._model_by_name(c.model)
        timeout = float(probe.get("timeoutSeconds", 1))
        if "httpGet" in probe:
            hg = probe["httpGet"]
            port = port_of(hg.get("port", 80))
            path = hg.get("path", "/")
            url = f"http://{rt.ip}:{port}{path}"
            if port not in c.ports:
                return False, f'Get "{url}": dial tcp {rt.ip}:{port}: connect: connection refused'
            handler = getattr(model, "http_probe", None)
            if handler is not None:
                code, latency = handler(c.instance, path)
                if latency > timeout:
                    return False, f'Get "{url}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)'
                if code >= 400:
                    return False, f"HTTP probe failed with statuscode: {code}"
            return True, ""
        if "tcpSocket" in probe:
            port = port_of(probe["tcpSocket"].get("port", 0))
            if port not in c.ports:
                return False, f"dial tcp {rt.ip}:{port}: connect: connection refused"
            return True, ""
        if "exec" in probe:
            cmd = probe["exec"].get("command") or []
            ctx = self._context(pod, rt, spec, self.clock.now())
            if model is not None:
                code, out, err = model.exec(ctx, c.instance, cmd)
            else:
                from kubesim.apps.generic import run_shell
                code, out, err = run_shell(ctx, cmd)
            return code == 0, (out + err).strip()
        if "grpc" in probe:
            port = port_of(probe["grpc"].get("port", 0))
            if port not in c.ports:
                return False, f'timeout: failed to connect service "{rt.ip}:{port}" within {timeout:g}s'
            return True, ""
        return True, ""

    # -- status ----------------------------------------------------------------------------------
    def _ctr_status(self, c: Ctr, spec: dict[str, Any]) -> dict[str, Any]:
        clock = self.clock
        if c.state == "running":
            state: dict[str, Any] = {"running": {"startedAt": clock.rfc3339(c.started_at or 0)}}
        elif c.state == "terminated":
            state = {"terminated": {"exitCode": c.exit_code, "reason": c.reason,
                                    "startedAt": clock.rfc3339(c.started_at or 0),
                                    "finishedAt": clock.rfc3339(c.finished_at or 0), "containerID": c.container_id}}
            if c.reason == "StartError":
                state["terminated"]["message"] = c.message
        else:
            state = {"waiting": {"reason": c.reason, **({"message": c.message} if c.message else {})}}
        full = normalize_image(c.image or spec.get("image", ""))[2]
        out: dict[str, Any] = {"name": c.name, "state": state, "lastState": c.last or {}, "ready": c.ready,
                               "restartCount": c.restarts, "image": spec.get("image", c.image),
                               "imageID": "" if c.stage in ("pull", "pulling", "pullbackoff") and not c.container_id
                               else full.split(":")[0] + "@sha256:" + hashlib.sha256(full.encode()).hexdigest(),
                               "started": c.state == "running"}
        if c.container_id:
            out["containerID"] = c.container_id
        return out

    def _render(self, pod: Obj, rt: PodRt, now: float, terminating: bool = False) -> None:
        # The status is a function of the pod object and the containers' runtime state: when
        # neither changed since the last pass, it would come out the same (and not be written),
        # so skip building it. Probe timers wake the kubelet every few seconds with nothing new.
        key = (pod["metadata"].get("resourceVersion"), terminating, rt.mount_ok, rt.ip, rt.node,
               tuple((c.state, c.reason, c.message, c.stage, c.restarts, c.started_at, c.finished_at, c.exit_code,
                      id(c.last), c.ready, c.container_id, c.image) for c in rt.containers.values()))
        if key == rt.render_key:
            return
        rt.render_key = key
        clock = self.clock
        old = pod.get("status") or {}
        status = dict(old)
        # set_condition edits conditions in place: copy them, or a change of conditions alone (a
        # kubelet that resumes after others marked its pods unready) would compare equal to `old`.
        # The empty reason and message stripped below go back in, so that set_condition compares
        # like with like: else every pass counts as a change and rewrites every pod.
        status["conditions"] = [{"reason": "", "message": "", **c} for c in old.get("conditions") or []]
        node = self.nodes.get(rt.node)
        status["hostIP"] = node.ip if node else ""
        status["hostIPs"] = [{"ip": status["hostIP"]}]
        status["podIP"], status["podIPs"] = rt.ip, [{"ip": rt.ip}]
        status["startTime"] = clock.rfc3339(rt.start)
        specs = {c["name"]: c for c in pod["spec"].get("containers", [])}
        ispecs = {c["name"]: c for c in pod["spec"].get("initContainers") or []}
        status["containerStatuses"] = [self._ctr_status(rt.containers[n], s) for n, s in specs.items() if n in rt.containers]
        if ispecs:
            status["initContainerStatuses"] = [self._ctr_status(rt.containers[n], s)
                                               for n, s in ispecs.items() if n in rt.containers]
        especs = {c["name"]: c for c in pod["spec"].get("ephemeralContainers") or []}
        if especs:
            status["ephemeralContainerStatuses"] = [
                {k: v for k, v in self._ctr_status(rt.containers[n], s).items() if k != "started"} | {"ready": False, "lastState": {}}
                for n, s in especs.items() if n in rt.containers]
        app = [rt.containers[n] for n in specs if n in rt.containers]
        inits_done = all(self._initialized(rt.containers[n]) for n in rt.init_order)
        policy = pod["spec"].get("restartPolicy", "Always")
        sidecar_running = any(rt.containers[n].sidecar and rt.containers[n].state == "running" for n in rt.init_order)
        if app and all(c.stage == "done" for c in app) and sidecar_running:
            phase = "Running"  # the app is done; its sidecars are being stopped
        elif app and all(c.stage == "done" for c in app):
            phase = "Succeeded" if all(c.exit_code == 0 for c in app) else "Failed"
        elif any(rt.containers[n].stage == "failed" for n in rt.init_order):
            phase = "Failed"
        elif policy == "Never" and app and all(c.stage in ("done",) or c.state == "terminated" for c in app):
            phase = "Failed"
        elif inits_done and any(c.state == "running" or c.restarts > 0 or c.last for c in app):
            phase = "Running"
        else:
            phase = "Pending"
        status["phase"] = phase
        stamp = clock.rfc3339(now)
        ready = inits_done and bool(app) and all(c.ready for c in app)
        started = [c.state == "running" for c in app]
        set_condition(status, "PodReadyToStartContainers", "True" if rt.mount_ok else "False", "", "", stamp)
        set_condition(status, "Initialized", "True" if inits_done else "False",
                      "" if inits_done else "ContainersNotInitialized",
                      "" if inits_done else f"containers with incomplete status: [{' '.join(n for n in rt.init_order if not self._initialized(rt.containers[n]))}]",
                      stamp)
        not_ready = [c.name for c in app if not c.ready]
        msg = "" if ready else f"containers with unready status: [{' '.join(not_ready)}]"
        reason = "" if ready else ("PodCompleted" if phase in ("Succeeded", "Failed") else "ContainersNotReady")
        set_condition(status, "Ready", "True" if ready else "False", reason, msg, stamp)
        set_condition(status, "ContainersReady", "True" if ready else "False", reason, msg, stamp)
        for cond in status["conditions"]:
            for k in ("reason", "message"):
                if not cond.get(k):
                    cond.pop(k, None)
        order = {"PodReadyToStartContainers": 0, "Initialized": 1, "Ready": 2, "ContainersReady": 3, "PodScheduled": 4}
        status["conditions"].sort(key=lambda x: order.get(x["type"], 9))
        del started
        if status != old:
            def put(o: Obj, st: dict[str, Any] = status) -> None:
                o["status"] = st
            try:
                self.store.mutate("pods", rt.namespace, rt.name, put, subresource="status", manager=KUBELET)
            except StoreError:
                pass

    def _event(self, pod: Obj, type_: str, reason: str, message: str, container: str | None = None) -> None:
        field_path = None
        if container is not None:
            inits = {c["name"] for c in pod["spec"].get("initContainers") or []}
            field_path = f"spec.{'initContainers' if container in inits else 'containers'}{{{container}}}"
        self.events.record(pod, type_, reason, message, "kubelet", pod["spec"].get("nodeName"), field_path)

    def reconcile_memory(self, now: float) -> None:
        """OOM-kill running containers whose working set (from the workload step) exceeds the limit."""
        for rt, c in list(self.running()):
            pod = self.store.raw("pods", rt.namespace, rt.name)
            if pod is None:
                continue
            limit = self.memory_limit(pod, c.name)
            if limit and c.memory > limit and c.pending_exit is None:
                self.oom_kernel_lines(rt, c, limit)
                self.terminate(rt.namespace, rt.name, c.name, 137, "OOMKilled")
