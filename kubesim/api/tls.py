"""A throwaway certificate authority and serving certificate for 127.0.0.1, made at start-up:
client-go only sends bearer tokens over TLS, so kubectl needs an https API server. The CA also
signs the admin's client certificate (CN kubernetes-admin, O system:masters), as kind's admin
kubeconfig carries one: clients that authenticate by certificate alone are served too."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import ssl
import tempfile
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class ServingCert:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes
    client_cert_pem: bytes = b""
    client_key_pem: bytes = b""

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_alpn_protocols(["http/1.1"])
        # load_cert_chain reads files only; the key lives on disk for the blink of an eye, mode 0600.
        fd, path = tempfile.mkstemp(prefix="sim-tls-", suffix=".pem")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(self.cert_pem + self.ca_pem + self.key_pem)
            ctx.load_cert_chain(path)
        finally:
            os.unlink(path)
        # a client certificate is optional (tokens are the rule) but, when sent, must be the CA's
        ctx.verify_mode = ssl.CERT_OPTIONAL
        ctx.load_verify_locations(cadata=self.ca_pem.decode())
        return ctx


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_serving_cert(hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> ServingCert:
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    until = now + dt.timedelta(days=3650)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name("sim-cluster-ca")).issuer_name(_name("sim-cluster-ca"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now).not_valid_after(until)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for h in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    sans += [x509.DNSName("kubernetes"), x509.DNSName("kubernetes.default.svc")]
    cert = (x509.CertificateBuilder().subject_name(_name("kube-apiserver")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(until)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256()))
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = (x509.CertificateBuilder()
              .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
                                       x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes-admin")]))
              .issuer_name(ca.subject).public_key(client_key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(now).not_valid_after(until)
              .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
              .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
              .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    pkcs8 = serialization.PrivateFormat.PKCS8
    return ServingCert(
        ca_pem=ca.public_bytes(pem), cert_pem=cert.public_bytes(pem),
        key_pem=key.private_bytes(pem, pkcs8, serialization.NoEncryption()),
        client_cert_pem=client.public_bytes(pem),
        client_key_pem=client_key.private_bytes(pem, pkcs8, serialization.NoEncryption()))
