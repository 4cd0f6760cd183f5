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
    # The sweep's cost cap was reached: never started, or its session was cut by the cap (the
    # attempt keeps what it produced). Not an agent result; a resubmission runs it again.
    SKIPPED_COST_CAP = "skipped_cost_cap"


class AttemptState(StrEnum):
    RUNNING = "running"
    RECORDED = "recorded"  # this attempt's result is the trial's final result
    INFRA_ERROR = "infra_error"  # deploy/inject/oracle failed; the trial is retried
    LOST = "lost"  # the worker vanished (lease expired); the trial is retried
    SUPERSEDED = "superseded"  # a late attempt that found its lease gone; wrote nothing final
    CANCELLED = "cancelled"
    COST_CAPPED = "cost_capped"  # its session was cut by the sweep's cost cap; kept, not final


# Nothing more happens to these without a resubmission (the embedded runner stops on them).
TRIAL_DONE = frozenset({TrialState.FINISHED, TrialState.INFRA_FAILED, TrialState.CANCELLED,
                        TrialState.SKIPPED_COST_CAP})
# Done, but not a result: a resubmission of the sweep wants these again (the cluster may be fixed,
# the cap raised); only FINISHED is final.
TRIAL_RESUBMITTABLE = frozenset({TrialState.INFRA_FAILED, TrialState.CANCELLED, TrialState.SKIPPED_COST_CAP})
TRIAL_CLAIMABLE = frozenset({TrialState.PENDING, TrialState.QUEUED})
TRIAL_OPEN = TRIAL_CLAIMABLE | {TrialState.RUNNING}  # not done yet: what a cancellation stops
ATTEMPT_OPEN = frozenset({AttemptState.RUNNING})

# Why an agent session ended.
END_SUBMITTED = "submitted"
END_AGENT_STOPPED = "agent_stopped"
END_AGENT_ERROR = "agent_error"
# The agent's conversation outgrew the model's context window: its own error (it must manage its
# context), labelled apart from other agent errors. A provider failure is no end reason: the
# attempt is an infrastructure error (core.errors.ProviderError) and the trial is retried.
END_CONTEXT_LENGTH = "context_length"
LIMIT_STEPS = "limit_steps"
LIMIT_WALL_TIME = "limit_wall_time"
LIMIT_TOKENS = "limit_tokens"
LIMIT_COST = "limit_cost"
LIMIT_SWEEP_COST = "limit_sweep_cost"
LIMIT_REASONS = frozenset({LIMIT_STEPS, LIMIT_WALL_TIME, LIMIT_TOKENS, LIMIT_COST, LIMIT_SWEEP_COST})

# Infrastructure events recorded apart from attempts' results (results.models.InfraEvent).
EVENT_RESET_FAILED = "reset_failed"  # the cluster could not be cleaned after a trial
EVENT_CLUSTER_REPLACED = "cluster_replaced"  # ... and was replaced by a fresh one
EVENT_CLUSTER_LOST = "cluster_lost"  # ... and no replacement could be opened: the worker stops claiming

LAYERS = ("application", "operator", "os", "hardware")
COMPOSITIONS = ("single", "concurrent", "correlated", "metastable")
