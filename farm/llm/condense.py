"""Client-side condensing of tool output for token-frugal agents: repeated lines (equal once
timestamps, ids and numbers are masked) collapse into one line with a count, and what is still too
long keeps its head and tail."""

from __future__ import annotations

import re

_VOLATILE = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ][\d:.]+Z?|\b[0-9a-f]{8,}\b|\b[a-z0-9]+(-[a-z0-9]{5,10}){1,2}\b|\d+(\.\d+)?"
)


def _shape(line: str) -> str:
    return _VOLATILE.sub("#", line).strip()


def dedupe_lines(text: str) -> str:
    """Collapse lines with the same shape, keeping the first of each and a count, in first-seen order."""
    lines = text.splitlines()
    if len(lines) < 4:
        return text
    order: list[str] = []
    first: dict[str, str] = {}
    count: dict[str, int] = {}
    for line in lines:
        key = _shape(line)
        if key not in count:
            order.append(key)
            first[key] = line
            count[key] = 0
        count[key] += 1
    if len(order) == len(lines):
        return text
    return "\n".join(first[k] if count[k] == 1 else f"[x{count[k]}] {first[k]}" for k in order)


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = int(limit * 0.7)
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters omitted ...]\n{text[-tail:]}"


def condense(text: str, limit: int = 2000) -> str:
    return clip(dedupe_lines(text), limit)
