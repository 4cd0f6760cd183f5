"""Faults in a controller that owns a finalizer: it loses the right to remove it."""

from __future__ import annotations

from pydantic import Field

from clusters.handle import ClusterHandle
from clusters.kube import Kube, NotFound, Obj
from core.errors import InjectionError
from injectors.fault import Fault, Params
from injectors.injector import Injection, faults
from injectors.jobs import POLL_SECONDS
from injectors.objects import Ref

RBAC_API = "rbac.authorization.k8s.io/v1"
# SREGym's FinalizerDeadlockControllerMitigationOracle: a fresh cleanup request must be reconciled
# (its ConfigMap gone) within this long.
CLEANUP_TIMEOUT_S = 45.0
FORBIDDEN_LOG = "Kubernetes API denied cleanup request with HTTP 403 Forbidden"

# SREGym's cleanup-controller, as its problem writes it into the ConfigMap the pod runs.
CONTROLLER_SCRIPT = """\
import json
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

NAMESPACE = "__NAMESPACE__"
FINALIZER = "__FINALIZER__"
LABEL_SELECTOR = "app.kubernetes.io/component=reservation-cleanup"
TOKEN_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
CA_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
API_SERVER = (
    f"https://{os.environ['KUBERNETES_SERVICE_HOST']}:"
    f"{os.environ['KUBERNETES_SERVICE_PORT_HTTPS']}"
)
TLS_CONTEXT = ssl.create_default_context(cafile=CA_FILE)


def api_request(method, path, payload=None):
    data = None if payload is None else json.dumps(payload).encode()
    headers = {
        "Authorization": f"Bearer {TOKEN_FILE.read_text().strip()}",
        "Accept": "application/json",
    }
    if payload is not None:
        headers["Content-Type"] = "application/merge-patch+json"
    request = urllib.request.Request(
        f"{API_SERVER}{path}",
        data=data,
        headers=headers,
        method=method,
    )
    with urllib.request.urlopen(request, context=TLS_CONTEXT, timeout=10) as response:
        raw = response.read()
        return json.loads(raw) if raw else {}


def reconcile():
    selector = urllib.parse.quote(LABEL_SELECTOR, safe="")
    response = api_request(
        "GET",
        f"/api/v1/namespaces/{NAMESPACE}/configmaps?labelSelector={selector}",
    )
    for configmap in response.get("items", []):
        metadata = configmap.get("metadata", {})
        finalizers = metadata.get("finalizers", [])
        if not metadata.get("deletionTimestamp") or FINALIZER not in finalizers:
            continue

        name = metadata["name"]
        remaining = [item for item in finalizers if item != FINALIZER]
        print(
            f"ConfigMap {name} is Terminating; attempting controller-owned cleanup",
            flush=True,
        )
        encoded_name = urllib.parse.quote(name, safe="")
        api_request(
            "PATCH",
            f"/api/v1/namespaces/{NAMESPACE}/configmaps/{encoded_name}",
            {"metadata": {"finalizers": remaining}},
        )
        print(f"ConfigMap {name} cleanup completed", flush=True)


print(f"cleanup-controller starting namespace={NAMESPACE}", flush=True)
while True:
    try:
        reconcile()
    except urllib.error.HTTPError as error:
        if error.code == 403:
            print(
                "cleanup-controller reconciliation failed: "
                "Kubernetes API denied cleanup request with HTTP 403 Forbidden",
                flush=True,
            )
        else:
            print(
                f"cleanup-controller reconciliation failed: Kubernetes API returned HTTP {error.code}",
                flush=True,
            )
    except Exception as error:
        print(
            f"cleanup-controller reconciliation failed: {type(error).__name__}",
            flush=True,
        )
    time.sleep(2)
"""


class FinalizerDeadlockParams(Params):
    controller: str = "cleanup-controller"  # its Deployment, ServiceAccount and app label
    script_configmap: str = "cleanup-controller-script"
    cluster_role: str = "configmap-cleanup-controller"  # and its ClusterRoleBinding
    configmap: str = "reservation-cleanup-token"  # the cleanup request left stuck
    finalizer: str = "cleanup.reservations.io/pending-cleanup"
    component: str = "reservation-cleanup"  # the label (app.kubernetes.io/component) the controller selects
    image: str = "python:3.12-alpine"
    ready_timeout_s: float = Field(180.0, gt=0)


@faults.register("finalizer-owner-rbac-revoked")
class FinalizerOwnerRbacRevoked(Fault):
    """SREGym's finalizer_deadlock_controller: a cleanup controller (a Python reconcile loop in the
    application's namespace, with its own ServiceAccount bound to a ClusterRole) owns a finalizer
    on the ConfigMaps labelled as cleanup requests; once it runs, its ClusterRole is cut to
    read-only (get, list, watch: patch gone) and a cleanup request is deleted. The controller sees
    it Terminating and is refused the patch that would remove its finalizer (it logs the API's
    403 every 2 s), so the ConfigMap stays Terminating, and so will every later request. Fixed
    when the stuck ConfigMap is gone, the controller's Deployment is there and rolled out, and a
    fresh cleanup request is reconciled by the controller itself within 45 s (SREGym's oracle):
    clearing the finalizer by hand, or deleting the controller, is not a fix."""

    Params = FinalizerDeadlockParams

    def _labels(self) -> dict[str, str]:
        return {"app.kubernetes.io/managed-by": self.p.controller}

    def _rules(self, patch: bool) -> list[Obj]:
        verbs = ["get", "list", "watch", *(["patch"] if patch else [])]
        return [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}]

    def _cluster_role(self, patch: bool) -> Obj:
        return {"apiVersion": RBAC_API, "metadata": {"name": self.p.cluster_role, "labels": self._labels()},
                "rules": self._rules(patch)}

    def _request(self, name: str) -> Obj:
        return {"metadata": {"name": name, "finalizers": [self.p.finalizer],
                             "labels": {"app.kubernetes.io/component": self.p.component,
                                        "app.kubernetes.io/managed-by": self.p.controller}},
                "data": {"cleanup-token": "pending", "source": "reservation-maintenance"}}

    def _objects(self, namespace: str) -> list[tuple[str, str, Obj]]:
        script = CONTROLLER_SCRIPT.replace("__NAMESPACE__", namespace).replace("__FINALIZER__", self.p.finalizer)
        script = script.replace("app.kubernetes.io/component=reservation-cleanup",
                                f"app.kubernetes.io/component={self.p.component}")
        labels = {"app": self.p.controller}
        request = self._request(self.p.configmap)
        request["metadata"]["labels"].pop("app.kubernetes.io/managed-by")  # SREGym's carries the component only
        return [
            ("ServiceAccount", namespace, {"metadata": {"name": self.p.controller, "labels": self._labels()}}),
            ("ClusterRole", "", self._cluster_role(patch=True)),
            ("ClusterRoleBinding", "", {
                "apiVersion": RBAC_API, "metadata": {"name": self.p.cluster_role, "labels": self._labels()},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": self.p.cluster_role},
                "subjects": [{"kind": "ServiceAccount", "name": self.p.controller, "namespace": namespace}]}),
            ("ConfigMap", namespace, {"metadata": {"name": self.p.script_configmap, "labels": self._labels()},
                                      "data": {"controller.py": script}}),
            ("ConfigMap", namespace, request),
            ("Deployment", namespace, {
                "metadata": {"name": self.p.controller, "labels": {**labels, **self._labels()}},
                "spec": {"replicas": 1, "selector": {"matchLabels": dict(labels)}, "template": {
                    "metadata": {"labels": dict(labels)},
                    "spec": {"serviceAccountName": self.p.controller, "automountServiceAccountToken": True,
                             "containers": [{"name": "controller", "image": self.p.image,
                                             "imagePullPolicy": "IfNotPresent",
                                             "command": ["python", "/controller/controller.py"],
                                             "volumeMounts": [{"name": "controller-script", "mountPath": "/controller",
                                                               "readOnly": True}]}],
                             "volumes": [{"name": "controller-script",
                                          "configMap": {"name": self.p.script_configmap, "defaultMode": 0o555}}]}}}}),
        ]

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        """Returns once the controller has been refused the cleanup (its 403 in the log)."""
        kube = Kube.of(cluster)
        if kube.find("Deployment", namespace, self.p.controller) is not None:
            raise InjectionError(f"{self.name}: a Deployment {self.p.controller} already exists in {namespace}")
        created: list[Ref] = []
        for kind, ns, body in self._objects(namespace):
            kube.create(kind, ns, body)
            created.append(Ref(kind, ns, body["metadata"]["name"]))
        waited = 0.0
        while int((kube.get("Deployment", namespace, self.p.controller).get("status") or {}).get("readyReplicas") or 0) < 1:
            if waited >= self.p.ready_timeout_s:
                raise InjectionError(f"{self.name}: Deployment {self.p.controller} not ready after {waited:.0f}s")
            cluster.advance(POLL_SECONDS)
            waited += POLL_SECONDS
        kube.replace("ClusterRole", "", self._cluster_role(patch=False))
        kube.delete("ConfigMap", namespace, self.p.configmap)
        waited = 0.0
        while FORBIDDEN_LOG not in self._controller_log(kube, namespace):
            if waited >= CLEANUP_TIMEOUT_S:
                break  # SREGym goes on too: the deletion stays blocked either way
            cluster.advance(POLL_SECONDS)
            waited += POLL_SECONDS
        return self.record(cluster, namespace, touched=created, created=[str(r) for r in created])

    def _controller_log(self, kube: Kube, namespace: str) -> str:
        from injectors.jobs import _logs

        return "".join(_logs(kube, namespace, p["metadata"]["name"])
                       for p in kube.list("Pod", namespace, f"app={self.p.controller}"))

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        """Everything it made gone, the cleanup requests' finalizers first (nothing else removes
        them once the controller is gone)."""
        kube = Kube.of(cluster)
        for cm in kube.list("ConfigMap", injection.namespace, f"app.kubernetes.io/component={self.p.component}"):
            if self.p.finalizer in (cm["metadata"].get("finalizers") or []):
                self._clear(kube, injection.namespace, cm["metadata"]["name"])
        for text in reversed(injection.saved["created"]):
            ref = Ref.parse(text)
            kube.delete(ref.kind, ref.namespace, ref.name)

    def _clear(self, kube: Kube, namespace: str, name: str) -> None:
        try:
            kube.patch("ConfigMap", namespace, name, {"metadata": {"finalizers": None}})
        except NotFound:
            pass

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        kube = Kube.of(cluster)
        return kube.find("ConfigMap", injection.namespace, self.p.configmap) is not None or not self._patch_granted(kube)

    def _patch_granted(self, kube: Kube) -> bool:
        role = kube.find("ClusterRole", "", self.p.cluster_role)
        return role is not None and any("patch" in (r.get("verbs") or []) for r in role.get("rules") or [])

    def affects(self, cluster: ClusterHandle, injection: Injection) -> bool:
        """As SREGym's oracle: the stuck ConfigMap still there, the controller's Deployment gone,
        scaled to zero or not rolled out, or a fresh cleanup request not reconciled within 45 s."""
        kube = Kube.of(cluster)
        ns = injection.namespace
        if kube.find("ConfigMap", ns, self.p.configmap) is not None:
            return True
        dep = kube.find("Deployment", ns, self.p.controller)
        if dep is None:
            return True
        spec, status = dep.get("spec") or {}, dep.get("status") or {}
        replicas = int(spec["replicas"]) if spec.get("replicas") is not None else 1
        if replicas < 1 or int(status.get("observedGeneration") or 0) < int(dep["metadata"].get("generation") or 0):
            return True
        if any(int(status.get(k) or 0) != replicas for k in ("updatedReplicas", "readyReplicas", "availableReplicas")):
            return True
        return not self._fresh_request_reconciled(cluster, kube, ns)

    def _fresh_request_reconciled(self, cluster: ClusterHandle, kube: Kube, namespace: str) -> bool:
        name = f"{self.p.component}-request-{int(cluster.now())}"[:63]
        kube.create("ConfigMap", namespace, self._request(name))
        try:
            kube.delete("ConfigMap", namespace, name)
            waited = 0.0
            while waited <= CLEANUP_TIMEOUT_S:
                if kube.find("ConfigMap", namespace, name) is None:
                    return True
                cluster.advance(POLL_SECONDS)
                waited += POLL_SECONDS
            return False
        finally:
            self._clear(kube, namespace, name)
            kube.delete("ConfigMap", namespace, name)

    def restart_targets(self, injection: Injection) -> list[str]:
        return [f"Deployment/{injection.namespace}/{self.p.controller}"]
