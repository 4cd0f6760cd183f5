"""The scripted OpenAI-compatible server, through real litellm and real HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from farm.llm.client import load_litellm
from farm.llm.scripted import ScriptedLLM, load_script, tool_plan, tool_results
from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[3]
TOOLS = [{"type": "function", "function": {"name": "kubectl", "description": "run kubectl",
                                           "parameters": {"type": "object",
                                                          "properties": {"command": {"type": "string"}}}}}]


def test_non_streaming_tool_call_and_usage_through_litellm() -> None:
    litellm = load_litellm()
    turns = [{"content": "checking", "tool_calls": [{"name": "kubectl", "arguments": {"command": "get pods"}}],
              "usage": {"prompt_tokens": 120, "completion_tokens": 7, "cached_tokens": 100}}]
    with ScriptedLLM(turns) as llm:
        r = litellm.completion(model="openai/scripted-model", api_base=llm.url, api_key="k", max_retries=0,
                               messages=[{"role": "user", "content": "hi"}], tools=TOOLS)
        assert r.choices[0].message.tool_calls[0].function.name == "kubectl"
        assert json.loads(r.choices[0].message.tool_calls[0].function.arguments) == {"command": "get pods"}
        assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (120, 7)
        assert r.usage.prompt_tokens_details.cached_tokens == 100
        assert llm.requests[0]["body"]["tools"][0]["function"]["name"] == "kubectl"
        assert llm.requests[0]["authorized"] is True
        assert "Bearer" not in json.dumps(llm.requests)  # the key itself is never recorded


def test_streaming_sse_rebuilds_tool_calls_and_usage() -> None:
    litellm = load_litellm()
    turns = [{"content": "a fairly long streamed answer to split into chunks",
              "tool_calls": [{"name": "kubectl", "arguments": {"command": "logs deploy/geo -n hotel"}}]}]
    with ScriptedLLM(turns) as llm:
        stream = litellm.completion(model="openai/scripted-model", api_base=llm.url, api_key="k", max_retries=0,
                                    messages=[{"role": "user", "content": "hi"}], tools=TOOLS, stream=True,
                                    stream_options={"include_usage": True})
        chunks = list(stream)
        assert len(chunks) > 3
        rebuilt = litellm.stream_chunk_builder(chunks)
        msg = rebuilt.choices[0].message
        assert msg.content == turns[0]["content"]
        assert json.loads(msg.tool_calls[0].function.arguments) == {"command": "logs deploy/geo -n hotel"}
        assert rebuilt.usage.prompt_tokens > 0 and rebuilt.usage.completion_tokens > 0


def test_estimated_cached_tokens_follow_the_shared_prefix() -> None:
    with ScriptedLLM([{"content": "one"}, {"content": "two"}]) as llm:
        first = [{"role": "system", "content": "x" * 400}, {"role": "user", "content": "a"}]
        r1 = httpx.post(f"{llm.url}/chat/completions", json={"model": "m", "messages": first}).json()
        r2 = httpx.post(f"{llm.url}/chat/completions",
                        json={"model": "m", "messages": first + [{"role": "assistant", "content": "one"}]}).json()
    assert r1["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert 0 < r2["usage"]["prompt_tokens_details"]["cached_tokens"] < r2["usage"]["prompt_tokens"]


def test_models_endpoint_and_error_turns() -> None:
    with ScriptedLLM([{"status": 429, "retry_after": 1.5, "content": "slow down"}, {"raw": "{not json"}]) as llm:
        models = httpx.get(f"{llm.url}/models").json()
        assert models["data"][0]["id"] == "scripted-model"
        r = httpx.post(f"{llm.url}/chat/completions", json={"model": "m", "messages": []})
        assert r.status_code == 429 and r.headers["retry-after"] == "1.5"
        assert r.json()["error"]["type"] == "rate_limit_error"
        r = httpx.post(f"{llm.url}/chat/completions", json={"model": "m", "messages": []})
        assert r.json()["choices"][0]["message"]["content"] == "{not json"
        r = httpx.post(f"{llm.url}/chat/completions", json={"model": "m", "messages": []})
        assert r.status_code == 500 and "exhausted" in r.json()["error"]["message"]


def test_callable_script_sees_previous_tool_results() -> None:
    plan = tool_plan([("kubectl", {"command": "get pods"}),
                      ("submit_diagnosis", lambda req: {"text": "saw: " + tool_results(req)[-1][1]})])
    tools = TOOLS + [{"type": "function", "function": {"name": "submit_diagnosis", "parameters": {}}}]
    msgs: list[dict] = [{"role": "user", "content": "go"}]
    with ScriptedLLM(plan) as llm:
        r = httpx.post(f"{llm.url}/chat/completions", json={"model": "m", "messages": msgs, "tools": tools}).json()
        call = r["choices"][0]["message"]["tool_calls"][0]
        assert call["function"]["name"] == "kubectl"
        msgs += [r["choices"][0]["message"], {"role": "tool", "tool_call_id": call["id"], "content": "geo CrashLoop"}]
        r = httpx.post(f"{llm.url}/chat/completions", json={"model": "m", "messages": msgs, "tools": tools}).json()
        call = r["choices"][0]["message"]["tool_calls"][0]
        assert call["function"]["name"] == "submit_diagnosis"
        assert json.loads(call["function"]["arguments"]) == {"text": "saw: geo CrashLoop"}


def test_runnable_as_a_module_with_a_script_file(tmp_path: Path) -> None:
    script = tmp_path / "turns.json"
    script.write_text(json.dumps([{"content": "from the file"}]))
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "farm.llm.scripted", "--script", str(script), "--port", str(port)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions",
                               json={"model": "m", "messages": [{"role": "user", "content": "x"}]})
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline, proc.stderr.read() if proc.poll() is not None else "no start"
                time.sleep(0.1)
        assert r.json()["choices"][0]["message"]["content"] == "from the file"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_bad_script_files_name_the_file_and_turn(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"content": "ok"}, {"contnet": "typo"}]))
    with pytest.raises(ValueError, match=r"bad.json: turn 1"):
        load_script(bad)
    with pytest.raises(FileNotFoundError, match="missing.json"):
        load_script(tmp_path / "missing.json")
    py = tmp_path / "responder.py"
    py.write_text("def respond(request):\n    return {'content': str(len(request['messages']))}\n")
    respond = load_script(py)
    assert callable(respond) and respond({"messages": [1, 2]}) == {"content": "2"}
