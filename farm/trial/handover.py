"""What each phase of a trial hands the next, as typed records: the chain (farm/trial/phases.py)
reads claim → deploy → inject → agent_session → oracle → record as a sequence of functions from
one of these to the next. Each record holds the one before it, so a phase sees everything the
attempt produced up to it and nothing a later phase will.

They hold live objects (the injection to recover, the interface serving the agent), so they stay
in the worker that owns the cluster: a Celery step message carries only `Claimed`, and the next
step finds the rest on the worker's live TrialRun. No field is typed Any
(tests/architecture/test_typed_trial.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the interface loads the MCP server (a second at import): only when a session runs
    from core.records import DiagnosisVerdict, MitigationVerdict
    from farm.agents.agent import AgentResult
    from farm.interface.server import AgentInterface
    from farm.oracles.mitigation import Baseline, MitigationOracle
    from injectors.compose import NoiseRunner, ProblemInjection


@dataclass(frozen=True)
class Claimed:
    """The chain's input: the attempt whose lease a worker holds (the body of every Celery step
    message, as a dict)."""

    trial_id: str
    token: int  # the attempt's fencing token
    key: str  # the trial's readable key, for logs and Flower


@dataclass(frozen=True)
class Deployed:
    """The application runs healthy; the oracle that will judge the fix has its baseline."""

    claimed: Claimed
    oracle: MitigationOracle
    baseline: Baseline


@dataclass(frozen=True)
class Injected:
    """The problem's faults are in the cluster (and its noise running, when there is any)."""

    deployed: Deployed
    injection: ProblemInjection
    injected_at: float  # cluster seconds
    noise: NoiseRunner | None


@dataclass(frozen=True)
class Session:
    """The agent's session ended; what it answered, or what the worker saw it do."""

    injected: Injected
    interface: AgentInterface
    agent_result: AgentResult


@dataclass(frozen=True)
class Judged:
    """The oracles' verdicts (no mitigation verdict for a diagnosis-only problem)."""

    session: Session
    diagnosis: DiagnosisVerdict
    mitigation: MitigationVerdict | None


@dataclass(frozen=True)
class Recorded:
    """The chain's end: whether this attempt's result is the trial's (False: superseded by a
    newer attempt, which the fencing token decides)."""

    judged: Judged
    won: bool


Handover = Claimed | Deployed | Injected | Session | Judged | Recorded
