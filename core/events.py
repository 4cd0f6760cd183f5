"""What happened during one trial attempt, as typed events: the attempt's event log
(`events.json` among its artifacts) is a list of these, one discriminated union, so that a
viewer, a test and a resume read one format. Every event says when it happened on the wall
clock (`at`) and on the cluster's clock (`cluster_time`, None when the clock could not be read).
"""

from __future__ import annotations

import time
from typing import Annotated, Literal

from pydantic import BaseModel, Field, TypeAdapter


class _Event(BaseModel):
    at: float = Field(default_factory=time.time)
    cluster_time: float | None = None


class PhaseEntered(_Event):
    """The attempt, still holding its lease, began a step of the chain."""

    kind: Literal["phase"] = "phase"
    phase: str


class FaultInjected(_Event):
    kind: Literal["fault_injected"] = "fault_injected"
    faults: list[str]  # the injectors of the problem's faults


class NoiseStarted(_Event):
    kind: Literal["noise_started"] = "noise_started"
    kinds: list[str]


class NoiseStopped(_Event):
    kind: Literal["noise_stopped"] = "noise_stopped"


class AgentCrashed(_Event):
    """The agent raised instead of returning a result: its failure, not the farm's."""

    kind: Literal["agent_error"] = "agent_error"
    trace: str


class InfrastructureFailed(_Event):
    kind: Literal["infrastructure_error"] = "infrastructure_error"
    phase: str
    error: str


class Abandoned(_Event):
    """The attempt lost its lease (a zombie) and stops without writing a result."""

    kind: Literal["abandoned"] = "abandoned"
    why: str


class Recorded(_Event):
    kind: Literal["recorded"] = "recorded"


class Superseded(_Event):
    """`record` found the lease gone: another attempt's result stands."""

    kind: Literal["superseded"] = "superseded"


TrialEvent = Annotated[
    PhaseEntered | FaultInjected | NoiseStarted | NoiseStopped | AgentCrashed | InfrastructureFailed
    | Abandoned | Recorded | Superseded,
    Field(discriminator="kind"),
]
EVENT_LOG = TypeAdapter(list[TrialEvent])


def read_events(data: object) -> list[TrialEvent]:
    """An attempt's event log as stored (a list of dicts) back into typed events."""
    return EVENT_LOG.validate_python(data)
