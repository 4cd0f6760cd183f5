"""A request filter (WAF rule) on an entry proxy: the rule in the container's WAF_RULE_REGEX is run
against each request's `waf` query value by a backtracking regex engine (Perl's, PCRE's), as
SREGym's edge_request_filter_cpu_saturation deploys it on astronomy-shop's frontend-proxy.

A rule with a quantifier nested inside another unbounded one (`^([a-zA-Z]+)*$`) tries every way to
split a run the inner element matches once the whole fails to match: 2^n steps for a run of n. Such
an evaluation holds its worker thread at 100 % of a core until the process ends; while workers are
held, the others share what CPU is left, so every user's request queues behind them."""

from __future__ import annotations

import re
from typing import Any

try:  # Python 3.11+: the parser moved under re
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    import sre_parse  # type: ignore[no-redef]

STEP_SECONDS = 10e-9  # one backtracking step of a compiled regex engine
PINNED_AFTER = 30.0  # an evaluation longer than this (seconds) is one nobody will wait out


def rule_of(env: dict[str, str]) -> str | None:
    """The active rule, or None when the filter is off (WAF_RULE_ENABLED=false) or has no rule."""
    if (env.get("WAF_RULE_ENABLED") or "true").strip().lower() == "false":
        return None
    return env.get("WAF_RULE_REGEX") or None


def _repeats(items: Any) -> list[tuple[int, Any]]:
    out = []
    for op, av in items:
        name = str(op)
        if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            out.append((av[1], av[2]))
        elif name == "SUBPATTERN":
            out.extend(_repeats(av[-1]))
        elif name == "BRANCH":
            for alt in av[1]:
                out.extend(_repeats(alt))
    return out


def nested_quantifier(rule: str) -> bool:
    """True when an unbounded repeat contains another repeat of more than one: exponential backtracking."""
    try:
        tree = sre_parse.parse(rule)
    except re.error:
        return False

    def walk(items: Any) -> bool:
        for hi, sub in _repeats(items):
            if hi == sre_parse.MAXREPEAT and any(h2 == sre_parse.MAXREPEAT for h2, _ in _repeats(sub)):
                return True
            if walk(sub):
                return True
        return False

    return walk(tree)


def _flattened(rule: str) -> str:
    """The same language without the inner quantifier ((X+)* matches what (X)* does), which Python's
    engine decides in linear time: whether the whole fails, so the engine backtracks."""
    return re.sub(r"([+*])\)([*+])", r")\2", rule)


def eval_seconds(rule: str, candidate: str) -> float:
    """CPU seconds a backtracking engine spends running `rule` over `candidate`."""
    if not candidate:
        return 0.0
    if not nested_quantifier(rule):
        return len(candidate) * STEP_SECONDS
    try:
        matched = re.search(_flattened(rule), candidate) is not None
    except re.error:
        matched = False
    if matched:
        return len(candidate) * STEP_SECONDS
    steps = 2.0 ** min(len(candidate), 200)
    return steps * STEP_SECONDS


def screen(container: Any, query: dict[str, list[str]], node_cpus: float) -> bool:
    """Run the proxy's rule over one request; False when it is not answered: its evaluation never
    returns (the worker is then held: `container.instance["filter_pinned"]` counts them), or every
    worker is already held, so nobody reads it."""
    inst = container.instance
    if inst.get("filter_pinned", 0) >= workers(container, node_cpus):
        return False
    rule = rule_of(inst.get("env") or {})
    candidate = (query.get("waf") or [""])[0]
    if rule is None or not candidate:
        return True
    cost = eval_seconds(rule, candidate)
    if cost < PINNED_AFTER:
        return True
    inst["filter_pinned"] = inst.get("filter_pinned", 0) + 1
    return False


def workers(container: Any, node_cpus: float) -> int:
    """Envoy's worker threads: --concurrency, else one per hardware thread the process sees."""
    args = [*(container.instance.get("args") or [])]
    for i, a in enumerate(args):
        if a.startswith("--concurrency="):
            return max(1, int(a.split("=", 1)[1]))
        if a == "--concurrency" and i + 1 < len(args):
            return max(1, int(args[i + 1]))
    return max(1, int(node_cpus))


def free_share(container: Any, node_cpus: float) -> float:
    """The share of the proxy's CPU left to serve other requests while pinned evaluations spin."""
    pinned = int(container.instance.get("filter_pinned", 0))
    if not pinned:
        return 1.0
    n = workers(container, node_cpus)
    return max(0.0, n - pinned) / n
