"""The trial key (results.keys): its spelling, the id hashed from it, and the row columns it fills."""

from __future__ import annotations

from results.keys import NO_MODEL, TrialKey, noise_part
from results.models import Trial


def test_the_key_spells_each_noise_setting() -> None:
    assert [noise_part(False), noise_part(True), noise_part(True, "high")] == ["quiet", "noise", "noise@high"]
    assert str(TrialKey("p", "baseline", NO_MODEL, 3, True, "0.3:error-burst")) == "p|baseline|-|3|noise@0.3:error-burst"
    assert str(TrialKey("p", "react", "openai/x", 0, False)) == "p|react|openai/x|0|quiet"


def test_the_key_fills_its_trial_columns() -> None:
    key = TrialKey("p", "react", "openai/x", 2, True, "high")
    row = key.columns()
    assert set(row) <= set(Trial.model_fields)
    assert row == {"key": "p|react|openai/x|2|noise@high", "problem_id": "p", "agent": "react", "model": "openai/x",
                   "seed": 2, "noise": True, "noise_level": "high"}
    assert TrialKey("p", "react", "openai/x", 2, True).columns()["noise_level"] is None


def test_the_trial_id_depends_on_the_sweep_and_every_part_of_the_key() -> None:
    key = TrialKey("p", "a", "-", 0, False)
    assert key.trial_id("s") == TrialKey("p", "a", "-", 0, False).trial_id("s")
    others = [key.trial_id("t"), TrialKey("q", "a", "-", 0, False).trial_id("s"),
              TrialKey("p", "a", "-", 1, False).trial_id("s"), TrialKey("p", "a", "-", 0, True).trial_id("s"),
              TrialKey("p", "a", "-", 0, True, "high").trial_id("s")]
    assert len({key.trial_id("s"), *others}) == 6 and all(len(i) == 20 for i in others)
    # Pinned: a resubmitted sweep finds the trials it already has by these ids.
    assert key.trial_id("s") == "ee2c0382a726425ad836"
    assert TrialKey("p", "a", "-", 0, True, "high").trial_id("s") == "7dd7f5f70be973f6c73e"
