"""Whose fault a failed model call is: the one classification of what litellm raised, shared by
every caller of a model (LLMClient.complete, the worker's model proxy, pre-flight).

A provider failure is infrastructure: bad or missing credentials, a model the provider does not
know, rate limits past the retry budget, 5xx and overload, timeouts, a dropped connection, a body
that is not a completion. It ends the trial `infra_failed` (core.errors.ProviderError), outside
the agent's n, and a re-run retries it. The agent's own failures are the requests it made:
a conversation longer than the model's context (the agent must manage its context) or a request
the provider rejects as malformed; they end the session and count against the agent (LLMError).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.errors import FarmError, ProviderError
from core.secrets import scrub

# kind -> (transient, what it means, for people)
PROVIDER_KINDS: dict[str, tuple[bool, str]] = {
    "auth": (False, "the provider refused the credentials"),
    "unknown_model": (False, "the provider does not know this model"),
    "rate_limited": (True, "rate-limited"),
    "overloaded": (True, "the provider is overloaded or unavailable"),
    "server_error": (True, "the provider failed (server error)"),
    "timeout": (True, "the request timed out"),
    "connection": (True, "the connection to the provider failed or was dropped"),
    "bad_response": (True, "the provider's answer was not a completion"),
}
AGENT_KINDS: dict[str, str] = {
    "context_length": "the conversation is longer than the model's context window",
    "content_policy": "the provider's content policy refused the request",
    "bad_request": "the provider rejected the request",
}

_CONTEXT_WORDS = re.compile(r"(?i)context.length|context.window|maximum context|too many tokens|prompt is too long|"
                            r"input is too long|reduce the length")
_UNKNOWN_MODEL_WORDS = re.compile(r"(?i)model[^.]{0,80}(does not exist|not found|unknown|not supported|is invalid)|"
                                  r"llm provider not provided|unknown model|invalid model")

_MISSING_KEY_WORDS = re.compile(r"(?i)missing credentials|missing \w+ api key|api_key client option must be set|"
                                r"no api key provided")
_DROPPED_WORDS = re.compile(r"(?i)connection error|connection reset|connection aborted|remoteprotocolerror|"
                            r"peer closed|incomplete (chunked )?read|server disconnected|broken pipe|"
                            r"stream ended before")
_UNPARSEABLE_WORDS = re.compile(r"(?i)received response - <apiresponse \[2\d\d|jsondecodeerror|unterminated string|"
                                r"expecting value|expecting property name|invalid control character")


class LLMError(FarmError):
    """A model call failed through the agent's own request (context length, a malformed request),
    or a model client could not be built: the session ends, and it counts against the agent."""

    def __init__(self, message: str, kind: str = "bad_request") -> None:
        self.kind = kind
        super().__init__(message, kind)

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class Failure:
    """What a failed model call was."""

    kind: str  # a key of PROVIDER_KINDS or AGENT_KINDS
    provider: bool  # the provider's fault (infrastructure), not the agent's
    transient: bool  # trying again (after a backoff, or on a re-run) may succeed
    status: int | None  # the HTTP status, when there was one
    detail: str  # the provider's words, scrubbed of secrets and cut short

    @property
    def meaning(self) -> str:
        return PROVIDER_KINDS[self.kind][1] if self.provider else AGENT_KINDS[self.kind]


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    try:
        return int(status) if status is not None else None
    except (TypeError, ValueError):
        return None


def _kind(exc: BaseException, status: int | None, text: str) -> str:
    import litellm

    # Order matters: litellm's classes subclass each other (ContextWindowExceededError is a
    # BadRequestError; Timeout an APIConnectionError in the OpenAI SDK underneath).
    # llama.cpp's server answers an overlong prompt with a 500 that says so
    if isinstance(exc, litellm.ContextWindowExceededError) or (status in (400, 413, 422, 500)
                                                               and _CONTEXT_WORDS.search(text)):
        return "context_length"
    if isinstance(exc, litellm.ContentPolicyViolationError):
        return "content_policy"
    if isinstance(exc, litellm.AuthenticationError | litellm.PermissionDeniedError) or status in (401, 403) \
            or _MISSING_KEY_WORDS.search(text):  # the OpenAI SDK without a key: a "500" of litellm's making
        return "auth"
    if isinstance(exc, litellm.NotFoundError) or status == 404 or (
            status in (None, 400) and _UNKNOWN_MODEL_WORDS.search(text)):
        return "unknown_model"
    if isinstance(exc, litellm.RateLimitError) or status == 429:
        return "rate_limited"
    if isinstance(exc, litellm.Timeout) or status in (408, 504):
        return "timeout"
    # litellm reports a dropped connection and an unparseable 200 as a 500 of its own making
    if _DROPPED_WORDS.search(text):
        return "connection"
    if _UNPARSEABLE_WORDS.search(text):
        return "bad_response"
    if isinstance(exc, litellm.ServiceUnavailableError) or status in (503, 529):
        return "overloaded"
    if status is not None and status >= 500:
        return "server_error"
    if isinstance(exc, litellm.APIConnectionError):
        return "connection"
    if isinstance(exc, litellm.BadRequestError | litellm.UnprocessableEntityError) or status in (400, 413, 422):
        return "bad_request"
    if isinstance(exc, litellm.InternalServerError | litellm.APIError):
        return "server_error"
    # Anything else came from below the request (the HTTP stack, litellm parsing an answer it did
    # not expect): not something the agent asked for.
    return "bad_response"


def classify(exc: BaseException) -> Failure:
    """The failure a litellm call raised (any exception from litellm.completion)."""
    text = scrub(str(exc))
    status = _status(exc)
    kind = _kind(exc, status, text)
    if kind in PROVIDER_KINDS:
        return Failure(kind, True, PROVIDER_KINDS[kind][0], status, text[:500])
    return Failure(kind, False, False, status, text[:500])


def error_for(failure: Failure, model: str, retries: int = 0) -> ProviderError | LLMError:
    """The farm's exception for a classified failure: ProviderError (infrastructure) or LLMError
    (the agent's)."""
    after = f" after {retries} retries" if retries else ""
    status = f" (HTTP {failure.status})" if failure.status else ""
    message = f"{model}: {failure.meaning}{status}{after}: {failure.detail}"
    if failure.provider:
        return ProviderError(message, kind=failure.kind, model=model, transient=failure.transient)
    return LLMError(message, kind=failure.kind)

