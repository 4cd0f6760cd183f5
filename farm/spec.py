"""The sweep spec: what a researcher asks the farm to run, as YAML validated by pydantic.

    name: hotel-smoke
    problems: {ids: [...], tags: [...], layers: [...], apps: [...]}   # all given filters hold
                                     # {suite: sregym-lite} or {suite: sregym}: the catalog problems
                                     # that carry those SREGym ids (farm/problems/sregym.py)
    agents: [baseline, {name: react, tool_mode: summarised, options: {...}}]
                                     # an agent listed twice is two variants: each gets a label
                                     # (`label:` or one made from what differs), part of the trial key
    models: [openai/gpt-4o, local/smollm2-135m, {name: openai/qwen2.5, api_base: http://127.0.0.1:8000/v1,
             price: {input_per_mtok: 0.1, output_per_mtok: 0.2}}]   # litellm strings (local/<name>: a
                                     # model the farm serves itself) or ModelEntry
    pairs: [{agent: react, model: openai/gpt-4o}]   # optional: only these agent × model pairs
    seeds: 3                         # or an explicit list [0, 1, 2]
    noise: [false, true]             # or a single bool; {intensity: high} (low, medium, high or 0..1,
                                     # optionally kinds: [...]) adds confounding ambient noise
    limits: {max_steps: 40, wall_time_s: 900, max_tokens: 2000000, max_cost_usd: 5,
             memory_mib: 2048, processes: 256, tmp_mib: 512}   # the last three: the agent's process
    concurrency: {openai/gpt-4o: 4}  # per-model, across the farm
    cost_cap_usd: 200                # sweep-wide
    judge: null                      # litellm model string; null = the offline judge

`load_spec(path)` raises one SpecError naming the file, the field and the reason, before
anything is written anywhere. The dispatcher (farm/dispatcher.py) expands a sweep into trial
rows; what one trial needs to run, rebuilt from its row, is farm/trial/spec.py (TrialSpec).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from core.errors import SpecError
from core.states import LAYERS
from farm.agents.agent import AgentLimits
from farm.llm.models import check_model
from results.keys import noise_part

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
_SECRET_KEY = re.compile(r"(api_?key|token|secret|password)", re.I)
_MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$")
# A key part: no '|' (the key's separator), no spaces.
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+=,\[\]-]{0,79}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _check_label(v: str) -> str:
    if not _LABEL.match(v):
        raise ValueError("must be letters, digits, '.', '_', '-', '+', '@', '[', ']', '=', ',', '/' or ':', "
                         "at most 80 characters (a part of the trial key: no '|', no spaces)")
    return v


Label = Annotated[str, AfterValidator(_check_label)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProblemSelection(_Strict):
    ids: list[str] = []
    tags: list[str] = []
    layers: list[str] = []
    apps: list[str] = []
    suite: str | None = None

    @field_validator("suite")
    @classmethod
    def _known_suite(cls, v: str | None) -> str | None:
        from farm.problems.sregym import SUITES

        if v is not None and v not in SUITES:
            raise ValueError(f"unknown suite '{v}' (known: {', '.join(SUITES)})")
        return v

    @field_validator("layers")
    @classmethod
    def _known_layers(cls, v: list[str]) -> list[str]:
        for layer in v:
            if layer not in LAYERS:
                raise ValueError(f"unknown layer '{layer}' (known: {', '.join(LAYERS)})")
        return v

    @model_validator(mode="after")
    def _something(self) -> ProblemSelection:
        if not (self.ids or self.tags or self.layers or self.apps or self.suite):
            raise ValueError("select problems by at least one of ids, tags, layers, apps, suite")
        return self


class AgentEntry(_Strict):
    name: str
    tool_mode: str | None = None  # None: the agent's own preference (stratus: summarised)
    options: dict[str, Any] = {}
    # The variant's name in trial keys and tables; None: the agent's name, or, for an agent listed
    # more than once, one made from what differs (SweepSpec._variant_labels fills it in).
    label: Label | None = None

    @property
    def key_name(self) -> str:
        """What trial keys and tables call this entry."""
        return self.label or self.name

    @field_validator("options")
    @classmethod
    def _no_secrets(cls, v: dict[str, Any]) -> dict[str, Any]:
        # Specs are stored in the database; secrets belong in the environment.
        for key in v:
            if _SECRET_KEY.search(key):
                raise ValueError(f"'{key}' looks like a secret; set it in the environment, not in the spec")
        return v

    @field_validator("tool_mode")
    @classmethod
    def _mode(cls, v: str | None) -> str | None:
        if v is not None and v not in ("raw", "summarised"):
            raise ValueError("must be 'raw' or 'summarised'")
        return v


class Limits(AgentLimits):
    model_config = ConfigDict(extra="forbid")
    max_steps: int = Field(40, gt=0)
    wall_time_s: float = Field(900.0, gt=0)
    max_tokens: int = Field(2_000_000, gt=0)
    max_cost_usd: float = Field(5.0, gt=0)
    memory_mib: int = Field(2048, ge=64)
    processes: int = Field(256, ge=16)
    tmp_mib: int = Field(512, ge=1)


class ClusterOptions(_Strict):
    live: bool = False  # emulated clusters advance with wall time (for LLM agents)
    speed: float = Field(1.0, gt=0)


class NoiseLevel(_Strict):
    """Ambient noise at a set intensity: the problem's noises and the confounders (restarts,
    rollouts, error bursts, warning events, a firing alert) on the fault's neighbours
    (injectors.compose.ambient_noises); `kinds` runs only those noise kinds."""

    intensity: str | float = "medium"
    kinds: list[str] = []

    @field_validator("intensity")
    @classmethod
    def _intensity(cls, v: str | float) -> str | float:
        from injectors.noise import level_intensity

        level_intensity(v)
        return v

    @field_validator("kinds")
    @classmethod
    def _kinds(cls, v: list[str]) -> list[str]:
        from injectors.injector import noises

        for kind in v:
            if kind not in noises:
                raise ValueError(f"unknown noise kind '{kind}' (known: {', '.join(noises.names())})")
        if len(set(v)) != len(v):
            raise ValueError("lists a noise kind twice")
        return v

    @property
    def label(self) -> str:
        """How trial keys name it: the intensity, then ':' and the kinds joined by '+'."""
        return str(self.intensity) + (":" + "+".join(self.kinds) if self.kinds else "")


def _variant_label(name: str, differing: dict[str, Any]) -> str:
    """`react[tool_mode=summarised]`: the agent's name and the settings that set it apart; a short
    hash when those do not fit a key part."""
    import hashlib
    import json

    parts = ",".join(f"{k}={v}" for k, v in differing.items() if v is not None)
    label = f"{name}[{parts}]" if parts else name
    if not _LABEL.match(label):
        digest = hashlib.sha256(json.dumps(differing, sort_keys=True, default=str).encode()).hexdigest()[:8]
        label = f"{name}@{digest}"
    return label


def noise_label(setting: bool | NoiseLevel) -> str:
    """The trial key's noise part for a sweep's noise setting (results.keys.noise_part)."""
    return noise_part(setting is not False, setting.label if isinstance(setting, NoiseLevel) else "")


class Price(_Strict):
    """What a model costs, in USD per million tokens (as providers quote it)."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)

    def per_token(self) -> dict[str, float]:
        """litellm's custom_cost_per_token form (farm.llm.client.LLMClient's `price` option)."""
        return {"input_cost_per_token": self.input_per_mtok / 1e6, "output_cost_per_token": self.output_per_mtok / 1e6}


class ModelEntry(_Strict):
    """One model of a sweep: a litellm model string and how to call it. `label` names it in trial
    keys and tables (default: the name), so one model may be listed twice with other settings."""

    name: str
    label: Label | None = None
    api_base: str | None = None  # an OpenAI-compatible endpoint (vLLM, ollama, llama.cpp, a proxy)
    api_key_env: str | None = None  # the environment variable holding its key (never the key itself)
    temperature: float | None = Field(None, ge=0, le=2)
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    max_tokens: int | None = Field(None, gt=0)  # per completion
    price: Price | None = None  # for a model litellm has no price for (or to override its price)
    concurrency: int | None = Field(None, ge=1)  # calls at once to this model, across the farm

    @property
    def key_name(self) -> str:
        return self.label or self.name

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _MODEL.match(v):
            raise ValueError(f"'{v}' is not a litellm model string (like openai/gpt-4o)")
        if (why := check_model(v)) is not None:
            raise ValueError(why)
        return v

    @field_validator("api_key_env")
    @classmethod
    def _env(cls, v: str | None) -> str | None:
        if v is not None and not _ENV_NAME.match(v):
            raise ValueError("must name an environment variable (like OPENAI_API_KEY), not hold a key")
        return v

    def call_options(self) -> dict[str, Any]:
        """The options farm.llm.client.LLMClient reads for this model (none of them a secret)."""
        out: dict[str, Any] = {}
        for key in ("api_base", "api_key_env", "temperature", "reasoning_effort", "max_tokens"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.price is not None:
            out["price"] = self.price.per_token()
        return out


class Pair(_Strict):
    """One agent × model combination a sweep runs (agent and model by their labels)."""

    agent: str
    model: str


class SweepSpec(_Strict):
    name: str
    problems: ProblemSelection
    agents: list[AgentEntry] = Field(min_length=1)
    models: list[ModelEntry] = []
    pairs: list[Pair] | None = None  # None: every agent with every model
    seeds: list[int] = [0]
    noise: list[bool | NoiseLevel] = [False]
    limits: Limits = Limits()
    concurrency: dict[str, int] = {}
    cost_cap_usd: float | None = Field(None, gt=0)
    judge: str | None = None
    max_infra_attempts: int = Field(3, ge=1, le=10)
    cluster: ClusterOptions = ClusterOptions()

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError("must be lowercase letters, digits, '.', '_' or '-', at most 63 characters")
        return v

    @field_validator("agents", "models", mode="before")
    @classmethod
    def _name_strings(cls, v: Any) -> Any:
        """A bare string in agents or models is an entry with only its name."""
        if isinstance(v, list):
            return [{"name": a} if isinstance(a, str) else a for a in v]
        return v

    @field_validator("models")
    @classmethod
    def _models(cls, v: list[ModelEntry]) -> list[ModelEntry]:
        seen: set[str] = set()
        for i, m in enumerate(v):
            if m.key_name in seen:
                raise _FieldError(f"models[{i}]", f"lists '{m.key_name}' twice; give the second a label "
                                                  f"(e.g. label: {m.name}@t0.7)")
            seen.add(m.key_name)
        return v

    @model_validator(mode="after")
    def _variant_labels(self) -> SweepSpec:
        """An agent listed more than once is several variants: each is named by its label, or by
        what differs between the entries (tool_mode and options), so trial keys tell them apart."""
        by_name: dict[str, list[AgentEntry]] = {}
        for entry in self.agents:
            by_name.setdefault(entry.name, []).append(entry)
        for name, entries in by_name.items():
            if len(entries) < 2:
                continue
            settings = [{"tool_mode": e.tool_mode, **e.options} for e in entries]
            differing = sorted({k for s in settings for k in s if any(s.get(k) != t.get(k) for t in settings)})
            for entry, setting in zip(entries, settings, strict=True):
                if entry.label is None:
                    entry.label = _variant_label(name, {k: setting.get(k) for k in differing})
        labels = [e.key_name for e in self.agents]
        for i, label in enumerate(labels):
            if labels.index(label) != i:
                raise _FieldError(f"agents[{i}]", f"two agent entries are both '{label}' (same agent, same "
                                                  "settings, or the same label): give each a distinct label")
        return self

    @field_validator("seeds", mode="before")
    @classmethod
    def _seeds(cls, v: Any) -> Any:
        if isinstance(v, bool):
            raise ValueError("must be a count or a list of integers")
        if isinstance(v, int):
            if v < 1:
                raise ValueError("a seed count must be at least 1")
            return list(range(v))
        return v

    @field_validator("seeds")
    @classmethod
    def _seed_values(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("needs at least one seed")
        if any(s < 0 for s in v):
            raise ValueError("seeds must be non-negative")
        if len(set(v)) != len(v):
            raise ValueError("lists a seed twice")
        return v

    @field_validator("noise", mode="before")
    @classmethod
    def _noise(cls, v: Any) -> Any:
        return [v] if isinstance(v, (bool, dict)) else v

    @field_validator("noise")
    @classmethod
    def _noise_values(cls, v: list[bool | NoiseLevel]) -> list[bool | NoiseLevel]:
        labels = [noise_label(x) for x in v]
        if not v or len(set(labels)) != len(labels):
            raise ValueError("must be true, false, {intensity: low|medium|high|0..1} or a list of distinct ones")
        return v

    @field_validator("concurrency")
    @classmethod
    def _concurrency(cls, v: dict[str, int]) -> dict[str, int]:
        for model, n in v.items():
            if n < 1:
                raise ValueError(f"limit for '{model}' must be at least 1")
        return v

    @model_validator(mode="after")
    def _cross(self) -> SweepSpec:
        names = {m.name for m in self.models} | {m.key_name for m in self.models}
        for model in self.concurrency:
            if model not in names:
                raise _FieldError(f"concurrency.{model}", "names a model that is not in models")
        if self.pairs is not None:
            agents = {e.key_name for e in self.agents}
            models = {m.key_name for m in self.models}
            for i, pair in enumerate(self.pairs):
                if pair.agent not in agents:
                    raise _FieldError(f"pairs[{i}].agent", f"'{pair.agent}' is not an agent label of agents "
                                                           f"(known: {', '.join(sorted(agents))})")
                if pair.model not in models:
                    raise _FieldError(f"pairs[{i}].model", f"'{pair.model}' is not a model label of models "
                                                           f"(known: {', '.join(sorted(models))})")

        if self.judge is not None and not _MODEL.match(self.judge):
            raise _FieldError("judge", f"'{self.judge}' is not a litellm model string")
        if self.judge is not None and (why := check_model(self.judge)) is not None:
            raise _FieldError("judge", why)
        return self


class _FieldError(ValueError):
    """A cross-field error that names its own field."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason)
        self.field = field


def _loc(err: Mapping[str, Any]) -> str:
    out = ""
    for item in err.get("loc", ()):
        out += f"[{item}]" if isinstance(item, int) else ("." if out else "") + str(item)
    return out or "(top level)"


def parse_spec(data: Any, path: str | None = None) -> SweepSpec:
    """Validate already-parsed YAML; raises SpecError with the first problem found."""
    if not isinstance(data, dict):
        raise SpecError(path, "(top level)", "a sweep spec must be a YAML mapping of fields")
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        ctx_err = (err.get("ctx") or {}).get("error")
        if isinstance(ctx_err, _FieldError):
            raise SpecError(path, ctx_err.field, str(ctx_err)) from None
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "is not a known field"
        elif err["type"] == "missing":
            msg = "is required"
        raise SpecError(path, _loc(err), msg) from None
    check_against_catalog(spec, path)
    return spec


@cache
def catalog() -> Any:
    """The problem catalog, parsed once per process (a sweep and its trials read it often)."""
    from farm.problems.catalog import load_catalog

    return load_catalog()


def check_against_catalog(spec: SweepSpec, path: str | None) -> None:
    """Names that must exist: problems, agents, apps; an agent that needs a model gets one."""
    from core.errors import ConfigurationError
    from farm.agenthost.known import agent_info

    for i, entry in enumerate(spec.agents):
        try:
            info = agent_info(entry.name)
        except (KeyError, ConfigurationError) as exc:
            raise SpecError(path, f"agents[{i}].name", str(exc).strip("'\"")) from None
        if info.uses_model and not spec.models:
            raise SpecError(path, "models", f"agent '{entry.name}' needs a model, and models is empty")
    if spec.cost_cap_usd is not None:
        # A cap cannot hold over a model whose calls are recorded at $0 for want of a price.
        model_agents = [e for e in spec.agents if agent_info(e.name).uses_model]
        for i, m in enumerate(spec.models):
            unpriced = [e.key_name for e in model_agents if not is_priced(m, e)]
            if unpriced:
                raise SpecError(path, f"models[{i}].price", f"'{m.name}' has no known price (for agent "
                                f"{', '.join(unpriced)}), so the cost cap cannot hold: give its price "
                                "({input_per_mtok: ..., output_per_mtok: ...}, USD per million tokens; 0 for a "
                                "free local model)")
    known = {p.id for p in catalog().problems}
    for i, pid in enumerate(spec.problems.ids):
        if pid not in known:
            raise SpecError(path, f"problems.ids[{i}]", f"unknown problem '{pid}' (see `farm problems list`)")
    apps = {p.app for p in catalog().problems}
    for i, app in enumerate(spec.problems.apps):
        if app not in apps:
            raise SpecError(path, f"problems.apps[{i}]", f"no problem uses application '{app}'")
    if not select_problems(spec):
        raise SpecError(path, "problems", "selects no problem of the catalog")


def is_priced(model: ModelEntry, agent: AgentEntry | None = None) -> bool:
    """Whether the trials of `agent` with `model` have a price to charge: the model entry's, the
    agent's `price` option (per token, as LLMClient reads it), or litellm's table."""
    from core.pricing import has_price

    return model.price is not None or (agent is not None and "price" in agent.options) or has_price(model.name)


def select_problems(spec: SweepSpec) -> list[Any]:
    sel = spec.problems
    out = []
    problems = catalog().problems
    if sel.suite:
        from farm.problems.sregym import suite_problems

        problems = suite_problems(problems, sel.suite)
    for p in problems:
        if sel.ids and p.id not in sel.ids:
            continue
        if sel.tags and not set(sel.tags) & set(p.tags):
            continue
        if sel.layers and p.layer not in sel.layers:
            continue
        if sel.apps and p.app not in sel.apps:
            continue
        out.append(p)
    return out


def load_spec(path: str | Path) -> SweepSpec:
    p = Path(path)
    if not p.is_file():
        raise SpecError(str(p), "(file)", "no such file")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise SpecError(str(p), "(file)", f"is not valid YAML{where}") from None
    return parse_spec(data, str(p))
