"""The trial key, problem|agent|model|seed|noise: what makes a trial one, spelled in one place.
The dispatcher builds keys from a sweep spec; the trial row stores the key, its parts as columns
and an id hashed from it; reports name the noise part the way keys do."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

NO_MODEL = "-"  # the model part of an agent that uses no model


def noise_part(noise: bool, level: str = "") -> str:
    """The key's noise part: quiet, noise (the problem's own noises), or noise@<level> (a sweep's
    {intensity: ...} setting, farm.spec.NoiseLevel.label)."""
    if level:
        return f"noise@{level}"
    return "noise" if noise else "quiet"


@dataclass(frozen=True)
class TrialKey:
    problem: str
    agent: str
    model: str
    seed: int
    noise: bool
    noise_level: str = ""  # farm.spec.NoiseLevel.label; "" for noise true/false

    def __str__(self) -> str:
        return f"{self.problem}|{self.agent}|{self.model}|{self.seed}|{noise_part(self.noise, self.noise_level)}"

    def trial_id(self, sweep_id: str) -> str:
        """Stable across submissions: a resubmitted sweep finds its trials by it."""
        digest = hashlib.sha256(f"{sweep_id}\n{self}".encode()).hexdigest()
        return digest[:20]

    def columns(self) -> dict[str, Any]:
        """The key and its parts as the trial row's columns (results.models.Trial)."""
        return {"key": str(self), "problem_id": self.problem, "agent": self.agent, "model": self.model,
                "seed": self.seed, "noise": self.noise, "noise_level": self.noise_level or None}
