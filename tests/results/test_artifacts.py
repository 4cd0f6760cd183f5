"""Artifacts land in a real S3-compatible server on loopback (moto server mode) or a folder."""

from __future__ import annotations

import boto3
import pytest

from farm.errors import ConfigurationError
from results.artifacts import LocalArtifactStore, S3ArtifactStore, open_store


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
