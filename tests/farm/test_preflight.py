"""Pre-flight: every model of a sweep is checked before anything is written (known to litellm or
given an api_base, credentials present, one tiny request answered by the faulty provider over real
HTTP through litellm); a failure is one error naming the model and why, and `farm run` writes nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from farm.llm.faulty import FaultyProvider
from farm.preflight import ModelUse, PreflightError, check_model, preflight, uses_of
from farm.spec import SweepSpec

ROOT = Path(__file__).resolve().parents[3]
PROBLEM = "hr-frontend-service-targetport-wrong"


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "FARM_JUDGE_API_BASE"):
        monkeypatch.delenv(var, raising=False)


def test_a_typo_and_an_unknown_provider_fail_offline() -> None:
    assert "does not know this openai model (a typo?)" in check_model(ModelUse("openai/gpt-4oo"), request=False)
    assert "cannot tell its provider" in check_model(ModelUse("gpt4o"), request=False)


def test_missing_credentials_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert check_model(ModelUse("anthropic/claude-sonnet-4-5"), request=False) == \
        "no credentials: ANTHROPIC_API_KEY is not set"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    assert check_model(ModelUse("anthropic/claude-sonnet-4-5"), request=False) is None


@pytest.mark.parametrize(("fault", "said"), [("auth", "(auth)"), ("unknown_model", "(unknown_model)"),
                                             ("unavailable", "(overloaded)"), ("context_length", "refused")])
def test_the_tiny_request_must_be_answered(fault: str, said: str) -> None:
    with FaultyProvider({"local": fault}) as fp:
        why = check_model(ModelUse("openai/local", {"api_base": fp.url}), timeout_s=5)
        assert why is not None and said in why, why
        fp.set_schedule({})
        assert check_model(ModelUse("openai/local", {"api_base": fp.url}), timeout_s=5) is None
        # An api_base names a server of the user's: any model name it answers for is fine.
        assert fp.served[("local", "ok")] == 1


def test_every_use_of_the_spec_is_checked_and_every_failure_named(monkeypatch: pytest.MonkeyPatch) -> None:
    with FaultyProvider({"down": "auth"}) as fp:
        monkeypatch.setenv("FARM_JUDGE_API_BASE", fp.url)
        spec = SweepSpec.model_validate({
            "name": "pf", "problems": {"ids": [PROBLEM]}, "models": ["openai/up", "openai/down"],
            "agents": ["baseline", {"name": "react", "options": {"api_base": fp.url}}], "judge": "openai/judge"})
        uses = uses_of(spec)
        # baseline calls no model; react calls both; the judge its own
        assert sorted((u.model, u.used_by) for u in uses) == [
            ("openai/down", "agent react"), ("openai/judge", "the judge"), ("openai/up", "agent react")]
        with pytest.raises(PreflightError) as err:
            preflight(uses, timeout_s=5)
    assert [m for m, _ in err.value.failures] == ["openai/down (agent react)"]
    assert "model 'openai/down (agent react)': a test request failed (auth)" in str(err.value)


def test_farm_run_stops_before_writing_anything(tmp_path: Path) -> None:
    spec = tmp_path / "typo.yaml"
    spec.write_text(yaml.safe_dump({"name": "typo", "problems": {"ids": [PROBLEM]}, "agents": ["react"],
                                    "models": ["openai/gpt-4oo"]}))
    out = tmp_path / "out"
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("OPENAI_API_KEY", "FARM_DATABASE_URL")}
    run = subprocess.run([sys.executable, "-m", "farm.cli", "run", str(spec), "--out", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 2, run.stdout + run.stderr
    said = " ".join(run.stderr.split())
    assert "model 'openai/gpt-4oo (agent react)': litellm does not know this openai model" in said, said
    assert not out.exists()  # nothing written: no database, no artifacts folder


def test_a_model_entry_is_checked_with_its_own_endpoint_and_key_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    with FaultyProvider() as fp:
        spec = SweepSpec.model_validate({
            "name": "pf-entries", "problems": {"ids": [PROBLEM]}, "agents": ["react"],
            "models": [{"name": "openai/qwen", "label": "qwen-t0", "api_base": fp.url, "api_key_env": "QWEN_KEY"}]})
        (use,) = uses_of(spec)
        assert (use.model, use.label, use.options["api_base"]) == ("openai/qwen", "qwen-t0", fp.url)
        monkeypatch.delenv("QWEN_KEY", raising=False)
        with pytest.raises(PreflightError) as err:
            preflight([use], timeout_s=5)
        assert "model 'qwen-t0 = openai/qwen (agent react)': no credentials: QWEN_KEY (its api_key_env) is not set" \
            in str(err.value)
        monkeypatch.setenv("QWEN_KEY", "sk-test-not-a-real-key")
        preflight([use], timeout_s=5)
        (request,) = fp.requests
    assert request["authorized"] and request["body"]["model"] == "qwen"
