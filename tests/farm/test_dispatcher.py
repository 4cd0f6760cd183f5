"""The dispatcher: stable keys, one run per problem × seed for agents without a model, resume
(trials that ended without a result run again) and cancel."""

from __future__ import annotations

import pytest
from sqlmodel import Session

from core.states import TrialState
from farm import dispatcher
from farm.spec import SweepSpec, select_problems
from results import ledger, progress
from results.db import engine_for
from results.keys import TrialKey
from results.models import Trial


def _spec(**kw):
    base = {"name": "disp", "problems": {"ids": ["hr-geo-image-tag-wrong", "hr-profile-wrong-binary"]},
            "agents": ["baseline", "react"], "models": ["openai/a", "openai/b"], "seeds": 2, "noise": [False, True]}
    base.update(kw)
    return SweepSpec.model_validate(base)


def test_expansion_counts_and_stable_keys(sqlite_url):
    spec = _spec()
    keys = [str(k) for k, _ in dispatcher.expand(spec, select_problems(spec))]
    # baseline: 2 problems × 2 seeds × 2 noise; react: × 2 models as well
    assert len(keys) == 2 * 2 * 2 + 2 * 2 * 2 * 2 == len(set(keys))
    assert "hr-geo-image-tag-wrong|baseline|-|0|quiet" in keys
    assert "hr-geo-image-tag-wrong|react|openai/b|1|noise" in keys
    first = TrialKey("p", "a", "-", 0, False).trial_id("s")
    assert first == TrialKey("p", "a", "-", 0, False).trial_id("s") != TrialKey(
        "p", "a", "-", 1, False).trial_id("s")


def test_resubmission_and_widening(db_url):
    engine = engine_for(db_url)
    sub = dispatcher.submit(engine, _spec(agents=["baseline"], models=[]))
    assert sub.total == sub.created == len(sub.to_run) == 8
    for tid in sub.to_run[:5]:
        c = ledger.claim(engine, tid, "w", "sim:sim")
        ledger.record(engine, c, ledger.AttemptResult(diagnosis_passed=True, mitigation_passed=False))
    again = dispatcher.submit(engine, _spec(agents=["baseline"], models=[]))
    assert again.created == 0 and again.done == 5 and sorted(again.to_run) == sorted(sub.to_run[5:])
    wider = dispatcher.submit(engine, _spec(agents=["baseline"], models=[], seeds=3))
    assert wider.total == 12 and wider.created == 4 and len(wider.to_run) == 7


def test_cancel_stops_claims(sqlite_url):
    engine = engine_for(sqlite_url)
    sub = dispatcher.submit(engine, _spec(agents=["baseline"], models=[]))
    running = ledger.claim(engine, sub.to_run[0], "w", "sim:sim")
    assert dispatcher.cancel(engine, "disp") == 8
    assert ledger.claim(engine, sub.to_run[1], "w", "sim:sim") is None
    assert not ledger.holds_lease(engine, running)  # the running attempt stops at its next step
    assert progress.status(engine, "disp")[TrialState.CANCELLED] == 8
    with pytest.raises(KeyError):
        dispatcher.cancel(engine, "no-such-sweep")
    # Resubmitting a cancelled sweep wants its trials again.
    assert len(dispatcher.submit(engine, _spec(agents=["baseline"], models=[])).to_run) == 8


def test_resubmission_wants_trials_that_ended_without_a_result(db_url):
    engine = engine_for(db_url)
    spec = _spec(agents=["baseline"], models=[], seeds=1, noise=[False], cost_cap_usd=1.0, max_infra_attempts=1)
    sub = dispatcher.submit(engine, spec)
    finished, capped = sub.to_run
    c = ledger.claim(engine, finished, "w", "sim:sim")
    ledger.record(engine, c, ledger.AttemptResult(diagnosis_passed=True, mitigation_passed=True, cost_usd=2.0))
    assert ledger.claim(engine, capped, "w", "sim:sim") is None  # $2.00 of a $1.00 cap: nothing more
    counts = progress.status(engine, "disp")
    assert counts[TrialState.FINISHED] == 1 and counts[TrialState.SKIPPED_COST_CAP] == 1
    # Raise the cap, resubmit: the skipped trial is wanted again and runs; the finished one is final.
    wider = _spec(agents=["baseline"], models=[], seeds=1, noise=[False], cost_cap_usd=10.0, max_infra_attempts=1)
    again = dispatcher.submit(engine, wider)
    assert (again.done, again.to_run) == (1, [capped])
    c = ledger.claim(engine, capped, "w", "sim:sim")
    assert ledger.infra_failure(engine, c, "deploy", "pods not ready", max_attempts=1) == TrialState.INFRA_FAILED
    again = dispatcher.submit(engine, wider)
    assert again.to_run == [capped]
    with Session(engine) as s:
        trial = s.get(Trial, capped)
    assert trial.state == TrialState.PENDING and trial.infra_attempts == 0 and trial.error is None
    info = dispatcher.infra_summary(engine, "disp")
    assert info == {"infra_errors": {"deploy": 1}, "infra_events": {}, "cost_usd": 2.0, "cost_cap_usd": 10.0}


def test_noise_levels_are_trials_of_their_own_and_old_keys_stay(db_url):
    engine = engine_for(db_url)
    spec = _spec(agents=["baseline"], models=[], seeds=1,
                 noise=[False, True, {"intensity": "high"}, {"intensity": 0.3, "kinds": ["error-burst"]}])
    sub = dispatcher.submit(engine, spec)
    assert sub.created == 2 * 4
    with Session(engine) as s:
        rows = {t.key: (t.noise, t.noise_level) for t in s.query(Trial).all()}
    assert rows["hr-geo-image-tag-wrong|baseline|-|0|quiet"] == (False, None)
    assert rows["hr-geo-image-tag-wrong|baseline|-|0|noise"] == (True, None)
    assert rows["hr-geo-image-tag-wrong|baseline|-|0|noise@high"] == (True, "high")
    assert rows["hr-geo-image-tag-wrong|baseline|-|0|noise@0.3:error-burst"] == (True, "0.3:error-burst")
    # the keys of true/false trials are those a sweep submitted before levels existed
    assert TrialKey("p", "a", "-", 0, True).trial_id("s") == TrialKey(
        "p", "a", "-", 0, True, "").trial_id("s") != TrialKey("p", "a", "-", 0, True, "high").trial_id("s")
