"""The Python agents the farm ships reach the cluster only through the interface: neither they nor
anything of the farm they import (transitively) loads the cluster providers, the catalog, the
oracles, the results store or the interface's server side. The code their sandboxed process is
given (farm/agenthost/sandbox.py AGENT_CODE) is all they need, and holds none of those."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from farm.agenthost.sandbox import AGENT_CODE, agent_code

ROOT = Path(__file__).resolve().parents[2]
# What an agent may use: what its sandbox is given (its base and registry, the MCP client, the LLM
# loop, and the farm's plain vocabulary: errors, states, secret scrubbing).
# (A package's __init__ alone is no licence for the whole package.)
ALLOWED = tuple(rel.removesuffix(".py").replace("/", ".") for rel in AGENT_CODE if not rel.endswith("__init__.py"))
FARM_PACKAGES = ("farm", "clusters", "results", "injectors", "tasks")


def _module_file(module: str) -> Path | None:
    base = ROOT / Path(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.exists():
            return path
    return None


def _farm_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            if name.split(".")[0] in FARM_PACKAGES and _module_file(name) is not None:
                found.add(name)
    return found


def _closure(start: str) -> dict[str, str]:
    """Every farm module reachable from `start` by imports, each with the module that imported it."""
    seen: dict[str, str] = {start: ""}
    todo = [start]
    while todo:
        module = todo.pop()
        path = _module_file(module)
        if path is None:
            continue
        for name in _farm_imports(path):
            if name not in seen:
                seen[name] = module
                todo.append(name)
    return seen


AGENT_MODULES = sorted(f"farm.agents.{p.stem}" for p in (ROOT / "farm" / "agents").glob("*.py"))


@pytest.mark.parametrize("module", AGENT_MODULES)
def test_an_agent_imports_nothing_of_the_farm_but_the_interface_client_and_the_llm_loop(module: str) -> None:
    reached = _closure(module)
    assert "farm.interface.client" in reached or module in ("farm.agents.agent", "farm.agents.__init__", "farm.agents.runner", "farm.agents.loopback") or \
        any(m.startswith("farm.llm") for m in reached), f"{module} does not use the interface at all?"
    outside = {m: by for m, by in reached.items()
               if m != module and not any(m == a or m.startswith(a + ".") for a in ALLOWED)
               and m not in ("farm", "farm.interface", "core")}
    assert not outside, f"{module} reaches {outside} (module: imported by)"


def test_the_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    """Not vacuous: the trial module, which drives clusters and results, is caught."""
    reached = _closure("farm.trial")
    assert "clusters.handle" in reached and "results.ledger" in reached


def test_the_agents_code_holds_no_catalog_oracle_ledger_or_server() -> None:
    tree = agent_code()
    files = {p.relative_to(tree).as_posix() for p in tree.rglob("*.py")}
    assert "farm/agents/runner.py" in files and "farm/agents/loop.py" in files and "farm/interface/client.py" in files
    assert not [f for f in files if f.startswith(("farm/problems", "farm/oracles", "farm/trial", "results",
                                                  "clusters", "farm/interface/server", "farm/agenthost"))]
    assert (tree / "farm" / "interface" / "__init__.py").read_text() == ""  # the real one loads the server
