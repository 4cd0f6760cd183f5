"""The artifact store: per-attempt JSON documents (transcript, tool calls, diagnosis, oracle
verdicts, cluster snapshot, gzip-compressed as .json.gz) in a local folder or in S3 through boto3. FARM_ARTIFACTS is
`s3://bucket/prefix` or a folder; the S3 endpoint comes from boto3's own AWS_ENDPOINT_URL.

A farm worker writes to S3 through a spool: while the endpoint is down, documents go to a
folder of the worker's own on local disk (FARM_SPOOL_DIR, one subfolder per worker) under the URI
they will have, and a background uploader sends them when it is back, before the worker exits,
and when a worker of the same name starts again. Nothing is lost to an S3 outage."""

from __future__ import annotations

import abc
import gzip
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from core.errors import ConfigurationError, InfrastructureError
from core.secrets import scrub

log = logging.getLogger("results.artifact_store")


class ArtifactStore(abc.ABC):
    @abc.abstractmethod
    def put_bytes(self, key: str, data: bytes, content_type: str) -> str:
        """Store `data` under `key`; returns the artifact's URI."""

    @abc.abstractmethod
    def get_bytes(self, uri: str) -> bytes: ...

    @abc.abstractmethod
    def base_uri(self, prefix: str) -> str: ...

    def put_json(self, key: str, obj: Any) -> str:
        """`obj` encoded once, scrubbed in one pass and stored; gzip-compressed when `key` ends in
        .gz (the cluster snapshot: a tenth of its size)."""
        data = scrub(json.dumps(obj, indent=1, sort_keys=True, default=str)).encode()
        if key.endswith(".gz"):
            # mtime 0: the same document compresses to the same bytes, whenever it is written.
            return self.put_bytes(key, gzip.compress(data, compresslevel=6, mtime=0), "application/gzip")
        return self.put_bytes(key, data, "application/json")

    def get_json(self, uri: str) -> Any:
        data = self.get_bytes(uri)
        return json.loads(gzip.decompress(data) if uri.endswith(".gz") else data)


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
        # Short connect timeout: an endpoint that is down must send a worker to its spool in
        # seconds, not after boto's minute per try.
        self._s3 = boto3.client("s3", config=Config(retries={"max_attempts": 3, "mode": "standard"},
                                                    connect_timeout=5, read_timeout=30))

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def uri_for(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._key(key)}"

    def put_bytes(self, key: str, data: bytes, content_type: str) -> str:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._s3.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, ContentType=content_type)
        except (BotoCoreError, ClientError) as exc:
            raise InfrastructureError(f"cannot write artifact s3://{self.bucket}/{self._key(key)}: {exc}") from exc
        return f"s3://{self.bucket}/{self._key(key)}"

    def get_bytes(self, uri: str) -> bytes:
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        body: bytes = self._s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        return body

    def base_uri(self, prefix: str) -> str:
        return f"s3://{self.bucket}/{self._key(prefix)}"

    def ensure_bucket(self) -> None:
        from botocore.exceptions import ClientError

        try:
            self._s3.head_bucket(Bucket=self.bucket)
        except ClientError:
            self._s3.create_bucket(Bucket=self.bucket)


class SpooledS3Store(ArtifactStore):
    """S3 through a local spool (see the module docstring). A document waiting in the spool is
    read back from it, so the worker itself never misses one."""

    SUFFIX = ".spooled"
    # After a failed upload, writes go straight to the spool for this long: every write would
    # otherwise pay boto's retries against a dead endpoint.
    DOWN_FOR_S = 10.0

    def __init__(self, s3: S3ArtifactStore, folder: str | Path, drain_every_s: float = 5.0) -> None:
        self.s3, self.folder = s3, Path(folder).resolve()
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._down_until = 0.0
        self._stop = threading.Event()
        self._every = drain_every_s
        self._thread = threading.Thread(target=self._uploader, name="artifact-uploader", daemon=True)
        self._thread.start()

    def _path(self, key: str) -> Path:
        return self.folder / (key + self.SUFFIX)

    def put_bytes(self, key: str, data: bytes, content_type: str) -> str:
        if time.monotonic() >= self._down_until:
            try:
                uri = self.s3.put_bytes(key, data, content_type)
            except InfrastructureError as exc:
                log.warning("S3 unreachable, spooling %s: %s", key, exc)
                self._down_until = time.monotonic() + self.DOWN_FOR_S
            else:
                with self._lock:  # an older spooled version must not overwrite this one later
                    self._path(key).unlink(missing_ok=True)
                return uri
        path = self._path(key)
        with self._lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
        return self.s3.uri_for(key)

    def get_bytes(self, uri: str) -> bytes:
        prefix = self.s3.uri_for("")
        if uri.startswith(prefix):
            path = self._path(uri.removeprefix(prefix))
            with self._lock:
                if path.is_file():
                    return path.read_bytes()
        return self.s3.get_bytes(uri)

    def base_uri(self, prefix: str) -> str:
        return self.s3.base_uri(prefix)

    def pending(self) -> list[str]:
        """Keys still waiting in the spool."""
        return sorted(str(p.relative_to(self.folder))[: -len(self.SUFFIX)] for p in self.folder.rglob("*" + self.SUFFIX))

    def drain(self) -> int:
        """Upload what the spool holds; stops at the first failure (the endpoint is still down).
        Returns how many documents are left."""
        for key in self.pending():
            path = self._path(key)
            with self._lock:
                try:
                    data = path.read_bytes()
                except FileNotFoundError:  # a direct write superseded it
                    continue
                try:
                    self.s3.put_bytes(key, data, "application/gzip" if key.endswith(".gz") else "application/json")
                except InfrastructureError as exc:
                    self._down_until = time.monotonic() + self.DOWN_FOR_S
                    log.info("spool not drained yet (%d left): %s", len(self.pending()), exc)
                    break
                path.unlink(missing_ok=True)
        return len(self.pending())

    def _uploader(self) -> None:
        while True:
            try:
                if self.pending():
                    self.drain()
            except Exception as exc:  # the uploader must outlive any one failure
                log.warning("artifact uploader: %s", exc)
            if self._stop.wait(self._every):
                return

    def close(self, timeout_s: float = 30.0) -> int:
        """Stop the uploader after a last drain (retried for up to `timeout_s`); returns what is
        left in the spool, uploaded when a worker of this name starts again."""
        self._stop.set()
        self._thread.join(timeout=self._every + 5)
        deadline = time.monotonic() + timeout_s
        left = self.drain()
        while left and time.monotonic() < deadline:
            time.sleep(1.0)
            left = self.drain()
        if left:
            log.warning("%d artifact(s) left in the spool %s; uploaded when this worker starts again", left, self.folder)
        return left


def spool_folder(worker: str) -> Path:
    return Path(os.environ.get("FARM_SPOOL_DIR") or Path("farm-out") / "spool") / worker


def open_store(target: str | None = None, out_dir: str | Path | None = None,
               spool_for: str | None = None) -> ArtifactStore:
    """The store FARM_ARTIFACTS names; `spool_for` (a worker's name) puts an S3 store behind
    that worker's spool."""
    target = target or os.environ.get("FARM_ARTIFACTS") or str(Path(out_dir or "farm-out") / "artifacts")
    if target.startswith("s3://"):
        bucket, _, prefix = target.removeprefix("s3://").partition("/")
        if not bucket:
            raise ConfigurationError(f"FARM_ARTIFACTS '{target}' names no bucket (use s3://bucket/prefix)")
        s3 = S3ArtifactStore(bucket, prefix)
        return SpooledS3Store(s3, spool_folder(spool_for)) if spool_for else s3
    if "://" in target and not target.startswith("file://"):
        raise ConfigurationError(f"FARM_ARTIFACTS '{target}' must be s3://bucket/prefix or a folder")
    return LocalArtifactStore(target.removeprefix("file://"))
