"""Every change of a Trial or Attempt row goes through results/ledger.py: its conditional UPDATEs
are what make exactly one attempt record a trial, and a state written anywhere else would bypass
the lease. The dispatcher inserts new rows (pending) and nothing more."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("core", "apps", "clusters", "injectors", "results", "farm", "tasks")
LEDGER = ROOT / "results" / "ledger.py"
ROWS = {"Trial", "Attempt"}


def _writes(tree: ast.AST) -> list[tuple[int, str]]:
    """Statements that change Trial/Attempt rows: update(Trial|Attempt) and assignments to
    `<something>.state` on a variable named like a trial or an attempt."""
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("update", "delete")
                and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in ROWS):
            found.append((node.lineno, f"{node.func.id}({node.args[0].id})"))
        if isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if (isinstance(t, ast.Attribute) and t.attr == "state" and isinstance(t.value, ast.Name)
                        and t.value.id.lower() in ("trial", "attempt", "t", "a", "row")):
                    found.append((node.lineno, f"{t.value.id}.state = ..."))
    return found


def test_only_the_ledger_writes_trial_and_attempt_rows() -> None:
    offenders = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if path == LEDGER:
                continue
            for line, what in _writes(ast.parse(path.read_text(), str(path))):
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    assert not offenders, "Trial/Attempt rows written outside results/ledger.py:\n" + "\n".join(offenders)


def test_the_check_sees_a_write() -> None:
    """Not vacuous: the ledger itself is full of them, and a stray assignment is caught."""
    assert len(_writes(ast.parse(LEDGER.read_text()))) >= 10
    probe = "def f(s, trial):\n    s.execute(update(Trial).values(state='x'))\n    trial.state = 'finished'\n"
    assert sorted(w for _, w in _writes(ast.parse(probe))) == ["trial.state = ...", "update(Trial)"]
