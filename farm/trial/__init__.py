"""One trial's lifecycle: its spec (spec.py), its steps (run.py), how a worker drives them and
the one failure policy (worker.py), the artifacts it leaves (artifacts.py) and the checkpoints
of a running agent session (checkpoint.py). Its events are core.events."""

from farm.trial.run import PHASES, TrialRun, time_to_mitigation
from farm.trial.spec import TrialSpec, load_trial_spec
from farm.trial.worker import StepOutcome, begin, hand_back, run_all, start_run, step

__all__ = ["PHASES", "StepOutcome", "TrialRun", "TrialSpec", "begin", "hand_back", "load_trial_spec", "run_all",
           "start_run", "step", "time_to_mitigation"]
