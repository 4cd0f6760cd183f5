"""One exception root for the farm, split by audience.

FarmError
├── InputError              the user's input is wrong; one clear sentence, nothing written
│   ├── SpecError           a sweep spec: file, field, reason
│   └── ProblemDefinitionError  a catalog entry: file, problem, field, reason
├── ConfigurationError      the farm itself is misconfigured (missing extra, bad env var): fatal
├── InfrastructureError     the cluster or the farm failed, not the agent: retried, reported apart
│   ├── ClusterUnavailable  the cluster cannot be reached or created
│   ├── DeployError         the application did not come up (names the pods that are not ready)
│   ├── InjectionError      a fault or noise could not be planted or recovered
│   ├── ResetError          the cluster could not be returned to a clean state
│   └── ProviderError       the model provider failed the agent (auth, unknown model, rate limit,
│                           5xx, overload, timeout, dropped connection): not the agent's fault
├── ToolError               returned to the agent as an observation; never ends a trial
├── LimitReached            a per-trial limit (steps, wall time, tokens, cost) ended the session
└── LeaseLost               this attempt no longer owns its trial (fencing); it must not write
"""

from __future__ import annotations


class FarmError(Exception):
    """Root of every error the farm raises on purpose."""


class InputError(FarmError):
    """The user's input is wrong."""


class SpecError(InputError):
    """A sweep spec is malformed: names the file, the field and the reason."""

    def __init__(self, path: str | None, field: str, reason: str) -> None:
        self.path, self.field, self.reason = path, field, reason
        where = f"{path}: " if path else ""
        super().__init__(f"{where}field '{field}': {reason}")


class ProblemDefinitionError(InputError):
    """A problem definition is malformed: names the file, the problem and the field."""

    def __init__(self, path: str | None, problem: str | None, field: str, reason: str) -> None:
        self.path, self.problem, self.field, self.reason = path, problem, field, reason
        where = f"{path}: " if path else ""
        prob = f"problem '{problem}': " if problem else ""
        super().__init__(f"{where}{prob}field '{field}': {reason}")


class ConfigurationError(FarmError):
    """The farm is misconfigured; no trial can run until it is fixed."""


class InfrastructureError(FarmError):
    """Not the agent's fault: the attempt is retried and reported apart from agent results."""

    phase: str = "infrastructure"


class ClusterUnavailable(InfrastructureError):
    phase = "cluster"


class DeployError(InfrastructureError):
    phase = "deploy"


class InjectionError(InfrastructureError):
    phase = "inject"


class ResetError(InfrastructureError):
    phase = "reset"


class ProviderError(InfrastructureError):
    """A model call failed on the provider's side, after the client's own retries. `kind` names
    how (farm.llm.failures.PROVIDER_KINDS); `transient` says whether trying again later may help
    (a rate limit, a 5xx) or not before the user changes something (credentials, the model name)."""

    phase = "provider"

    def __init__(self, message: str, *, kind: str, model: str, transient: bool) -> None:
        self.kind, self.model, self.transient = kind, model, transient
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:  # keyword-only fields survive pickling (process pools)
        return (_provider_error, (str(self), self.kind, self.model, self.transient))


def _provider_error(message: str, kind: str, model: str, transient: bool) -> ProviderError:
    return ProviderError(message, kind=kind, model=model, transient=transient)


class ToolError(FarmError):
    """A tool call failed; the message goes back to the agent as the tool's result."""


class LimitReached(FarmError):
    """A per-trial limit ended the agent session; `reason` is one of core.states.LIMIT_REASONS."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason, self.detail = reason, detail
        super().__init__(f"limit reached: {reason}" + (f" ({detail})" if detail else ""))


class LeaseLost(FarmError):
    """The attempt's lease expired or was taken over; it must stop without recording."""
