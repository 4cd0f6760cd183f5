"""The shape of a problem. Catalog files (YAML under farm/problems/catalog/) are validated into
these models; the judge reads `ground_truth`, the injectors read `faults`, the mitigation
oracle reads `faults` (each fault's own check) and `oracle`."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

Layer = Literal["application", "operator", "os", "hardware"]
# "none": a no-fault control (AIOpsLab's detection task): nothing is injected and the right
# diagnosis is that nothing is wrong.
Composition = Literal["single", "concurrent", "correlated", "metastable", "none"]
# What a no-fault ground truth says where a faulty problem names its root cause.
NO_FAULT_TRUTH: dict[str, Any] = {"component": "none", "component_kind": "None", "fault_type": "no-fault",
                                  "details": {}}


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


def fill_placeholders(value: Any, **values: str) -> Any:
    """`value` (text, or lists and mappings of it) with each `{name}` replaced by values[name]."""
    if isinstance(value, str):
        for key, v in values.items():
            value = value.replace("{" + key + "}", v)
        return value
    if isinstance(value, list):
        return [fill_placeholders(v, **values) for v in value]
    if isinstance(value, dict):
        return {k: fill_placeholders(v, **values) for k, v in value.items()}
    return value


class GroundTruth(Strict):
    """What actually broke, rich enough for all nine checklist questions; with `no_fault`, that
    nothing did (a control: component, kind, fault type and details take NO_FAULT_TRUTH's values)."""

    no_fault: bool = False

    component: str  # the faulty component, e.g. "geo" or "node/worker-2"
    component_kind: str  # Deployment, Service, ConfigMap, Secret, Node, Disk, TidbCluster, ...
    fault_type: str  # family: misconfiguration, resource-limit, network, disk-io, code-bug, ...
    mechanism: str  # one sentence: how the root cause produces the failure
    details: dict[str, str]  # the concrete mutated values: key, value, port, selector, tag, limit
    affected: list[str] = []  # components that fail only downstream of the root cause
    symptom: str  # what a user of the application sees
    # For concurrent problems, the other root causes (each a full ground truth).
    also: list[GroundTruth] = []

    @model_validator(mode="before")
    @classmethod
    def _no_fault_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("no_fault") is True:
            return {**NO_FAULT_TRUTH, **data}
        return data

    def placeholders(self) -> set[str]:
        """The `{name}` placeholders left for injection to fill (e.g. node)."""
        return set(re.findall(r"\{([a-z_]+)\}", self.model_dump_json()))

    def filled(self, **values: str) -> GroundTruth:
        """This ground truth with each `{name}` replaced by values[name]: what only injection
        decides (the node a node-level fault landed on). The judge gets this, never the raw one."""
        if not values:
            return self
        return GroundTruth.model_validate(fill_placeholders(self.model_dump(), **values))


class MitigationStep(Strict):
    """One step of the reference mitigation. `kubectl` runs through the agent's own kubectl tool
    and token (so it proves the agent could do it), with `manifest` as the text a `-f -` reads.
    `recover` undoes fault number N through its injector with the farm's own credentials: the
    farm's reset may use it, a reference mitigation never does (no agent could)."""

    kubectl: str | None = None
    manifest: str | None = None  # what `kubectl ... -f -` reads (the agent tool's manifest argument)
    recover: int | None = None
    wait: float | None = None  # seconds of cluster time to let pass after the step


class OracleSpec(Strict):
    """Thresholds of the mitigation oracle for this problem."""

    success_rate: float = Field(0.95, ge=0, le=1)  # client-side, over the window
    window_seconds: float = Field(120, gt=0)
    replay_trigger: bool = False  # metastable: replay the trigger and require recovery


class Problem(Strict):
    id: str
    app: str  # a name under apps
    layer: Layer
    composition: Composition = "single"
    tags: list[str] = []
    description: str  # for humans; never shown to the agent
    faults: list[FaultSpec] = Field([], validate_default=True)  # none exactly when composition is "none"
    noises: list[NoiseSpec] = []  # used when the sweep turns noise on
    mitigation: list[MitigationStep] = []
    ground_truth: GroundTruth
    oracle: OracleSpec = OracleSpec()
    needs_real_cluster: bool = False  # the fault needs a mechanism the emulated cluster lacks
    # No fix an agent could make from its scope exists (say, data lost on a disk with no replica):
    # the problem is scored for diagnosis only, its mitigation neither scored nor a failure.
    diagnosis_only: bool = False
    # The SREGym problems (ids of its registry, farm/problems/sregym.tsv) that inject this root
    # cause in this application; `sregym_id: x` is read as `sregym_ids: [x]`.
    sregym_ids: list[str] = []

    @field_validator("faults")
    @classmethod
    def _some_faults(cls, v: list[FaultSpec], info: ValidationInfo) -> list[FaultSpec]:
        if not v and info.data.get("composition") != "none":
            raise ValueError("a problem needs at least 1 fault (or composition: none, a no-fault control)")
        return v

    @model_validator(mode="before")
    @classmethod
    def _one_sregym_id(cls, data: Any) -> Any:
        if isinstance(data, dict) and "sregym_id" in data:
            data = dict(data)
            one = data.pop("sregym_id")
            data["sregym_ids"] = [*data.get("sregym_ids", []), *(one if isinstance(one, list) else [one])]
        return data

    @property
    def no_fault(self) -> bool:
        return self.composition == "none"

    @model_validator(mode="after")
    def _scored_problems_have_a_fix(self) -> Problem:
        if self.no_fault:
            if self.faults:
                raise ValueError("faults: a no-fault control (composition: none) injects nothing")
            if not self.ground_truth.no_fault:
                raise ValueError("ground_truth.no_fault: a no-fault control's ground truth says no_fault: true")
            if self.mitigation:
                raise ValueError("mitigation: a no-fault control has nothing to fix (the right action is none)")
            return self
        if self.ground_truth.no_fault:
            raise ValueError("ground_truth.no_fault: only a no-fault control (composition: none) says so")
        if not self.diagnosis_only and not self.mitigation:
            raise ValueError("mitigation: a problem needs a reference mitigation (or diagnosis_only: true)")
        for i, step in enumerate(self.mitigation):
            if step.manifest is not None and step.kubectl is None:
                raise ValueError(f"mitigation[{i}]: a manifest goes with a kubectl step")
        return self
