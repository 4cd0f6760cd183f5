"""Per-model settings and agent variants: a model entry's endpoint, price and key variable reach the
trial that runs it (and a key never reaches the spec or the database), an agent listed twice is two
variants in the keys, `pairs:` keeps only the pairs it names, and a spec without variants keeps the
trial ids it always had."""

from __future__ import annotations

import json

import pytest
from sqlmodel import Session

from core.errors import ProviderError
from farm import dispatcher
from farm.agents.agent import AgentContext, AgentLimits
from farm.llm.client import LLMClient
from farm.llm.scripted import ScriptedLLM
from farm.spec import SweepSpec, select_problems
from farm.trial.spec import load_trial_spec
from results.db import engine_for
from results.keys import TrialKey
from results.models import Sweep, Trial

PROBLEM = "hr-geo-image-tag-wrong"


def _spec(**kw: object) -> SweepSpec:
    base: dict[str, object] = {"name": "variants", "problems": {"ids": [PROBLEM]}, "agents": ["react"],
                               "models": ["openai/gpt-4o"], "seeds": 1}
    base.update(kw)
    return SweepSpec.model_validate(base)


def _keys(spec: SweepSpec) -> list[str]:
    return [str(k) for k, _ in dispatcher.expand(spec, select_problems(spec))]


def test_an_agent_listed_twice_is_two_variants_named_by_what_differs() -> None:
    spec = _spec(agents=[{"name": "react", "tool_mode": "raw"}, {"name": "react", "tool_mode": "summarised"},
                         {"name": "react", "label": "react-hot", "options": {"temperature": 1.0}}])
    assert [a.key_name for a in spec.agents] == [
        "react[tool_mode=raw]", "react[tool_mode=summarised]", "react-hot"]
    assert _keys(spec) == [f"{PROBLEM}|react[tool_mode=raw]|openai/gpt-4o|0|quiet",
                           f"{PROBLEM}|react[tool_mode=summarised]|openai/gpt-4o|0|quiet",
                           f"{PROBLEM}|react-hot|openai/gpt-4o|0|quiet"]
    # the labels are part of the recorded spec: reloading it names the variants the same way
    again = SweepSpec.model_validate(json.loads(spec.model_dump_json()))
    assert [a.key_name for a in again.agents] == [a.key_name for a in spec.agents]


def test_a_spec_without_variants_keeps_its_trial_ids() -> None:
    spec = _spec(agents=["baseline", "react"], models=["openai/a", {"name": "openai/b"}], seeds=2)
    keys = dict(dispatcher.expand(spec, select_problems(spec)))
    assert TrialKey(PROBLEM, "react", "openai/b", 1, False) in keys
    assert TrialKey(PROBLEM, "baseline", "-", 0, False) in keys
    # computed with the code before model entries and variants existed
    assert TrialKey("p", "a", "-", 0, False).trial_id("s") == TrialKey("p", "a", "-", 0, False, "").trial_id("s")


def test_pairs_keep_only_the_named_agent_model_pairs() -> None:
    spec = _spec(agents=["react", "stratus", "baseline"], models=["openai/a", "openai/b"],
                 pairs=[{"agent": "react", "model": "openai/a"}, {"agent": "stratus", "model": "openai/b"}])
    assert sorted(_keys(spec)) == sorted([f"{PROBLEM}|react|openai/a|0|quiet", f"{PROBLEM}|stratus|openai/b|0|quiet",
                                          f"{PROBLEM}|baseline|-|0|quiet"])


def test_a_model_entry_reaches_its_trial_and_a_label_tells_two_settings_apart(sqlite_url: str) -> None:
    spec = _spec(agents=[{"name": "react", "options": {"temperature": 0.2, "max_backoff_retries": 1}}],
                 models=[{"name": "openai/local-qwen", "api_base": "http://127.0.0.1:9/v1", "api_key_env": "QWEN_KEY",
                          "temperature": 0.0, "max_tokens": 256, "reasoning_effort": "low",
                          "price": {"input_per_mtok": 0.5, "output_per_mtok": 1.5}, "concurrency": 3},
                         {"name": "openai/local-qwen", "label": "qwen-hot", "temperature": 1.0,
                          "price": {"input_per_mtok": 0, "output_per_mtok": 0}}],
                 cost_cap_usd=5)
    engine = engine_for(sqlite_url)
    sub = dispatcher.submit(engine, spec)
    with Session(engine) as s:
        rows = {t.model: t for t in s.query(Trial).all()}
        recorded = s.get(Sweep, "variants")
        assert recorded is not None
        assert "QWEN_KEY" in recorded.spec_json and "sk-" not in recorded.spec_json
    assert set(rows) == {"openai/local-qwen", "qwen-hot"} and sub.total == 2
    cold = load_trial_spec(engine, rows["openai/local-qwen"].id)
    hot = load_trial_spec(engine, rows["qwen-hot"].id)
    assert cold.agent == hot.agent == "react"
    assert cold.model == hot.model == "openai/local-qwen"  # what litellm is called with
    assert cold.agent_options["temperature"] == 0.0 and hot.agent_options["temperature"] == 1.0
    assert cold.agent_options["max_backoff_retries"] == 1  # the agent's own options stay
    assert cold.agent_options["price"] == {"input_cost_per_token": pytest.approx(0.5e-6),
                                           "output_cost_per_token": pytest.approx(1.5e-6)}
    assert cold.agent_options["api_base"] == "http://127.0.0.1:9/v1"
    assert cold.agent_options["api_key_env"] == "QWEN_KEY" and "api_key" not in cold.agent_options
    assert cold.agent_options["max_tokens"] == 256 and cold.agent_options["reasoning_effort"] == "low"
    assert cold.concurrency["openai/local-qwen"] == 3


def _ctx(options: dict[str, object]) -> AgentContext:
    return AgentContext(trial_id="t", namespace="ns", mcp_url="http://127.0.0.1:1/mcp", mcp_token="x",
                        model="openai/local-qwen", limits=AgentLimits(), options=options)


def test_the_key_is_read_from_the_named_variable_in_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QWEN_KEY", raising=False)
    # A key missing in the worker is the farm's setup, not the agent: infrastructure (phase provider).
    with pytest.raises(ProviderError, match="QWEN_KEY") as missing:
        LLMClient.from_context(_ctx({"api_key_env": "QWEN_KEY"}))
    assert missing.value.kind == "auth" and not missing.value.transient
    monkeypatch.setenv("QWEN_KEY", "sk-test-not-a-real-key")
    with ScriptedLLM([{"content": "ok"}]) as llm:
        client = LLMClient.from_context(_ctx({"api_key_env": "QWEN_KEY", "api_base": llm.url, "max_tokens": 64,
                                              "price": {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}}))
        call = client.complete([{"role": "user", "content": "hi"}])
        (request,) = llm.requests
    assert request["authorized"] and request["body"]["max_tokens"] == 64
    assert call.priced and call.cost_usd == pytest.approx(call.tokens_in * 1e-6 + call.tokens_out * 2e-6)
