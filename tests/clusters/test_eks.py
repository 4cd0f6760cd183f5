# ruff: noqa: F811  (pytest fixtures imported from test_real_support)
"""Provider "eks" against moto's EKS, EC2 and STS in server mode on loopback; a loopback proxy in
front of moto scripts what moto does not model (CREATING, FAILED, quotas), and an EKS-style
authenticator in front of a real Kubernetes API server checks the tokens `open()` writes."""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import json
import ssl
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, parse_qsl, quote, urlsplit

import boto3
import pytest
import yaml
from botocore.exceptions import ClientError

from clusters.handle import providers
from clusters.eks import (
    TOKEN_LIFETIME,
    EksClusterHandle,
    EksProvider,
    decode_token,
    generate_token,
    translate_aws_error,
)
from core.errors import ClusterUnavailable, ConfigurationError
from tests.conftest import moto_server

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_real_support import api_server  # noqa: E402,F401  (fixture)


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    with moto_server() as url:
        yield url


class LoopbackHandler(BaseHTTPRequestHandler):
    """The loopback fronts' request handlers: no access log, answers sent whole with their length."""

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, data: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serve_on_loopback(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    """A threaded HTTP server on a free loopback port, serving in a daemon thread; and its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture()
def aws(moto_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFARMTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-farm-test")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("FARM_EKS_ROLE_ARN", "arn:aws:iam::123456789012:role/farm-eks")
    monkeypatch.setenv("FARM_EKS_NODE_ROLE_ARN", "arn:aws:iam::123456789012:role/farm-nodes")
    monkeypatch.setenv("FARM_EKS_SUBNETS", "subnet-aaa,subnet-bbb")
    return moto_url


def provider(messages: list[str] | None = None, **kw: object) -> EksProvider:
    return EksProvider(farm="farm-test", poll_seconds=0.01, wait_seconds=5,
                       progress=(messages.append if messages is not None else None), **kw)


def test_eks_is_a_registered_provider() -> None:
    assert "eks" in providers.names()


def test_create_waits_until_active_and_tags_cluster_and_node_group(aws: str) -> None:
    messages: list[str] = []
    eks = provider(messages, nodes=2)
    cluster = eks.ensure("farm-create")
    assert cluster["status"] == "ACTIVE"
    raw = boto3.client("eks", region_name="eu-west-1")
    described = raw.describe_cluster(name="farm-create")["cluster"]
    assert described["roleArn"] == "arn:aws:iam::123456789012:role/farm-eks"
    assert described["resourcesVpcConfig"]["subnetIds"] == ["subnet-aaa", "subnet-bbb"]
    assert raw.list_tags_for_resource(resourceArn=described["arn"])["tags"] == {
        "farm": "farm-test", "farm-cluster": "eks:farm-create"}
    group = raw.describe_nodegroup(clusterName="farm-create", nodegroupName="farm-create-nodes")["nodegroup"]
    assert group["tags"] == {"farm": "farm-test", "farm-cluster": "eks:farm-create"}
    assert group["scalingConfig"]["desiredSize"] == 2
    assert group["nodeRole"] == "arn:aws:iam::123456789012:role/farm-nodes"
    assert "creating EKS cluster farm-create in eu-west-1" in messages
    assert "cluster farm-create: ACTIVE" in messages
    assert "node group farm-create-nodes: ACTIVE" in messages
    # The instances and volumes the node group launches carry the tags too, through its template.
    ec2 = boto3.client("ec2", region_name="eu-west-1")
    template = ec2.describe_launch_templates(LaunchTemplateNames=["farm-create-nodes"])["LaunchTemplates"][0]
    assert group["launchTemplate"]["id"] == template["LaunchTemplateId"]
    assert group["launchTemplate"]["version"] == str(template["LatestVersionNumber"])
    data = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
        "LaunchTemplateVersions"][0]["LaunchTemplateData"]
    specs = {spec["ResourceType"]: {t["Key"]: t["Value"] for t in spec["Tags"]} for spec in data["TagSpecifications"]}
    assert specs["instance"] == specs["volume"] == {"farm": "farm-test", "farm-cluster": "eks:farm-create"}
    assert "ImageId" not in data and "InstanceType" not in data  # EKS picks the AMI; the node group the types


def test_kubeconfig_token_is_a_presigned_get_caller_identity(aws: str, tmp_path) -> None:
    eks = provider()
    cluster = eks.ensure("farm-token")
    path = tmp_path / "kubeconfig"
    eks.write_kubeconfig(cluster, path)
    assert path.stat().st_mode & 0o777 == 0o600
    config = yaml.safe_load(path.read_text())
    entry = config["clusters"][0]["cluster"]
    assert entry["server"] == cluster["endpoint"]
    assert entry["certificate-authority-data"] == cluster["certificateAuthority"]["data"]
    token = config["users"][0]["user"]["token"]
    assert token.startswith("k8s-aws-v1.")
    assert "=" not in token and "+" not in token and "/" not in token  # base64url, no padding
    url = decode_token(token)
    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}" == aws  # the STS endpoint boto3 was pointed at
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    assert query["Action"] == "GetCallerIdentity"
    assert query["Version"] == "2011-06-15"
    assert query["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256"
    assert query["X-Amz-Expires"] == "60"
    assert set(query["X-Amz-SignedHeaders"].split(";")) == {"host", "x-k8s-aws-id"}
    access_key, _date, region, service, terminator = query["X-Amz-Credential"].split("/")
    assert (access_key, region, service, terminator) == ("AKIAFARMTEST", "eu-west-1", "sts", "aws4_request")
    assert len(query["X-Amz-Signature"]) == 64
    # Check the signature as STS would: SigV4 over the query and the signed x-k8s-aws-id header.
    assert query["X-Amz-Signature"] == sigv4_query_signature(url, {"x-k8s-aws-id": "farm-token"},
                                                              "secret-farm-test")
    wrong = sigv4_query_signature(url, {"x-k8s-aws-id": "other-cluster"}, "secret-farm-test")
    assert query["X-Amz-Signature"] != wrong


def sigv4_query_signature(url: str, headers: dict[str, str], secret: str) -> str:
    """Recompute a presigned URL's SigV4 signature from the AWS specification."""
    parts = urlsplit(url)
    pairs = sorted((k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "X-Amz-Signature")
    canonical_query = "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in pairs)
    signed = {"host": parts.netloc, **{k.lower(): v for k, v in headers.items()}}
    names = sorted(signed)
    canonical = "\n".join([
        "GET", parts.path or "/", canonical_query,
        "".join(f"{n}:{signed[n].strip()}\n" for n in names), ";".join(names),
        hashlib.sha256(b"").hexdigest(),
    ])
    query = dict(pairs)
    _key, date, region, service, _ = query["X-Amz-Credential"].split("/")
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", query["X-Amz-Date"], scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = f"AWS4{secret}".encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def test_tokens_differ_by_cluster_because_the_header_is_signed(aws: str, tmp_path) -> None:
    eks = provider()
    a, b = eks.ensure("farm-sig-a"), eks.ensure("farm-sig-b")
    eks.write_kubeconfig(a, tmp_path / "a")
    eks.write_kubeconfig(b, tmp_path / "b")
    sig = [parse_qs(urlsplit(decode_token(yaml.safe_load((tmp_path / n).read_text())["users"][0]["user"]["token"]))
                    .query)["X-Amz-Signature"][0] for n in ("a", "b")]
    assert sig[0] != sig[1]


def test_attach_existing_cluster_without_creating(aws: str) -> None:
    raw = boto3.client("eks", region_name="eu-west-1")
    raw.create_cluster(name="their-cluster", roleArn="arn:aws:iam::123456789012:role/x",
                       resourcesVpcConfig={"subnetIds": ["subnet-x"]})
    raw.create_nodegroup(clusterName="their-cluster", nodegroupName="their-own-group",
                         nodeRole="arn:aws:iam::123456789012:role/n", subnets=["subnet-x"])
    cluster = provider().ensure("their-cluster", create=False)
    assert cluster["name"] == "their-cluster"
    assert raw.list_clusters()["clusters"].count("their-cluster") == 1
    assert raw.list_nodegroups(clusterName="their-cluster")["nodegroups"] == ["their-own-group"]  # none added
    with pytest.raises(ConfigurationError, match="not tagged farm=farm-test"):
        provider().delete("their-cluster")
    assert raw.describe_cluster(name="their-cluster")["cluster"]["status"] == "ACTIVE"


def test_missing_cluster_is_not_created_unless_asked(aws: str) -> None:
    with pytest.raises(ClusterUnavailable, match="does not exist.*farm cluster create eks:ghost"):
        provider().ensure("ghost", create=False)


def test_delete_removes_node_group_then_cluster(aws: str) -> None:
    messages: list[str] = []
    eks = provider(messages)
    eks.ensure("farm-delete")
    eks.delete("farm-delete")
    assert eks.describe("farm-delete") is None
    raw = boto3.client("eks", region_name="eu-west-1")
    assert "farm-delete" not in raw.list_clusters()["clusters"]
    order = [m for m in messages if m.startswith("deleting")]
    assert order == ["deleting node group farm-delete-nodes", "deleting cluster farm-delete",
                     "deleting launch template farm-delete-nodes"]
    ec2 = boto3.client("ec2", region_name="eu-west-1")
    names = [t["LaunchTemplateName"] for t in ec2.describe_launch_templates()["LaunchTemplates"]]
    assert "farm-delete-nodes" not in names


def test_create_needs_a_role(aws: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FARM_EKS_ROLE_ARN")
    with pytest.raises(ConfigurationError, match="FARM_EKS_ROLE_ARN"):
        provider().ensure("farm-norole")


def test_missing_credentials_is_one_clear_sentence(aws: str, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(ConfigurationError, match="no AWS credentials found; set AWS_ACCESS_KEY_ID"):
        provider().ensure("farm-nocreds")


def test_region_without_eks(aws: str) -> None:
    with pytest.raises(ConfigurationError, match="region 'mars-north-1' does not offer EKS"):
        provider(region="mars-north-1").ensure("farm-mars")


@pytest.mark.parametrize("code", ["ResourceLimitExceededException", "LimitExceededException"])
def test_quota_errors_say_so(code: str) -> None:
    exc = ClientError({"Error": {"Code": code, "Message": "Cluster limit exceeded for account"}}, "CreateCluster")
    translated = translate_aws_error(exc, "creating EKS cluster 'x'", "eu-west-1")
    assert isinstance(translated, ClusterUnavailable)
    assert "AWS quota reached" in str(translated) and "Cluster limit exceeded" in str(translated)


def test_rejected_credentials_are_configuration() -> None:
    exc = ClientError({"Error": {"Code": "UnrecognizedClientException", "Message": "bad token"}}, "DescribeCluster")
    assert isinstance(translate_aws_error(exc, "describing", "eu-west-1"), ConfigurationError)


def test_a_worker_attaches_but_never_creates_unless_told(aws: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FARM_EKS_CREATE", raising=False)
    with pytest.raises(ClusterUnavailable, match="does not exist.*farm cluster create eks:costly"):
        provider().open("costly", install_stack=False)
    assert "costly" not in boto3.client("eks", region_name="eu-west-1").list_clusters()["clusters"]


# -- EKS's asynchronous side, through a loopback proxy in front of moto ---------------------------
# moto answers ACTIVE at once and never runs out of quota. AwsProxy forwards every AWS call to
# moto unchanged, except what a test scripts: the statuses DescribeCluster / DescribeNodegroup
# report next (CREATING, FAILED, ...), an error answer to a call (a quota), or the endpoint a
# cluster reports (a Kubernetes API server on loopback instead of moto's made-up host name).

class AwsProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        self.statuses: dict[str, list[tuple[str, list[dict[str, str]]]]] = {}  # path -> [(status, issues)]
        self.errors: dict[tuple[str, str], tuple[int, str, str]] = {}  # (method, path) -> (code, type, msg)
        self.endpoints: dict[str, tuple[str, str]] = {}  # cluster -> (endpoint, CA data)
        self.seen: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(LoopbackHandler):
            def _any(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.split("?")[0]
                with proxy.lock:
                    proxy.seen.append((self.command, path))
                    error = proxy.errors.get((self.command, path))
                if error:
                    code, kind, message = error
                    return self._send(code, json.dumps({"message": message}).encode(),
                                      {"Content-Type": "application/json", "x-amzn-ErrorType": f"{kind}:"})
                conn = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                conn.request(self.command, self.path, body=body, headers=headers)
                answer = conn.getresponse()
                data, status = answer.read(), answer.status
                out = {k: v for k, v in answer.getheaders()
                       if k.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server")}
                conn.close()
                if status == 200 and self.command == "GET":
                    data = proxy._rewrite(path, data)
                self._send(status, data, out)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _any

        self.server, self.url = serve_on_loopback(Handler)

    def _rewrite(self, path: str, data: bytes) -> bytes:
        parts = path.strip("/").split("/")
        if parts[0] != "clusters" or len(parts) not in (2, 4):
            return data
        doc = json.loads(data)
        item = doc.get("cluster") or doc.get("nodegroup")
        with self.lock:
            queue = self.statuses.get(path)
            scripted = queue.pop(0) if queue and len(queue) > 1 else (queue[0] if queue else None)
        if scripted:
            item["status"] = scripted[0]
            item["health"] = {"issues": scripted[1]}
        if len(parts) == 2 and parts[1] in self.endpoints:
            item["endpoint"], item["certificateAuthority"] = self.endpoints[parts[1]][0], {
                "data": self.endpoints[parts[1]][1]}
        return json.dumps(doc).encode()

    def script(self, path: str, *statuses: str | tuple[str, list[dict[str, str]]]) -> None:
        """The next statuses reported at `path`, in order; the last one stays (None: moto's own)."""
        self.statuses[path] = [s if isinstance(s, tuple) else (s, []) for s in statuses]

    def polls(self, path: str) -> int:
        return self.seen.count(("GET", path))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def proxy(aws: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[AwsProxy]:
    p = AwsProxy(aws)
    monkeypatch.setenv("AWS_ENDPOINT_URL", p.url)  # boto3 (EKS, EC2, STS) talks to the proxy
    yield p
    p.close()


def test_creating_is_polled_until_active(proxy: AwsProxy) -> None:
    messages: list[str] = []
    proxy.script("/clusters/farm-poll", "CREATING", "CREATING", "ACTIVE")
    proxy.script("/clusters/farm-poll/node-groups/farm-poll-nodes", "CREATING", "ACTIVE")
    cluster = provider(messages).ensure("farm-poll")
    assert cluster["status"] == "ACTIVE"
    assert proxy.polls("/clusters/farm-poll") == 1 + 3  # the look-up before creating, then three polls
    assert proxy.polls("/clusters/farm-poll/node-groups/farm-poll-nodes") == 2
    assert ("POST", "/clusters") in proxy.seen and ("POST", "/clusters/farm-poll/node-groups") in proxy.seen
    # Each status change is reported once, in order.
    states = [m for m in messages if m.startswith(("cluster farm-poll:", "node group farm-poll-nodes:"))]
    assert states == ["cluster farm-poll: CREATING", "cluster farm-poll: ACTIVE",
                      "node group farm-poll-nodes: CREATING", "node group farm-poll-nodes: ACTIVE"]


def test_a_failed_cluster_is_one_clear_error(proxy: AwsProxy) -> None:
    proxy.script("/clusters/farm-fail", "CREATING", ("FAILED", [
        {"code": "Ec2SubnetInvalidConfiguration", "message": "One or more Amazon EC2 Subnets of [subnet-aaa] "
         "for node group farm-fail does not automatically assign public IP addresses"}]))
    with pytest.raises(ClusterUnavailable) as err:
        provider().ensure("farm-fail")
    assert str(err.value) == ("EKS cluster 'farm-fail' is FAILED (Ec2SubnetInvalidConfiguration: One or more Amazon "
                              "EC2 Subnets of [subnet-aaa] for node group farm-fail does not automatically assign "
                              "public IP addresses)")
    assert ("POST", "/clusters/farm-fail/node-groups") not in proxy.seen  # no node group on a failed cluster


def test_a_failed_node_group_is_one_clear_error(proxy: AwsProxy) -> None:
    proxy.script("/clusters/farm-ngfail/node-groups/farm-ngfail-nodes", "CREATING", ("CREATE_FAILED", [
        {"code": "AsgInstanceLaunchFailures", "message": "Could not launch On-Demand Instances. "
         "VcpuLimitExceeded - You have requested more vCPU capacity than your current vCPU limit of 0 allows"}]))
    with pytest.raises(ClusterUnavailable, match=r"EKS node group 'farm-ngfail-nodes' is CREATE_FAILED "
                                                 r"\(AsgInstanceLaunchFailures: Could not launch .*VcpuLimitExceeded"):
        provider().ensure("farm-ngfail")


def test_waiting_gives_up_after_wait_seconds(proxy: AwsProxy) -> None:
    proxy.script("/clusters/farm-slow", "CREATING")  # forever
    start = time.monotonic()
    with pytest.raises(ClusterUnavailable, match=r"^EKS cluster 'farm-slow' still CREATING after 1 s$"):
        EksProvider(farm="farm-test", poll_seconds=0.05, wait_seconds=1).ensure("farm-slow")
    assert time.monotonic() - start >= 1  # it waited the whole wait_seconds (no upper bound: a loaded machine is slow)
    assert proxy.polls("/clusters/farm-slow") > 5  # polled all along, not one long sleep


def test_quota_on_create_cluster_end_to_end(proxy: AwsProxy) -> None:
    proxy.errors[("POST", "/clusters")] = (400, "ResourceLimitExceededException",
                                           "Cluster limit exceeded for account 123456789012 in eu-west-1")
    with pytest.raises(ClusterUnavailable) as err:
        provider().ensure("farm-quota")
    assert str(err.value) == (
        "creating EKS cluster 'farm-quota': AWS quota reached (ResourceLimitExceededException: Cluster limit "
        "exceeded for account 123456789012 in eu-west-1); delete unused clusters or raise the quota in the "
        "Service Quotas console")
    assert "farm-quota" not in boto3.client("eks", region_name="eu-west-1").list_clusters()["clusters"]
    from typer.testing import CliRunner

    from farm.cli.cluster import app

    result = CliRunner().invoke(app, ["create", "eks:farm-quota", "--no-stack"])
    assert result.exit_code == 1
    assert "AWS quota reached (ResourceLimitExceededException" in " ".join(result.output.split())


# -- open(): a kubeconfig whose token an EKS-style authenticator accepts -------------------------

class EksApiFront:
    """What an EKS endpoint does with the farm's bearer token, on loopback over HTTP: it takes
    only `k8s-aws-v1.` tokens whose presigned GetCallerIdentity URL is SigV4-signed, with the
    x-k8s-aws-id header naming this cluster, by the test's AWS secret, and no older than
    `max_age` (EKS: 15 minutes); then it forwards the call to a real Kubernetes API server (the
    emulated cluster's) with that server's own admin token."""

    def __init__(self, cluster: str, secret: str, api: dict[str, Any], max_age: float = 900.0) -> None:
        self.cluster, self.secret, self.max_age = cluster, secret, max_age
        self.accepted: list[str] = []
        self.refused: list[str] = []
        target = urlsplit(api["kubernetes"])
        context = ssl.create_default_context(cadata=api["ca_cert"])
        front = self

        class Handler(LoopbackHandler):
            def _any(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                token = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
                why = front.verify(token)
                if why:
                    front.refused.append(token)
                    data = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                       "message": f"Unauthorized: {why}", "reason": "Unauthorized", "code": 401})
                    return self._send(401, data.encode(), {"Content-Type": "application/json"})
                front.accepted.append(token)
                conn = http.client.HTTPSConnection(target.hostname, target.port, context=context, timeout=30)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("host", "authorization", "content-length")}
                headers["Authorization"] = f"Bearer {api['admin_token']}"
                conn.request(self.command, self.path, body=body or None, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                out = {k: v for k, v in answer.getheaders() if k.lower() == "content-type"}
                conn.close()
                self._send(answer.status, data, out)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

        self.server, self.url = serve_on_loopback(Handler)

    def verify(self, token: str) -> str:
        """Why the token is refused, or '' when it is good."""
        try:
            url = decode_token(token)
        except ValueError as exc:
            return str(exc)
        query = dict(parse_qsl(urlsplit(url).query))
        if query.get("Action") != "GetCallerIdentity":
            return "not a GetCallerIdentity request"
        if "x-k8s-aws-id" not in query.get("X-Amz-SignedHeaders", "").split(";"):
            return "the cluster id header is not signed"
        signed_at = datetime.strptime(query["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        if (datetime.now(UTC) - signed_at).total_seconds() > self.max_age:
            return "token expired"
        if query.get("X-Amz-Signature") != sigv4_query_signature(url, {"x-k8s-aws-id": self.cluster}, self.secret):
            return "signature mismatch (another cluster's token, or another secret)"
        return ""

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _token(kubeconfig: Path) -> str:
    return yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]


def _signed_at(token: str) -> datetime:
    query = dict(parse_qsl(urlsplit(decode_token(token)).query))
    return datetime.strptime(query["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)


@pytest.fixture()
def eks_front(proxy: AwsProxy, api_server: dict[str, Any]) -> Iterator[EksApiFront]:
    front = EksApiFront("farm-open", "secret-farm-test", api_server)
    proxy.endpoints["farm-open"] = (front.url, base64.b64encode(api_server["ca_cert"].encode()).decode())
    yield front
    front.close()


def test_open_gives_a_handle_whose_kubeconfig_carries_a_fresh_token(eks_front: EksApiFront, proxy: AwsProxy,
                                                                    tmp_path: Path) -> None:
    proxy.script("/clusters/farm-open", "CREATING", "ACTIVE")
    handle = provider().open("farm-open", create=True, install_stack=False, workdir=tmp_path)
    try:
        assert isinstance(handle, EksClusterHandle) and handle.ref == "eks:farm-open"
        assert handle.kubeconfig == tmp_path / "kubeconfig"
        assert handle.kubeconfig.stat().st_mode & 0o777 == 0o600
        token = _token(handle.kubeconfig)
        assert abs((datetime.now(UTC) - _signed_at(token)).total_seconds()) < 60
        assert eks_front.verify(token) == ""
        health = handle.health()
        assert health.ok, health.detail  # the authenticator took the token; the API server answered
        assert "default" in handle._namespaces()
        assert token in eks_front.accepted and not eks_front.refused
        assert _token(handle.kubeconfig) == token  # a fresh token is not re-signed on every use
    finally:
        handle.close()


def test_a_token_near_expiry_is_refreshed(eks_front: EksApiFront, tmp_path: Path) -> None:
    handle = provider().open("farm-open", create=True, install_stack=False, workdir=tmp_path)
    try:
        old = _token(handle.kubeconfig)
        assert handle.health().ok
        time.sleep(1.1)  # SigV4 dates have one-second resolution: the next signature must differ
        # The handle as it stands 11 minutes after signing (3 minutes before EKS would refuse it).
        handle._expires = datetime.now(UTC) + (TOKEN_LIFETIME - timedelta(minutes=11))
        eks_front.max_age = 1.0  # and the authenticator now refuses the old token
        health = handle.health()
        assert health.ok, health.detail
        new = _token(handle.kubeconfig)
        assert new != old and _signed_at(new) > _signed_at(old)
        assert eks_front.verify(old) == "token expired"
        assert eks_front.accepted[-1] == new  # the API client was rebuilt with the new token
        assert handle._expires > datetime.now(UTC) + TOKEN_LIFETIME - timedelta(minutes=1)
    finally:
        handle.close()


def test_a_token_for_another_cluster_is_refused(eks_front: EksApiFront, aws: str) -> None:
    session = boto3.session.Session(region_name="eu-west-1")
    token, _ = generate_token(session, "some-other-cluster", "eu-west-1")
    assert eks_front.verify(token).startswith("signature mismatch")
    good, _ = generate_token(session, "farm-open", "eu-west-1")
    assert eks_front.verify(good) == ""
