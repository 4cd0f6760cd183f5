"""The shape of a problem. Catalog files (YAML under farm/problems/catalog/) are validated into
these models; the judge reads `ground_truth`, the injectors read `faults`, the mitigation
oracle reads `faults` (each fault's own check) and `oracle`."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Layer = Literal["application", "operator", "os", "hardware"]
Composition = Literal["single", "concurrent", "correlated", "metastable"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FaultSpec(Strict):
    """One injector invocation: `injector` is a name in injectors.faults, `params` its arguments."""

    injector: str
    params: dict[str, Any] = {}


class NoiseSpec(Strict):
    """One noise source; `intensity` in [0, 1] scales how often it fires, seeded per trial."""

    kind: str
    intensity: float = Field(0.5, ge=0, le=1)
    params: dict[str, Any] = {}


class GroundTruth(Strict):
    """What actually broke, rich enough for all nine checklist questions."""

    component: str  # the faulty component, e.g. "geo" or "node/worker-2"
    component_kind: str  # Deployment, Service, ConfigMap, Secret, Node, Disk, TidbCluster, ...
    fault_type: str  # family: misconfiguration, resource-limit, network, disk-io, code-bug, ...
    mechanism: str  # one sentence: how the root cause produces the failure
    details: dict[str, str]  # the concrete mutated values: key, value, port, selector, tag, limit
    affected: list[str] = []  # components that fail only downstream of the root cause
    symptom: str  # what a user of the application sees
    # For concurrent problems, the other root causes (each a full ground truth).
    also: list[GroundTruth] = []

    def placeholders(self) -> set[str]:
        """The `{name}` placeholders left for injection to fill (e.g. node)."""
        return set(re.findall(r"\{([a-z_]+)\}", self.model_dump_json()))

    def filled(self, **values: str) -> GroundTruth:
        """This ground truth with each `{name}` replaced by values[name]: what only injection
        decides (the node a node-level fault landed on). The judge gets this, never the raw one."""
        if not values:
            return self

        def fill(value: Any) -> Any:
            if isinstance(value, str):
                for key, v in values.items():
                    value = value.replace("{" + key + "}", v)
                return value
            if isinstance(value, list):
                return [fill(v) for v in value]
            if isinstance(value, dict):
                return {k: fill(v) for k, v in value.items()}
            return value

        return GroundTruth.model_validate(fill(self.model_dump()))


class MitigationStep(Strict):
    """One step of the reference mitigation. Exactly one of the fields is set:
    `kubectl` runs through the agent's own kubectl tool (so it proves the agent could do it);
    `recover` undoes fault number N of the problem through its injector (for faults an agent
    cannot reach from kubectl, such as a node's disk, where the fix is "drain and replace")."""

    kubectl: str | None = None
    recover: int | None = None
    wait: float | None = None  # seconds of cluster time to let pass after the step


class OracleSpec(Strict):
    """Thresholds of the mitigation oracle for this problem."""

    success_rate: float = Field(0.95, ge=0, le=1)  # client-side, over the window
    window_seconds: float = Field(120, gt=0)
    replay_trigger: bool = False  # metastable: replay the trigger and require recovery


class Problem(Strict):
    id: str
    app: str  # a name under farm/apps
    layer: Layer
    composition: Composition = "single"
    tags: list[str] = []
    description: str  # for humans; never shown to the agent
    faults: list[FaultSpec] = Field(min_length=1)
    noises: list[NoiseSpec] = []  # used when the sweep turns noise on
    mitigation: list[MitigationStep] = Field(min_length=1)
    ground_truth: GroundTruth
    oracle: OracleSpec = OracleSpec()
    needs_real_cluster: bool = False  # the fault needs a mechanism the emulated cluster lacks
