"""SREGym's problem registry as data (farm/problems/sregym.tsv), and its cross-reference to the
catalog: which catalog problems carry each SREGym id (`sregym_ids`), and for an id none carries,
what the catalog has instead and why.

    cross_reference(catalog) -> list[SregymEntry]     # one per SREGym id, in registry order
    suite_problems(catalog, "sregym-lite")            # the catalog problems of a named suite
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from core.errors import InputError

SREGYM_TSV = Path(__file__).parent / "sregym.tsv"
STATUSES = ("same-app", "other-app", "partial", "missing")
# Named suites a sweep spec selects with `problems: {suite: NAME}`: the SREGym ids each holds.
SUITES = ("sregym", "sregym-lite")


@dataclass(frozen=True)
class SregymProblem:
    id: str
    app: str  # by this farm's application names
    lite: bool  # in SREGym-Lite
    status: str  # what the catalog has when no problem carries the id
    note: str


@dataclass
class SregymEntry:
    """One SREGym id as the catalog covers it."""

    sregym: SregymProblem
    problems: list[str] = field(default_factory=list)  # catalog problems carrying the id

    @property
    def status(self) -> str:
        return "same-app" if self.problems else self.sregym.status


@cache
def registry() -> dict[str, SregymProblem]:
    """SREGym's 123 problem ids, in its registry's order."""
    out: dict[str, SregymProblem] = {}
    lines = [line for line in SREGYM_TSV.read_text().splitlines() if line and not line.startswith("#")]
    for i, row in enumerate(csv.DictReader(lines, delimiter="\t"), start=2):
        if row["status"] not in STATUSES or row["lite"] not in ("yes", "no") or row["id"] in out:
            raise InputError(f"{SREGYM_TSV}: row {i} ({row.get('id')}): bad status, lite flag or duplicate id")
        out[row["id"]] = SregymProblem(row["id"], row["app"], row["lite"] == "yes", row["status"], row["note"])
    return out


def unknown_ids(ids: Iterable[str]) -> list[str]:
    known = registry()
    return [i for i in ids if i not in known]


def cross_reference(problems: Iterable[Any]) -> list[SregymEntry]:
    """Every SREGym id with the catalog problems that carry it."""
    entries = {sid: SregymEntry(sp) for sid, sp in registry().items()}
    for p in problems:
        for sid in p.sregym_ids:
            if sid in entries:
                entries[sid].problems.append(p.id)
    return list(entries.values())


def suite_ids(suite: str) -> list[str]:
    """The SREGym ids of a named suite; InputError naming the suites for an unknown one."""
    if suite == "sregym":
        return list(registry())
    if suite == "sregym-lite":
        return [sid for sid, sp in registry().items() if sp.lite]
    raise InputError(f"unknown suite '{suite}' (known: {', '.join(SUITES)})")


def suite_problems(problems: Iterable[Any], suite: str) -> list[Any]:
    """The catalog problems that carry an id of the suite, in catalog order."""
    ids = set(suite_ids(suite))
    return [p for p in problems if ids & set(p.sregym_ids)]
