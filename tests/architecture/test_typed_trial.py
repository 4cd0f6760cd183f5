"""A trial's phases hand each other typed records (farm/trial/handover.py) along one declared
chain (farm/trial/phases.py, TRIAL). These checks keep it so: every phase takes what the one
before it gives, its body says so in its own signature, and no field of what a phase hands over
is Any (an Any there is where a reader, and the type checker, lose the trial's thread)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import sys
import types
import typing
from typing import Any

import pytest

from farm.trial import handover
from farm.trial.handover import Claimed, Recorded
from farm.trial.phases import PHASES, TRIAL
from farm.trial.run import TrialRun


def type_checking_names(module: types.ModuleType) -> dict[str, Any]:
    """The names a module imports under `if TYPE_CHECKING:` (its annotations may use them)."""
    tree = ast.parse(inspect.getsource(module))
    names: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            block = ast.Module(body=[n for n in node.body if isinstance(n, ast.Import | ast.ImportFrom)],
                               type_ignores=[])
            exec(compile(block, module.__file__ or module.__name__, "exec"), names)
    names.pop("__builtins__", None)
    return names


def hints(obj: Any) -> dict[str, Any]:
    """`obj`'s annotations resolved, its module's type-checking-only imports included."""
    module = sys.modules[obj.__module__]
    return typing.get_type_hints(obj, globalns={**vars(module), **type_checking_names(module)})


def any_in(tp: Any) -> bool:
    """Whether a resolved type is Any or holds one (list[Any], X | Any, Callable[..., Any] ...)."""
    if tp is Any:
        return True
    return any(any_in(arg) for arg in typing.get_args(tp) if arg is not Ellipsis)


def untyped_fields(record: type, seen: set[type] | None = None) -> list[str]:
    """The fields of a handover record, and of the handover records it holds, typed with Any."""
    seen = set() if seen is None else seen
    if record in seen:
        return []
    seen.add(record)
    out = []
    for name, tp in hints(record).items():
        if any_in(tp):
            out.append(f"{record.__name__}.{name}: {tp}")
        for arg in (tp, *typing.get_args(tp)):
            if dataclasses.is_dataclass(arg) and isinstance(arg, type):
                out += untyped_fields(arg, seen)
    return out


def test_the_chain_runs_from_the_claim_to_the_record_each_phase_taking_what_the_last_gave() -> None:
    phases = TRIAL.phases
    assert PHASES == ("deploy", "inject", "agent_session", "oracle", "record")
    assert phases[0].takes is Claimed and phases[-1].gives is Recorded
    for before, after in zip(phases, phases[1:], strict=False):
        assert after.takes is before.gives, f"{after.name} takes {after.takes}, {before.name} gives {before.gives}"


@pytest.mark.parametrize("phase", TRIAL.phases, ids=PHASES)
def test_a_phase_body_declares_the_types_its_phase_hands_over(phase: Any) -> None:
    params = list(inspect.signature(phase.body).parameters)
    declared = hints(phase.body)
    assert len(params) == 2, f"{phase.name}: a phase body takes the attempt and what it was handed"
    assert declared[params[0]] is TrialRun
    assert declared[params[1]] is phase.takes, f"{phase.name} body takes {declared[params[1]]}"
    assert declared["return"] is phase.gives, f"{phase.name} body returns {declared['return']}"


@pytest.mark.parametrize("record", typing.get_args(handover.Handover), ids=lambda r: r.__name__)
def test_no_phase_hands_over_an_untyped_field(record: type) -> None:
    assert dataclasses.is_dataclass(record), f"{record.__name__} is a handover: a typed record"
    assert untyped_fields(record) == []


def test_every_record_a_phase_hands_over_is_a_handover() -> None:
    handed = {t for p in TRIAL.phases for t in (p.takes, p.gives)}
    assert handed == set(typing.get_args(handover.Handover))


@dataclasses.dataclass(frozen=True)
class _HidesAny:
    payload: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class _HoldsAny:
    inner: _HidesAny
    fine: list[int]
    loose: Any
    maybe: int | None


def test_the_check_finds_an_any_however_deep() -> None:
    # The check itself, on records that hide an Any in a field, a generic and a record they hold.
    assert sorted(untyped_fields(_HoldsAny)) == [f"_HidesAny.payload: {dict[str, Any]}", f"_HoldsAny.loose: {Any}"]
    assert untyped_fields(Claimed) == []


def test_the_celery_chain_has_one_task_per_phase_by_the_same_name() -> None:
    from tasks.trial import STEP_TASKS

    assert tuple(STEP_TASKS) == PHASES
    assert {name: task.name for name, task in STEP_TASKS.items()} == {name: f"farm.{name}" for name in PHASES}
