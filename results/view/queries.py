"""The view's reads beyond the report's: the sweep list with live counts, trial lists filtered,
searched, sorted and paginated in SQL, a trial's neighbours in such a list, the attempts that
failed. Every function issues aggregates or indexed, LIMITed selects: nothing loads a sweep's rows
into Python."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import Integer, and_, cast, func, or_, select
from sqlalchemy.engine import Engine
from sqlmodel import col

from core.states import TRIAL_DONE, AttemptState, TrialState
from results.leaderboard import GROUP_COLUMNS
from results.models import Attempt, InfraEvent, Sweep, Trial

# What a trial list may be filtered on by equality: the leaderboard's grouping columns (by their
# `--by` names) and a few more.
EQUAL_FILTERS: dict[str, str] = {**GROUP_COLUMNS, "state": "state", "noise_level": "noise_level",
                                 "end_reason": "end_reason"}
OUTCOMES = {"diagnosis": "diagnosis_passed", "mitigation": "mitigation_passed", "e2e": "e2e_passed"}
OUTCOME_VALUES = ("pass", "fail", "scored", "unscored")
# What a trial list may be sorted by.
SORTS = ("key", "problem_id", "agent", "model", "seed", "state", "cost_usd", "tokens_in", "tokens_out",
         "time_to_diagnosis_s", "time_to_mitigation_s", "diagnosis_score", "finished_at", "infra_attempts")
LIST_COLUMNS = ("id", "key", "problem_id", "layer", "agent", "model", "seed", "noise", "noise_level", "state",
                "diagnosis_passed", "mitigation_passed", "e2e_passed", "diagnosis_score", "cost_usd", "tokens_in",
                "tokens_out", "time_to_diagnosis_s", "time_to_mitigation_s", "end_reason", "error", "infra_attempts",
                "current_attempt", "finished_at")
# Attempt states that are not a recorded result: what the errors view lists.
FAILED_ATTEMPTS = (AttemptState.INFRA_ERROR, AttemptState.LOST, AttemptState.SUPERSEDED, AttemptState.COST_CAPPED)
SEARCH_CHARS = 200


class BadQuery(ValueError):
    """A filter, sort or page the view cannot apply; the message names the parameter."""


def _typed(name: str, value: str) -> Any:
    if name == "seed":
        try:
            return int(value)
        except ValueError:
            raise BadQuery(f"seed must be a whole number, not '{value}'") from None
    if name == "noise":
        if value.lower() in ("true", "1", "noise", "yes"):
            return True
        if value.lower() in ("false", "0", "quiet", "no"):
            return False
        raise BadQuery(f"noise must be true or false, not '{value}'")
    return value


@dataclass(frozen=True)
class TrialFilter:
    """Which trials of a sweep a list shows: equal columns, outcomes (pass, fail, scored,
    unscored) and a search over key, end reason and error."""

    equal: dict[str, Any] = field(default_factory=dict)
    outcomes: dict[str, str] = field(default_factory=dict)
    q: str = ""

    @classmethod
    def parse(cls, params: Any) -> TrialFilter:
        equal = {name: _typed(name, params[name]) for name in EQUAL_FILTERS if params.get(name, "") != ""}
        outcomes = {}
        for name in OUTCOMES:
            value = params.get(name, "")
            if value:
                if value not in OUTCOME_VALUES:
                    raise BadQuery(f"{name} must be one of {', '.join(OUTCOME_VALUES)}, not '{value}'")
                outcomes[name] = value
        return cls(equal, outcomes, str(params.get("q", ""))[:SEARCH_CHARS].strip())

    def clauses(self) -> list[Any]:
        out: list[Any] = [getattr(Trial, EQUAL_FILTERS[k]) == v for k, v in self.equal.items()]
        for name, value in self.outcomes.items():
            column = col(getattr(Trial, OUTCOMES[name]))
            out.append({"pass": column.is_(True), "fail": column.is_(False), "scored": column.is_not(None),
                        "unscored": column.is_(None)}[value])
        if self.q:
            escaped = self.q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            like = f"%{escaped}%"
            out.append(or_(col(Trial.key).ilike(like, escape="\\"), col(Trial.end_reason).ilike(like, escape="\\"),
                           col(Trial.error).ilike(like, escape="\\")))
        return out

    def params(self) -> dict[str, str]:
        """The filter as URL parameters (what `parse` reads back)."""
        out = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in self.equal.items()}
        out.update(self.outcomes)
        if self.q:
            out["q"] = self.q
        return out

    def query_string(self, **extra: Any) -> str:
        return urlencode({**self.params(), **{k: v for k, v in extra.items() if v not in (None, "")}})


def sweeps(engine: Engine) -> list[dict[str, Any]]:
    """Every sweep, newest first, with its trials per state, rates over its finished trials and
    what its attempts spent: three grouped queries whatever the number of trials."""
    with engine.connect() as conn:
        rows = [dict(r) for r in conn.execute(
            select(col(Sweep.id), col(Sweep.created_at), col(Sweep.updated_at), col(Sweep.cancelled),
                   col(Sweep.cost_cap_usd), col(Sweep.judge)).order_by(col(Sweep.created_at).desc())).mappings()]
        counts: dict[str, dict[str, int]] = {}
        for sweep_id, state, n in conn.execute(select(col(Trial.sweep_id), col(Trial.state), func.count())
                                               .group_by(col(Trial.sweep_id), col(Trial.state))):
            counts.setdefault(sweep_id, {})[state] = int(n)
        done = col(Trial.state) == TrialState.FINISHED
        rates = {r[0]: r for r in conn.execute(
            select(col(Trial.sweep_id), func.count(),
                   *(func.sum(cast(getattr(Trial, c), Integer)) for c in OUTCOMES.values()),
                   *(func.count(getattr(Trial, c)) for c in OUTCOMES.values()))
            .where(done).group_by(col(Trial.sweep_id)))}
        spent = func.coalesce(col(Attempt.cost_usd), 0.0) + func.coalesce(col(Attempt.judge_cost_usd), 0.0)
        costs = dict(conn.execute(select(col(Trial.sweep_id), func.coalesce(func.sum(spent), 0.0))
                                  .join(Trial, col(Trial.id) == col(Attempt.trial_id))
                                  .group_by(col(Trial.sweep_id))).all())
    for r in rows:
        c = counts.get(r["id"], {})
        r["counts"] = c
        r["total"] = sum(c.values())
        r["done"] = sum(n for s, n in c.items() if s in TRIAL_DONE)
        r["errors"] = c.get(TrialState.INFRA_FAILED, 0)
        r["settled"] = r["done"] == r["total"]
        rate = rates.get(r["id"])
        r["finished"] = int(rate[1]) if rate else 0
        for i, name in enumerate(OUTCOMES):
            passed, scored = (int(rate[2 + i] or 0), int(rate[5 + i] or 0)) if rate else (0, 0)
            r[f"{name}_rate"] = passed / scored if scored else None
        r["cost_usd"] = float(costs.get(r["id"]) or 0.0)
    return rows


def sweep_ids(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return list(conn.execute(select(col(Sweep.id)).order_by(col(Sweep.created_at).desc())).scalars())


def distinct_values(engine: Engine, sweep_id: str, names: tuple[str, ...]) -> dict[str, list[Any]]:
    """The values each named column takes in the sweep, for the filter menus: one scan for all of
    them (the distinct combinations), not one per column."""
    columns = [getattr(Trial, EQUAL_FILTERS[n]) for n in names]
    seen: dict[str, set[Any]] = {n: set() for n in names}
    with engine.connect() as conn:
        for row in conn.execute(select(*columns).where(col(Trial.sweep_id) == sweep_id).distinct()):
            for name, value in zip(names, row, strict=True):
                seen[name].add(value)
    return {n: sorted(v for v in seen[n] if v is not None) for n in names}


def trials(engine: Engine, sweep_id: str, flt: TrialFilter, sort: str = "key", descending: bool = False,
           page: int = 1, per_page: int = 100) -> tuple[list[dict[str, Any]], int]:
    """One page of the sweep's trials that pass the filter, and how many pass it."""
    if sort not in SORTS:
        raise BadQuery(f"sort must be one of {', '.join(SORTS)}, not '{sort}'")
    if page < 1 or not 1 <= per_page <= 1000:
        raise BadQuery("page must be 1 or more and per_page between 1 and 1000")
    where = [col(Trial.sweep_id) == sweep_id, *flt.clauses()]
    column = col(getattr(Trial, sort))
    order = [column.desc().nulls_last() if descending else column.asc().nulls_last(), col(Trial.id)]
    with engine.connect() as conn:
        total = int(conn.execute(select(func.count()).select_from(Trial).where(*where)).scalar_one())
        rows = [dict(r) for r in conn.execute(
            select(*(getattr(Trial, c) for c in LIST_COLUMNS)).where(*where).order_by(*order)
            .limit(per_page).offset((page - 1) * per_page)).mappings()]
    return rows, total


def trial(engine: Engine, trial_id: str) -> dict[str, Any] | None:
    """The trial row and its attempts, oldest first."""
    with engine.connect() as conn:
        row = conn.execute(select(Trial).where(col(Trial.id) == trial_id)).mappings().one_or_none()
        if row is None:
            return None
        out = dict(row)
        out["attempts"] = [dict(a) for a in conn.execute(
            select(Attempt).where(col(Attempt.trial_id) == trial_id).order_by(col(Attempt.token))).mappings()]
    return out


def neighbours(engine: Engine, t: dict[str, Any], flt: TrialFilter) -> tuple[str | None, str | None]:
    """The trials before and after `t` in its sweep's list under `flt`, in key order."""
    base = [col(Trial.sweep_id) == t["sweep_id"], *flt.clauses()]
    after = or_(col(Trial.key) > t["key"], and_(col(Trial.key) == t["key"], col(Trial.id) > t["id"]))
    before = or_(col(Trial.key) < t["key"], and_(col(Trial.key) == t["key"], col(Trial.id) < t["id"]))
    with engine.connect() as conn:
        prev = conn.execute(select(col(Trial.id)).where(*base, before)
                            .order_by(col(Trial.key).desc(), col(Trial.id).desc()).limit(1)).scalar_one_or_none()
        nxt = conn.execute(select(col(Trial.id)).where(*base, after)
                           .order_by(col(Trial.key), col(Trial.id)).limit(1)).scalar_one_or_none()
    return prev, nxt


def failed_attempts(engine: Engine, sweep_id: str, phase: str | None = None, page: int = 1,
                    per_page: int = 100, counted: bool = True) -> tuple[list[dict[str, Any]], int | None]:
    """Attempts of the sweep that ended without a result (infrastructure errors, lost, superseded,
    cut by the cost cap) and recorded attempts that carry an error, newest first; and how many
    there are (None when not `counted`)."""
    where = [col(Trial.sweep_id) == sweep_id,
             or_(col(Attempt.state).in_(list(FAILED_ATTEMPTS)), col(Attempt.error).is_not(None))]
    if phase:
        where.append(col(Attempt.error_phase) == phase)
    with engine.connect() as conn:
        total = int(conn.execute(select(func.count()).select_from(Attempt).join(Trial, col(Trial.id) == col(Attempt.trial_id))
                                 .where(*where)).scalar_one()) if counted else None
        rows = [dict(r) for r in conn.execute(
            select(col(Attempt.trial_id), col(Attempt.token), col(Attempt.state), col(Attempt.phase),
                   col(Attempt.error_phase), col(Attempt.error), col(Attempt.worker), col(Attempt.cluster),
                   col(Attempt.started_at), col(Attempt.ended_at), col(Trial.key), col(Trial.state).label("trial_state"))
            .join(Trial, col(Trial.id) == col(Attempt.trial_id)).where(*where)
            .order_by(func.coalesce(col(Attempt.ended_at), col(Attempt.started_at)).desc(), col(Attempt.id).desc())
            .limit(per_page).offset((page - 1) * per_page)).mappings()]
    return rows, total


def infra_events(engine: Engine, sweep_id: str, limit: int = 100) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(
            select(InfraEvent).where(col(InfraEvent.sweep_id) == sweep_id)
            .order_by(col(InfraEvent.at).desc()).limit(limit)).mappings()]
