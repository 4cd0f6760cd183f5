"""The emulated cluster's own floors (issue 27): each part of kubesim/ may import the parts below
it and never one above, counting every import, those made only for the type checker and those
deferred into a function included. A part that names a part above it, even in a type hint, makes
the two one unit that can be neither read nor tested alone; the floors being one order, no two
parts can import each other.

The few imports that must reach up at run time (a part that is a client of a part above it) are
deferred into the function that needs them, say why there, and are listed in REACHING_UP with the
same reason: an upward import anywhere else, or one of these made at module load or for typing,
fails."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.architecture.test_layers import ROOT, imports_of, module_name

# Bottom first; a module belongs to the longest prefix that names it.
FLOORS = (
    "kubesim.clock",  # the virtual clock and RFC 3339 time
    "kubesim.store",  # the object store: resourceVersions, watches, the lock
    "kubesim.resources",  # the API's resource types, registered into the store
    "kubesim.quantity",  # Kubernetes quantities ("500m", "2Gi")
    # the runtime contract: the kubelet's pod and container records, a process's start and exit,
    # a dial's outcome, the node records, field-manager names
    "kubesim.runtime",
    "kubesim.lifecycle",  # node and container transitions as data
    "kubesim.observability",  # the metric, log and trace stores and their query languages
    "kubesim.view",  # ClusterView and a Protocol for each part it hands out; ControlPlane
    "kubesim.apps",  # the containers' behaviour models and the call-graph engine they share
    "kubesim.userland",  # the shell and tools inside containers (kubectl exec)
    "kubesim.controllers",  # the kubelet, the scheduler, the workload controllers, the network
    "kubesim.nodes",  # the node fleet: hardware, kernel, node lifecycle
    "kubesim.chaos",  # Chaos Mesh's effects
    "kubesim.workload",  # the applications' load, connections and state
    "kubesim.api",  # kube-apiserver: HTTP, admission, RBAC, tables, the metrics API
    # Loki's live tail is a WebSocket endpoint built on the API server's HTTP and WebSocket framing,
    # so it sits above the API though the rest of observability is below it
    "kubesim.observability.loki.tail",
    "kubesim.cluster",  # SimCluster assembles every part
    "kubesim.server",  # serves one cluster as its own process
    "kubesim.sre_session",  # a client of a served cluster
    "kubesim",  # the package's public face (its __init__ alone: the floors above name the rest)
)

# (importing module, imported module): why it reaches up. Each is a call-time import in a function.
REACHING_UP = {
    ("kubesim.controllers", "kubesim.api.metrics"):
        "the HPA is a client of the resource metrics API, which the API serves from the TSDB",
    ("kubesim.controllers.tidb_operator", "kubesim.api.admission"):
        "the operator writes the store directly, so it runs the API server's own validation",
    ("kubesim.apps.k8stools", "kubesim.api.authn"):
        "the in-pod kubectl is a client of the API server: its answer is the server's RBAC decision",
    ("kubesim.apps.k8stools", "kubesim.api.rbac"):
        "the in-pod kubectl is a client of the API server: its answer is the server's RBAC decision",
}


def floor_of(module: str) -> str | None:
    """The floor of a dotted module name, or None when none declares it."""
    best = None
    for floor in FLOORS:
        inside = module == floor or (floor != "kubesim" and module.startswith(floor + "."))
        if inside and (best is None or len(floor) > len(best)):
            best = floor
    return best


def _modules(root: Path) -> dict[str, Path]:
    return {module_name(path, root): path for path in sorted((root / "kubesim").rglob("*.py"))}


def deferred_import_lines(path: Path) -> set[int]:
    """Lines of the imports made inside a function (at call time), outside `if TYPE_CHECKING:`."""
    lines: set[int] = set()

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue  # typing only, never run
            if isinstance(child, ast.Import | ast.ImportFrom) and in_function:
                lines.add(child.lineno)
            visit(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

    visit(ast.parse(path.read_text(), filename=str(path)), False)
    return lines


def resolved_imports(path: Path, root: Path, modules: dict[str, Path]) -> list[tuple[int, str]]:
    """(line, kubesim module) of each import: `from pkg.mod import name` imports pkg.mod, and
    `from pkg import mod` imports pkg.mod (not also pkg, which loads first whatever the order)."""
    by_line: dict[int, set[str]] = {}
    for line, target in imports_of(path, root):
        if not target.startswith("kubesim."):
            continue
        while target not in modules and "." in target:
            target = target.rpartition(".")[0]
        by_line.setdefault(line, set()).add(target)
    return [(line, target) for line, targets in sorted(by_line.items()) for target in sorted(targets)
            if not any(other.startswith(target + ".") for other in targets)]


def upward_imports(root: Path = ROOT) -> list[str]:
    """Every import of a module on a higher floor, as "path:line: module imports target (why)",
    less the REACHING_UP ones made at call time."""
    modules = _modules(root)
    found = []
    for name, path in modules.items():
        here = floor_of(name)
        deferred = deferred_import_lines(path)
        for line, target in resolved_imports(path, root, modules):
            there = floor_of(target)
            if here is None or there is None or FLOORS.index(there) <= FLOORS.index(here):
                continue
            excused = (name, target) in REACHING_UP
            if excused and line in deferred:
                continue
            how = "at call time" if line in deferred else "at load or for typing"
            found.append(f"{path.relative_to(root)}:{line}: {name} imports {target} {how} ({here} < {there})")
    return found


def test_no_part_of_the_emulator_imports_a_floor_above_it() -> None:
    assert upward_imports() == []


def test_every_module_of_the_emulator_is_on_a_floor() -> None:
    # a new module or sub-package is placed in FLOORS, else the check above would not see it
    assert [name for name in _modules(ROOT) if floor_of(name) is None] == []


def test_each_excused_import_is_still_there_and_deferred() -> None:
    # the list shrinks with the code: an excuse nothing uses any more is taken out
    modules = _modules(ROOT)
    used = set()
    for name, path in modules.items():
        deferred = deferred_import_lines(path)
        used |= {(name, target) for line, target in resolved_imports(path, ROOT, modules)
                 if (name, target) in REACHING_UP and line in deferred}
    assert sorted(set(REACHING_UP) - used) == []


def test_the_check_sees_typed_lazy_and_load_time_imports(tmp_path: Path) -> None:
    # The check itself must be able to fail: a controller naming the cluster for typing, the store
    # importing the API in a function, and an excused import made at load instead of call time.
    pkg = tmp_path / "kubesim"
    for sub in ("controllers", "apps", "api"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "cluster.py").write_text("")
    (pkg / "api" / "rbac.py").write_text("")
    (pkg / "api" / "authn.py").write_text("")
    (pkg / "controllers" / "probe.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kubesim.cluster import SimCluster\n")
    (pkg / "store.py").write_text("def f():\n    from kubesim.api import rbac\n")
    (pkg / "apps" / "k8stools.py").write_text(
        "from kubesim.api.rbac import RBACAuthorizer\n\ndef check():\n    from kubesim.api.authn import UserInfo\n")
    found = upward_imports(tmp_path)
    assert [f.split(": ", 1)[1] for f in found] == [
        "kubesim.apps.k8stools imports kubesim.api.rbac at load or for typing (kubesim.apps < kubesim.api)",
        "kubesim.controllers.probe imports kubesim.cluster at load or for typing (kubesim.controllers < kubesim.cluster)",
        "kubesim.store imports kubesim.api.rbac at call time (kubesim.store < kubesim.api)",
    ]
    assert floor_of("kubesim.observability.loki.tail") == "kubesim.observability.loki.tail"
    assert floor_of("kubesim.observability.loki.logs") == "kubesim.observability"
    assert floor_of("kubesim.storekeeper") is None
