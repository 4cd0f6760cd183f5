"""LLMClient through real litellm against the scripted server: usage and cost, backoff on 429,
budgets, the sweep cost cap and the farm-wide concurrency limit on real Redis (database 11)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
import redis

from core.errors import LimitReached, ProviderError
from core.states import LIMIT_COST, LIMIT_SWEEP_COST, LIMIT_TOKENS
from farm.llm.client import Budget, LLMClient, LLMError
from farm.llm.limits import RedisSemaphore, SweepLedger
from farm.llm.scripted import ScriptedLLM

REDIS_URL = "redis://127.0.0.1:6379/11"
ROOT = Path(__file__).resolve().parents[3]
PRICE = {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}
MSG = [{"role": "user", "content": "hello"}]


@pytest.fixture
def rkeys():
    """Redis keys this test creates, deleted afterwards (never a flush)."""
    made: list[str] = []
    yield made
    r = redis.Redis.from_url(REDIS_URL)
    if made:
        r.delete(*made)


def test_usage_cached_tokens_and_cost_with_a_price() -> None:
    turns = [{"content": "a", "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "cached_tokens": 600}}]
    with ScriptedLLM(turns) as llm:
        c = LLMClient("openai/scripted-model", api_base=llm.url, price=PRICE)
        call = c.complete(MSG)
    assert (call.tokens_in, call.tokens_out, call.tokens_cached) == (1000, 100, 600)
    assert call.priced and call.cost_usd == pytest.approx(1000 * 1e-6 + 100 * 2e-6, rel=0.2)
    assert c.totals.calls == 1 and c.totals.tokens == 1100


def test_a_model_without_a_price_costs_zero_and_is_flagged() -> None:
    with ScriptedLLM([{"content": "a"}]) as llm:
        c = LLMClient("openai/scripted-model", api_base=llm.url)
        call = c.complete(MSG)
    assert call.cost_usd == 0.0 and call.priced is False and c.totals.unpriced_calls == 1


def test_a_known_model_is_priced_from_litellms_table() -> None:
    turns = [{"content": "a", "usage": {"prompt_tokens": 1_000_000, "completion_tokens": 0}}]
    with ScriptedLLM(turns) as llm:
        call = LLMClient("openai/gpt-4o", api_base=llm.url).complete(MSG)
    assert call.priced and call.cost_usd > 0.5  # gpt-4o input is dollars per million tokens


def test_backoff_honours_retry_after() -> None:
    turns = [{"status": 429, "retry_after": 0.25}, {"status": 429, "retry_after": 0.1}, {"content": "finally"}]
    with ScriptedLLM(turns) as llm:
        c = LLMClient("openai/scripted-model", api_base=llm.url)
        t0 = time.monotonic()
        call = c.complete(MSG)
        elapsed = time.monotonic() - t0
        assert len(llm.requests) == 3  # no hidden SDK retries on top of ours
    assert call.message["content"] == "finally" and call.retries == 2
    assert c.waits == [0.25, 0.1] and elapsed >= 0.35


def test_backoff_is_bounded() -> None:
    with ScriptedLLM([{"status": 429, "retry_after": 30}], repeat_last=True) as llm:
        c = LLMClient("openai/scripted-model", api_base=llm.url, max_backoff_retries=2, max_backoff_s=0.05)
        with pytest.raises(ProviderError, match=r"rate-limited \(HTTP 429\) after 2 retries"):
            c.complete(MSG)
        assert len(llm.requests) == 3
    assert c.waits == [0.05, 0.05]  # Retry-After of 30 s capped at max_backoff_s


def test_backoff_never_waits_past_the_deadline() -> None:
    with ScriptedLLM([{"status": 429, "retry_after": 30}], repeat_last=True) as llm:
        c = LLMClient("openai/scripted-model", api_base=llm.url)
        t0 = time.monotonic()
        with pytest.raises(ProviderError) as hit:
            c.complete(MSG, deadline=time.monotonic() + 2)
    # The provider, not the agent, would have used the session's time up: infrastructure.
    assert hit.value.kind == "rate_limited" and hit.value.transient and time.monotonic() - t0 < 2


def test_other_errors_are_not_retried_and_carry_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-abcdefghijklmnopqrstuv")
    with ScriptedLLM([{"status": 400, "content": "bad request: key sk-test-abcdefghijklmnopqrstuv"}]) as llm:
        c = LLMClient("openai/scripted-model", api_base=llm.url)
        with pytest.raises(LLMError) as err:
            c.complete(MSG)
        assert len(llm.requests) == 1
    assert "sk-test-abcdefghijklmnopqrstuv" not in str(err.value)


def test_token_and_cost_budgets_raise_limit_reached() -> None:
    turns = [{"content": "a", "usage": {"prompt_tokens": 600, "completion_tokens": 10}}]
    with ScriptedLLM(turns, repeat_last=True) as llm:
        c = LLMClient("openai/scripted-model", api_base=llm.url, budget=Budget(max_tokens=1000))
        c.complete(MSG)
        c.complete(MSG)  # 610 < 1000 before this call
        with pytest.raises(LimitReached) as hit:
            c.complete(MSG)
        assert hit.value.reason == LIMIT_TOKENS and len(llm.requests) == 2
        c = LLMClient("openai/scripted-model", api_base=llm.url, price=PRICE, budget=Budget(max_cost_usd=0.0005))
        c.complete(MSG)
        with pytest.raises(LimitReached) as hit:
            c.complete(MSG)
        assert hit.value.reason == LIMIT_COST


@pytest.mark.redis
def test_sweep_cost_cap_is_shared_through_redis(rkeys: list[str]) -> None:
    sweep = f"e2test-{uuid.uuid4().hex[:8]}"
    turns = [{"content": "a", "usage": {"prompt_tokens": 300, "completion_tokens": 0}}]
    with ScriptedLLM(turns, repeat_last=True) as llm:
        a = LLMClient("openai/scripted-model", api_base=llm.url, price=PRICE,
                      ledger=SweepLedger(sweep, 0.0005, REDIS_URL))
        b = LLMClient("openai/scripted-model", api_base=llm.url, price=PRICE,
                      ledger=SweepLedger(sweep, 0.0005, REDIS_URL))
        rkeys.append(a.ledger.key)  # type: ignore[union-attr]
        a.complete(MSG)
        b.complete(MSG)  # 0.0003 spent before: still under the cap
        for client in (a, b):
            with pytest.raises(LimitReached) as hit:
                client.complete(MSG)
            assert hit.value.reason == LIMIT_SWEEP_COST
    assert SweepLedger(sweep, None, REDIS_URL).spent() == pytest.approx(0.0006)


_WORKER = textwrap.dedent("""
    import sys
    from farm.llm.client import LLMClient, load_litellm
    url, model, n, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    load_litellm()  # the slow import first, so that both processes start calling together
    c = LLMClient(model, api_base=url, concurrency=int(limit) if limit != "none" else None,
                  redis_url="{redis}", lease_s=5)
    print("ready", flush=True)
    sys.stdin.readline()
    for _ in range(n):
        c.complete([{{"role": "user", "content": "x"}}])
    print("ok", flush=True)
""").format(redis=REDIS_URL)


def _run_together(url: str, model: str, n: int, limit: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, url, model, str(n), limit], env=env, cwd=ROOT,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs


@pytest.mark.redis
@pytest.mark.slow
def test_concurrency_limit_holds_across_two_processes(rkeys: list[str]) -> None:
    model = f"openai/e2-conc-{uuid.uuid4().hex[:8]}"
    rkeys.append(f"farm:llm:slots:{model}")
    with ScriptedLLM([{"content": "x", "delay": 0.3}], repeat_last=True) as llm:
        _run_together(llm.url, model, 3, "1")
        assert len(llm.requests) == 6
        assert llm.max_in_flight == 1
    # the same load without the limit does overlap, so the assertion above can fail
    with ScriptedLLM([{"content": "x", "delay": 0.3}], repeat_last=True) as llm:
        _run_together(llm.url, model, 3, "none")
        assert llm.max_in_flight == 2


@pytest.mark.redis
def test_a_dead_holder_releases_its_slot_when_its_lease_expires(rkeys: list[str]) -> None:
    name = f"e2-lease-{uuid.uuid4().hex[:8]}"
    rkeys.append(f"farm:llm:slots:{name}")
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import time
            from farm.llm.limits import RedisSemaphore
            RedisSemaphore("{REDIS_URL}", "{name}", 1, lease_s=1.0).acquire()
            print("held", flush=True)
            time.sleep(60)
        """)], env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        sem = RedisSemaphore(REDIS_URL, name, 1, lease_s=1.0)
        with pytest.raises(TimeoutError):
            sem.acquire(timeout=1.5)  # the live holder renews its lease: the slot stays taken
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        slot = sem.acquire(timeout=5)  # renewals stopped: the lease runs out and the slot is free
        assert sem.holders() == 1
        slot.release()
        assert sem.holders() == 0
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
