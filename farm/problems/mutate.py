"""New problems from existing ones: move a problem to another target workload, or change its
parameters. The result is validated like any catalog entry (same ProblemDefinitionError), and,
when asked, on the emulated cluster (`validate_mutation`).

Retargeting rewrites the ground truth from the application's structure (injectors/topology.py),
not by swapping one name for another: every fact the old text states about the old target — its
callers, the operations it serves, the stores it dials by protocol, its container, Consul name,
database, claim and port — is replaced by the same fact about the new target (search's `Nearby`
calls to geo become search's `GetRates` calls to rate, not search's `Nearby` calls to rate);
`affected` is the new target's chain of callers; the symptom names the user routes that pass
through the new target. A fact the text states that the new target has no counterpart for (a
cache it does not have, a caller it lacks) makes the retarget fail rather than write a wrong answer."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

import yaml

from core.errors import ProblemDefinitionError
from core.problem import Problem
from farm.problems.catalog import parse_problem
from injectors.topology import Role, Topology, short_op, topology

WORKLOAD_PARAMS = ("service", "dependency", "target")  # params that name the faulty workload
# Names faults derive from their target (a NetworkPolicy "<dependency>-ingress").
DERIVED_SUFFIXES = ("-ingress",)
# How people name an application's routes (the entry operations; the first form is what a
# rewritten symptom says), and the routes that carry most of the load.
ROUTE_WORDS: dict[str, dict[str, tuple[str, ...]]] = {
    "hotel-reservation": {
        "HTTP GET /hotels": ("hotel searches (/hotels)", "hotel searches", "searches"),
        "HTTP GET /recommendations": ("recommendations (/recommendations)", "recommendations"),
        "HTTP POST /user": ("logins (/user)", "logins"),
        "HTTP POST /reservation": ("reservations (/reservation)", "reservations"),
    },
    "astronomy-shop": {
        "GET /": ("the home page",),
        "GET /api/products/[productId]": ("product pages", "viewing products"),
        "GET /api/recommendations": ("recommendations",),
        "GET /api/product-reviews/[productId]": ("product reviews", "reviews"),
        "POST /api/product-ask-ai-assistant/[productId]": ("AI assistant answers",),
        "GET /api/data": ("ads", "ad requests"),
        "GET /api/cart": ("cart pages", "carts"),
        "POST /api/cart": ("adding to the cart",),
        "POST /api/checkout": ("checkouts",),
    },
}
MAIN_ROUTES = {"hotel-reservation": ("HTTP GET /hotels", "HTTP GET /recommendations"),
               "astronomy-shop": ("GET /api/products/[productId]", "GET /api/cart", "POST /api/checkout")}
# How prose names a data store's protocol.
PROTOCOL_WORDS = {"redis": ("Redis", "Valkey"), "postgres": ("PostgreSQL", "Postgres"), "mongo": ("MongoDB", "Mongo"),
                  "memcached": ("memcached", "Memcached"), "kafka": ("Kafka",), "mysql": ("MySQL",)}


def _containers(app: str) -> dict[str, str]:
    """Workload name → its first container's name, from the application's manifests."""
    from injectors.topology import manifest_workloads

    return {name: w.container for name, w in manifest_workloads(app).items()}


# -- the mapping of facts ---------------------------------------------------------------------


@dataclass
class Facts:
    """What retargeting from `old` to `new` renames, and what it cannot."""

    renames: dict[str, str]
    unmappable: dict[str, str]  # a fact of the old target → why the new one has no counterpart


def _positional(old: list[str], new: list[str], what: str, facts: Facts, new_name: str) -> None:
    for i, name in enumerate(old):
        if new:
            facts.renames.setdefault(name, new[min(i, len(new) - 1)])
        else:
            facts.unmappable.setdefault(name, f"{new_name} has no {what}")


def role_facts(topo: Topology, old: Role, new: Role) -> Facts:
    facts = Facts({old.name: new.name}, {})
    ops: dict[str, str] = {}
    if old.container and new.container:
        facts.renames[old.container] = new.container
    for key, value in old.derived.items():
        if key in new.derived:
            facts.renames.setdefault(value, new.derived[key])
        else:
            facts.unmappable.setdefault(value, f"{new.name} has no {key} of its own")
    # The operations it serves.
    for i, op in enumerate(old.ops):
        if new.ops:
            ops.setdefault(op, new.ops[min(i, len(new.ops) - 1)])
        else:
            facts.unmappable.setdefault(short_op(op), f"{new.name} serves no operation")
    _positional(old.caller_names, [c for c in new.caller_names if c != old.name], "caller", facts, new.name)
    protocols = list(dict.fromkeys(p for _, _, p in old.callees))
    for p in protocols:
        kind = f"{p} dependency" if p in ("grpc", "http", "thrift") else f"{p} store"
        _positional(old.callee_names(p), new.callee_names(p), kind, facts, new.name)
    # The operations of the calls in and out: a caller's op and the op it calls on the target,
    # the op the target calls on each dependency, each moved with the workload it belongs to.
    for caller, caller_op, _ in old.callers:
        twin = next((cop for c, cop, _ in new.callers if c == facts.renames.get(caller, caller)), None)
        if twin is not None:
            ops.setdefault(caller_op, twin)
    for callee, op, _ in old.callees:
        twin = next((top for c, top, _ in new.callees if c == facts.renames.get(callee, callee)), None)
        if twin is not None:
            ops.setdefault(op, twin)
        else:
            facts.unmappable.setdefault(short_op(op), f"{new.name} makes no such call")
    for op, twin in ops.items():  # full names, then the short names prose uses
        facts.renames.setdefault(op, twin)
    for op, twin in ops.items():
        facts.renames.setdefault(short_op(op), short_op(twin))
    # Further up the chain: the same workloads, or nothing to say about them.
    for name in old.upstream:
        if name not in facts.renames and name not in new.upstream and name != new.name:
            facts.unmappable.setdefault(name, f"{name} does not call {new.name}, directly or not")
    if old.protocol in PROTOCOL_WORDS and new.protocol in PROTOCOL_WORDS and old.protocol != new.protocol:
        for i, word in enumerate(PROTOCOL_WORDS[old.protocol]):
            facts.renames.setdefault(word, PROTOCOL_WORDS[new.protocol][min(i, len(PROTOCOL_WORDS[new.protocol]) - 1)])
    facts.renames = {k: v for k, v in facts.renames.items() if k and k != v}
    for k in list(facts.unmappable):
        if k in facts.renames or k == new.name or k in new.upstream:
            facts.unmappable.pop(k)
    return facts


def _pattern(names: list[str]) -> re.Pattern[str]:
    # A name as a whole word: "geo" must not match inside "mongodb-geo", "srv-geo", "geography" or
    # an op's full name ("/geo.Geo/Nearby"), but does after a kind ("deployment/geo") and inside the
    # names derived from it ("geo-ingress"); an op's short name never inside another op's full
    # name ("/search.Search/Nearby"). Full names are tried first (the longest alternatives).
    derived = "|".join(re.escape(s) for s in DERIVED_SUFFIXES)
    end = rf"(?=$|(?!\.\w)[^\w-]|(?:{derived})(?![\w-]))"
    ordered = sorted(names, key=len, reverse=True)
    workloads = "|".join(re.escape(n) for n in ordered if re.fullmatch(r"[a-z0-9][a-z0-9.-]*", n))
    others = "|".join(re.escape(n) for n in ordered if not re.fullmatch(r"[a-z0-9][a-z0-9.-]*", n))
    parts = [rf"(?<![\w./-])(?:{others}){end}"] if others else []
    if workloads:
        parts.append(rf"(?<![\w.-])(?:{workloads}){end}")
    return re.compile("|".join(parts))


def _rename(value: Any, renames: dict[str, str]) -> Any:
    if not renames:
        return value
    pattern = _pattern(list(renames))
    return _walk(value, lambda s: pattern.sub(lambda m: renames[m.group(0)], s))


def _walk(value: Any, fn: Any) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list):
        return [_walk(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: _walk(v, fn) for k, v in value.items()}
    return value


def _mentions(value: Any, names: list[str]) -> list[str]:
    if not names:
        return []
    pattern = _pattern(names)
    found: list[str] = []

    def collect(s: str) -> str:
        found.extend(pattern.findall(s))
        return s
    _walk(value, collect)
    return list(dict.fromkeys(found))


# -- symptoms -----------------------------------------------------------------------------------


def _route_phrase(words: dict[str, tuple[str, ...]], routes: list[str]) -> str:
    phrases = [words[r][0] for r in routes if r in words]
    return phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " and " + phrases[-1] if phrases else ""


def rewrite_symptom(app: str, symptom: str, old: Role, new: Role, rename: Any = lambda s: s) -> str:
    """The symptom with the user routes of the new target: the clause saying what fails names the
    routes through the new target, the clause saying what still works names the others; the
    clauses that name no route keep their text, renamed."""
    words = ROUTE_WORDS.get(app)
    if not words or set(old.routes) == set(new.routes):
        return rename(symptom)
    aliases = sorted(((a, r) for r, forms in words.items() for a in forms), key=lambda x: len(x[0]), reverse=True)
    alias_re = re.compile("|".join(rf"(?<![\w/]){re.escape(a)}(?![\w/])" for a, _ in aliases))
    route_of = dict(aliases)
    main = [r for r in MAIN_ROUTES.get(app, ()) if r not in new.routes]
    clauses = []
    for clause in symptom.split(";"):
        text = clause.strip()
        hits = list(alias_re.finditer(text))
        if not hits:
            clauses.append(rename(text))
            continue
        mentioned = {route_of[h.group(0)] for h in hits}
        if "still work" in text:
            if main:
                clauses.append(f"{_route_phrase(words, main)} still work")
            continue
        if mentioned <= set(old.routes):
            # What happens to them, without the old target's explanation in parentheses.
            predicate = re.sub(r"\s*\([^)]*\)", "", text[hits[-1].end():]).strip()
            phrase = _route_phrase(words, [r for r in words if r in new.routes]) or "requests"
            clauses.append(f"{phrase} {rename(predicate)}".strip())
        else:
            clauses.append(rename(text))
    return "; ".join(c for c in clauses if c)


# -- mutation -----------------------------------------------------------------------------------


def _old_target(data: dict[str, Any]) -> str | None:
    for spec in data["faults"]:
        for key in WORKLOAD_PARAMS:
            if isinstance(spec["params"].get(key), str):
                return spec["params"][key]
    return None


def retarget(problem: Problem, data: dict[str, Any], target: str) -> dict[str, Any]:
    """`data` (a dumped problem) aimed at `target`, its ground truth rewritten from the structure."""
    old_target = _old_target(data)
    if old_target is None:
        raise ProblemDefinitionError(None, problem.id, "target", "this problem's faults name no target workload to change")
    topo = topology(problem.app)
    if topo.workloads and target not in topo.workloads:
        raise ProblemDefinitionError(None, problem.id, "target",
                                     f"no workload '{target}' in {problem.app} (known: {', '.join(sorted(topo.workloads))})")
    old, new = topo.role(old_target), topo.role(target)
    facts = role_facts(topo, old, new)
    gt = data["ground_truth"]
    texts = [gt["mechanism"], gt["symptom"], gt["details"], gt["component"], data["description"],
             [m.get("kubectl") for m in data["mitigation"]]]
    wrong = _mentions(texts, list(facts.unmappable))
    if wrong:
        raise ProblemDefinitionError(None, problem.id, "ground_truth", "cannot move to " + target + ": the ground truth "
                                     + "; ".join(f"names {w} ({facts.unmappable[w]})" for w in wrong)
                                     + " — write this problem's ground truth by hand")
    renames = facts.renames
    for key in ("faults", "mitigation", "description"):
        data[key] = _rename(data[key], renames)
    data["tags"] = [renames.get(t, t) for t in data["tags"]]
    new_gt = _rename({k: v for k, v in gt.items() if k not in ("component", "affected", "also", "symptom")}, renames)
    new_gt["details"], fix = _expected_values(problem.app, data["faults"], old_target, target, gt["details"],
                                              new_gt["details"])
    if fix is not None:  # the reference mitigation puts back what the new target's manifest says
        data["mitigation"] = _walk(data["mitigation"], lambda t: re.sub(rf"(?<=[=:]){re.escape(fix[0])}(?![\w.])",
                                                                        fix[1], t))
    new_gt["component"] = target if gt["component"] == old_target else _rename(gt["component"], renames)
    # Who fails downstream of the new target: its chain of callers (and the target itself when
    # the old one was listed, as for a node fault whose component is the node).
    affected = [w for w in new.upstream if w != new_gt["component"]]
    if old_target in gt.get("affected", []) and target != new_gt["component"]:
        affected.insert(0, target)
    new_gt["affected"] = affected
    new_gt["symptom"] = rewrite_symptom(problem.app, gt["symptom"], old, new, lambda t: _rename(t, renames))
    new_gt["also"] = gt.get("also", [])
    data["ground_truth"] = new_gt
    for noise in data.get("noises", []):
        params = noise.get("params", {})
        if target in params.get("targets", []):
            params["targets"] = [t for t in params["targets"] if t != target] or [old_target]
    return data


def _manifest_value(app: str, workload: str, injector: str, params: dict[str, Any]) -> str | None:
    """What the fault's field holds in the workload's manifest (the value a fix puts back)."""
    from injectors.topology import manifest_workloads

    w = manifest_workloads(app).get(workload)
    if w is None:
        return None
    spec = w.spec
    limits = (spec.get("resources") or {}).get("limits") or {}
    if injector == "memory-limit-too-low":
        return str(limits["memory"]) if "memory" in limits else None
    if injector == "cpu-limit-too-low":
        return str(limits["cpu"]) if "cpu" in limits else None
    if injector.startswith("env-var-") or injector == "retry-amplification":
        var = params.get("var")
        return next((str(e.get("value")) for e in spec.get("env") or [] if e.get("name") == var and "value" in e), None)
    if injector in ("image-wrong-tag", "image-buggy-version"):
        return str(spec.get("image", "")).split()[0] or None
    return None


def _expected_values(app: str, faults: list[dict[str, Any]], old_target: str, target: str,
                     old_details: dict[str, str], details: dict[str, str]
                     ) -> tuple[dict[str, str], tuple[str, str] | None]:
    """`expected` (what the field held before the fault) read from the new target's manifest where
    the old one was read from the old target's: a limit, an env value, an image; and the
    (old value, new value) pair a fix carries, when both are known."""
    if "expected" not in old_details:
        return details, None
    for fault in faults:
        before = _manifest_value(app, old_target, fault["injector"], fault["params"])
        after = _manifest_value(app, target, fault["injector"], fault["params"])
        text = old_details["expected"]
        if before and before in text:
            out = dict(details)
            out["expected"] = text.replace(before, after) if after else f"unset in {target}'s manifest"
            return out, ((before, after) if after else None)
    return details, None


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
    if target is not None:
        data = retarget(problem, data, target)
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


def validate_mutation(problem: Problem, seed: int = 1) -> Any:
    """Run the mutated problem through the validator on a fresh emulated cluster (a ValidationResult)."""
    from clusters.handle import open_cluster
    from farm.problems.validate import Validator

    with open_cluster("sim", seed=seed) as cluster, Validator(cluster) as validator:
        return validator.validate(problem)


def failed_step(result: Any) -> str:
    """`step: detail` of the first step that did not pass (skipped included)."""
    step = next((s for s in result.steps if not s.ok or s.skipped), None)
    return f"{step.name}: {step.detail}" if step is not None else ""


__all__ = ["failed_step", "mutate", "parse_settings", "retarget", "role_facts", "validate_mutation"]
