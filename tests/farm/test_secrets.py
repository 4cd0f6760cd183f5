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


def sequential_scrub(text: str) -> str:
    """scrub() as it was before issue 29: each secret replaced in turn, then each folder, then the
    key shapes, everything read again from the environment for every text."""
    from core.secrets import _KEY_SHAPES, PATH_REDACTED, private_paths, secret_values

    for value in secret_values():
        text = text.replace(value, REDACTED)
    for path in private_paths():
        text = text.replace(path, PATH_REDACTED)
    return _KEY_SHAPES.sub(REDACTED, text)


def test_an_artifact_scrubbed_in_one_pass_is_what_it_was_scrubbed_value_by_value(tmp_path, monkeypatch) -> None:
    import json
    from pathlib import Path

    from core.secrets import hide_path, hide_secret
    from results.artifact_store import LocalArtifactStore

    repo = Path(__file__).resolve().parents[2]
    worker = tmp_path / "sim-worker-one-pass"
    hide_path(worker)
    hide_secret("admin-token-one-pass-0123456789")
    monkeypatch.setenv("FARM_DATABASE_URL", "postgresql://farm:Wh1spered-Passw0rd@db.internal:5432/farm")
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-standard-shape-1234")
    monkeypatch.setenv("FARM_ARTIFACTS", str(tmp_path / "artifacts"))
    calls = [{"index": i, "name": "kubectl", "args": {"command": f"get pods -n hotel --kubeconfig {worker}/agent"},
              "output": (f"error reading {repo}/farm/problems/catalog/hotel.yaml with admin-token-one-pass-0123456789 "
                         f"and not-a-standard-shape-1234; db Wh1spered-Passw0rd at postgresql://farm:Wh1spered-Passw0rd@"
                         f"db.internal; key sk-ant-abcdefghijklmnopqrstuvwx AKIAABCDEFGHIJKLMNOP; {tmp_path}/artifacts/x"
                         f"; /tmp and / stay; farm words stay")} for i in range(50)]
    store = LocalArtifactStore(tmp_path / "store")
    uri = store.put_json("s/t/attempt-1/tool_calls.json", calls)
    written = Path(uri.removeprefix("file://")).read_text()
    assert written == sequential_scrub(json.dumps(calls, indent=1, sort_keys=True, default=str))
    for secret in ("admin-token-one-pass", "not-a-standard-shape", "Wh1spered", "sk-ant-", "AKIA", str(worker), str(repo)):
        assert secret not in written
    assert written.count("farm words stay") == 50 and written.count("/tmp and / stay") == 50


def test_the_matcher_is_built_once_and_again_only_when_what_it_knows_changes(monkeypatch) -> None:
    from core.secrets import current_scrubber, hide_secret

    first = current_scrubber()
    assert current_scrubber() is first  # every text of a trial: the same compiled matcher
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "a-token-set-after-the-first-scrub")
    assert current_scrubber() is not first
    assert scrub("x a-token-set-after-the-first-scrub y") == f"x {REDACTED} y"
    after_env = current_scrubber()
    hide_secret("a-registered-value-after-the-env")
    assert current_scrubber() is not after_env
    assert scrub("a-registered-value-after-the-env") == REDACTED
