"""farm/llm/llama_server.py on the real model (SmolLM2-135M through llama-cpp-python, in this
process): chatml-function-calling generates tool arguments with max_tokens=None (in auto mode, and
for a named tool when the request sets none), and the farm's bound stops them at its cap all the
same. (Its prose replies in auto mode are held by a grammar to an empty text.)"""

from __future__ import annotations

import json
import os

import pytest

from farm.llm.llama_server import bound_generations, split_cap

pytestmark = [pytest.mark.slow, pytest.mark.local_model]
CAP = 6
TOOLS = [{"type": "function", "function": {
    "name": "write_report", "description": "Write the incident report.",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}]
ASK = [{"role": "user", "content": "Write a long incident report: list every number from 1 to 300, one per line."}]


@pytest.fixture(scope="module")
def capped():  # type: ignore[no-untyped-def]
    from core.errors import ConfigurationError
    from farm.llm import local_server

    try:
        weights = local_server.check_installed("smollm2-135m")
    except ConfigurationError as exc:
        if os.environ.get("FARM_SKIP_LOCAL_MODEL"):
            pytest.skip(f"{exc} (skipped: FARM_SKIP_LOCAL_MODEL is set)")
        raise
    import llama_cpp

    class Capped(llama_cpp.Llama):  # a subclass: the process's own Llama stays as it is
        pass

    bound_generations(Capped, CAP)
    return Capped(model_path=str(weights), n_ctx=2048, n_threads=1, chat_format="chatml-function-calling",
                  verbose=False, seed=0)


def _tokens(llama, text: str) -> int:  # type: ignore[no-untyped-def]
    return len(llama.tokenize(text.encode(), add_bos=False))


def test_a_tool_calls_arguments_stop_at_the_cap(capped) -> None:  # type: ignore[no-untyped-def]
    reply = capped.create_chat_completion(messages=ASK, tools=TOOLS, temperature=0, max_tokens=None,
                                          tool_choice={"type": "function", "function": {"name": "write_report"}})
    choice = reply["choices"][0]
    arguments = choice["message"]["tool_calls"][0]["function"]["arguments"]
    assert _tokens(capped, arguments) <= CAP + 1, arguments
    with pytest.raises(json.JSONDecodeError):  # cut short: the agent's loop reports it as malformed
        json.loads(arguments)


def test_the_flag_is_read_and_the_rest_passed_on() -> None:
    assert split_cap(["--max_generation_tokens", "384", "--model", "w.gguf"]) == (384, ["--model", "w.gguf"])
    assert split_cap(["--max_generation_tokens=9", "--port", "1"]) == (9, ["--port", "1"])
    with pytest.raises(SystemExit, match="positive"):
        split_cap(["--max_generation_tokens", "0"])
