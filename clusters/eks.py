"""Provider "eks": an Amazon EKS cluster and node group per worker, through boto3.

`open(name)` attaches to the cluster of that name or creates it (tagged with the farm's name, and
so are its node group and, through a launch template, the EC2 instances and volumes the node group
launches), waits until it and its node group are ACTIVE, writes a kubeconfig whose bearer token is a
presigned STS GetCallerIdentity request (what `aws eks get-token` produces), and installs the
stack. Tear-down happens only through `farm cluster delete eks:NAME`, and only for clusters this
farm created (tag `farm`).
"""

from __future__ import annotations

import base64
import functools
import os
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from clusters.handle import ClusterProvider, providers
from clusters.real import KubeconfigClusterHandle
from core.errors import ClusterUnavailable, ConfigurationError

TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_ID_HEADER = "x-k8s-aws-id"
URL_EXPIRES_SECONDS = 60  # the presigned URL's lifetime, as aws-cli signs it
TOKEN_LIFETIME = timedelta(minutes=14)  # the API server accepts a token ~15 min after signing
REFRESH_AFTER = timedelta(minutes=10)
QUOTA_CODES = {"LimitExceededException", "ResourceLimitExceededException", "LimitExceeded",
               "ServiceQuotaExceededException", "ResourceLimitExceeded"}
CREDENTIAL_CODES = {"UnrecognizedClientException", "InvalidClientTokenId", "ExpiredToken",
                    "ExpiredTokenException", "AccessDeniedException", "SignatureDoesNotMatch"}

Progress = Callable[[str], None]


def farm_name() -> str:
    return os.environ.get("FARM_NAME", "sre-farm")


def generate_token(session: Any, cluster_name: str, region: str) -> tuple[str, datetime]:
    """A bearer token for an EKS API server, computed exactly as `aws eks get-token` does: a
    presigned GET of STS GetCallerIdentity whose signature covers the `x-k8s-aws-id` header
    (the cluster name), base64url-encoded without padding behind the `k8s-aws-v1.` prefix."""
    sts = session.client("sts", region_name=region)

    def add_cluster_header(request: Any, **_: Any) -> None:
        request.headers[CLUSTER_ID_HEADER] = cluster_name

    sts.meta.events.register("before-sign.sts.GetCallerIdentity", add_cluster_header)
    url = sts.generate_presigned_url(
        "get_caller_identity", Params={}, ExpiresIn=URL_EXPIRES_SECONDS, HttpMethod="GET"
    )
    token = TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")
    return token, datetime.now(UTC) + TOKEN_LIFETIME


def decode_token(token: str) -> str:
    """The presigned URL inside a token (for tests and debugging)."""
    if not token.startswith(TOKEN_PREFIX):
        raise ValueError(f"not an EKS token (no '{TOKEN_PREFIX}' prefix)")
    body = token[len(TOKEN_PREFIX):]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()


def translate_aws_error(exc: Exception, doing: str, region: str) -> Exception:
    """botocore's errors as the farm's: credentials and regions are configuration, quotas and
    outages make the cluster unavailable. Each message says what to do."""
    from botocore.exceptions import (
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
        PartialCredentialsError,
    )

    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return ConfigurationError(
            f"{doing}: no AWS credentials found; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
            "or AWS_PROFILE, or run on a host with an IAM role"
        )
    if isinstance(exc, NoRegionError):
        return ConfigurationError(f"{doing}: no AWS region; set AWS_REGION or pass region=")
    if isinstance(exc, EndpointConnectionError):
        return ClusterUnavailable(
            f"{doing}: cannot reach the EKS endpoint of region '{region}' ({exc}); "
            "check the region offers EKS and the network reaches AWS"
        )
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code, message = error.get("Code", "?"), error.get("Message", str(exc))
        if code in QUOTA_CODES:
            return ClusterUnavailable(
                f"{doing}: AWS quota reached ({code}: {message}); delete unused clusters or raise "
                "the quota in the Service Quotas console"
            )
        if code in CREDENTIAL_CODES:
            return ConfigurationError(f"{doing}: AWS rejected the credentials ({code}: {message})")
        return ClusterUnavailable(f"{doing}: {code}: {message}")
    return exc


class EksClusterHandle(KubeconfigClusterHandle):
    """A KubeconfigClusterHandle whose admin token is re-signed before it expires."""

    def __init__(self, provider: EksProvider, cluster: dict[str, Any], kubeconfig: Path,
                 expires: datetime, **options: Any) -> None:
        self._eks, self._cluster_info, self._expires = provider, cluster, expires
        super().__init__("eks", cluster["name"], kubeconfig, **options)

    def _refresh_credentials(self) -> None:
        if datetime.now(UTC) < self._expires - (TOKEN_LIFETIME - REFRESH_AFTER):
            return
        self._expires = self._eks.write_kubeconfig(self._cluster_info, self._kubeconfig_path)
        self._drop_client()


@providers.register("eks")
class EksProvider(ClusterProvider):
    """Options come from arguments or the environment: AWS_REGION, FARM_NAME,
    FARM_EKS_ROLE_ARN, FARM_EKS_NODE_ROLE_ARN, FARM_EKS_SUBNETS, FARM_EKS_SECURITY_GROUPS."""

    def __init__(
        self,
        region: str | None = None,
        farm: str | None = None,
        role_arn: str | None = None,
        node_role_arn: str | None = None,
        subnets: list[str] | None = None,
        security_groups: list[str] | None = None,
        kubernetes_version: str = "1.30",
        instance_types: list[str] | None = None,
        nodes: int = 3,
        wait_seconds: float = 1800.0,
        poll_seconds: float = 15.0,
        progress: Progress | None = None,
    ) -> None:
        self.region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or ""
        self.farm = farm or farm_name()
        self.role_arn = role_arn or os.environ.get("FARM_EKS_ROLE_ARN")
        self.node_role_arn = node_role_arn or os.environ.get("FARM_EKS_NODE_ROLE_ARN")
        self.subnets = subnets or _env_list("FARM_EKS_SUBNETS")
        self.security_groups = security_groups or _env_list("FARM_EKS_SECURITY_GROUPS")
        self.kubernetes_version = kubernetes_version
        self.instance_types = instance_types or ["m5.large"]
        self.nodes = nodes
        self.wait_seconds, self.poll_seconds = wait_seconds, poll_seconds
        self.progress = progress or (lambda message: None)
        self._session: Any = None

    # -- AWS access -----------------------------------------------------------------------
    def session(self) -> Any:
        if self._session is None:
            import boto3

            if not self.region:
                raise ConfigurationError("eks: no AWS region; set AWS_REGION or pass region=")
            session = boto3.session.Session(region_name=self.region)
            known = session.get_available_regions("eks") + session.get_available_regions(
                "eks", partition_name="aws-cn") + session.get_available_regions("eks", partition_name="aws-us-gov")
            if self.region not in known:
                raise ConfigurationError(
                    f"eks: region '{self.region}' does not offer EKS (regions that do: {', '.join(sorted(known)[:8])}, ...)"
                )
            if session.get_credentials() is None:
                raise ConfigurationError(
                    "eks: no AWS credentials found; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                    "or AWS_PROFILE, or run on a host with an IAM role"
                )
            self._session = session
        return self._session

    def client(self) -> Any:
        return self.session().client("eks")

    def _call(self, doing: str, fn: Callable[..., Any], **kwargs: Any) -> Any:
        try:
            return fn(**kwargs)
        except Exception as exc:
            translated = translate_aws_error(exc, doing, self.region)
            if translated is exc:
                raise
            raise translated from exc

    def tags(self, name: str) -> dict[str, str]:
        return {"farm": self.farm, "farm-cluster": f"eks:{name}"}

    @staticmethod
    def nodegroup_name(name: str) -> str:
        return f"{name}-nodes"

    # -- create or attach -----------------------------------------------------------------
    def describe(self, name: str) -> dict[str, Any] | None:
        eks = self.client()
        try:
            return eks.describe_cluster(name=name)["cluster"]
        except eks.exceptions.ResourceNotFoundException:
            return None
        except Exception as exc:
            raise translate_aws_error(exc, f"describing EKS cluster '{name}'", self.region) from exc

    def ensure(self, name: str, *, create: bool = True) -> dict[str, Any]:
        """The cluster, ACTIVE with an ACTIVE node group; created (tagged) when absent."""
        eks = self.client()
        cluster = self.describe(name)
        if cluster is None:
            if not create:
                raise ClusterUnavailable(f"EKS cluster '{name}' does not exist in {self.region} "
                                         f"(create it with `farm cluster create eks:{name}`)")
            self._require("role_arn", "FARM_EKS_ROLE_ARN", self.role_arn)
            self._require("subnets", "FARM_EKS_SUBNETS", self.subnets)
            vpc: dict[str, Any] = {"subnetIds": self.subnets}
            if self.security_groups:
                vpc["securityGroupIds"] = self.security_groups
            self.progress(f"creating EKS cluster {name} in {self.region}")
            self._call(f"creating EKS cluster '{name}'", eks.create_cluster, name=name,
                       version=self.kubernetes_version, roleArn=self.role_arn,
                       resourcesVpcConfig=vpc, tags=self.tags(name))
        cluster = self._wait(name, "cluster", lambda: eks.describe_cluster(name=name)["cluster"])
        group = self.nodegroup_name(name)
        groups = self._call("listing node groups", eks.list_nodegroups, clusterName=name)["nodegroups"]
        if group not in groups and groups:
            # An attached cluster with node groups of its own: use those.
            for existing in groups:
                self._wait(existing, "node group", functools.partial(self._nodegroup, eks, name, existing))
            return cluster
        if group not in groups:
            if not create:
                raise ClusterUnavailable(f"EKS cluster '{name}' has no node group (the farm would create '{group}')")
            self._require("node_role_arn", "FARM_EKS_NODE_ROLE_ARN", self.node_role_arn)
            template = self.ensure_launch_template(name)
            self.progress(f"creating node group {group} ({self.nodes} × {', '.join(self.instance_types)})")
            self._call(f"creating node group '{group}'", eks.create_nodegroup, clusterName=name,
                       nodegroupName=group, nodeRole=self.node_role_arn,
                       subnets=cluster.get("resourcesVpcConfig", {}).get("subnetIds") or self.subnets,
                       instanceTypes=self.instance_types,
                       scalingConfig={"minSize": self.nodes, "maxSize": self.nodes, "desiredSize": self.nodes},
                       launchTemplate=template, labels={"farm": self.farm}, tags=self.tags(name))
        self._wait(group, "node group", functools.partial(self._nodegroup, eks, name, group))
        return cluster

    @staticmethod
    def launch_template_name(name: str) -> str:
        return f"{name}-nodes"

    def ensure_launch_template(self, name: str) -> dict[str, str]:
        """The node group's launch template, created when absent. A node group's own `tags` stay
        on the node group (EKS does not copy them to what it launches); the template's tag
        specifications put the farm's tags on every instance and volume, so that the machines
        that cost money can be found, and billed, by farm. It sets nothing else: EKS picks the
        AMI, and the node group names the instance types."""
        ec2 = self.session().client("ec2")
        template = self.launch_template_name(name)
        found = self._launch_template(ec2, template)
        if found is None:
            tags = [{"Key": k, "Value": v} for k, v in self.tags(name).items()]
            self.progress(f"creating launch template {template} (tags for the nodes' instances and volumes)")
            found = self._call(
                f"creating launch template '{template}'", ec2.create_launch_template, LaunchTemplateName=template,
                LaunchTemplateData={"TagSpecifications": [{"ResourceType": "instance", "Tags": tags},
                                                          {"ResourceType": "volume", "Tags": tags}]},
                TagSpecifications=[{"ResourceType": "launch-template", "Tags": tags}])["LaunchTemplate"]
        return {"id": found["LaunchTemplateId"], "version": str(found["LatestVersionNumber"])}

    def _launch_template(self, ec2: Any, template: str) -> dict[str, Any] | None:
        from botocore.exceptions import ClientError

        try:
            return ec2.describe_launch_templates(LaunchTemplateNames=[template])["LaunchTemplates"][0]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "InvalidLaunchTemplateName.NotFoundException":
                return None
            raise translate_aws_error(exc, f"describing launch template '{template}'", self.region) from exc
        except Exception as exc:
            raise translate_aws_error(exc, f"describing launch template '{template}'", self.region) from exc

    def _require(self, field: str, env: str, value: Any) -> None:
        if not value:
            raise ConfigurationError(f"eks: creating a cluster needs {field} (argument '{field}' or ${env})")

    def _wait(self, label: str, what: str, describe: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Poll until ACTIVE, reporting each status change; bounded by wait_seconds."""
        deadline = time.monotonic() + self.wait_seconds
        last = None
        while True:
            item = self._call(f"describing {what} '{label}'", describe)
            status = item.get("status", "?")
            if status != last:
                self.progress(f"{what} {label}: {status}")
                last = status
            if status == "ACTIVE":
                return item
            if status in ("FAILED", "CREATE_FAILED", "DELETE_FAILED", "DEGRADED"):
                issues = item.get("health", {}).get("issues") or []
                detail = "; ".join(f"{i.get('code')}: {i.get('message')}" for i in issues)
                raise ClusterUnavailable(f"EKS {what} '{label}' is {status}" + (f" ({detail})" if detail else ""))
            if time.monotonic() > deadline:
                raise ClusterUnavailable(
                    f"EKS {what} '{label}' still {status} after {self.wait_seconds:.0f} s"
                )
            time.sleep(self.poll_seconds)

    # -- kubeconfig -----------------------------------------------------------------------
    def write_kubeconfig(self, cluster: dict[str, Any], path: Path) -> datetime:
        token, expires = generate_token(self.session(), cluster["name"], self.region)
        entry = f"eks-{cluster['name']}"
        config = {
            "apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": entry, "cluster": {
                "server": cluster["endpoint"],
                "certificate-authority-data": cluster["certificateAuthority"]["data"],
            }}],
            "users": [{"name": entry, "user": {"token": token}}],
            "contexts": [{"name": entry, "context": {"cluster": entry, "user": entry}}],
            "current-context": entry,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            yaml.safe_dump(config, out, sort_keys=False)
        return expires

    def kubeconfig(self, name: str, path: Path) -> datetime:
        cluster = self.describe(name)
        if cluster is None or cluster.get("status") != "ACTIVE":
            raise ClusterUnavailable(f"EKS cluster '{name}' is not ACTIVE")
        return self.write_kubeconfig(cluster, path)

    def open(self, name: str, *, create: bool | None = None, install_stack: bool = True, helm: str = "helm",
             workdir: Path | None = None, **handle_options: Any) -> EksClusterHandle:
        """Attach to the cluster; create it only when asked (`farm cluster create eks:NAME`, or
        FARM_EKS_CREATE=1 for a worker), since an EKS cluster costs money by the hour."""
        if create is None:
            create = os.environ.get("FARM_EKS_CREATE", "0").strip().lower() in ("1", "true", "yes", "on")
        cluster = self.ensure(name, create=create)
        workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix=f"farm-eks-{name}-"))
        kubeconfig = workdir / "kubeconfig"
        expires = self.write_kubeconfig(cluster, kubeconfig)
        handle = EksClusterHandle(self, cluster, kubeconfig, expires, workdir=workdir, **handle_options)
        if install_stack:
            from clusters.stack import install_stack as install

            try:
                install(handle, helm=helm)
            except Exception:
                handle.close()
                raise
            handle.mark_baseline()
        return handle

    # -- tear down ------------------------------------------------------------------------
    def delete(self, name: str) -> None:
        """Node groups first, then the cluster, then the nodes' launch template; refuses clusters
        this farm did not create."""
        eks = self.client()
        cluster = self.describe(name)
        if cluster is None:
            raise ClusterUnavailable(f"EKS cluster '{name}' does not exist in {self.region}")
        owner = (cluster.get("tags") or {}).get("farm")
        if owner != self.farm:
            raise ConfigurationError(
                f"EKS cluster '{name}' is not tagged farm={self.farm} (tag: {owner or 'none'}); "
                "the farm deletes only clusters it created"
            )
        groups = self._call("listing node groups", eks.list_nodegroups, clusterName=name)["nodegroups"]
        for group in groups:
            self.progress(f"deleting node group {group}")
            self._call(f"deleting node group '{group}'", eks.delete_nodegroup, clusterName=name, nodegroupName=group)
        for group in groups:
            self._wait_gone(f"node group {group}", functools.partial(self._nodegroup, eks, name, group))
        self.progress(f"deleting cluster {name}")
        self._call(f"deleting EKS cluster '{name}'", eks.delete_cluster, name=name)
        self._wait_gone(f"cluster {name}", lambda: eks.describe_cluster(name=name)["cluster"])
        ec2 = self.session().client("ec2")
        template = self._launch_template(ec2, self.launch_template_name(name))
        # Only a template this farm made: a same-named one of someone else's stays.
        if template is not None and {t.get("Key"): t.get("Value") for t in template.get("Tags") or []}.get(
                "farm") == self.farm:
            self.progress(f"deleting launch template {template['LaunchTemplateName']}")
            self._call(f"deleting launch template '{template['LaunchTemplateName']}'", ec2.delete_launch_template,
                       LaunchTemplateId=template["LaunchTemplateId"])

    @staticmethod
    def _nodegroup(eks: Any, cluster: str, group: str) -> dict[str, Any]:
        return eks.describe_nodegroup(clusterName=cluster, nodegroupName=group)["nodegroup"]

    def _wait_gone(self, what: str, describe: Callable[[], dict[str, Any]]) -> None:
        eks = self.client()
        deadline = time.monotonic() + self.wait_seconds
        while True:
            try:
                status = describe().get("status", "?")
            except eks.exceptions.ResourceNotFoundException:
                self.progress(f"{what}: deleted")
                return
            except Exception as exc:
                raise translate_aws_error(exc, f"waiting for {what} to go", self.region) from exc
            if status == "DELETE_FAILED":
                raise ClusterUnavailable(f"EKS {what} failed to delete")
            if time.monotonic() > deadline:
                raise ClusterUnavailable(f"EKS {what} still {status} after {self.wait_seconds:.0f} s")
            time.sleep(self.poll_seconds)


def _env_list(name: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]
