"""The artifact store: per-attempt JSON documents (transcript, tool calls, diagnosis, oracle
verdicts, cluster snapshot) in a local folder or in S3 through boto3. FARM_ARTIFACTS is
`s3://bucket/prefix` or a folder; the S3 endpoint comes from boto3's own AWS_ENDPOINT_URL."""

from __future__ import annotations

import abc
import json
import os
from pathlib import Path
from typing import Any

from farm.errors import ConfigurationError, InfrastructureError
from farm.secrets import scrub


class ArtifactStore(abc.ABC):
    @abc.abstractmethod
    def put_bytes(self, key: str, data: bytes, content_type: str) -> str:
        """Store `data` under `key`; returns the artifact's URI."""

    @abc.abstractmethod
    def get_bytes(self, uri: str) -> bytes: ...

    @abc.abstractmethod
    def base_uri(self, prefix: str) -> str: ...

    def put_json(self, key: str, obj: Any) -> str:
        text = json.dumps(obj, indent=1, sort_keys=True, default=str)
        return self.put_bytes(key, scrub(text).encode(), "application/json")

    def get_json(self, uri: str) -> Any:
        return json.loads(self.get_bytes(uri))


class LocalArtifactStore(ArtifactStore):
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()

    def put_bytes(self, key: str, data: bytes, content_type: str) -> str:
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)  # readers never see half a file
        return path.as_uri()

    def get_bytes(self, uri: str) -> bytes:
        return Path(uri.removeprefix("file://")).read_bytes()

    def base_uri(self, prefix: str) -> str:
        return (self.root / prefix).as_uri()


class S3ArtifactStore(ArtifactStore):
    def __init__(self, bucket: str, prefix: str = "") -> None:
        import boto3
        from botocore.config import Config

        self.bucket, self.prefix = bucket, prefix.strip("/")
        self._s3 = boto3.client("s3", config=Config(retries={"max_attempts": 5, "mode": "standard"}))

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def put_bytes(self, key: str, data: bytes, content_type: str) -> str:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._s3.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, ContentType=content_type)
        except (BotoCoreError, ClientError) as exc:
            raise InfrastructureError(f"cannot write artifact s3://{self.bucket}/{self._key(key)}: {exc}") from exc
        return f"s3://{self.bucket}/{self._key(key)}"

    def get_bytes(self, uri: str) -> bytes:
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        return self._s3.get_object(Bucket=bucket, Key=key)["Body"].read()

    def base_uri(self, prefix: str) -> str:
        return f"s3://{self.bucket}/{self._key(prefix)}"

    def ensure_bucket(self) -> None:
        from botocore.exceptions import ClientError

        try:
            self._s3.head_bucket(Bucket=self.bucket)
        except ClientError:
            self._s3.create_bucket(Bucket=self.bucket)


def open_store(target: str | None = None, out_dir: str | Path | None = None) -> ArtifactStore:
    target = target or os.environ.get("FARM_ARTIFACTS") or str(Path(out_dir or "farm-out") / "artifacts")
    if target.startswith("s3://"):
        bucket, _, prefix = target.removeprefix("s3://").partition("/")
        if not bucket:
            raise ConfigurationError(f"FARM_ARTIFACTS '{target}' names no bucket (use s3://bucket/prefix)")
        return S3ArtifactStore(bucket, prefix)
    if "://" in target and not target.startswith("file://"):
        raise ConfigurationError(f"FARM_ARTIFACTS '{target}' must be s3://bucket/prefix or a folder")
    return LocalArtifactStore(target.removeprefix("file://"))
