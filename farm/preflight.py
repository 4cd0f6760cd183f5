"""Pre-flight: before a sweep writes anything, every model it will call is checked, so a typo or a
missing key fails in seconds with one clear error instead of burning every trial.

For each model (with the options a trial calls it with: its agent entry's, then its model entry's
api_base, api_key_env, ...):
1. litellm knows it (its provider and its entry in litellm's model list), or an api_base names the
   server that answers for it;
2. its credentials are present (its api_key_env, else the provider's environment variable, e.g.
   ANTHROPIC_API_KEY), unless an api_base names an OpenAI-compatible server that needs none;
3. one tiny request is answered (`request=False` skips it), through LLMClient as trials call it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from core.errors import InputError, ProviderError
from farm.llm.failures import LLMError

PROMPT = [{"role": "user", "content": "This is a connectivity check. Reply with the single word OK."}]
# Options that change how a model is reached (and so what is checked).
REACH_OPTIONS = ("api_base", "api_key", "api_key_env")


class PreflightError(InputError):
    """Models of the sweep failed their pre-flight check; each is named with the reason."""

    def __init__(self, failures: list[tuple[str, str]]) -> None:
        self.failures = failures
        lines = [f"model '{model}': {why}" for model, why in failures]
        super().__init__("pre-flight check failed (nothing was written; `--no-preflight` skips the check):\n  "
                         + "\n  ".join(lines))


@dataclass(frozen=True)
class ModelUse:
    """A model as the sweep will call it: its name, the options that say how, and who calls it."""

    model: str  # the litellm model string
    options: Mapping[str, Any] = field(default_factory=dict)
    used_by: str = ""
    label: str | None = None  # the model entry's label, when it has one

    def reach(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        return self.model, tuple((k, str(self.options[k])) for k in REACH_OPTIONS if self.options.get(k))

    def describe(self) -> str:
        name = f"{self.label} = {self.model}" if self.label and self.label != self.model else self.model
        return name + (f" ({self.used_by})" if self.used_by else "")


def uses_of(spec: Any) -> list[ModelUse]:
    """Every distinct way the sweep `spec` (farm.spec.SweepSpec) calls a model: each model of each
    agent entry that uses one, with that entry's options, and the judge."""
    from farm.agenthost.known import agent_info

    pairs = None if spec.pairs is None else {(p.agent, p.model) for p in spec.pairs}
    seen: dict[Any, ModelUse] = {}
    for entry in spec.agents:
        if not agent_info(entry.name).uses_model:  # plugins too: described from their sandbox
            continue
        for model in spec.models:
            if pairs is not None and (entry.key_name, model.key_name) not in pairs:
                continue
            # As farm.trial.spec gives a trial its options: the agent's, then the model entry's.
            options = {**entry.options, **model.call_options()}
            use = ModelUse(model.name, options, f"agent {entry.key_name}", model.key_name)
            seen.setdefault(use.reach(), use)
    if spec.judge:
        judge_base = os.environ.get("FARM_JUDGE_API_BASE")
        use = ModelUse(spec.judge, {"api_base": judge_base} if judge_base else {}, "the judge")
        seen.setdefault(use.reach(), use)
    return list(seen.values())


def _known(model: str, options: Mapping[str, Any]) -> str | None:
    """Why litellm cannot call `model` as given, or None."""
    from farm.llm.client import load_litellm

    litellm = load_litellm()
    try:
        _name, provider, _key, _base = litellm.get_llm_provider(model=model, api_base=options.get("api_base"))
    except Exception:  # litellm's BadRequestError: "LLM Provider NOT provided"
        return ("litellm cannot tell its provider: write it as provider/model (e.g. openai/gpt-4o, "
                "anthropic/claude-sonnet-4-5)")
    if options.get("api_base"):
        return None  # a server of the user's answers for it: its name is that server's business
    bare = model.split("/", 1)[1] if "/" in model else model
    if model in litellm.model_cost or bare in litellm.model_cost or f"{provider}/{bare}" in litellm.model_cost:
        return None
    return (f"litellm does not know this {provider} model (a typo?); for a model served elsewhere give its "
            "api_base in the agent's options")


def _missing_credentials(model: str, options: Mapping[str, Any]) -> str | None:
    """Why the credentials for `model` are missing, or None."""
    from farm.llm.client import load_litellm

    if options.get("api_key"):
        return None
    if options.get("api_key_env"):
        env_name = str(options["api_key_env"])
        return None if os.environ.get(env_name) else f"no credentials: {env_name} (its api_key_env) is not set"
    if options.get("api_base") and model.startswith(("openai/", "hosted_vllm/")):
        return None  # a local OpenAI-compatible server (LLMClient sends a placeholder key)
    litellm = load_litellm()
    try:
        env = litellm.validate_environment(model=model, api_base=options.get("api_base"))
    except Exception:  # a provider litellm has no environment rule for: the request below will tell
        return None
    missing = [k for k in env.get("missing_keys") or [] if k.endswith(("_KEY", "_TOKEN")) or "KEY" in k]
    if env.get("keys_in_environment") or not missing:
        return None
    return f"no credentials: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set"


def _answers(model: str, options: Mapping[str, Any], timeout_s: float) -> str | None:
    """Why one tiny request to `model` was not answered, or None."""
    from farm.llm.client import LLMClient

    key = options.get("api_key") or (os.environ.get(str(options["api_key_env"])) if options.get("api_key_env") else None)
    client = LLMClient(model, api_base=options.get("api_base"), api_key=key,
                       max_backoff_retries=2, max_backoff_s=5.0, request_timeout_s=timeout_s)
    try:
        client.complete(PROMPT, max_tokens=8)
    except ProviderError as exc:
        return f"a test request failed ({exc.kind}): {exc}"
    except LLMError as exc:
        return f"a test request was refused ({exc.kind}): {exc}"
    return None


def check_model(use: ModelUse, *, request: bool = True, timeout_s: float = 60.0) -> str | None:
    """Why the sweep could not call this model, or None when it can."""
    from farm.llm.models import is_local

    if is_local(use.model):  # served by the farm on this host: litellm and keys do not apply
        return _answers(use.model, use.options, timeout_s) if request else None
    for check in (_known, _missing_credentials):
        why = check(use.model, use.options)
        if why:
            return why
    return _answers(use.model, use.options, timeout_s) if request else None


def preflight(uses: Iterable[ModelUse], *, request: bool = True, timeout_s: float = 60.0) -> list[ModelUse]:
    """Check every model use; PreflightError naming each that failed and why. Returns the uses checked."""
    checked, failures = [], []
    for use in uses:
        why = check_model(use, request=request, timeout_s=timeout_s)
        if why:
            failures.append((use.describe(), why))
        checked.append(use)
    if failures:
        raise PreflightError(failures)
    return checked
