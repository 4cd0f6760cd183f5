"""One trial's lifecycle: its spec (spec.py), its phases and the chain that orders them
(phases.py), what each phase hands the next (handover.py), an attempt's live state (run.py), how
a worker drives the phases and the one failure policy (worker.py), the artifacts it leaves
(artifacts.py) and the checkpoints of a running agent session (checkpoint.py). Its events are
core.events."""

from farm.trial.handover import Claimed, Deployed, Injected, Judged, Recorded, Session
from farm.trial.phases import PHASES, TRIAL, Chain, Phase
from farm.trial.run import TrialRun, time_to_mitigation
from farm.trial.spec import TrialSpec, load_trial_spec
from farm.trial.worker import StepOutcome, begin, hand_back, run_all, start_run, step

__all__ = ["PHASES", "TRIAL", "Chain", "Claimed", "Deployed", "Injected", "Judged", "Phase", "Recorded", "Session",
           "StepOutcome", "TrialRun", "TrialSpec", "begin", "hand_back", "load_trial_spec", "run_all", "start_run",
           "step", "time_to_mitigation"]
