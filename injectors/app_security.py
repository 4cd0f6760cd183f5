"""Security and access faults: database credentials and TLS, certificates, secrets, admission
webhooks and RBAC."""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

from pydantic import Field

from clusters.handle import ClusterHandle
from clusters.kube import Kube, Obj
from core import pod_security as podsecurity
from core.errors import InjectionError
from injectors.fault import (
    CHAOS_NAMESPACE,
    MISSING,
    Creation,
    Fault,
    Mutation,
    NamedObjectMutation,
    Params,
    Removal,
    WorkloadParams,
    appended,
    has_run,
    neutral_name,
    require,
)
from injectors.injector import Injection, faults
from injectors.jobs import exec_in
from injectors.objects import Ref
from injectors.workload import RESTARTED_AT, ContainerMutation

# -- database users -------------------------------------------------------------------------


class DbUserParams(Params):
    database: str  # the database's Service, e.g. mongodb-geo
    engine: str = Field("mongodb", pattern="^(mongodb|postgresql)$")
    user: str
    password: str  # the user's password, to create it again on recover
    roles: list[dict[str, str]] = [{"role": "readWrite", "db": "admin"}]
    admin_user: str = "root"
    admin_password: str = "root"
    auth_db: str = "admin"


def _mongo(p: DbUserParams, script: str) -> list[str]:
    return ["mongo", "--quiet", "-u", p.admin_user, "-p", p.admin_password,
            "--authenticationDatabase", p.auth_db, "--eval", script]


def _psql(p: DbUserParams, sql: str) -> list[str]:
    return ["psql", "-U", p.admin_user, "-d", "postgres", "-tAc", sql]


@faults.register("db-user-removed")
class DbUserRemoved(Fault):
    """Drops the database user an application service logs in as: its queries fail with an
    authentication error. Runs the database's own shell inside its pod (pods/exec)."""

    Params = DbUserParams

    def _command(self, action: str) -> list[str]:
        p = self.p
        if p.engine == "mongodb":
            roles = ", ".join(f'{{role: "{r["role"]}", db: "{r["db"]}"}}' for r in p.roles)
            if action == "check":
                # Logging in as the user is the check that means something to the application.
                return ["mongo", "--quiet", "-u", p.user, "-p", p.password, "--authenticationDatabase", p.auth_db,
                        "--eval", "db.runCommand({ping: 1})"]
            scripts = {
                "drop": f'db.getSiblingDB("{p.auth_db}").dropUser("{p.user}")',
                "create": f'db.getSiblingDB("{p.auth_db}").createUser({{user: "{p.user}", pwd: "{p.password}", roles: [{roles}]}})',
            }
            return _mongo(p, scripts[action])
        sql = {
            "drop": f'DROP ROLE IF EXISTS "{p.user}"',
            "create": f"CREATE ROLE \"{p.user}\" LOGIN PASSWORD '{p.password}'",
            "check": f"SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_roles WHERE rolname='{p.user}') "
            "THEN 'present' ELSE 'absent' END",
        }
        return _psql(p, sql[action])

    def _run(self, cluster: ClusterHandle, namespace: str, action: str) -> str:
        code, out = exec_in(cluster, namespace, self.p.database, self._command(action))
        if code != 0:
            raise InjectionError(f"{self.name}: {action} on {self.p.database} exited {code}: {out.strip()[-200:]}")
        return out

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        self._run(cluster, namespace, "drop")
        return self.record(cluster, namespace, touched=[f"{self.p.engine}-user/{namespace}/{self.p.user}"])

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        if self.is_active(cluster, injection):
            self._run(cluster, injection.namespace, "create")

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        code, out = exec_in(cluster, injection.namespace, self.p.database, self._command("check"))
        if self.p.engine == "mongodb":
            return code != 0 and "Authentication failed" in out
        return "absent" in out


class DbTlsParams(WorkloadParams):
    engine: str = Field("mongodb", pattern="^(mongodb|redis)$")
    certificate_path: str = "/etc/tls/server.pem"


@faults.register("db-tls-required")
class DbTlsRequired(ContainerMutation):
    """Restarts the database requiring TLS from its clients, which connect in plain text."""

    Params = DbTlsParams
    field = "args"

    def mutate(self, before: Any, obj: Obj) -> Any:
        current = [] if before == MISSING else list(before)
        if self.p.engine == "mongodb":
            extra = ["--tlsMode", "requireTLS", "--tlsCertificateKeyFile", self.p.certificate_path]
        else:
            extra = ["--port", "0", "--tls-port", "6379", "--tls-cert-file", self.p.certificate_path,
                     "--tls-key-file", self.p.certificate_path, "--tls-auth-clients", "no"]
        return [*current, *extra]

    def still_in_place(self, current: Any, injection: Any) -> bool:
        """The TLS flags, in their order, anywhere among the current arguments."""
        return has_run(current, appended(injection))


# -- certificates and secrets ---------------------------------------------------------------


class CertParams(Params):
    secret: str
    cert_key: str = "tls.crt"
    key_key: str | None = "tls.key"  # where the private key lives (a combined PEM when None)
    common_name: str = "server"
    expired_days_ago: int = Field(3, ge=1)


def expired_certificate(common_name: str, days_ago: int) -> tuple[bytes, bytes]:
    """A self-signed certificate (PEM) whose validity ended `days_ago` days ago, and its key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    end = dt.datetime(2026, 1, 1, tzinfo=dt.UTC) - dt.timedelta(days=days_ago)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(end - dt.timedelta(days=365))
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(common_name)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


@faults.register("certificate-expired")
class CertificateExpired(NamedObjectMutation):
    """Replaces a TLS secret's certificate with one that has expired: handshakes fail."""

    Params = CertParams
    object_kind = "Secret"
    name_param = "secret"

    def path(self, obj: Obj) -> list[Any]:
        return ["data"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        data = {} if before == MISSING else dict(before)
        cert, key = expired_certificate(self.p.common_name, self.p.expired_days_ago)
        if self.p.key_key:
            data[self.p.cert_key] = base64.b64encode(cert).decode()
            data[self.p.key_key] = base64.b64encode(key).decode()
        else:
            data[self.p.cert_key] = base64.b64encode(key + cert).decode()
        return data

    def still_in_place(self, current: Any, injection: Injection) -> bool:
        return current != MISSING and current.get(self.p.cert_key) == injection.saved["after"][self.p.cert_key]


class SecretRotationParams(Params):
    secret: str
    key: str
    value: str  # the new (rotated) value, in plain text
    server: str  # the workload that reads the secret at start and now uses the new value
    consumers: list[str] = Field(min_length=1)  # workloads still running with the old value


@faults.register("secret-rotated-stale-pods")
class SecretRotatedStalePods(NamedObjectMutation):
    """The secret was rotated and the server restarted onto the new value, but the client pods
    still hold the old one in their environment until they are restarted."""

    Params = SecretRotationParams
    object_kind = "Secret"
    name_param = "secret"

    def path(self, obj: Obj) -> list[Any]:
        return ["data", self.p.key]

    def mutate(self, before: Any, obj: Obj) -> Any:
        return base64.b64encode(self.p.value.encode()).decode()

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        injection = super().inject(cluster, namespace)
        kube = Kube.of(cluster)
        kind, obj = kube.workload(namespace, self.p.server)
        annotations = obj["spec"]["template"].get("metadata", {}).get("annotations", {}) or {}
        injection.saved["server_restarted_before"] = annotations.get(RESTARTED_AT, MISSING)
        when = dt.datetime.fromtimestamp(cluster.now(), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        kube.patch(kind, namespace, self.p.server,
                   {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: when}}}}})
        injection.touched.append(str(Ref(kind, namespace, self.p.server)))
        return injection

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        super().recover(cluster, injection)
        kube = Kube.of(cluster)
        kind, _ = kube.workload(injection.namespace, self.p.server)
        before = injection.saved.get("server_restarted_before", MISSING)
        kube.patch(kind, injection.namespace, self.p.server,
                   {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: None if before == MISSING else before}}}}})

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        if not super().is_active(cluster, injection):
            return False
        # Still broken while any consumer pod started before the rotation.
        kube = Kube.of(cluster)
        rotated = dt.datetime.fromtimestamp(injection.injected_at, dt.UTC)
        for name in self.p.consumers:
            _, obj = kube.workload(injection.namespace, name)
            for pod in kube.pods_of(injection.namespace, obj):
                created = pod["metadata"].get("creationTimestamp")
                if created and dt.datetime.fromisoformat(created.replace("Z", "+00:00")) < rotated:
                    return True
        return False


# -- admission and RBAC ---------------------------------------------------------------------


class WebhookParams(Params):
    webhook: str = "pod-policy.platform.internal"
    service_name: str = "pod-policy-webhook"  # a webhook service that does not answer
    service_namespace: str = "platform-system"
    failure_policy: str = Field("Fail", pattern="^(Fail|Ignore)$")
    evict: list[str] = []  # workloads whose pods are replaced right after (a routine drain)


@faults.register("admission-webhook-outage")
class AdmissionWebhookOutage(Creation):
    """A validating webhook for pod creation whose backend is down, with failurePolicy Fail:
    every new pod in the namespace is refused, so nothing that restarts comes back."""

    Params = WebhookParams

    def objects(self, kube: Kube, namespace: str) -> list[tuple[str, str, Obj]]:
        body = {
            "metadata": {"name": neutral_name(self.p.webhook, namespace, prefix="pod-policy-")},
            "webhooks": [
                {
                    "name": self.p.webhook,
                    "clientConfig": {
                        "service": {"name": self.p.service_name, "namespace": self.p.service_namespace,
                                    "path": "/validate", "port": 443},
                    },
                    "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                               "resources": ["pods"], "scope": "Namespaced"}],
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                    "failurePolicy": self.p.failure_policy,
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 10,
                }
            ],
        }
        return [("ValidatingWebhookConfiguration", "", body)]

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        injection = super().inject(cluster, namespace)
        kube = Kube.of(cluster)
        for name in self.p.evict:
            _, obj = kube.workload(namespace, name)
            for pod in kube.pods_of(namespace, obj):
                kube.delete("Pod", namespace, pod["metadata"]["name"])
        return injection


class RoleBindingParams(Params):
    rolebinding: str


@faults.register("rbac-rolebinding-removed")
class RbacRoleBindingRemoved(Removal):
    """Deletes the RoleBinding that lets a component's service account read the API."""

    Params = RoleBindingParams

    def removed(self, kube: Kube, namespace: str) -> Ref:
        return Ref("RoleBinding", namespace, self.p.rolebinding)


class RoleRuleParams(Params):
    role: str
    resource: str  # rules granting this resource are dropped
    cluster_role: bool = False


@faults.register("rbac-role-rule-dropped")
class RbacRoleRuleDropped(Mutation):
    """Removes the rule granting a resource from a Role: the component gets 403 Forbidden."""

    Params = RoleRuleParams

    def target(self, kube: Kube, namespace: str) -> tuple[Ref, Obj]:
        kind = "ClusterRole" if self.p.cluster_role else "Role"
        ns = "" if self.p.cluster_role else namespace
        return Ref(kind, ns, self.p.role), kube.get(kind, ns, self.p.role)

    def path(self, obj: Obj) -> list[Any]:
        return ["rules"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        rules = [] if before == MISSING else list(before)
        kept = [r for r in rules if self.p.resource not in r.get("resources", [])]
        require(len(kept) < len(rules), f"role {self.p.role} grants nothing on {self.p.resource}")
        return kept

    def still_in_place(self, current: Any, injection: Any) -> bool:
        return not any(self.p.resource in r.get("resources", []) for r in (current if current != MISSING else []))


__all__ = ["CHAOS_NAMESPACE", "expired_certificate"]


class PodSecurityParams(WorkloadParams):
    level: str = Field("restricted", pattern="^(baseline|restricted)$")


@faults.register("pod-security-enforce")
class PodSecurityEnforce(Mutation):
    """Labels the application's namespace `pod-security.kubernetes.io/enforce: <level>` (a
    security rollout; SREGym's psa_restricted_blocks_recreation). Running pods are untouched (the
    plugin gates admission only); the next pod of a workload that violates the level is refused by
    the API server (`violates PodSecurity "restricted:latest": ...`) and its ReplicaSet reports
    FailedCreate: pair it with a restart of `service`. In place while the namespace's enforced
    level still refuses `service`'s pod template: removing the label, relaxing it to a level the
    workload meets, or making the workload compliant all end it."""

    Params = PodSecurityParams

    def target(self, kube: Kube, namespace: str) -> tuple[Ref, Obj]:
        return Ref("Namespace", "", namespace), kube.get("Namespace", "", namespace)

    def path(self, obj: Obj) -> list[Any]:
        return ["metadata", "labels"]

    def mutate(self, before: Any, obj: Obj) -> Any:
        labels = {} if before == MISSING or not before else dict(before)
        labels[podsecurity.ENFORCE_LABEL] = self.p.level
        labels[podsecurity.ENFORCE_VERSION_LABEL] = "latest"
        return labels

    def restart_targets(self, injection: Injection) -> list[str]:
        return [f"{kind}/{injection.namespace}/{self.p.service}" for kind in [injection.saved.get("workload_kind")] if kind]

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        kind, workload = Kube.of(cluster).workload(namespace, self.p.service, self.p.kind)
        injection = super().inject(cluster, namespace)
        injection.saved["workload_kind"] = kind
        injection.saved["security"] = _security_contexts(workload["spec"]["template"]["spec"])
        return injection

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        """The label goes back; so do the security contexts of the workload's template, which a
        fix that made the workload compliant changed (the cluster returns to what was deployed)."""
        super().recover(cluster, injection)
        kube = Kube.of(cluster)
        kind = injection.saved.get("workload_kind") or "Deployment"
        workload = kube.find(kind, injection.namespace, self.p.service)
        saved = injection.saved.get("security")
        if workload is None or saved is None:
            return
        spec = workload["spec"]["template"]["spec"]
        if _security_contexts(spec) == saved:
            return
        for holder, key in [(spec, "pod"), *((c, c.get("name", "")) for field in ("initContainers", "containers")
                                             for c in spec.get(field) or [])]:
            if saved.get(key) is None:
                holder.pop("securityContext", None)
            else:
                holder["securityContext"] = saved[key]
        workload.pop("status", None)
        kube.replace(kind, injection.namespace, workload)

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        kube = Kube.of(cluster)
        ns = kube.find("Namespace", "", injection.namespace)
        workload = kube.find(injection.saved.get("workload_kind") or "Deployment", injection.namespace, self.p.service)
        if ns is None or workload is None:
            return False
        level, _ = podsecurity.enforce_level(ns["metadata"].get("labels"))
        spec = ((workload.get("spec") or {}).get("template") or {}).get("spec") or {}
        return bool(podsecurity.violations(spec, level))


def _security_contexts(spec: dict[str, Any]) -> dict[str, Any]:
    """The pod's and each container's securityContext, by container name ("pod" for the pod's)."""
    out: dict[str, Any] = {"pod": spec.get("securityContext")}
    for field in ("initContainers", "containers"):
        for c in spec.get(field) or []:
            out[c.get("name", "")] = c.get("securityContext")
    return out


class ValkeyAuthParams(Params):
    store: str = "valkey-cart"  # the Valkey Deployment
    client: str = "cart"  # its client, whose pod is replaced so it connects afresh
    password: str = "invalid_pass"


@faults.register("valkey-password-set")
class ValkeyPasswordSet(Fault):
    """SREGym's valkey_auth_disruption: `valkey-cli CONFIG SET requirepass invalid_pass` on the
    running Valkey, then the client's pod replaced: the client's new connections are refused
    (NOAUTH Authentication required) and cart operations fail. Fixed, as SREGym's oracle checks,
    when CONFIG GET requirepass answers an empty password without authentication, PING answers
    PONG, and the client Deployment has every replica available."""

    Params = ValkeyAuthParams

    def inject(self, cluster: ClusterHandle, namespace: str) -> Injection:
        code, out = exec_in(cluster, namespace, self.p.store, ["valkey-cli", "CONFIG", "SET", "requirepass", self.p.password])
        if code != 0 or "OK" not in out:
            raise InjectionError(f"{self.name}: CONFIG SET requirepass failed on {self.p.store}: {out.strip()}")
        kube = Kube.of(cluster)
        _, obj = kube.workload(namespace, self.p.client)
        for pod in kube.pods_of(namespace, obj):
            kube.delete("Pod", namespace, pod["metadata"]["name"])
        return self.record(cluster, namespace, touched=[Ref("Deployment", namespace, self.p.store)])

    def recover(self, cluster: ClusterHandle, injection: Injection) -> None:
        """The password cleared (authenticating with it while it is set), and the client's pod
        replaced so it connects afresh."""
        ns = injection.namespace
        try:
            exec_in(cluster, ns, self.p.store, ["valkey-cli", "-a", self.p.password, "--no-auth-warning",
                                                "CONFIG", "SET", "requirepass", ""])
        except InjectionError:
            pass  # no running Valkey: a restarted one starts without the password
        kube = Kube.of(cluster)
        _, obj = kube.workload(ns, self.p.client)
        for pod in kube.pods_of(ns, obj):
            kube.delete("Pod", ns, pod["metadata"]["name"])

    def is_active(self, cluster: ClusterHandle, injection: Injection) -> bool:
        return self._password_set(cluster, injection.namespace)

    def _password_set(self, cluster: ClusterHandle, namespace: str) -> bool:
        try:
            code, out = exec_in(cluster, namespace, self.p.store, ["valkey-cli", "CONFIG", "GET", "requirepass"])
        except InjectionError:
            return True  # no running Valkey is no fix
        lines = out.splitlines()
        return code != 0 or not lines or lines[0].strip() != "requirepass" or any(line.strip() for line in lines[1:])

    def affects(self, cluster: ClusterHandle, injection: Injection) -> bool:
        ns = injection.namespace
        if self._password_set(cluster, ns):
            return True
        code, out = exec_in(cluster, ns, self.p.store, ["valkey-cli", "PING"])
        if code != 0 or out.strip() != "PONG":
            return True
        obj = Kube.of(cluster).find("Deployment", ns, self.p.client)
        if obj is None:
            return True
        want = int(obj["spec"].get("replicas", 1) if obj["spec"].get("replicas") is not None else 1)
        return want < 1 or int((obj.get("status") or {}).get("availableReplicas") or 0) < want

    def restart_targets(self, injection: Injection) -> list[str]:
        return [f"Deployment/{injection.namespace}/{self.p.client}"]
