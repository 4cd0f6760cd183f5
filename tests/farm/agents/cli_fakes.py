"""The fake `claude` and `codex` executables (tests/fakes), installed for a test outside the project
or for the agent's sandbox, and what the worker hands an agent's process (helpers, no tests here). The adapters strip the project's folders from the PATH they give a CLI, so
the fakes cannot find the venv's Python there: their copies name it in their first line instead."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
FAKES = ROOT / "tests" / "fakes"


def install_fakes(bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Copies of the fakes in `bin_dir`, run by this interpreter, first on PATH."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in ("claude", "codex"):
        body = (FAKES / name).read_text().split("\n", 1)[1]
        target = bin_dir / name
        target.write_text(f"#!{sys.executable}\n{body}")
        target.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


def sandboxed_fake(name: str, folder: Path) -> Path:
    """A copy of the fake `name` for the agent's sandbox: it runs there under the system's python3 and
    finds the installed packages (the MCP client) where the sandbox mounts them; a real CLI needs
    nothing of the sort."""
    from farm.agenthost.sandbox import SITE_PATH

    body = (FAKES / name).read_text().split("\n", 1)[1]
    fake = folder / name
    fake.write_text(f"#!/usr/bin/env python3\nimport sys; sys.path[:0] = {[f'{SITE_PATH}/0', f'{SITE_PATH}/1']!r}\n"
                    + body)
    fake.chmod(0o755)
    return fake


def observe_handoff(monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], list[tuple[list[str], dict[str, str]]]]:
    """What the worker hands an agent's process, observed where it hands it: the contexts it is given
    (farm.trial.session.agent_view) and the sandbox's command lines and environments."""
    from farm.agenthost import process as process_mod
    from farm.trial import session as session_mod

    contexts: list[Any] = []
    commands: list[tuple[list[str], dict[str, str]]] = []
    original_view, original_command = session_mod.agent_view, process_mod.runner_command

    def observed_view(ctx: Any, endpoint: Any) -> Any:
        contexts.append(original_view(ctx, endpoint))
        return contexts[-1]

    def observed_command(*args: Any, **kwargs: Any) -> tuple[list[str], dict[str, str]]:
        commands.append(original_command(*args, **kwargs))
        return commands[-1]

    monkeypatch.setattr(session_mod, "agent_view", observed_view)
    monkeypatch.setattr(process_mod, "runner_command", observed_command)
    return contexts, commands
