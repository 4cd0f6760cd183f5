"""What other clients' suites (tests/conformance) found missing, checked over real HTTPS against a
served emulated cluster: x509 client authentication with the admin certificate `farm sim up`
hands out, TokenReview, DELETE answered with the object for the kinds whose registry returns it,
and server-side apply keeping a map that was owned whole."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusters.emulated import SimHandle
from farm.pytest_plugin import SimClusters

pytestmark = pytest.mark.slow


@pytest.fixture()
def sim(sim_clusters: SimClusters) -> SimHandle:
    return sim_clusters.served(seed=3)


def _user(kubeconfig: Path) -> dict[str, str]:
    return yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]


def _context(sim: SimHandle, tmp_path: Path, with_cert: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(sim.ca_file))
    if with_cert:
        user = _user(sim.kind_kubeconfig)
        cert, key = tmp_path / "admin.crt", tmp_path / "admin.key"
        cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
        key.write_bytes(base64.b64decode(user["client-key-data"]))
        ctx.load_cert_chain(str(cert), str(key))
    return ctx


def call(sim: SimHandle, ctx: ssl.SSLContext, method: str, path: str, body: Any = None,
         token: str | None = None, content_type: str = "application/json") -> tuple[int, Any]:
    headers = {"Content-Type": content_type, "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(sim.endpoints.kubernetes + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_the_admin_certificate_authenticates_alone_and_only_farm_sim_ups_kubeconfig_carries_it(
        sim: SimHandle, tmp_path: Path) -> None:
    assert "client-certificate-data" not in _user(sim.kubeconfig)
    code, review = call(sim, _context(sim, tmp_path, True), "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    assert code == 201
    assert review["status"]["userInfo"]["username"] == "kubernetes-admin"
    assert "system:masters" in review["status"]["userInfo"]["groups"]
    code, status = call(sim, _context(sim, tmp_path, False), "GET", "/api/v1/namespaces")
    assert code == 401 and status["reason"] == "Unauthorized"


def test_a_token_review_names_the_tokens_user_or_says_it_does_not_authenticate(sim: SimHandle, tmp_path: Path) -> None:
    ctx, admin = _context(sim, tmp_path, False), _user(sim.kubeconfig)["token"]
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": admin}}
    code, out = call(sim, ctx, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", review, token=admin)
    assert code == 201 and out["status"]["authenticated"] is True
    assert out["status"]["user"]["username"] == "kubernetes-admin"
    review["spec"]["token"] = "not-a-token"
    code, out = call(sim, ctx, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", review, token=admin)
    assert code == 201 and "authenticated" not in out["status"]


def test_delete_answers_with_the_service_and_with_a_status_for_a_configmap(sim: SimHandle, tmp_path: Path) -> None:
    ctx, admin = _context(sim, tmp_path, False), _user(sim.kubeconfig)["token"]
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "gone"},
           "spec": {"ports": [{"port": 80}], "selector": {"app": "x"}}}
    assert call(sim, ctx, "POST", "/api/v1/namespaces/default/services", svc, token=admin)[0] == 201
    code, out = call(sim, ctx, "DELETE", "/api/v1/namespaces/default/services/gone", token=admin)
    assert code == 200 and out["kind"] == "Service" and out["metadata"]["name"] == "gone"
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gone"}}
    assert call(sim, ctx, "POST", "/api/v1/namespaces/default/configmaps", cm, token=admin)[0] == 201
    code, out = call(sim, ctx, "DELETE", "/api/v1/namespaces/default/configmaps/gone", token=admin)
    assert code == 200 and out["kind"] == "Status" and out["details"] == {
        "name": "gone", "kind": "configmaps", "uid": out["details"]["uid"]}


def test_apply_fills_a_map_it_emptied_before(sim: SimHandle, tmp_path: Path) -> None:
    ctx, admin = _context(sim, tmp_path, False), _user(sim.kubeconfig)["token"]
    path = "/api/v1/namespaces/default/configmaps/applied?fieldManager=lightkube"
    for data, want in (({"a": "1"}, {"a": "1"}), ({}, None), ({"b": "2"}, {"b": "2"})):
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": data}
        code, out = call(sim, ctx, "PATCH", path, cm, token=admin, content_type="application/apply-patch+yaml")
        assert code in (200, 201), out
        assert (out.get("data") or None) == want
