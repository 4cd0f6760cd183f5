"""The leaderboard is computed by SQL from recorded rows; these tests recompute the same figures
in Python from the rows themselves and compare."""

from __future__ import annotations

import random
import time

import pandas as pd
import pytest
from sqlmodel import Session

from core.states import TrialState
from results import leaderboard
from results.db import engine_for
from results.models import Sweep, Trial


def _rows(engine, n: int = 200, seed: int = 7) -> list[Trial]:
    rng = random.Random(seed)
    now = time.time()
    trials = []
    with Session(engine, expire_on_commit=False) as s:
        s.add(Sweep(id="sw", spec_json="{}", created_at=now, updated_at=now))
        for i in range(n):
            agent, model = rng.choice([("baseline", "-"), ("react", "openai/a"), ("react", "openai/b")])
            infra = rng.random() < 0.05
            d, m = rng.random() < 0.5, rng.random() < 0.6
            t = Trial(id=f"t{i}", sweep_id="sw", key=str(i), problem_id=f"p{i % 7}", app="hotel-reservation",
                      layer=rng.choice(["application", "os"]), composition="single", agent=agent, model=model,
                      seed=i % 3, noise=bool(i % 2),
                      state=TrialState.INFRA_FAILED if infra else TrialState.FINISHED)
            if not infra:
                t.diagnosis_passed, t.mitigation_passed, t.e2e_passed = d, m, d and m
                t.tokens_in, t.tokens_out, t.cost_usd = rng.randint(100, 9000), rng.randint(10, 900), rng.random()
                t.time_to_diagnosis_s = rng.uniform(10, 600) if d else None
                t.judge_offline = True
            trials.append(t)
            s.add(t)
        s.commit()
    return trials


@pytest.mark.parametrize("by", ["agent,model", "layer", "noise", "problem"])
def test_figures_match_the_rows(db_url, by, tmp_path):
    engine = engine_for(db_url)
    trials = _rows(engine)
    rows = leaderboard.compute(engine, "sw", by)
    keys = leaderboard.GROUPINGS[by]
    assert rows, "no groups"
    for row in rows:
        group = [t for t in trials if all(getattr(t, k) == row[k] for k in keys)]
        done = [t for t in group if t.state == TrialState.FINISHED]
        assert row["n"] == len(done)
        assert row["infra_failed"] == len(group) - len(done)
        diag = sum(t.diagnosis_passed for t in done)
        assert row["diagnosis_rate"] == pytest.approx(diag / len(done))
        assert row["e2e_rate"] == pytest.approx(sum(t.e2e_passed for t in done) / len(done))
        both = sum(t.diagnosis_passed and t.mitigation_passed for t in done)
        assert row["p_mitigation_given_diagnosis"] == pytest.approx(both / diag)
        assert row["mean_tokens"] == pytest.approx(sum(t.tokens_in + t.tokens_out for t in done) / len(done))
        lo, hi = leaderboard.wilson(diag, len(done))
        assert row["diagnosis_lo"] == pytest.approx(lo) and row["diagnosis_hi"] == pytest.approx(hi)
        assert row["diagnosis_lo"] <= row["diagnosis_rate"] <= row["diagnosis_hi"]
    path = leaderboard.write_csv(rows, by, tmp_path / "lb.csv")
    frame = pd.read_csv(path)
    assert list(frame.columns) == leaderboard.header(by)
    assert frame["n"].sum() == sum(t.state == TrialState.FINISHED for t in trials)


def test_wilson_known_values():
    lo, hi = leaderboard.wilson(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-4) and hi == pytest.approx(0.9433, abs=1e-4)
    assert leaderboard.wilson(0, 0) == (None, None)
    lo, hi = leaderboard.wilson(0, 5)
    assert lo == 0.0 and 0 < hi < 0.5


def test_unknown_grouping_is_refused(sqlite_url):
    with pytest.raises(ValueError, match="--by must be one of"):
        leaderboard.compute(engine_for(sqlite_url), None, "colour")


def test_cost_capped_trials_and_failed_resets_are_reported_apart(db_url):
    from results import ledger

    engine = engine_for(db_url)
    now = time.time()
    with Session(engine) as s:
        s.add(Sweep(id="sw", spec_json="{}", created_at=now, updated_at=now))
        for i, state in enumerate([TrialState.FINISHED, TrialState.FINISHED, TrialState.SKIPPED_COST_CAP,
                                   TrialState.SKIPPED_COST_CAP, TrialState.INFRA_FAILED, TrialState.QUEUED]):
            s.add(Trial(id=f"t{i}", sweep_id="sw", key=str(i), problem_id="p", app="a", layer="os",
                        composition="single", agent="react", model="m", seed=i, noise=False, state=state,
                        diagnosis_passed=True if state == TrialState.FINISHED else None,
                        # a cut session's row may carry numbers; they are not a result
                        cost_usd=1.0 if state != TrialState.QUEUED else None))
        s.commit()
    c = ledger.Claim("t0", 1, 1, "w", "sim:sim")
    ledger.infra_event(engine, "reset_failed", "w", "sim:sim", "restore failed", c)
    ledger.infra_event(engine, "cluster_replaced", "w", "sim:sim", "", c)
    (row,) = leaderboard.compute(engine, "sw")
    assert (row["n"], row["infra_failed"], row["cost_capped"], row["reset_failures"]) == (2, 1, 2, 1)
    assert row["diagnosis_rate"] == 1.0 and row["mean_cost_usd"] == 1.0 and row["total_cost_usd"] == 2.0


def test_diagnosis_only_rows_count_for_diagnosis_and_apart_for_mitigation(db_url):
    """A diagnosis-only problem's trials carry no mitigation verdict (NULL): they are in n and in
    the diagnosis rate, never a mitigation failure; mitigation_n, the mitigation and E2E rates
    and P(M|D) are over the scored trials alone."""
    engine = engine_for(db_url)
    now = time.time()
    with Session(engine) as s:
        s.add(Sweep(id="dx", spec_json="{}", created_at=now, updated_at=now))
        outcomes = [(True, True), (True, False), (False, False), (True, None), (False, None), (True, None)]
        for i, (d, m) in enumerate(outcomes):
            s.add(Trial(id=f"dx{i}", sweep_id="dx", key=str(i), problem_id="p", app="a", layer="os",
                        composition="single", agent="baseline", model="-", seed=i, noise=False,
                        state=TrialState.FINISHED, diagnosis_passed=d, mitigation_passed=m,
                        e2e_passed=None if m is None else d and m))
        s.commit()
    (row,) = leaderboard.compute(engine, "dx", "agent,model")
    assert row["n"] == 6 and row["mitigation_n"] == 3
    assert row["diagnosis_rate"] == pytest.approx(4 / 6)
    assert row["mitigation_rate"] == pytest.approx(1 / 3)
    assert row["e2e_rate"] == pytest.approx(1 / 3)
    assert row["p_mitigation_given_diagnosis"] == pytest.approx(1 / 2)


def test_the_leaderboard_says_which_pass_rule_scored_and_flags_a_mix(db_url):
    from rich.console import Console

    engine = engine_for(db_url)
    trials = _rows(engine, n=40)
    with Session(engine) as s:
        for t in trials:
            row = s.get(Trial, t.id)
            # react/openai/b's rows were judged partly before the rule was recorded
            row.diagnosis_pass_rule = None if (t.model == "openai/b" and int(t.id[1:]) % 2) else "localized-and-mechanism-v2"
            s.add(row)
        s.commit()
    rows = {(r["agent"], r["model"]): r for r in leaderboard.compute(engine, "sw", "agent,model")}
    assert rows[("baseline", "-")]["diagnosis_pass_rule"] == "localized-and-mechanism-v2"
    assert rows[("react", "openai/b")]["diagnosis_pass_rule"] == "mixed: localized-and-mechanism-v2, pre-v2"
    console = Console(record=True, width=200)
    console.print(leaderboard.render(list(rows.values()), "agent,model"))
    assert "pass rule localized-and-mechanism-v2" in console.export_text()
    assert "diagnosis_pass_rule" in leaderboard.header("agent,model")


def test_provider_failures_and_agent_errors_are_counted_apart(db_url):
    """Through the ledger's own writes: what the last attempt of an infra_failed trial failed on
    decides whether it is a provider failure; agent errors are finished trials, in n."""
    from core.states import END_AGENT_ERROR, END_CONTEXT_LENGTH, END_SUBMITTED
    from farm import dispatcher
    from farm.spec import SweepSpec
    from results import ledger

    engine = engine_for(db_url)
    spec = SweepSpec.model_validate({"name": "pf", "problems": {"ids": ["hr-frontend-service-targetport-wrong"]},
                                     "agents": ["baseline"], "seeds": 6})
    ids = dispatcher.submit(engine, spec).to_run

    def attempt(tid: str, *, fail: str | None = None, end: str | None = None, max_attempts: int = 1) -> None:
        c = ledger.claim(engine, tid, "w", "sim:sim")
        assert c is not None
        if fail:
            ledger.infra_failure(engine, c, fail, f"{fail} failed", max_attempts)
        else:
            ledger.record(engine, c, ledger.AttemptResult(end_reason=end, diagnosis_passed=False))

    attempt(ids[0], fail="provider")  # given up on the provider
    attempt(ids[1], fail="provider", max_attempts=2)  # the provider, then the deploy, gave it up
    attempt(ids[1], fail="deploy", max_attempts=2)
    attempt(ids[2], end=END_AGENT_ERROR)
    attempt(ids[3], end=END_CONTEXT_LENGTH)
    attempt(ids[4], fail="provider")  # given up on the provider, then a re-run recorded it
    ledger.revive(engine, [ids[4]])
    attempt(ids[4], end=END_SUBMITTED)
    attempt(ids[5], end=END_SUBMITTED)
    (row,) = leaderboard.compute(engine, "pf")
    assert (row["n"], row["infra_failed"], row["provider_failed"], row["agent_errors"]) == (4, 2, 1, 2)
    assert leaderboard.failure_counts(engine, "pf") == {"provider_failed": 1, "infra_failed_other": 1,
                                                        "agent_errors": 2, "context_length": 1}


def test_structured_diagnoses_have_rates_of_their_own(db_url):
    engine = engine_for(db_url)
    now = time.time()
    with Session(engine) as s:
        s.add(Sweep(id="st", spec_json="{}", created_at=now, updated_at=now))
        for i, (top1, top3, ft) in enumerate([(True, True, True), (False, True, False), (False, False, None),
                                              (None, None, None)]):
            s.add(Trial(id=f"s{i}", sweep_id="st", key=str(i), problem_id="p", app="a", layer="application",
                        composition="single", agent="react", model="m", seed=i, noise=False,
                        state=TrialState.FINISHED, diagnosis_passed=True, rca_top1=top1, rca_top3=top3,
                        fault_type_correct=ft))
        s.commit()
    row = leaderboard.compute(engine, "st")[0]
    assert row["n"] == 4 and row["structured_n"] == 3 and row["fault_type_n"] == 2  # the text-only trial is not in them
    assert row["rca_top1_rate"] == pytest.approx(1 / 3) and row["rca_top3_rate"] == pytest.approx(2 / 3)
    assert row["fault_type_rate"] == pytest.approx(1 / 2)


def test_false_alarm_rate_per_agent_and_model_over_the_no_fault_controls(db_url, tmp_path):
    """A no-fault control (composition "none") whose submitted diagnosis did not pass blamed
    something: a false alarm. One with no diagnosis submitted fails, but raised no alarm; faulty
    problems never enter the rate. In the CSV and the terminal table as well."""
    engine = engine_for(db_url)
    now = time.time()
    # (agent, composition, submitted, passed)
    outcomes = [("react", "none", True, False), ("react", "none", True, True), ("react", "none", False, False),
                ("react", "none", True, False), ("react", "single", True, False),
                ("baseline", "none", True, True), ("baseline", "single", True, True)]
    with Session(engine) as s:
        s.add(Sweep(id="nf", spec_json="{}", created_at=now, updated_at=now))
        for i, (agent, comp, submitted, passed) in enumerate(outcomes):
            s.add(Trial(id=f"nf{i}", sweep_id="nf", key=str(i), problem_id=f"p{comp}", app="a", layer="application",
                        composition=comp, agent=agent, model="m", seed=i, noise=False, state=TrialState.FINISHED,
                        diagnosis_submitted=submitted, diagnosis_passed=passed, mitigation_passed=True,
                        e2e_passed=passed))
        s.commit()
    rows = {r["agent"]: r for r in leaderboard.compute(engine, "nf", "agent,model")}
    assert rows["react"]["no_fault_n"] == 4 and rows["react"]["false_alarm_rate"] == pytest.approx(2 / 4)
    lo, hi = leaderboard.wilson(2, 4)
    assert (rows["react"]["false_alarm_lo"], rows["react"]["false_alarm_hi"]) == (lo, hi)
    assert rows["baseline"]["no_fault_n"] == 1 and rows["baseline"]["false_alarm_rate"] == 0.0
    csv_rows = pd.read_csv(leaderboard.write_csv(list(rows.values()), "agent,model", tmp_path / "lb.csv"))
    assert csv_rows.set_index("agent")["false_alarm_rate"].to_dict() == {"baseline": 0.0, "react": 0.5}

    from rich.console import Console

    console = Console(width=400, record=True)
    console.print(leaderboard.render(list(rows.values()), "agent,model"))
    text = console.export_text()
    assert "false alarms" in text and "50.0%" in text and "of 4" in text
