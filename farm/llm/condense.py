"""Client-side condensing of tool output for token-frugal agents: repeated lines (equal once
timestamps, pod hashes and numbers are masked) collapse into one line with a count; what is still
too long keeps its head, its salient lines (errors, reasons, images, warnings) and its tail; an
output the model has already read shrinks to its salient lines."""

from __future__ import annotations

import re

_VOLATILE = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ][\d:.]+Z?"  # timestamps
    r"|(?<=[a-z0-9])(-[a-z0-9]{8,10})?-[a-z0-9]{5}\b"  # pod hash suffixes (the workload name stays)
    r"|\b[0-9a-f]{12,}\b"  # trace and container ids
    r"|\d+(\.\d+)?"  # numbers
)
SALIENT = re.compile(
    r"error|fail|backoff|refused|denied|oom|killed|panic|timeout|timed out|unhealthy|crash|warning|not found|"
    r"exceed|invalid|unavailable|image:|reason|firing|evict|unschedul|insufficient|5\d\d\b|exit code",
    re.I,
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


def salient_lines(text: str, limit: int) -> list[str]:
    out, used = [], 0
    for line in text.splitlines():
        if SALIENT.search(line):
            line = line.strip()[:200]
            if used + len(line) > limit:
                break
            out.append(line)
            used += len(line) + 1
    return out


def clip(text: str, limit: int) -> str:
    """`text` in at most about `limit` characters: head, the salient lines of the middle, tail."""
    if len(text) <= limit:
        return text
    head_n, mid_n = int(limit * 0.45), int(limit * 0.3)
    tail_n = limit - head_n - mid_n
    head, middle, tail = text[:head_n], text[head_n:len(text) - tail_n], text[len(text) - tail_n:]
    kept = salient_lines(middle, mid_n)
    note = f"[... {len(middle)} characters omitted" + ("; salient lines among them:]\n" + "\n".join(kept)
                                                        if kept else "]")
    return f"{head}\n{note}\n[...]\n{tail}"


def condense(text: str, limit: int = 2000) -> str:
    return clip(dedupe_lines(text), limit)


def stub(text: str, limit: int = 300) -> str:
    """What stays of an output the model has already read: its first line and its salient lines."""
    stripped = text.strip()
    first = stripped.splitlines()[0][:160] if stripped else ""
    kept = [line for line in salient_lines(stripped, limit) if line != first.strip()]
    body = ("; salient: " + " | ".join(kept)) if kept else ""
    return f"[elided {len(text)} chars; began: {first}{body}]"
