"""Loads the declarative problem catalog (YAML files under farm/problems/catalog/) into
`Problem` models, checking each definition against the injector and noise registries.

A file holds `problems:` (a list) and optionally `app:` (the default application of its
problems). A malformed problem (unknown injector, missing ground-truth field, bad parameter
type, duplicate id, ...) becomes one `ProblemDefinitionError` naming the file, the problem and
the field; the rest of the catalog still loads.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from apps.application import APPS_DIR
from core.errors import InputError, ProblemDefinitionError
from core.problem import Problem

CATALOG_DIR = Path(__file__).parent / "catalog"
# Applications a problem may target: those with an apps/<name>/app.yaml, plus the ones whose
# manifests are written elsewhere this release (their problems are defined, and validate on a
# cluster that runs them).
PLANNED_APPS = frozenset({"hotel-reservation", "social-network", "astronomy-shop", "train-ticket", "tidb-cluster"})


def known_apps() -> set[str]:
    return set(PLANNED_APPS) | {p.parent.name for p in APPS_DIR.glob("*/app.yaml")}


@dataclass
class Catalog:
    problems: list[Problem] = field(default_factory=list)
    errors: list[ProblemDefinitionError] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # problem id → file it came from

    def get(self, problem_id: str) -> Problem:
        for p in self.problems:
            if p.id == problem_id:
                return p
        broken = [e for e in self.errors if e.problem == problem_id]
        if broken:
            raise InputError(f"problem '{problem_id}' is malformed: {broken[0]}")
        raise InputError(f"unknown problem '{problem_id}' ({len(self.problems)} problems in the catalog)")

    def select(
        self,
        ids: Iterable[str] | None = None,
        tags: Iterable[str] | None = None,
        layers: Iterable[str] | None = None,
        apps: Iterable[str] | None = None,
        compositions: Iterable[str] | None = None,
    ) -> list[Problem]:
        """Problems matching every filter given: ids (exact), any of the tags, any of the layers."""
        if ids is not None:
            return [self.get(i) for i in ids]
        tags_set = set(tags or [])
        out = []
        for p in self.problems:
            if tags_set and not tags_set & set(p.tags):
                continue
            if layers is not None and p.layer not in set(layers):
                continue
            if apps is not None and p.app not in set(apps):
                continue
            if compositions is not None and p.composition not in set(compositions):
                continue
            out.append(p)
        return out


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "problem"


def check_problem(problem: Problem, path: str | None) -> None:
    """The checks pydantic cannot make alone: injectors and noises exist and accept their
    params, mitigation steps are well formed, and the real-cluster flag is honest."""
    from injectors.fault import ParamsError
    from injectors.injector import faults, noises

    def fail(field_name: str, reason: str) -> None:
        raise ProblemDefinitionError(path, problem.id, field_name, reason)

    if problem.app not in known_apps():
        fail("app", f"unknown application '{problem.app}' (known: {', '.join(sorted(known_apps()))})")
    if problem.sregym_ids:
        from farm.problems.sregym import SREGYM_TSV, registry, unknown_ids

        for i, sid in enumerate(problem.sregym_ids):
            if sid in unknown_ids([sid]):
                fail(f"sregym_ids[{i}]", f"'{sid}' is not a problem of SREGym's registry ({SREGYM_TSV.name})")
            if registry()[sid].app != problem.app:
                fail(f"sregym_ids[{i}]", f"SREGym runs '{sid}' on {registry()[sid].app}, not {problem.app}: "
                     "an id marks the same root cause in the same application")
        if len(set(problem.sregym_ids)) != len(problem.sregym_ids):
            fail("sregym_ids", "an id is listed twice")
    real_only = []
    triggers = 0
    for i, spec in enumerate(problem.faults):
        if spec.injector not in faults:
            fail(f"faults[{i}].injector", f"unknown injector '{spec.injector}'")
        try:
            injector = faults.create(spec.injector, **spec.params)
        except ParamsError as exc:
            fail(f"faults[{i}].params.{exc.field}", exc.reason)
        except TypeError as exc:
            fail(f"faults[{i}].params", str(exc))
        if getattr(injector, "needs_real_cluster", False):
            real_only.append(spec.injector)
        triggers += bool(getattr(injector, "trigger", False))
    if real_only and not problem.needs_real_cluster:
        fail("needs_real_cluster", f"injector {real_only[0]} needs a real cluster; set needs_real_cluster: true")
    if problem.composition == "metastable" and not triggers:
        fail("faults", "a metastable problem needs a trigger fault (load-spike or pod-kill)")
    if problem.composition == "metastable" and triggers == len(problem.faults):
        fail("faults", "a metastable problem needs a sustaining fault besides its trigger")
    if problem.composition == "single" and len(problem.faults) - triggers > 1:
        fail("composition", "several root causes: use concurrent or correlated")
    if problem.composition == "concurrent" and len(problem.ground_truth.also) < 1:
        fail("ground_truth.also", "a concurrent problem lists each further root cause in also")
    for i, noise in enumerate(problem.noises):
        if noise.kind not in noises:
            fail(f"noises[{i}].kind", f"unknown noise '{noise.kind}' (known: {', '.join(noises.names())})")
        try:
            noises.create(noise.kind, **noise.params)
        except ParamsError as exc:
            fail(f"noises[{i}].params.{exc.field}", exc.reason)
    for i, step in enumerate(problem.mitigation):
        set_fields = [name for name in ("kubectl", "recover") if getattr(step, name) is not None]
        if len(set_fields) > 1 or (not set_fields and step.wait is None):
            fail(f"mitigation[{i}]", "set exactly one of kubectl or recover (with an optional wait)")
        if step.recover is not None:
            fail(f"mitigation[{i}].recover", "a reference mitigation is what an agent could do with its own tools: "
                 "write the fix as kubectl steps (recover is the farm's own, privileged step), or mark the problem "
                 "diagnosis_only when no fix is within the agent's scope")
        if step.kubectl is not None:
            words = step.kubectl.split()
            if words and words[0] == "kubectl":
                fail(f"mitigation[{i}].kubectl", "give the arguments only, without the leading 'kubectl'")
            if any(ch in step.kubectl for ch in ("|", ";", "&&", "`", "$(")):
                fail(f"mitigation[{i}].kubectl", "one kubectl command, no shell syntax")


def parse_problem(data: Any, path: str | None, default_app: str | None = None) -> Problem:
    if not isinstance(data, dict):
        raise ProblemDefinitionError(path, None, "problems[]", "each problem must be a mapping")
    pid = data.get("id") if isinstance(data.get("id"), str) else None
    if default_app and "app" not in data:
        data = {**data, "app": default_app}
    try:
        problem = Problem.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ProblemDefinitionError(path, pid, _loc(err["loc"]), err["msg"]) from None
    check_problem(problem, path)
    return problem


def load_file(path: Path, catalog: Catalog) -> None:
    where = str(path)
    try:
        # libyaml's C loader: the pure-Python one takes seconds over the whole catalog.
        doc = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        catalog.errors.append(ProblemDefinitionError(where, None, "yaml", str(exc).replace("\n", " ")))
        return
    if not isinstance(doc, dict) or not isinstance(doc.get("problems"), list):
        catalog.errors.append(ProblemDefinitionError(where, None, "problems", "the file needs a 'problems:' list"))
        return
    default_app = doc.get("app")
    seen = {p.id for p in catalog.problems}
    for entry in doc["problems"]:
        try:
            problem = parse_problem(entry, where, default_app)
        except ProblemDefinitionError as exc:
            catalog.errors.append(exc)
            continue
        if problem.id in seen:
            first = catalog.sources.get(problem.id, "?")
            catalog.errors.append(ProblemDefinitionError(where, problem.id, "id", f"duplicate id (first defined in {first})"))
            continue
        seen.add(problem.id)
        catalog.problems.append(problem)
        catalog.sources[problem.id] = where


def load_catalog(directory: Path | str | None = None, files: Iterable[Path] | None = None) -> Catalog:
    """Every problem of the catalog directory (or of the given files), and the errors."""
    catalog = Catalog()
    paths = list(files) if files is not None else sorted(Path(directory or CATALOG_DIR).glob("*.yaml"))
    for path in paths:
        load_file(Path(path), catalog)
    return catalog
