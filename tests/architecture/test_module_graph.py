"""The import graph at module load, and who may reach the emulator.

A cycle at module load makes the import order decide whether a module sees its neighbour's names
(the half-initialised module problem), and makes every module of the loop a dependency of every
other: none can be read, tested or moved alone. Imports deferred into functions, or made only for
the type checker, do not run at load and are not counted here (`test_layers` counts them for the
floors).

The emulated cluster is one cluster among kind and EKS: the benchmark (injectors, the farm, the
results, the Celery tasks) reaches it only through `clusters.emulated`, the provider that adapts it,
so everything above `clusters/` runs unchanged on a real cluster."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from tests.architecture.test_layers import PACKAGES, ROOT, imports_of, module_name, project_modules

# The modules that may import the emulator: its provider, and the roof that gathers every floor
# (the CLI, and the pytest plugin that hands emulated clusters to tests).
EMULATOR_USERS = ("clusters.emulated", "farm.cli", "farm.pytest_plugin")


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def load_time_imports(path: Path, root: Path = ROOT) -> list[ast.Import | ast.ImportFrom]:
    """The import statements that run when the module is loaded: the module body's own statements
    and the branches of its top-level if/try blocks, never a function's or class body's, never an
    `if TYPE_CHECKING:` block."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.append(node)
            elif isinstance(node, ast.If):
                if not _is_type_checking(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)

    visit(ast.parse(path.read_text(), filename=str(path)).body)
    return found


def module_graph(root: Path = ROOT, files: list[Path] | None = None) -> dict[str, set[str]]:
    """module -> the project modules it imports at load. `from pkg import name` is an import of
    pkg.name when that is a module (its package is its parent, loaded first whatever the order),
    else of pkg."""
    files = project_modules() if files is None else files
    modules = {module_name(path, root): path for path in files}

    def owner(target: str) -> str:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        return target

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in load_time_imports(path, root):
            if isinstance(node, ast.Import):
                edges |= {owner(alias.name) for alias in node.names}
                continue
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                edges.add(f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else owner(source))
        graph[name] = edges - {"", name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_at_module_load() -> None:
    assert cycles(module_graph()) == []


def test_the_cycle_check_can_fail(tmp_path: Path) -> None:
    # a loop through a top-level import and a try block is a cycle; one closed only inside a
    # function or under TYPE_CHECKING is not
    pkg = tmp_path / "core"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from core import b\n")
    (pkg / "b.py").write_text("try:\n    from core.c import x\nexcept ImportError:\n    pass\n")
    (pkg / "c.py").write_text("import core.a\n")
    (pkg / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from core import e\n")
    (pkg / "e.py").write_text("def f():\n    from core import d\n")
    graph = module_graph(tmp_path, sorted(pkg.glob("*.py")))
    assert cycles(graph) == [["core.a", "core.b", "core.c"]]


def test_only_the_emulators_provider_and_the_roof_import_the_emulator() -> None:
    reaching = []
    for path in project_modules():
        name = module_name(path)
        if name == "kubesim" or name.startswith("kubesim.") or name.startswith(EMULATOR_USERS):
            continue
        for line, target in imports_of(path):  # lazy imports too: a deferred import is still a dependency
            if target == "kubesim" or target.startswith("kubesim."):
                reaching.append(f"{path.relative_to(ROOT)}:{line}: {target}")
    assert reaching == []


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_declares_its_public_face(package: str) -> None:
    module = importlib.import_module(package)
    public = getattr(module, "__all__", None)
    assert public, f"{package}/__init__.py declares no __all__"
    missing = [name for name in public if not hasattr(module, name)
               and importlib.util.find_spec(f"{package}.{name}") is None]
    assert missing == [], f"{package}.__all__ names what it does not have: {missing}"


def test_the_llm_client_knows_nothing_of_agents() -> None:
    # farm.llm is what agents (and the LLM judge) call models with; the agents' loop, their ATIF
    # export and the sweep's pre-flight check sit above it. An import back, even for a type hint,
    # makes the two one package.
    reaching = []
    for path in project_modules():
        if module_name(path).startswith("farm.llm"):
            reaching += [f"{path.relative_to(ROOT)}:{line}: {target}" for line, target in imports_of(path)
                         if target.startswith(("farm.agents", "farm.agenthost"))]
    assert reaching == []


def test_benches_import_nothing_of_the_tests() -> None:
    # A bench measures the product; what tests and benches share (fakes, harnesses) is product code
    # (farm/testing), so a bench runs from an installed package without the repository's tests.
    reaching = []
    for path in sorted((ROOT / "bench").rglob("*.py")):
        reaching += [f"{path.relative_to(ROOT)}:{line}: {target}" for line, target in imports_of(path)
                     if target == "tests" or target.startswith("tests.")]
    assert reaching == []


def test_the_emulators_parts_see_the_cluster_through_its_view() -> None:
    # Controllers, models and userland type the cluster they are built into as kubesim.view's
    # ClusterView; naming SimCluster would make each depend on the class that assembles them all.
    reaching = []
    for path in sorted((ROOT / "kubesim").rglob("*.py")):
        if module_name(path) in ("kubesim", "kubesim.cluster"):
            continue
        reaching += [f"{path.relative_to(ROOT)}:{line}" for line, target in imports_of(path)
                     if target == "kubesim.cluster.SimCluster"]
    assert reaching == []
