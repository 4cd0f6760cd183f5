"""Provider "eks" against moto's EKS and STS in server mode on loopback."""

from __future__ import annotations

import hashlib
import hmac
import socket
from collections.abc import Iterator
from urllib.parse import parse_qs, parse_qsl, quote, urlsplit

import boto3
import pytest
import yaml
from botocore.exceptions import ClientError

from clusters.base import providers
from clusters.eks import EksProvider, decode_token, translate_aws_error
from farm.errors import ClusterUnavailable, ConfigurationError


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


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
    assert order == ["deleting node group farm-delete-nodes", "deleting cluster farm-delete"]


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
