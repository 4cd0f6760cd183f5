"""The fake `claude` and `codex` executables (tests/fakes), installed for a test outside the project
(helpers, no tests here). The adapters strip the project's folders from the PATH they give a CLI, so
the fakes cannot find the venv's Python there: their copies name it in their first line instead."""

from __future__ import annotations

import os
import sys
from pathlib import Path

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
