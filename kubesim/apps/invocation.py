"""Finding a program's invocation inside a container's command, the way load generators and
clients are started from manifests (`sh -c "while true; do wrk …; done"`)."""

from __future__ import annotations

import re
import shlex


def find_invocation(argv: list[str], program: str) -> tuple[re.Match[str], list[str]] | None:
    """A program's invocation inside a container's command (possibly inside `sh -c` and a loop):
    the match of the regex `program` (its own groups kept), and the arguments after it up to the
    next `;`, `&` or `|`, split as the shell splits them (on white space where the quoting is broken)."""
    m = re.search(r"(?:^|[\s;/])" + program + r"([^;&|]*)", " ".join(argv))
    if not m:
        return None
    tail = m.group(m.re.groups)
    try:
        return m, shlex.split(tail)
    except ValueError:
        return m, tail.split()
