"""Programs in the apps' pods that talk with the Kubernetes API server:

- groundnuty/k8s-wait-for, the init container that holds a pod back until a dependency's pods are
  ready (`wait_for.sh service NAME`, `pod -lKEY=VALUE`). Each poll asks the API as
  `system:serviceaccount:<namespace>:<serviceAccountName>`, so an RBAC change that takes a verb
  away leaves it printing kubectl's Forbidden error and waiting forever, as the real one does.
- agnhost's `webhook` (registry.k8s.io/e2e-test-images/agnhost), an admission webhook server that
  the API server calls over TLS: it needs its certificate and key files to start; the API
  server's verification of the certificate it serves is in kubesim/api/webhooks.py.
- Python scripts mounted from a ConfigMap: a finalizer's owner that reconciles as its service
  account, and an admission webhook server whose JSON patch the API server applies (see
  PythonScripts)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kubesim.apps.model import (
    AppModel,
    Exited,
    StartContext,
    Started,
    app_model,
    fluid_ticks,
    image_lookup,
    register_image,
)
from kubesim.store import Obj, match_labels

register_image("groundnuty/k8s-wait-for", tags=("v2.0", "v1.7", "v1.6", "latest", "no-root-v2.0"), size=28_000_000,
               executables=("wait_for.sh", "kubectl", "jq", "sh"))
register_image("registry.k8s.io/e2e-test-images/agnhost", tags=("2.47", "2.45", "2.52", "2.53"), size=51_000_000,
               executables=("/agnhost", "agnhost"), shell=False)
POLL_S = 2.0  # wait_for.sh's WAIT_TIME


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _forbidden(user: str, verb: str, resource: str, namespace: str, name: str = "") -> str:
    what = f'{resource} "{name}"' if name else resource
    return (f"Error from server (Forbidden): {what} is forbidden: User \"{user}\" cannot {verb} resource "
            f"\"{resource}\" in API group \"\" in the namespace \"{namespace}\"")


def check(cluster: Any, namespace: str, account: str, kind: str, target: str) -> tuple[bool, str]:
    """(ready, what wait_for.sh prints) for one poll of `kind target` as the service account."""
    # the in-pod kubectl is a client of the API server: its answer is the server's RBAC decision,
    # a floor above the application models, so deferred (tests/architecture/test_kubesim_floors)
    from kubesim.api.authn import UserInfo
    from kubesim.api.rbac import RBACAuthorizer

    user = UserInfo(f"system:serviceaccount:{namespace}:{account}",
                    ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"))
    rbac = RBACAuthorizer(cluster.store)
    store = cluster.store
    selector: dict[str, Any] = {}
    if kind == "service":
        if not rbac.allowed(user, "get", "", "services", "", namespace, target):
            return False, _forbidden(user.name, "get", "services", namespace, target)
        svc = store.try_get("services", namespace, target)
        if svc is None:
            return False, f'Error from server (NotFound): services "{target}" not found'
        selector = {"matchLabels": (svc.get("spec") or {}).get("selector") or {}}
    elif kind in ("pod", "pod-ready"):
        key, _, value = target.removeprefix("-l").partition("=")
        selector = {"matchLabels": {key: value}}
    else:
        return False, f"Unknown type: {kind}"
    if not rbac.allowed(user, "list", "", "pods", "", namespace, ""):
        return False, _forbidden(user.name, "list", "pods", namespace)
    pods = [p for p in store.list("pods", namespace) if match_labels(selector, p["metadata"].get("labels") or {})
            and not p["metadata"].get("deletionTimestamp")]
    ready = bool(pods) and all(any(c.get("type") == "Ready" and c.get("status") == "True"
                                   for c in (p.get("status") or {}).get("conditions") or []) for p in pods)
    return ready, ""


@app_model
class K8sWaitFor(AppModel):
    name = "k8s-wait-for"
    images = ("groundnuty/k8s-wait-for",)
    memory_base = 12 * 2**20

    def start(self, ctx: StartContext) -> Started | Exited:
        argv = [a for a in ctx.argv if a not in ("wait_for.sh", "/usr/local/bin/wait_for.sh")]
        if len(argv) < 2:
            return Exited(1, ["Usage:", "wait_for.sh pod [<pod name>|-l<kubectl selector>]",
                              "wait_for.sh service [<service name>|-l<kubectl selector>]",
                              "wait_for.sh job [<job name>|-l<kubectl selector>]"])
        kind, target = argv[0], argv[1]
        account = ctx.pod["spec"].get("serviceAccountName") or "default"
        inst = {"kind": "k8s-wait", "what": kind, "target": target, "account": account, "last_log": -1e18}
        ready, error = check(ctx.cluster, ctx.namespace, account, kind, target)
        t = ctx.app_time()
        if ready:
            return Exited(0, [f"[{_stamp(t)}] {kind} {target} is ready."], after=0.5)
        lines = ([error] if error else []) + [f"[{_stamp(t)}] Waiting for {kind} {target}..."]
        inst["last_log"] = ctx.now
        return Started(lines, set(), inst, ready_after=0.0)


def wait_tick(cluster: Any, now: float, dt: float) -> None:
    """Every poll of every waiting k8s-wait-for: done once the dependency is ready (exit 0), else
    another Waiting line (and the error that kept it waiting)."""
    for rt, c in list(cluster.kubelet.running()):
        inst = c.instance
        if not isinstance(inst, dict) or inst.get("kind") != "k8s-wait":
            continue
        pod = cluster.store.try_get("pods", rt.namespace, rt.name)
        if pod is None:
            continue
        ready, error = check(cluster, rt.namespace, inst["account"], inst["what"], inst["target"])
        t = now + cluster.nodes.clock_offset(rt.node)
        if ready:
            cluster.kubelet.terminate(rt.namespace, rt.name, c.name, 0, "Completed",
                                      [f"[{_stamp(t)}] {inst['what']} {inst['target']} is ready."])
            continue
        if now - inst["last_log"] >= POLL_S * 5 - 1e-9:  # the log keeps one poll in five
            inst["last_log"] = now
            cluster.logs.write(pod, c.name, ([error] if error else []) + [
                f"[{_stamp(t)}] Waiting for {inst['what']} {inst['target']}..."], now)


if wait_tick not in fluid_ticks:
    fluid_ticks.append(wait_tick)


def _flag(argv: list[str], name: str, default: str = "") -> str:
    for i, a in enumerate(argv):
        if a.startswith(f"--{name}="):
            return a.split("=", 1)[1]
        if a == f"--{name}" and i + 1 < len(argv):
            return argv[i + 1]
    return default


@app_model
class AgnhostWebhook(AppModel):
    name = "agnhost-webhook"
    images = ("registry.k8s.io/e2e-test-images/agnhost",)
    memory_base = 15 * 2**20

    def start(self, ctx: StartContext) -> Started | Exited:
        argv = [a for a in ctx.argv if a not in ("/agnhost", "agnhost")]
        if not argv or argv[0] != "webhook":
            return Started([], set(), {"kind": "agnhost"})  # other agnhost subcommands: an idle helper
        t = datetime.fromtimestamp(ctx.app_time(), UTC)
        klog = f"F{t.strftime('%m%d %H:%M:%S.%f')}       1 config.go:33]"
        for name in ("tls-cert-file", "tls-private-key-file"):
            path = _flag(argv, name)
            if not path or path not in ctx.files:
                return Exited(255, [], after=0.1, stderr=[f"{klog} open {path}: no such file or directory"])
        port = int(_flag(argv, "port", "443") or 443)
        return Started([], {port}, {"kind": "agnhost-webhook", "port": port}, ready_after=0.5)


# -- a finalizer's owner: a reconcile loop in Python against the API -------------------------------
RECONCILE_S = 2.0  # the script's time.sleep(2)
_SCRIPT_CONST = r'^{name}\s*=\s*"([^"]*)"'


def _finalizer_script(text: str) -> dict[str, str] | None:
    """What a finalizer controller script declares (NAMESPACE, FINALIZER, LABEL_SELECTOR), when
    the file is one: a loop that lists the ConfigMaps it owns and patches its finalizer away."""
    import re

    found = {}
    for name in ("NAMESPACE", "FINALIZER", "LABEL_SELECTOR"):
        m = re.search(_SCRIPT_CONST.format(name=name), text, re.M)
        if m is None:
            return None
        found[name] = m.group(1)
    if "configmaps" not in text or '"finalizers"' not in text or "PATCH" not in text:
        return None
    starting = re.search(r'print\(f"([\w-]+) starting namespace=', text)
    found["name"] = starting.group(1) if starting else "controller"
    return found


@app_model
class PythonScripts(AppModel):
    """`python DIR/FILE.py`, for the scripts the emulator runs (any other python program runs as
    the generic image does):

    - a finalizer's owner (SREGym's cleanup-controller): every 2 s, as its service account, it
      lists the ConfigMaps its selector names and, for each one being deleted that still carries
      its finalizer, patches the finalizer away so the deletion completes. An RBAC rule that no
      longer grants list or patch leaves it printing the API's 403 each round and the ConfigMap
      stuck Terminating;
    - an admission webhook server (SREGym's memory rewriter, `webhook_server_patch`): it listens
      with TLS on its port from the certificate and key files it loads; the API server's calls
      are in kubesim/api/webhooks.py."""

    name = "python-scripts"
    images = ("python",)
    memory_base = 24 * 2**20

    def matches(self, container: dict[str, Any]) -> bool:
        # only a script run by the interpreter: the image's other uses stay generic
        argv = [*(container.get("command") or []), *(container.get("args") or [])]
        return super().matches(container) and argv[:1] in (["python"], ["python3"]) \
            and any(str(a).endswith(".py") for a in argv[1:])

    def exec(self, ctx: StartContext, instance: Any, command: list[str]) -> tuple[int, str, str]:
        from kubesim.apps.generic import run_shell

        return run_shell(ctx, command)

    def start(self, ctx: StartContext) -> Started | Exited:
        from kubesim.apps.generic import shell_outcome

        script = next((a for a in ctx.argv[1:] if a.endswith(".py")), "")
        text = ctx.files.get(script, "")
        spec = _finalizer_script(text)
        if spec is None and webhook_server_memory(text) is not None:
            return self._webhook_server(ctx, text)
        if spec is None:
            return shell_outcome(ctx, ctx.argv, image_lookup(ctx.container.get("image", ""))[0])
        account = ctx.pod["spec"].get("serviceAccountName") or "default"
        inst = {"kind": "finalizer-controller", "account": account, "next": ctx.now + RECONCILE_S, **spec}
        return Started([f"{spec['name']} starting namespace={spec['NAMESPACE']}"], set(), inst)

    @staticmethod
    def _webhook_server(ctx: StartContext, text: str) -> Started | Exited:
        import re

        port = re.search(r'HTTPServer\(\(\s*"[^"]*"\s*,\s*(\d+)\s*\)', text)
        for path in re.findall(r'load_cert_chain\(\s*"([^"]+)"\s*,\s*"([^"]+)"', text)[:1]:
            for f in path:
                if f not in ctx.files:
                    return Exited(1, [], after=0.3, stderr=[
                        "Traceback (most recent call last):",
                        f'  File "{ctx.argv[1]}", line 1, in <module>',
                        "FileNotFoundError: [Errno 2] No such file or directory"])
        return Started([], {int(port.group(1))} if port else set(), {"kind": "webhook-server"}, ready_after=0.2)


def _reconcile(cluster: Any, pod: Obj, container: str, inst: dict[str, Any], now: float) -> None:
    from kubesim.api.authn import UserInfo
    from kubesim.api.rbac import RBACAuthorizer

    ns, store = inst["NAMESPACE"], cluster.store
    user = UserInfo(f"system:serviceaccount:{pod['metadata']['namespace']}:{inst['account']}",
                    ("system:serviceaccounts", f"system:serviceaccounts:{pod['metadata']['namespace']}",
                     "system:authenticated"))
    rbac = RBACAuthorizer(store)
    denied = f"{inst['name']} reconciliation failed: Kubernetes API denied cleanup request with HTTP 403 Forbidden"
    if not rbac.allowed(user, "list", "", "configmaps", "", ns, ""):
        cluster.logs.write(pod, container, [denied], now)
        return
    key, _, value = inst["LABEL_SELECTOR"].partition("=")
    lines: list[str] = []
    for cm in store.list("configmaps", ns):
        meta = cm["metadata"]
        if (meta.get("labels") or {}).get(key) != value or not meta.get("deletionTimestamp") \
                or inst["FINALIZER"] not in (meta.get("finalizers") or []):
            continue
        name = meta["name"]
        lines.append(f"ConfigMap {name} is Terminating; attempting controller-owned cleanup")
        if not rbac.allowed(user, "patch", "", "configmaps", "", ns, name):
            lines.append(denied)
            break  # the script's reconcile() raises at the first refusal

        def drop(o: Obj, finalizer: str = inst["FINALIZER"]) -> None:
            o["metadata"]["finalizers"] = [f for f in o["metadata"].get("finalizers") or [] if f != finalizer]
        store.mutate("configmaps", ns, name, drop)
        lines.append(f"ConfigMap {name} cleanup completed")
    if lines:
        cluster.logs.write(pod, container, lines, now)


def finalizer_tick(cluster: Any, now: float, dt: float) -> None:
    for rt, c in list(cluster.kubelet.running()):
        inst = c.instance
        if not isinstance(inst, dict) or inst.get("kind") != "finalizer-controller" or now + 1e-9 < inst["next"]:
            continue
        inst["next"] = now + RECONCILE_S
        pod = cluster.store.try_get("pods", rt.namespace, rt.name)
        if pod is not None:
            _reconcile(cluster, pod, c.name, inst, now)


if finalizer_tick not in fluid_ticks:
    fluid_ticks.append(finalizer_tick)


# -- a mutating admission webhook's server: a Python script the API server calls ---------------------
def webhook_server_memory(script: str) -> str | None:
    """The memory value a webhook server script stamps into the pods it admits, when it is one."""
    import re

    m = re.search(_SCRIPT_CONST.format(name="MEMORY"), script, re.M)
    if m is None or "def build_patch" not in script or "/spec/containers/0/resources" not in script \
            or '"JSONPatch"' not in script:
        return None
    return m.group(1)


def webhook_server_patch(script: str, obj: Obj) -> list[dict[str, Any]] | None:
    """The JSON patch a webhook server script answers for `obj`, when the file is one the emulator
    runs (SREGym's memory rewriter: `MEMORY = "..."` stamped into the first container's memory
    request and limit, whatever they were, RFC 6902 add); None when it is not, or answers with no
    patch (an object without containers)."""
    memory = webhook_server_memory(script)
    if memory is None:
        return None
    containers = (obj.get("spec") or {}).get("containers") or []
    if not containers:
        return None
    resources = containers[0].get("resources")
    base = "/spec/containers/0/resources"
    if resources is None:
        return [{"op": "add", "path": base, "value": {"requests": {"memory": memory}, "limits": {"memory": memory}}}]
    ops = []
    for section in ("requests", "limits"):
        if resources.get(section) is None:
            ops.append({"op": "add", "path": f"{base}/{section}", "value": {"memory": memory}})
        else:
            ops.append({"op": "add", "path": f"{base}/{section}/memory", "value": memory})
    return ops
