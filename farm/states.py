"""Named states of trials and attempts, and the sets callers test against."""

from __future__ import annotations

from enum import StrEnum


class TrialState(StrEnum):
    PENDING = "pending"  # row exists, not yet sent to a queue
    QUEUED = "queued"  # a claim message is on the shared queue
    RUNNING = "running"  # an attempt holds the lease
    FINISHED = "finished"  # exactly one attempt recorded the final result
    INFRA_FAILED = "infra_failed"  # infrastructure failed on every allowed attempt
    CANCELLED = "cancelled"


class AttemptState(StrEnum):
    RUNNING = "running"
    RECORDED = "recorded"  # this attempt's result is the trial's final result
    INFRA_ERROR = "infra_error"  # deploy/inject/reset failed; the trial is retried
    LOST = "lost"  # the worker vanished (lease expired); the trial is retried
    SUPERSEDED = "superseded"  # a late attempt that found its lease gone; wrote nothing final
    CANCELLED = "cancelled"


TRIAL_DONE = frozenset({TrialState.FINISHED, TrialState.INFRA_FAILED, TrialState.CANCELLED})
TRIAL_CLAIMABLE = frozenset({TrialState.PENDING, TrialState.QUEUED})
ATTEMPT_OPEN = frozenset({AttemptState.RUNNING})

# Why an agent session ended.
END_SUBMITTED = "submitted"
END_AGENT_STOPPED = "agent_stopped"
END_AGENT_ERROR = "agent_error"
LIMIT_STEPS = "limit_steps"
LIMIT_WALL_TIME = "limit_wall_time"
LIMIT_TOKENS = "limit_tokens"
LIMIT_COST = "limit_cost"
LIMIT_SWEEP_COST = "limit_sweep_cost"
LIMIT_REASONS = frozenset({LIMIT_STEPS, LIMIT_WALL_TIME, LIMIT_TOKENS, LIMIT_COST, LIMIT_SWEEP_COST})

LAYERS = ("application", "operator", "os", "hardware")
COMPOSITIONS = ("single", "concurrent", "correlated", "metastable")
