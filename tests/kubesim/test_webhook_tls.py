"""kube-apiserver's TLS verification of an admission webhook's serving certificate on the emulated
cluster (astronomy-shop's pod-policy webhook, agnhost behind a Service): a certificate that has
expired, is for another name or comes from another CA makes the API server refuse every pod the
webhook covers, with crypto/x509's words; the webhook's own pods stay exempt."""

from __future__ import annotations

import base64
import datetime as dt

import pytest

from kubesim.api.webhooks import WebhookAdmission
from kubesim.cluster import SimCluster
from kubesim.store import StoreError
from farm.pytest_plugin import SimClusters
from injectors.app_security import expired_certificate

NS = "astronomy-shop"
HOST = "pod-policy-webhook.astronomy-shop.svc"


@pytest.fixture(scope="module")
def base(sim_clusters: SimClusters) -> SimCluster:
    cluster = sim_clusters.in_process("astronomy-shop", seed=11)
    WebhookAdmission(cluster.store).install()  # the API server installs it; the bare model has none
    cluster.checkpoint("with-webhooks")
    return cluster


@pytest.fixture
def cluster(base: SimCluster) -> SimCluster:
    base.restore("with-webhooks")
    return base


def serve(cluster: SimCluster, cert: bytes, key: bytes) -> None:
    def put(s: dict) -> None:
        s["data"]["tls.crt"] = base64.b64encode(cert).decode()
        s["data"]["tls.key"] = base64.b64encode(key).decode()
    cluster.store.mutate("secrets", NS, "pod-policy-webhook-tls", put)


def new_pod(name: str, labels: dict[str, str] | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": labels or {}},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36", "command": ["sleep", "3600"]}]}}


def refusal(cluster: SimCluster, labels: dict[str, str] | None = None) -> str:
    with pytest.raises(StoreError) as info:
        cluster.store.create("pods", new_pod("probe", labels))
    assert info.value.code == 500
    return info.value.message


def certificate(host: str, days: int = 365) -> tuple[bytes, bytes]:
    """A self-signed, currently valid certificate for `host` (not from the caBundle's CA)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    start = dt.datetime.now(dt.UTC) - dt.timedelta(days=30)  # the cluster's clock starts at the host's
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(start)
            .not_valid_after(start + dt.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


def test_the_deployed_webhook_admits_pods(cluster: SimCluster) -> None:
    created = cluster.store.create("pods", new_pod("probe"))
    assert created["metadata"]["name"] == "probe"
    assert all(p["status"].get("phase") == "Running" for p in cluster.store.list("pods", NS) if p["metadata"]["name"] != "probe")


def test_an_expired_certificate_refuses_every_new_pod_with_the_x509_error(cluster: SimCluster) -> None:
    serve(cluster, *expired_certificate(HOST, 3))
    message = refusal(cluster)
    now = dt.datetime.fromtimestamp(cluster.now(), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert message == (
        'Internal error occurred: failed calling webhook "pods.pod-policy.platform.internal": failed to call webhook: '
        f'Post "https://{HOST}:443/pods?timeout=10s": tls: failed to verify certificate: x509: certificate has '
        f"expired or is not yet valid: current time {now} is after 2025-12-29T00:00:00Z")
    # A ReplicaSet meets the same refusal (FailedCreate) when a pod of it goes away...
    checkout = next(p for p in cluster.store.list("pods", NS) if p["metadata"]["name"].startswith("checkout-"))
    cluster.store.delete("pods", NS, checkout["metadata"]["name"])
    cluster.advance(30)
    assert not [p for p in cluster.store.list("pods", NS) if p["metadata"]["name"].startswith("checkout-")]
    failed = [e for e in cluster.store.list("events", NS) if e["reason"] == "FailedCreate"]
    assert failed and "x509: certificate has expired or is not yet valid" in failed[-1]["message"]
    # ...but the webhook's own pods are exempt (objectSelector).
    created = cluster.store.create("pods", new_pod("own", {"app.kubernetes.io/name": "pod-policy-webhook"}))
    assert created["metadata"]["name"] == "own"


def test_a_certificate_for_another_name_or_from_another_ca_is_refused_too(cluster: SimCluster) -> None:
    serve(cluster, *certificate("pod-policy.platform.internal"))
    assert refusal(cluster).endswith(f"x509: certificate is valid for pod-policy.platform.internal, not {HOST}")
    serve(cluster, *certificate(HOST))
    assert refusal(cluster).endswith("tls: failed to verify certificate: x509: certificate signed by unknown authority")


def test_a_webhook_that_cannot_read_its_certificate_does_not_start(cluster: SimCluster) -> None:
    def drop(s: dict) -> None:
        s["data"].pop("tls.key")
    cluster.store.mutate("secrets", NS, "pod-policy-webhook-tls", drop)
    hook = next(p for p in cluster.store.list("pods", NS) if p["metadata"]["name"].startswith("pod-policy-webhook-"))
    cluster.store.delete("pods", NS, hook["metadata"]["name"])
    cluster.advance(30)
    hook = next(p for p in cluster.store.list("pods", NS) if p["metadata"]["name"].startswith("pod-policy-webhook-"))
    assert hook["status"]["containerStatuses"][0]["restartCount"] >= 1
    text = cluster.read_container_log(NS, hook["metadata"]["name"], previous=True)
    assert "config.go:33] open /etc/webhook/certs/tls.key: no such file or directory" in text
    assert "no endpoints available for service" in refusal(cluster)
