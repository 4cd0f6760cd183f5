"""One trial's spec: everything a worker needs to run it, rebuilt from its rows, so any worker can
run any trial. A sweep's spec (farm/spec.py, SweepSpec) expands into trial rows
(farm/dispatcher.py); `load_trial_spec` turns one row and its sweep back into a TrialSpec."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from sqlalchemy.engine import Engine
from sqlmodel import Session

from farm.agents.agent import AgentLimits
from results.models import Sweep, Trial


class TrialSpec(BaseModel):
    """Everything needed to run one trial, rebuilt from its rows (so any worker can run it)."""

    trial_id: str
    sweep_id: str
    key: str
    problem_id: str
    agent: str
    agent_options: dict[str, Any] = {}
    tool_mode: str = "raw"
    model: str | None
    seed: int
    noise: bool
    noise_level: str = ""  # set: ambient confounding noise at this level (injectors.compose.ambient_noises)
    limits: AgentLimits
    judge: str | None
    max_infra_attempts: int
    cost_cap_usd: float | None = None
    concurrency: dict[str, int] = {}  # per-model limits across the farm


def _tool_mode(agent: str, asked: str | None) -> str:
    if asked:
        return asked
    from farm.agenthost.known import agent_info

    return agent_info(agent).tool_mode


def load_trial_spec(engine: Engine, trial_id: str) -> TrialSpec:
    from farm.spec import SweepSpec

    with Session(engine) as session:
        trial = session.get(Trial, trial_id)
        if trial is None:
            raise KeyError(f"no trial {trial_id}")
        sweep = session.get(Sweep, trial.sweep_id)
        assert sweep is not None
    spec = SweepSpec.model_validate(json.loads(sweep.spec_json))
    # The row names the agent and the model by their labels (variants); the spec says what they are.
    entry = next((a for a in spec.agents if a.key_name == trial.agent), None)
    agent = entry.name if entry else trial.agent
    model_entry = next((m for m in spec.models if m.key_name == trial.model), None)
    model = None if trial.model == "-" else (model_entry.name if model_entry else trial.model)
    options = dict(entry.options if entry else {})
    if model_entry is not None:
        # The model's own settings (endpoint, temperature, price, ...) win over an agent option of
        # the same name: they are what the sweep says of that model.
        options.update(model_entry.call_options())
    concurrency = dict(spec.concurrency)
    for m in spec.models:
        if m.concurrency is not None:
            concurrency[m.name] = m.concurrency
    if model_entry is not None and model_entry.key_name in concurrency:
        concurrency.setdefault(model_entry.name, concurrency[model_entry.key_name])
    return TrialSpec(
        trial_id=trial.id, sweep_id=trial.sweep_id, key=trial.key, problem_id=trial.problem_id,
        agent=agent, agent_options=options,
        tool_mode=_tool_mode(agent, entry.tool_mode if entry else None),
        model=model, seed=trial.seed, noise=trial.noise,
        noise_level=trial.noise_level or "",
        limits=AgentLimits(**spec.limits.model_dump()), judge=spec.judge,
        max_infra_attempts=spec.max_infra_attempts, cost_cap_usd=spec.cost_cap_usd,
        concurrency=concurrency,
    )
