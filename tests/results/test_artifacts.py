"""Artifacts land in a real S3-compatible server on loopback (moto server mode) or a folder."""

from __future__ import annotations

import boto3
import pytest

from core.errors import ConfigurationError
from results.artifact_store import LocalArtifactStore, S3ArtifactStore, open_store


def test_s3_roundtrip_and_uri(s3_env, monkeypatch):
    monkeypatch.setenv("FARM_ARTIFACTS", "s3://farm-artifacts/runs")
    store = open_store()
    assert isinstance(store, S3ArtifactStore)
    store.ensure_bucket()
    uri = store.put_json("sw/t1/attempt-1/diagnosis.json", {"text": "geo lacks JAEGER_AGENT_HOST"})
    assert uri == "s3://farm-artifacts/runs/sw/t1/attempt-1/diagnosis.json"
    # Read it back with a plain boto3 client, not through the store.
    body = boto3.client("s3").get_object(Bucket="farm-artifacts", Key="runs/sw/t1/attempt-1/diagnosis.json")["Body"].read()
    assert b"JAEGER_AGENT_HOST" in body
    assert store.get_json(uri)["text"].startswith("geo")


def test_secrets_never_reach_artifacts(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secretsecretsecret123456")
    store = LocalArtifactStore(tmp_path)
    uri = store.put_json("a/b.json", {"transcript": "key is sk-ant-secretsecretsecret123456 and AKIAABCDEFGHIJKLMNOP"})
    text = store.get_bytes(uri).decode()
    assert "secretsecret" not in text and "AKIAABCDEFGHIJKLMNOP" not in text and "[REDACTED]" in text


def test_bad_artifact_target_is_one_clear_error():
    with pytest.raises(ConfigurationError, match="names no bucket"):
        open_store("s3:///prefix")
    with pytest.raises(ConfigurationError, match="must be s3://bucket/prefix or a folder"):
        open_store("gs://bucket/x")


def test_spooled_store_keeps_every_document_through_an_s3_outage(tmp_path, monkeypatch):
    """The endpoint goes down: documents land in the worker's spool under their final URI and read
    back from it; a newer version written after S3 returned is never overwritten by the spooled
    older one; the uploader sends the rest once it is back."""
    from farm.testing.services import MotoS3
    from results.artifact_store import SpooledS3Store

    s3 = MotoS3().start()
    for var, value in {"AWS_ENDPOINT_URL": s3.endpoint, "AWS_ACCESS_KEY_ID": "testing",
                       "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                       "FARM_SPOOL_DIR": str(tmp_path / "spool")}.items():
        monkeypatch.setenv(var, value)
    try:
        store = open_store("s3://farm-spool-test/runs", spool_for="w1")
        assert isinstance(store, SpooledS3Store) and store.folder == (tmp_path / "spool" / "w1").resolve()
        store.s3.ensure_bucket()
        s3.stop()
        old = store.put_json("sw/t1/attempt-1/verdicts.json", {"v": "old"})
        kept = store.put_json("sw/t1/attempt-1/attempt.json", {"phase": "record"})
        assert old == "s3://farm-spool-test/runs/sw/t1/attempt-1/verdicts.json"
        assert store.pending() == ["sw/t1/attempt-1/attempt.json", "sw/t1/attempt-1/verdicts.json"]
        assert store.get_json(kept) == {"phase": "record"}  # read back from the spool
        s3.start()
        store._down_until = 0.0  # S3 is back: the next write goes straight to it
        store.put_json("sw/t1/attempt-1/verdicts.json", {"v": "new"})
        assert store.pending() == ["sw/t1/attempt-1/attempt.json"]
        assert store.close() == 0
        client = boto3.client("s3")
        body = lambda key: client.get_object(Bucket="farm-spool-test", Key=f"runs/sw/t1/attempt-1/{key}")["Body"].read()  # noqa: E731
        assert b'"new"' in body("verdicts.json") and b'"record"' in body("attempt.json")
        assert store.pending() == []
    finally:
        if s3.server is not None:
            s3.stop()
