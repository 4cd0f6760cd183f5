"""Kubernetes label selectors as the API server reads them: a LabelSelector ({matchLabels,
matchExpressions}) or a plain map, and the `?labelSelector=` query syntax. Pure functions shared by
the emulated API and the injectors that aim at an application's pods on any cluster."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def match_labels(selector: dict[str, Any] | None, labels: dict[str, str] | None) -> bool:
    """A LabelSelector ({matchLabels, matchExpressions}) or a plain map against labels."""
    if not selector:
        return True
    labels = labels or {}
    if "matchLabels" not in selector and "matchExpressions" not in selector:
        return all(labels.get(k) == v for k, v in selector.items())
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    return all(expression_holds(expr, labels) for expr in selector.get("matchExpressions") or [])


def expression_holds(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    """One matchExpressions requirement (In, NotIn, Exists, DoesNotExist) of a LabelSelector or a
    node selector term against labels; an operator it does not know holds."""
    # A requirement without a key names no label: "" is never one (a label's key is not empty).
    return _holds(str(expr.get("key") or ""), _EXPRESSION_OPS.get(expr.get("operator") or "", ""),
                  list(expr.get("values") or []), labels)


# A LabelSelector's matchExpressions operators as parse_label_selector names them.
_EXPRESSION_OPS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}


def _holds(key: str, op: str, values: Sequence[object], labels: dict[str, str]) -> bool:
    """One requirement (an op of parse_label_selector's) against labels; an unknown op holds."""
    have = labels.get(key)
    if op == "=":
        return have == values[0]
    if op == "!=":
        return have != values[0]
    if op == "in":
        return have in values
    if op == "notin":
        return not (key in labels and have in values)
    if op == "exists":
        return key in labels
    if op == "!":
        return key not in labels
    return True


def parse_label_selector(text: str | None) -> list[tuple[str, str, list[str]]]:
    """`a=b,c!=d,e in (f,g),!h,i` → [(key, op, values)] with op in = != in notin exists !."""
    out: list[tuple[str, str, list[str]]] = []
    if not text:
        return out
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    for raw in parts:
        part = raw.strip()
        if not part:
            continue
        low = part.replace("\t", " ")
        if " notin " in low or " in " in low:
            op = "notin" if " notin " in low else "in"
            key, _, rest = low.partition(f" {op} ")
            values = [v.strip() for v in rest.strip().strip("()").split(",") if v.strip()]
            out.append((key.strip(), op, values))
        elif "!=" in part:
            k, v = part.split("!=", 1)
            out.append((k.strip(), "!=", [v.strip()]))
        elif "==" in part:
            k, v = part.split("==", 1)
            out.append((k.strip(), "=", [v.strip()]))
        elif "=" in part:
            k, v = part.split("=", 1)
            out.append((k.strip(), "=", [v.strip()]))
        elif part.startswith("!"):
            out.append((part[1:].strip(), "!", []))
        else:
            out.append((part, "exists", []))
    return out


def labels_match_query(reqs: list[tuple[str, str, list[str]]], labels: dict[str, str] | None) -> bool:
    labels = labels or {}
    return all(_holds(key, op, values, labels) for key, op, values in reqs)
