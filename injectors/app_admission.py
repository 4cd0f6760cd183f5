"""A mutating admission webhook that rewrites what the pods it admits ask for."""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

from pydantic import Field

from clusters.handle import ClusterHandle
from clusters.kube import Kube, Obj
from core.errors import InjectionError
from injectors.fault import Fault, Params
from injectors.injector import Injection, faults
from injectors.jobs import POLL_SECONDS
from injectors.objects import Ref

ADMISSION_API = "admissionregistration.k8s.io/v1"

# SREGym's webhook server (mutating_webhook_resource_limits.py), as its problem writes it into the
# ConfigMap the backend runs.
SERVER_SCRIPT = '''\
import base64
import json
import ssl
from http.server import BaseHTTPRequestHandler, HTTPServer

MEMORY = "__MEMORY_VALUE__"

def build_patch(resources):
    """Emit JSON Patch ops that stamp MEMORY into both
    resources.requests.memory and resources.limits.memory on container[0].
    RFC 6902 "add" semantics: replaces the value if the target already exists,
    so this works whether the field is absent or already populated."""
    ops = []
    if resources is None:
        ops.append({
            "op": "add",
            "path": "/spec/containers/0/resources",
            "value": {"requests": {"memory": MEMORY}, "limits": {"memory": MEMORY}},
        })
        return ops
    if resources.get("requests") is None:
        ops.append({"op": "add", "path": "/spec/containers/0/resources/requests",
                    "value": {"memory": MEMORY}})
    else:
        ops.append({"op": "add", "path": "/spec/containers/0/resources/requests/memory",
                    "value": MEMORY})
    if resources.get("limits") is None:
        ops.append({"op": "add", "path": "/spec/containers/0/resources/limits",
                    "value": {"memory": MEMORY}})
    else:
        ops.append({"op": "add", "path": "/spec/containers/0/resources/limits/memory",
                    "value": MEMORY})
    return ops

class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("content-length", "0") or 0)
        raw = self.rfile.read(length)
        uid = ""
        patch = []
        try:
            body = json.loads(raw)
            uid = body.get("request", {}).get("uid", "")
            containers = body.get("request", {}).get("object", {}).get("spec", {}).get("containers", [])
            if containers:
                patch = build_patch(containers[0].get("resources"))
        except Exception:
            pass

        resp = {"uid": uid, "allowed": True}
        if patch:
            resp["patchType"] = "JSONPatch"
            resp["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
        response = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": resp,
        }
        data = json.dumps(response).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, fmt, *args):
        return

httpd = HTTPServer(("0.0.0.0", 8443), Handler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain("/certs/tls.crt", "/certs/tls.key")
httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
httpd.serve_forever()
'''

# SREGym's companion configurations: the same backend, caBundle and namespaceSelector as the
# active one, each inert (rules for CRDs that are not installed, or an opt-in label no pod has).
COMPANIONS: tuple[tuple[str, str, list[dict[str, Any]], dict[str, Any] | None], ...] = (
    ("cert-manager-webhook", "webhook.cert-manager.io",
     [{"apiGroups": ["cert-manager.io"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
       "resources": ["certificates", "issuers"], "scope": "*"}], None),
    ("istio-sidecar-injector", "rev.namespace.sidecar-injector.istio.io",
     [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"],
       "scope": "Namespaced"}], {"matchLabels": {"sidecar.istio.io/inject": "true"}}),
    ("kyverno-resource-mutating-webhook-cfg", "mutate.kyverno.svc",
     [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"],
       "scope": "Namespaced"}], {"matchLabels": {"kyverno.io/managed": "enabled"}}),
    ("linkerd-proxy-injector-webhook-config", "linkerd-proxy-injector.linkerd.io",
     [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"],
       "scope": "Namespaced"}], {"matchLabels": {"linkerd.io/inject": "enabled"}}),
)


class MutatingWebhookParams(Params):
    service: str = "nginx-thrift"  # the Deployment whose replacement pods are rewritten
    spec_memory_request: str = "128Mi"  # what its template asks for, set first (the values look right)
    spec_memory_limit: str = "256Mi"
    injected_memory: str = "16Mi"  # what the webhook stamps into both
    config: str = "gatekeeper-mutating-webhook-configuration"
    webhook: str = "mutation.gatekeeper.sh"
    backend: str = "platform-policy-controller"  # its Deployment and Service
    backend_namespace: str = "platform-ops"
    image: str = "python:3.12-alpine"
    ready_timeout_s: float = Field(180.0, gt=0)


def _certificates(host_names: list[str], now: float) -> tuple[bytes, bytes, bytes]:
    """A CA, and a serving certificate for `host_names` it signed, valid around `now` (cluster
    time): (CA PEM, certificate PEM, key PEM), as SREGym's openssl steps make them."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    start = dt.datetime.fromtimestamp(now, dt.UTC) - dt.timedelta(days=1)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "platform-policy-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(start)
          .not_valid_after(start + dt.timedelta(days=366))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host_names[0])]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(start + dt.timedelta(days=366))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in host_names]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    return (ca.public_bytes(pem), cert.public_bytes(pem),
            key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


@faults.register("mutating-webhook-memory-rewrite")
class MutatingWebhookMemoryRewrite(Fault):
    """SREGym's mutating_webhook_resource_limits: the target Deployment first gets plausible memory
    (requests 128Mi, limits 256Mi); then a webhook server (a Python script in the platform-ops
    namespace, TLS signed by the caBundle) and a MutatingWebhookConfiguration for pod CREATE in the
    application's namespace, among four inert companions that share its backend and
    namespaceSelector, are installed, and one of the target's pods is deleted. Its replacement is
    admitted with both memory values rewritten to 16Mi and is OOM-killed at start, while the
    Deployment still says 128Mi/256Mi. The configuration is cluster-scoped: out of the agent's reach
    (the problem is diagnosis-only here)."""

    Params = MutatingWebhookParams

    def _host_names(self) -> list[str]:
        base = f"{self.p.backend}.{self.p.backend_namespace}.svc"
        return [base, f"{base}.cluster.local"]

    def _config(self, name: str, webhook: str, rules: list[dict[str, Any]], selector: dict[str, Any] | None,
                namespace: str, ca_bundle: str) -> Obj:
        hook: dict[str, Any] = {
            "name": webhook,
            "clientConfig": {"service": {"name": self.p.backend, "namespace": self.p.backend_namespace,
                                         "path": "/mutate", "port": 443}, "caBundle": ca_bundle},
            "rules": rules, "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}, "timeoutSeconds": 5,
        }
        if selector is not None:
            hook["objectSelector"] = selector
        return {"apiVersion": ADMISSION_API, "metadata": {"name": name}, "webhooks": [hook]}

    def _backend(self, cluster: ClusterHandle) -> tuple[list[tuple[str, str, Obj]], str]:
        ca, cert, key = _certificates(self._host_names(), cluster.now())
        ns, name = self.p.backend_namespace, self.p.backend
        script = SERVER_SCRIPT.replace("__MEMORY_VALUE__", self.p.injected_memory)
        labels = {"app": name}
        objects: list[tuple[str, str, Obj]] = [
            ("Secret", ns, {"metadata": {"name": f"{name}-tls"}, "type": "kubernetes.io/tls",
                            "data": {"tls.crt": base64.b64encode(cert).decode(), "tls.key": base64.b64encode(key).decode()}}),
            ("ConfigMap", ns, {"metadata": {"name": f"{name}-server"}, "data": {"server.py": script}}),
            ("Deployment", ns, {"metadata": {"name": name}, "spec": {
                "replicas": 1, "selector": {"matchLabels": dict(labels)}, "template": {
                    "metadata": {"labels": dict(labels)},
                    "spec": {"containers": [{
                        "name": "webhook", "image": self.p.image, "imagePullPolicy": "IfNotPresent",
                        "command": ["python", "/app/server.py"], "ports": [{"containerPort": 8443}],
                        "volumeMounts": [{"name": "server-code", "mountPath": "/app"},
                                         {"name": "tls", "mountPath": "/certs", "readOnly": True}],
                        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"},
                                      "limits": {"cpu": "200m", "memory": "128Mi"}}}],
                        "volumes": [{"name": "server-code", "configMap": {"name": f"{name}-server"}},
                                    {"name": "tls", "secret": {"secretName": f"{name}-tls"}}]}}}}),
            ("Service", ns, {"metadata": {"name": name}, "spec": {
                "selector": dict(labels), "ports": [{"name": "https", "port": 443, "targetPort": 8443}]}}),
        ]
        return objects, base64.b64encode(ca).decode()

    def _wait_ready(self, cluster: ClusterHandle, kube: Kube, namespace: str, name: str) -> None:
        waited = 0.0
        while True:
            obj = kube.get("Deployment", namespace, name)
            spec, status = obj.get("spec") or {}, obj.get("status") or {}
            want = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
            # observedGeneration first: right after a patch the status still describes the old template
            if int(status.get("observedGeneration") or 0) >= int(obj["metadata"].get("generation") or 0) \
                    and int(status.get("updatedReplicas") or 0) >= want and int(status.get("readyReplicas") or 0) >= want \
                    and int(status.get("replicas") or 0) == want:
                return
            if waited >= self.p.ready_timeout_s:
                raise InjectionError(f"{self.name}: Deployment {name} in {namespace} not ready after {waited:.0f}s")
            cluster.advance(POLL_SECONDS)
            waited += POLL_SECONDS

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        """Returns once the target's replacement pod carries the rewritten memory."""
        kube = Kube.of(cluster)
        if kube.find("MutatingWebhookConfiguration", "", self.p.config) is not None:
            raise InjectionError(f"{self.name}: MutatingWebhookConfiguration {self.p.config} already exists")
        kind, obj = kube.workload(namespace, self.p.service)
        container = obj["spec"]["template"]["spec"]["containers"][0]
        before = container.get("resources")
        resources = {**(before or {})}
        resources["requests"] = {**(resources.get("requests") or {}), "memory": self.p.spec_memory_request}
        resources["limits"] = {**(resources.get("limits") or {}), "memory": self.p.spec_memory_limit}
        kube.patch(kind, namespace, self.p.service, [
            {"op": "add", "path": "/spec/template/spec/containers/0/resources", "value": resources}], merge=False)
        self._wait_ready(cluster, kube, namespace, self.p.service)
        made = kube.ensure_namespace(self.p.backend_namespace)
        objects, ca_bundle = self._backend(cluster)
        created: list[Ref] = []
        for k, ns, body in objects:
            kube.create(k, ns, body)
            created.append(Ref(k, ns, body["metadata"]["name"]))
        self._wait_ready(cluster, kube, self.p.backend_namespace, self.p.backend)
        for name, webhook, rules, selector in COMPANIONS:
            kube.create("MutatingWebhookConfiguration", "", self._config(name, webhook, rules, selector, namespace, ca_bundle))
            created.append(Ref("MutatingWebhookConfiguration", "", name))
        pod_rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"],
                      "scope": "Namespaced"}]
        kube.create("MutatingWebhookConfiguration", "", self._config(self.p.config, self.p.webhook, pod_rules, None,
                                                                     namespace, ca_bundle))
        created.append(Ref("MutatingWebhookConfiguration", "", self.p.config))
        _, obj = kube.workload(namespace, self.p.service, kind)
        old = {p["metadata"]["uid"] for p in kube.pods_of(namespace, obj)}
        victim = sorted(p["metadata"]["name"] for p in kube.pods_of(namespace, obj)
                        if not p["metadata"].get("deletionTimestamp"))[0]
        kube.request("DELETE", kube.path("Pod", namespace, victim), {"gracePeriodSeconds": 0})
        waited = 0.0
        while not any(p["metadata"]["uid"] not in old and self._rewritten(p) for p in kube.pods_of(namespace, obj)):
            if waited >= self.p.ready_timeout_s:
                raise InjectionError(f"{self.name}: no rewritten replacement pod of {self.p.service} after {waited:.0f}s")
            cluster.advance(POLL_SECONDS)
            waited += POLL_SECONDS
        return self.record(cluster, namespace, touched=[Ref(kind, namespace, self.p.service), *created],
                           ref=str(Ref(kind, namespace, self.p.service)), resources=before,
                           created=[str(r) for r in created], namespace_made=made)

    def _rewritten(self, pod: Obj) -> bool:
        containers = (pod.get("spec") or {}).get("containers") or []
        res = (containers[0].get("resources") or {}) if containers else {}
        return ((res.get("limits") or {}).get("memory") == self.p.injected_memory
                and (res.get("requests") or {}).get("memory") == self.p.injected_memory)

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        """The configurations and their backend gone, the target's resources as they were (a new
        rollout replaces the rewritten pods)."""
        kube = Kube.of(cluster)
        for text in reversed(injection.saved["created"]):
            ref = Ref.parse(text)
            kube.delete(ref.kind, ref.namespace, ref.name)
        if injection.saved.get("namespace_made"):
            kube.delete("Namespace", "", self.p.backend_namespace)
        ref = Ref.parse(injection.saved["ref"])
        before = injection.saved.get("resources")
        op = {"op": "add", "path": "/spec/template/spec/containers/0/resources", "value": before} if before is not None \
            else {"op": "remove", "path": "/spec/template/spec/containers/0/resources"}
        kube.patch(ref.kind, ref.namespace, ref.name, [op], merge=False)

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        return Kube.of(cluster).find("MutatingWebhookConfiguration", "", self.p.config) is not None

    def affects(self, cluster: ClusterHandle, injection: Injection) -> bool:
        """The configuration still rewrites new pods, or a pod of the target still runs rewritten."""
        kube = Kube.of(cluster)
        if self.is_active(cluster, injection):
            return True
        ref = Ref.parse(injection.saved["ref"])
        obj = kube.find(ref.kind, ref.namespace, ref.name)
        return obj is not None and any(self._rewritten(p) for p in kube.pods_of(ref.namespace, obj))

    def restart_targets(self, injection: Injection) -> list[str]:
        return [injection.saved["ref"]]
