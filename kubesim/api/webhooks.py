"""Admission webhooks as kube-apiserver calls them, for the failure an SRE meets: a request (from
a client or a controller) that a Validating/MutatingWebhookConfiguration matches is refused with
the real "failed calling webhook" error when the webhook's Service is missing or has no ready
endpoints, or when the certificate its back end serves fails kube-apiserver's TLS verification
(expired or not yet valid, not for the Service's name, not signed by the caBundle), and
failurePolicy is Fail. A webhook whose back end is reachable admits; a mutating one first
applies the JSON patch its server answers, when the server is a program the emulator runs (its
script, read from the ConfigMap its pod mounts, as the TLS check reads the Secret): mutating
webhooks run before validating ones, as kube-apiserver orders them."""

from __future__ import annotations

from typing import Any

from kubesim.store import Obj, Store, StoreError, match_labels

_ADMISSION = "admissionregistration.k8s.io"
_MUTATING = f"mutatingwebhookconfigurations.{_ADMISSION}"
_CONFIGS = (_MUTATING, f"validatingwebhookconfigurations.{_ADMISSION}")
_OPERATIONS = {"create": "CREATE", "update": "UPDATE", "delete": "DELETE"}


def _rule_matches(rule: dict[str, Any], operation: str, group: str, version: str, plural: str, sub: str,
                  namespaced: bool) -> bool:
    ops = rule.get("operations") or []
    if "*" not in ops and operation not in ops:
        return False
    groups, versions = rule.get("apiGroups") or [], rule.get("apiVersions") or []
    if "*" not in groups and group not in groups or "*" not in versions and version not in versions:
        return False
    # "*" and "pods" name the resource only; "pods/*", "*/*" and "pods/status" reach sub-resources.
    wanted = (f"{plural}/{sub}", f"{plural}/*", "*/*", f"*/{sub}") if sub else ("*", plural, "*/*")
    if not any(r in wanted for r in rule.get("resources") or []):
        return False
    scope = rule.get("scope", "*")
    return scope == "*" or (scope == "Namespaced") == namespaced


def _issued_by(cert: Any, ca: Any) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
        return True
    except Exception:  # wrong issuer name, bad signature, not a CA: all "unknown authority" to Go
        return False


def _only_status_changed(old: Obj, new: Obj) -> bool:
    """A write that changed nothing but status is, to webhooks, a request to the status sub-resource
    (controllers write status through the store, which does not say which)."""
    def strip(o: Obj) -> Obj:
        meta = {k: v for k, v in (o.get("metadata") or {}).items() if k not in ("resourceVersion", "generation")}
        return {**{k: v for k, v in o.items() if k != "status"}, "metadata": meta}

    return strip(old) == strip(new)


class WebhookAdmission:
    """Store admission hook; reads the webhook configurations and Services from the store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def install(self) -> None:
        if self not in self.store.admission:
            self.store.admission.append(self)

    def _namespace_labels(self, namespace: str) -> dict[str, str]:
        ns = self.store.try_get("namespaces", "", namespace) if namespace else None
        return ((ns or {}).get("metadata") or {}).get("labels") or {}

    def _failure(self, client_config: dict[str, Any]) -> str | None:
        """Why the webhook cannot be called, or None when its back end is reachable."""
        svc = client_config.get("service")
        if svc is None:
            url = client_config.get("url", "")
            return f'Post "{url}": dial tcp: lookup {url.split("//")[-1].split("/")[0].split(":")[0]}: no such host'
        ns, name = svc.get("namespace", ""), svc.get("name", "")
        target = f'Post "https://{name}.{ns}.svc:{svc.get("port", 443)}{svc.get("path", "")}?timeout=10s"'
        if self.store.try_get("services", ns, name) is None:
            return f'{target}: service "{name}" not found'
        ep = self.store.try_get("endpoints", ns, name)
        if not any(s.get("addresses") for s in (ep or {}).get("subsets") or []):
            return f'{target}: no endpoints available for service "{name}"'
        why = self._tls_failure(ep or {}, ns, f"{name}.{ns}.svc", client_config.get("caBundle"))
        return f"{target}: tls: failed to verify certificate: {why}" if why else None

    def _mutate(self, client_config: dict[str, Any], obj: Obj) -> None:
        """Apply the patch the webhook's server answers for `obj` (in place: what is stored)."""
        from kubesim.api.patch import json_patch
        from kubesim.apps.k8stools import webhook_server_patch

        svc = client_config.get("service") or {}
        ns = svc.get("namespace", "")
        script = self._server_script(self.store.try_get("endpoints", ns, svc.get("name", "")) or {}, ns)
        ops = webhook_server_patch(script, obj) if script else None
        if ops:
            # in place, the metadata dict too: the store still holds references into `obj`
            patched = json_patch(obj, ops)
            for key in [k for k in obj if k not in patched]:
                del obj[key]
            for key, value in patched.items():
                if key == "metadata" and isinstance(obj.get(key), dict):
                    obj[key].clear()
                    obj[key].update(value)
                else:
                    obj[key] = value

    def _server_script(self, ep: Obj, namespace: str) -> str | None:
        """The Python script a back-end pod runs (`python DIR/FILE.py`), read from the ConfigMap
        volume mounted at DIR."""
        for subset in ep.get("subsets") or []:
            for address in subset.get("addresses") or []:
                ref = address.get("targetRef") or {}
                pod = self.store.try_get("pods", ref.get("namespace", namespace), ref.get("name", "")) \
                    if ref.get("kind") == "Pod" else None
                spec = (pod or {}).get("spec") or {}
                volumes = {v.get("name"): v for v in spec.get("volumes") or []}
                for c in spec.get("containers") or []:
                    argv = [*(c.get("command") or []), *(c.get("args") or [])]
                    path = next((str(a) for a in argv[1:] if str(a).endswith(".py")), "")
                    if argv[:1] not in (["python"], ["python3"]) or "/" not in path:
                        continue
                    folder, name = path.rsplit("/", 1)
                    for m in c.get("volumeMounts") or []:
                        source = (volumes.get(m.get("name")) or {}).get("configMap") or {}
                        if (m.get("mountPath") or "").rstrip("/") == folder and source:
                            cm = self.store.try_get("configmaps", namespace, source.get("name", ""))
                            text = ((cm or {}).get("data") or {}).get(name)
                            if text:
                                return str(text)
        return None

    def _serving_certificate(self, ep: Obj, namespace: str) -> bytes | None:
        """The PEM certificate a back-end pod serves: the tls.crt of a Secret volume it mounts
        (what the server reads; a server that watches its files serves the Secret's current one)."""
        import base64

        for subset in ep.get("subsets") or []:
            for address in subset.get("addresses") or []:
                ref = address.get("targetRef") or {}
                pod = self.store.try_get("pods", ref.get("namespace", namespace), ref.get("name", "")) \
                    if ref.get("kind") == "Pod" else None
                for volume in ((pod or {}).get("spec") or {}).get("volumes") or []:
                    secret = self.store.try_get("secrets", namespace, (volume.get("secret") or {}).get("secretName", ""))
                    cert = ((secret or {}).get("data") or {}).get("tls.crt")
                    if cert:
                        return base64.b64decode(cert)
        return None

    def _tls_failure(self, ep: Obj, namespace: str, host: str, ca_bundle: str | None) -> str | None:
        """crypto/x509's verdict on the served certificate, in Verify's order: validity period,
        then the host name, then the chain to the caBundle. None when it verifies (or serves no
        certificate the cluster can see)."""
        import base64
        import datetime as dt

        from cryptography import x509

        pem = self._serving_certificate(ep, namespace)
        if pem is None:
            return None
        try:
            cert = x509.load_pem_x509_certificate(pem)
        except ValueError:
            return "x509: malformed certificate"
        now = dt.datetime.fromtimestamp(self.store.clock.now(), dt.UTC)

        def go(t: dt.datetime) -> str:
            return t.strftime("%Y-%m-%dT%H:%M:%SZ")

        if now > cert.not_valid_after_utc:
            return (f"x509: certificate has expired or is not yet valid: current time {go(now)} is after "
                    f"{go(cert.not_valid_after_utc)}")
        if now < cert.not_valid_before_utc:
            return (f"x509: certificate has expired or is not yet valid: current time {go(now)} is before "
                    f"{go(cert.not_valid_before_utc)}")
        try:
            names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
                x509.DNSName)
        except x509.ExtensionNotFound:
            names = []
        if host not in names:
            if not names:
                return "x509: certificate relies on legacy Common Name field, use SANs instead"
            return f"x509: certificate is valid for {', '.join(names)}, not {host}"
        if ca_bundle:
            try:
                cas = x509.load_pem_x509_certificates(base64.b64decode(ca_bundle))
            except ValueError:
                cas = []
            if not any(_issued_by(cert, ca) for ca in cas):
                return "x509: certificate signed by unknown authority"
        return None

    def __call__(self, verb: str, key: str, obj: Obj, old: Obj | None) -> None:
        if key in _CONFIGS or verb not in _OPERATIONS:
            return
        rt = self.store.types.get(key)
        if rt is None:
            return
        configs = [(k, c) for k in _CONFIGS if k in self.store.types for c in self.store.iter_raw(k)]
        if not configs:
            return
        meta = obj.get("metadata") or {}
        sub = "status" if verb == "update" and old is not None and _only_status_changed(old, obj) else ""
        namespace = meta.get("namespace", "") if rt.namespaced else ""
        if key == "namespaces":
            namespace = meta.get("name", "")
        for config_key, config in configs:
            for hook in config.get("webhooks") or []:
                if not any(_rule_matches(r, _OPERATIONS[verb], rt.group, rt.version, rt.plural, sub, rt.namespaced)
                           for r in hook.get("rules") or []):
                    continue
                ns_sel, obj_sel = hook.get("namespaceSelector"), hook.get("objectSelector")
                if ns_sel and (namespace or key == "namespaces") and not match_labels(ns_sel, self._namespace_labels(namespace)):
                    continue
                if obj_sel and not match_labels(obj_sel, meta.get("labels") or {}):
                    continue
                why = self._failure(hook.get("clientConfig") or {})
                if why is None and config_key == _MUTATING and verb in ("create", "update"):
                    self._mutate(hook.get("clientConfig") or {}, obj)
                if why is None or hook.get("failurePolicy", "Fail") == "Ignore":
                    continue
                message = f'failed calling webhook "{hook.get("name", "")}": failed to call webhook: {why}'
                raise StoreError(500, "InternalError", f"Internal error occurred: {message}",
                                 {"causes": [{"message": message}]})
