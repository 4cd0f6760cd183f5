"""New problems from existing ones: move a problem to another target service, or change its
parameters. The result is validated like any catalog entry (same ProblemDefinitionError)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import yaml

from farm.errors import ProblemDefinitionError
from farm.problems.catalog import parse_problem
from farm.problems.model import Problem

WORKLOAD_PARAMS = ("service", "dependency", "target")  # params that name the faulty workload


def _containers(app: str) -> dict[str, str]:
    """Workload name → its first container's name, from the application's manifests."""
    out: dict[str, str] = {}
    manifests = Path(__file__).parent.parent / "apps" / app / "manifests"
    for path in sorted(manifests.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") in ("Deployment", "StatefulSet", "DaemonSet"):
                containers = doc.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
                if containers:
                    out[doc["metadata"]["name"]] = containers[0].get("name", "")
    return out


# Names faults derive from their target (a NetworkPolicy "<dependency>-ingress").
DERIVED_SUFFIXES = ("-ingress",)


def _word(name: str) -> re.Pattern[str]:
    # A workload name as a whole word: "geo" must not match inside "mongodb-geo" or "geo-db",
    # but does inside the names derived from it.
    derived = "|".join(re.escape(s) for s in DERIVED_SUFFIXES)
    return re.compile(rf"(?<![\w-]){re.escape(name)}(?=$|[^\w-]|(?:{derived})(?![\w-]))")


def _replace(value: Any, renames: dict[str, str]) -> Any:
    if isinstance(value, str):
        for old, new in renames.items():
            value = _word(old).sub(new, value)
        return value
    if isinstance(value, list):
        return [_replace(v, renames) for v in value]
    if isinstance(value, dict):
        return {k: _replace(v, renames) for k, v in value.items()}
    return value


def _replace_value(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return re.sub(rf"(?<![\w.]){re.escape(old)}(?![\w.])", new, value)
    if isinstance(value, list):
        return [_replace_value(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _replace_value(v, old, new) for k, v in value.items()}
    return value


def _scalar(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def parse_settings(pairs: list[str]) -> list[tuple[int | None, str, Any]]:
    """`key=value` (every fault that has the key, else fault 0) or `N.key=value` (fault N)."""
    out = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ProblemDefinitionError(None, None, "set", f"'{pair}' is not key=value")
        index = None
        head, dot, rest = key.partition(".")
        if dot and head.isdigit():
            index, key = int(head), rest
        out.append((index, key, _scalar(value)))
    return out


def mutate(problem: Problem, target: str | None = None, settings: list[str] | None = None,
           new_id: str | None = None) -> Problem:
    """A copy of `problem` aimed at `target` (the faulty workload) and/or with changed params."""
    data = problem.model_dump(exclude_defaults=False)
    old_target = None
    for spec in data["faults"]:
        for key in WORKLOAD_PARAMS:
            if isinstance(spec["params"].get(key), str):
                old_target = spec["params"][key]
                break
        if old_target:
            break
    if target is not None:
        if old_target is None:
            raise ProblemDefinitionError(None, problem.id, "target",
                                         "this problem's faults name no target workload to change")
        renames = {old_target: target}
        containers = _containers(problem.app)
        if old_target in containers and target in containers:
            renames[containers[old_target]] = containers[target]
        elif target not in containers and containers:
            raise ProblemDefinitionError(None, problem.id, "target",
                                         f"no workload '{target}' in {problem.app} (known: {', '.join(sorted(containers))})")
        for key in ("faults", "mitigation", "ground_truth", "description", "tags"):
            data[key] = _replace(data[key], renames)
        # The new target is not downstream of itself.
        data["ground_truth"]["affected"] = [a for a in data["ground_truth"]["affected"] if a != target]
        for noise in data.get("noises", []):
            params = noise.get("params", {})
            if target in params.get("targets", []):
                params["targets"] = [t for t in params["targets"] if t != target] or [old_target]
    for index, key, value in parse_settings(settings or []):
        indices = [index] if index is not None else [
            i for i, f in enumerate(data["faults"]) if key in f["params"]] or [0]
        for i in indices:
            if not 0 <= i < len(data["faults"]):
                raise ProblemDefinitionError(None, problem.id, f"faults[{i}]", "no such fault")
            before = data["faults"][i]["params"].get(key)
            data["faults"][i]["params"][key] = value
            # The ground truth names the injected value: carry the new one into it.
            if before is not None and len(str(before)) >= 2:
                data["ground_truth"] = _replace_value(data["ground_truth"], str(before), str(value))
                data["description"] = _replace_value(data["description"], str(before), str(value))
    suffix = "-".join(filter(None, [
        target, hashlib.sha1(repr(settings).encode()).hexdigest()[:6] if settings else ""]))
    data["id"] = new_id or f"{problem.id}--{suffix}"
    data["description"] = f"{data['description']} (mutated from {problem.id})"
    return parse_problem(data, "mutation")
