"""The farm's local model server: llama-cpp-python's OpenAI-compatible server (`python -m
llama_cpp.server`, the same arguments) with every generation bounded.

Why: llama-cpp-python's `chatml-function-calling` handler, with `tool_choice: auto`, generates the
prose reply and each tool call's JSON arguments with `max_tokens=None`, ignoring the request's
`max_tokens`: a weak model that keeps writing one string argument runs until the context window is
full, minutes on a few cores, while every other session on the host waits for the shared server.
Here each completion the server makes (the handler makes several per request) stops after
`--max_generation_tokens` tokens (finish reason `length`); a tool call cut there has arguments that
are not JSON, which the agent's loop answers as the model's mistake (a step), like any malformed
call.

    python -m farm.llm.llama_server --max_generation_tokens 384 --model W.gguf ...   # then llama_cpp.server's own
"""

from __future__ import annotations

import functools
import sys
from typing import Any

FLAG = "--max_generation_tokens"


def bound_generations(llama_class: Any, cap: int) -> None:
    """Make `llama_class.create_completion` (llama_cpp.Llama's) generate at most `cap` tokens a call."""
    original = llama_class.create_completion
    if getattr(original, "farm_cap", None) is not None:
        original = original.__wrapped__

    @functools.wraps(original)
    def create_completion(self: Any, *args: Any, **kwargs: Any) -> Any:
        asked = kwargs.get("max_tokens")
        if asked is None or asked <= 0 or asked > cap:
            kwargs["max_tokens"] = cap
        return original(self, *args, **kwargs)

    create_completion.farm_cap = cap  # type: ignore[attr-defined]
    llama_class.create_completion = create_completion


def split_cap(argv: list[str]) -> tuple[int | None, list[str]]:
    """The cap named by FLAG (`FLAG N` or `FLAG=N`) and the remaining arguments."""
    cap: int | None = None
    rest: list[str] = []
    it = iter(argv)
    for arg in it:
        if arg == FLAG:
            cap = int(next(it))
        elif arg.startswith(FLAG + "="):
            cap = int(arg.split("=", 1)[1])
        else:
            rest.append(arg)
    if cap is not None and cap <= 0:
        raise SystemExit(f"{FLAG} must be a positive number of tokens, not {cap}")
    return cap, rest


def main() -> None:
    cap, rest = split_cap(sys.argv[1:])
    import llama_cpp
    from llama_cpp.server.__main__ import main as serve

    if cap is not None:
        bound_generations(llama_cpp.Llama, cap)
    sys.argv = [sys.argv[0], *rest]
    serve()


if __name__ == "__main__":
    main()
