"""Provider failures against the faulty provider (farm.llm.faulty), a real HTTP server on loopback,
through real litellm and LLMClient: which failures are the provider's (ProviderError: retried with
backoff, then infrastructure) and which the agent's (LLMError: context length), Retry-After
honoured, and the damage a call that is answered can carry (tool-call arguments that are not JSON)."""

from __future__ import annotations

import pytest

from core.errors import InfrastructureError, ProviderError
from farm.llm.client import LLMClient, LLMError, parse_arguments
from farm.llm.faulty import FAULT_KINDS, PROVIDER_FAULTS, FaultyProvider

MSG = [{"role": "user", "content": "hello"}]
TRANSIENT = {"rate_limit", "server_error", "unavailable", "overloaded", "slow", "drop", "malformed_body"}


@pytest.fixture(scope="module")
def provider():
    with FaultyProvider(slow_s=2.0) as fp:
        yield fp


def _client(fp: FaultyProvider, model: str, **kw) -> LLMClient:
    c = LLMClient(f"openai/{model}", api_base=fp.url, request_timeout_s=0.6, max_backoff_s=0.05, **kw)
    c._sleep = lambda s: None  # the waits are recorded in c.waits; the test need not sleep them
    return c


@pytest.mark.parametrize("fault", sorted(PROVIDER_FAULTS))
def test_a_provider_failure_that_persists_is_infrastructure(provider: FaultyProvider, fault: str) -> None:
    model = f"always-{fault}"
    provider.set_schedule({model: fault})
    c = _client(provider, model, max_backoff_retries=2)
    with pytest.raises(ProviderError) as err:
        c.complete(MSG)
    exc = err.value
    assert isinstance(exc, InfrastructureError) and exc.phase == "provider"
    assert exc.kind == FAULT_KINDS[fault] and exc.model == f"openai/{model}"
    # Transient failures were retried up to the budget; the others (auth, unknown model) at once.
    assert exc.transient == (fault in TRANSIENT)
    calls = 3 if fault in TRANSIENT else 1
    assert provider.served[(model, fault)] == calls, provider.served
    assert len(c.waits) == calls - 1


@pytest.mark.parametrize("fault", sorted(TRANSIENT))
def test_a_transient_failure_is_retried_to_an_answer(provider: FaultyProvider, fault: str) -> None:
    model = f"once-{fault}"
    provider.set_schedule({model: [fault, fault]})
    call = _client(provider, model, max_backoff_retries=2).complete(MSG)
    assert call.message["content"] == "OK" and call.retries == 2
    assert provider.served[(model, fault)] == 2 and provider.served[(model, "ok")] == 1


def test_retry_after_is_honoured(provider: FaultyProvider) -> None:
    provider.retry_after_s = 0.3
    try:
        provider.set_schedule({"polite": ["rate_limit", "rate_limit"]})
        c = _client(provider, "polite", max_backoff_retries=3)
        c.max_backoff_s = 10.0
        c.complete(MSG)
    finally:
        provider.retry_after_s = 0.05
    assert c.waits == [0.3, 0.3]  # the server's Retry-After, not the client's own backoff


def test_context_length_is_the_agents_failure_and_not_retried(provider: FaultyProvider) -> None:
    provider.set_schedule({"small": "context_length"})
    with pytest.raises(LLMError) as err:
        _client(provider, "small", max_backoff_retries=3).complete(MSG)
    assert not isinstance(err.value, InfrastructureError)
    assert err.value.kind == "context_length" and "context window" in str(err.value)
    assert provider.served[("small", "context_length")] == 1


@pytest.mark.parametrize("fault", ["truncated_tool_call", "malformed_tool_call"])
def test_damaged_tool_call_json_is_answered_and_reaches_the_agent_as_malformed(provider: FaultyProvider,
                                                                             fault: str) -> None:
    provider.set_schedule({"sloppy": fault})
    call = _client(provider, "sloppy").complete(MSG)
    (tc,) = call.message["tool_calls"]
    args = parse_arguments(tc["function"]["arguments"])
    assert set(args) == {"_malformed"}, args  # the loop sends this back to the model as an error


def test_the_schedule_is_per_model_and_replaced_between_runs(provider: FaultyProvider) -> None:
    provider.set_schedule({"a": "unavailable", "*": ["auth"]})
    with pytest.raises(ProviderError):
        _client(provider, "a", max_backoff_retries=0).complete(MSG)
    with pytest.raises(ProviderError):
        _client(provider, "b", max_backoff_retries=0).complete(MSG)
    assert _client(provider, "b").complete(MSG).message["content"] == "OK"  # its list ran out
    provider.set_schedule({})
    assert _client(provider, "a").complete(MSG).message["content"] == "OK"
    with pytest.raises(ValueError, match="unknown fault 'typo'"):
        provider.set_schedule({"a": ["typo"]})


def test_a_dropped_stream_is_a_connection_failure(provider: FaultyProvider) -> None:
    """A caller that streams (a proxy forwarding an agent's streamed call) meets the same classification."""
    from farm.llm.client import load_litellm
    from farm.llm.failures import classify

    litellm = load_litellm()
    provider.set_schedule({"streamed": "drop"})
    with pytest.raises(Exception) as err:  # noqa: B017, PT011 - whatever litellm raises is what is classified
        list(litellm.completion(model="openai/streamed", api_base=provider.url, api_key="k", messages=MSG,
                                max_retries=0, stream=True))
    failure = classify(err.value)
    assert (failure.kind, failure.provider, failure.transient) == ("connection", True, True), failure


def test_the_errors_survive_pickling() -> None:
    """Across a process pool they keep what the trial runner reads (kind, transient, phase)."""
    import pickle

    provider = pickle.loads(pickle.dumps(ProviderError("m: down", kind="overloaded", model="m", transient=True)))
    assert (str(provider), provider.kind, provider.model, provider.transient, provider.phase) == (
        "m: down", "overloaded", "m", True, "provider")
    agent = pickle.loads(pickle.dumps(LLMError("too long", "context_length")))
    assert (str(agent), agent.kind) == ("too long", "context_length")


def test_a_missing_key_or_provider_fails_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """What litellm raises without a key or without a provider prefix: infrastructure, not retried."""
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    for model, kind in (("openai/gpt-4o", "auth"), ("anthropic/claude-sonnet-4-5", "auth"), ("gpt4o", "unknown_model")):
        with pytest.raises(ProviderError) as err:
            LLMClient(model, max_backoff_retries=3, request_timeout_s=5).complete(MSG)
        assert (err.value.kind, err.value.transient) == (kind, False), (model, str(err.value))
