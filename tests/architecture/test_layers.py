"""The packages form floors: each may import the ones below it and never one above. A layer that
reaches up (a cluster handle importing the farm's problem model, a CLI inside clusters/) makes the
lower floor impossible to understand, test or reuse without the whole house.

The check reads every module's imports with `ast`, the lazy ones inside functions included: an
import deferred to call time is still a dependency."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Bottom first. kubesim, the emulated cluster, sits below the cluster providers: clusters.emulated
# adapts it as kind.py and eks.py adapt theirs. farm.cli is its own floor, the roof: the commands
# gather every layer, and nothing imports them back.
FLOORS = ("core", "apps", "kubesim", "clusters", "injectors", "results", "farm", "tasks", "farm.cli")
PACKAGES = ("core", "apps", "kubesim", "clusters", "injectors", "results", "farm", "tasks")


def floor_of(module: str) -> str | None:
    """The floor a dotted module name belongs to (the longest matching prefix), or None when it is
    not the project's."""
    best = None
    for floor in FLOORS:
        if module == floor or module.startswith(floor + "."):
            if best is None or len(floor) > len(best):
                best = floor
    return best


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.append((node.lineno, target))
            # `from farm import cli` may name a module (here, of another floor), not only a name
            out += [(node.lineno, f"{target}.{alias.name}") for alias in node.names]
    return out


def project_modules() -> list[Path]:
    files: list[Path] = []
    for top in PACKAGES:
        files += sorted((ROOT / top).rglob("*.py"))
    return files


def upward_imports() -> list[str]:
    found = []
    for path in project_modules():
        here = floor_of(module_name(path))
        assert here is not None, path
        for line, target in imports_of(path):
            there = floor_of(target)
            if there is not None and FLOORS.index(there) > FLOORS.index(here):
                found.append(f"{path.relative_to(ROOT)}:{line}: {here} imports {target} ({there})")
    return found


def test_no_package_imports_a_floor_above_it() -> None:
    assert upward_imports() == []


def test_the_check_sees_lazy_and_relative_imports(tmp_path: Path) -> None:
    # The check itself must be able to fail: an import inside a function, and a relative one that
    # climbs out of its package, are both found.
    # (a probe in a copy of the layout, not in the tree: other checks read the tree meanwhile)
    probe = tmp_path / "clusters" / "_layer_probe.py"
    probe.parent.mkdir()
    probe.write_text("def f():\n    from farm.trial import run_all\n    from ..results import ledger\n")
    targets = [t for _, t in imports_of(probe, tmp_path)]
    assert "farm.trial" in targets
    assert "results.ledger" in targets
    assert "farm.trial.run_all" in targets
    assert floor_of("farm.cli.sim") == "farm.cli"
    assert floor_of("farm.trial") == "farm"
    assert floor_of("farmer") is None


@pytest.mark.parametrize("floor", ["core"])
def test_the_ground_floor_imports_nothing_of_the_project(floor: str) -> None:
    for path in (ROOT / floor).rglob("*.py"):
        assert [t for _, t in imports_of(path) if floor_of(t) not in (None, floor)] == [], path
