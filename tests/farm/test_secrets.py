"""Secrets never reach artifacts: API keys by name and shape, and credentials inside the farm's own
connection URLs."""

from __future__ import annotations

import pytest

from core.secrets import REDACTED, scrub


def test_passwords_inside_the_farms_connection_urls_are_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FARM_DATABASE_URL", "postgresql://farm:Wh1spered-Passw0rd@db.internal:5432/farm")
    monkeypatch.setenv("FARM_BROKER_URL", "redis://:farm@10.0.0.5:6379/0")
    text = ("connection to postgresql://farm:Wh1spered-Passw0rd@db.internal:5432/farm failed; "
            "retrying with Wh1spered-Passw0rd; broker redis://:farm@10.0.0.5:6379/0 is down; the farm runs on")
    out = scrub(text)
    assert "Wh1spered-Passw0rd" not in out and ":farm@" not in out
    assert out.count(REDACTED) == 3
    assert out.endswith("the farm runs on")  # a short password is not scrubbed as a word everywhere


def test_api_keys_by_variable_name_and_by_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-standard-shape-1234")
    out = scrub("key not-a-standard-shape-1234 and sk-ant-abcdefghijklmnopqrstuvwx")
    assert "not-a-standard-shape-1234" not in out and "sk-ant-" not in out


def test_the_farms_folders_and_registered_secrets_are_scrubbed(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pathlib import Path

    from core.secrets import PATH_REDACTED, hide_path, hide_secret

    repo = Path(__file__).resolve().parents[2]
    worker = tmp_path / "sim-worker-folder"
    hide_path(worker)
    hide_secret("admin-token-0123456789")
    monkeypatch.setenv("FARM_ARTIFACTS", "/srv/farm-artifacts")
    text = (f"open {repo}/farm/problems/catalog/hotel.yaml; {worker}/admin.kubeconfig has admin-token-0123456789; "
            "wrote /srv/farm-artifacts/sweep/trial")
    out = scrub(text)
    assert str(repo) not in out and str(worker) not in out and "/srv/farm-artifacts" not in out
    assert "admin-token-0123456789" not in out
    assert out.count(PATH_REDACTED) == 3 and "/farm/problems/catalog/hotel.yaml" in out
    assert scrub("/tmp and / stay") == "/tmp and / stay"  # short prefixes of every path are left alone
