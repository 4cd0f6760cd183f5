"""The report's numbers, the paired comparison and the exports, on rows written through the real
recording path (ledger.claim → ledger.record with an AttemptResult), recomputed here in Python."""

from __future__ import annotations

import json
import random
import re
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from sqlmodel import Session

from core.states import AttemptState, TrialState
from results import ledger
from results.db import engine_for
from results.ledger import AttemptResult
from results.models import Sweep, Trial
from results.report import build_report, queries
from results.report import compare as cmp
from results.report import export as ex
from results.report.plots import pareto_front

TOOLS = ("kubectl", "prometheus_query", "loki_query", "get_alerts")


def _sweep(engine, sweep_id: str, cap: float | None = None) -> None:
    now = time.time()
    with Session(engine) as s:
        s.add(Sweep(id=sweep_id, spec_json=json.dumps({"name": sweep_id, "judge": None}), created_at=now,
                    updated_at=now, cost_cap_usd=cap))
        s.commit()


def _trial(engine, sweep_id: str, i: int, problem: str, agent: str, model: str, seed: int, noise: bool,
           layer: str = "application", composition: str = "single") -> str:
    tid = f"{sweep_id}-{i}"
    with Session(engine) as s:
        s.add(Trial(id=tid, sweep_id=sweep_id, key=f"{problem}|{agent}|{model}|{seed}|{noise}", problem_id=problem,
                    app="hotel-reservation", layer=layer, composition=composition, agent=agent, model=model, seed=seed,
                    noise=noise, state=TrialState.PENDING))
        s.commit()
    return tid


def _record(engine, tid: str, result: AttemptResult) -> None:
    claim = ledger.claim(engine, tid, "w1", "sim:sim")
    assert claim is not None
    assert ledger.record(engine, claim, result)


def _result(rng: random.Random, model: str, d: bool, m: bool, artifacts: str | None = None) -> AttemptResult:
    uses_model = model != "-"
    per_tool = {t: {"calls": rng.randint(1, 4), "tokens": rng.randint(10, 3000)} for t in rng.sample(TOOLS, 2)}
    tin = rng.randint(1000, 50_000) if uses_model else 0
    return AttemptResult(
        end_reason="submitted", diagnosis_submitted=True, diagnosis_passed=d, diagnosis_score=0.8 if d else 0.3,
        judge="offline", judge_offline=True, diagnosis_threshold=0.7, mitigation_passed=m,
        tokens_in=tin, tokens_out=rng.randint(100, 2000) if uses_model else 0,
        tokens_cached=rng.randint(0, tin) if uses_model else 0, cost_usd=rng.random() if uses_model else 0.0,
        tool_calls=sum(v["calls"] for v in per_tool.values()),
        tool_output_tokens=sum(v["tokens"] for v in per_tool.values()), tool_tokens=per_tool,
        tool_mode="summarised" if model == "openai/b" else "raw",
        time_to_diagnosis_s=rng.uniform(30, 600) if d else None, time_to_mitigation_s=rng.uniform(60, 900) if m else None,
        artifacts_uri=artifacts)


@pytest.fixture()
def recorded(db_url):
    """A sweep of 48 trials (3 agent/models × 4 problems × 2 seeds × noise), one infra-failed trial
    and one lost attempt; returns the engine and the results as recorded, per trial id."""
    engine = engine_for(db_url)
    rng = random.Random(11)
    _sweep(engine, "sw", cap=100.0)
    results: dict[str, tuple[dict, AttemptResult]] = {}
    i = 0
    for agent, model in (("baseline", "-"), ("react", "openai/a"), ("react", "openai/b")):
        for p in range(4):
            for seed in range(2):
                for noise in (False, True):
                    tid = _trial(engine, "sw", i, f"p{p}", agent, model, seed, noise, layer="os" if p == 3 else "application")
                    i += 1
                    # p0 always solved, p3 never: the heatmap must put p3 first
                    d = p == 0 or (p != 3 and rng.random() < 0.6)
                    m = p == 0 or (p != 3 and rng.random() < (0.7 if d else 0.2))
                    r = _result(rng, model, d, m)
                    _record(engine, tid, r)
                    results[tid] = ({"agent": agent, "model": model, "problem": f"p{p}", "noise": noise}, r)
    # An attempt lost with its worker, then the trial recorded by a second attempt.
    tid = _trial(engine, "sw", i, "p1", "react", "openai/a", 9, False)
    lost = ledger.claim(engine, tid, "w2", "sim:sim", lease_s=0.01)
    assert lost is not None
    ledger.set_phase(engine, lost, "agent_session", partial=AttemptResult(tokens_in=500, tokens_out=50, cost_usd=0.5))
    time.sleep(0.05)
    assert ledger.reap(engine) == [tid]
    r = _result(rng, "openai/a", True, True)
    _record(engine, tid, r)
    results[tid] = ({"agent": "react", "model": "openai/a", "problem": "p1", "noise": False}, r)
    # An infrastructure failure, given up at once: apart, never in n.
    infra = _trial(engine, "sw", i + 1, "p2", "react", "openai/a", 9, False)
    c = ledger.claim(engine, infra, "w1", "sim:sim")
    ledger.infra_failure(engine, c, "deploy", "cluster down", max_attempts=1)
    return engine, results


def test_conditional_mitigation_and_tokens_match_the_rows(recorded):
    engine, results = recorded
    cond = {(r["agent"], r["model"]): r for r in queries.conditional_mitigation(engine, "sw")}
    for (agent, model), row in cond.items():
        mine = [r for meta, r in results.values() if (meta["agent"], meta["model"]) == (agent, model)]
        d = [r for r in mine if r.diagnosis_passed]
        not_d = [r for r in mine if not r.diagnosis_passed]
        assert row["n"] == len(mine) and row["diagnosed"] == len(d)
        assert row["p_m_given_d"] == pytest.approx(sum(r.mitigation_passed for r in d) / len(d))
        assert row["p_m_given_not_d"] == pytest.approx(sum(r.mitigation_passed for r in not_d) / len(not_d))
        assert row["p_m_given_d_lo"] <= row["p_m_given_d"] <= row["p_m_given_d_hi"]

    usage = {u["model"]: u for u in queries.token_usage(engine, "sw")}
    assert set(usage) == {"openai/a", "openai/b"}  # agents without a model have no model tokens
    for model, u in usage.items():
        mine = [r for meta, r in results.values() if meta["model"] == model]
        lost_tokens = 500 if model == "openai/a" else 0  # the lost attempt spent tokens too
        assert u["prompt_tokens"] == sum(r.tokens_in for r in mine) + lost_tokens
        assert u["cached_tokens"] == sum(r.tokens_cached for r in mine)
        assert u["cache_hit_share"] == pytest.approx(u["cached_tokens"] / u["prompt_tokens"])

    tools = queries.tool_tokens(engine, "sw")
    expected: dict[str, int] = {}
    for _, r in results.values():
        for name, v in r.tool_tokens.items():
            expected[name] = expected.get(name, 0) + v["tokens"]
    assert {t["tool"]: t["tokens"] for t in tools["per_tool"]} == expected
    assert [t["tokens"] for t in tools["per_tool"]] == sorted(expected.values(), reverse=True)
    assert tools["attempts_not_recorded"] == 2  # the lost attempt and the infra-failed one recorded no tools
    summarised = [r for meta, r in results.values() if meta["model"] == "openai/b"]
    mode = tools["per_mode"]["summarised"]
    assert mode["tool_calls"] == sum(r.tool_calls for r in summarised)
    assert mode["e2e_rate"] == pytest.approx(sum(r.e2e_passed for r in summarised) / len(summarised))

    infra = queries.infrastructure(engine, "sw")
    assert infra["trial_states"] == {TrialState.FINISHED: 49, TrialState.INFRA_FAILED: 1}
    assert infra["attempt_states"][AttemptState.LOST] == 1
    assert infra["infra_errors_by_phase"] == {"deploy": 1}
    spend = queries.spend(engine, "sw")
    assert spend[("react", "openai/a")]["agent_cost_usd"] == pytest.approx(
        0.5 + sum(r.cost_usd for meta, r in results.values() if meta["model"] == "openai/a"))


def test_report_page_states_its_sources_and_orders_the_heatmap(recorded, tmp_path):
    engine, _ = recorded
    index = build_report(engine, "sw", tmp_path / "rep", drill_down=True)
    page = index.read_text()
    for needed in ("judge", "offline", "pass rule", "not recorded", "code version", "generated", "sweep spec",
                   "Token analytics", "P(M|not D)", "lost", "infra_failed"):
        assert needed in page, needed
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) >= 12
    assert all(len(i) > 1000 for i in images)
    # every trial links to its drill-down page, which exists
    links = re.findall(r'href="(trials/[^"]+\.html)"', page)
    assert len(links) == 50 and all((index.parent / link).is_file() for link in links)
    # the note under the heatmap, and hardest first: p3 (never solved) before p0 (always)
    rows = queries.rates(engine, "sw", "problem,agent,model")
    assert {r["problem_id"] for r in rows} == {"p0", "p1", "p2", "p3"}
    from results.report.build import _heatmap

    assert "4 problems" in _heatmap(engine, "sw")


def test_pareto_front_keeps_the_undominated_points():
    points = [(1.0, 0.5), (2.0, 0.4), (0.5, 0.2), (3.0, 0.9), (3.5, 0.9)]
    assert pareto_front(points) == [2, 0, 3]


def test_mcnemar_exact_known_values():
    assert cmp.mcnemar_exact(1, 6) == pytest.approx(2 * (1 + 7) / 128)
    assert cmp.mcnemar_exact(0, 0) == 1.0
    assert cmp.mcnemar_exact(5, 5) == 1.0
    assert cmp.mcnemar_exact(0, 10) == pytest.approx(2 / 1024)
    assert cmp.mcnemar_exact(100, 1500) < 1e-100  # big counts: exact integers, no overflow


def test_paired_comparison_on_shared_trials(db_url, tmp_path):
    engine = engine_for(db_url)
    rng = random.Random(3)
    _sweep(engine, "A")
    _sweep(engine, "B")
    i = 0
    truth = []
    for p in range(10):
        for seed in range(3):
            a_pass, b_pass = rng.random() < 0.4, rng.random() < 0.7
            for sweep, passed in (("A", a_pass), ("B", b_pass)):
                tid = _trial(engine, sweep, i, f"p{p}", "react", "m", seed, False)
                i += 1
                _record(engine, tid, AttemptResult(diagnosis_passed=passed, mitigation_passed=True, end_reason="submitted"))
            truth.append((a_pass, b_pass))
    # Trials only one sweep has are not pairs.
    _record(engine, _trial(engine, "B", i, "extra", "react", "m", 0, False),
            AttemptResult(diagnosis_passed=True, mitigation_passed=True))
    rows = cmp.compare(engine, "A", "B", "agent,model", seed=5)
    diag = next(r for r in rows if r["metric"] == "diagnosis")
    a_only = sum(1 for a, b in truth if a and not b)
    b_only = sum(1 for a, b in truth if b and not a)
    assert diag["pairs"] == 30 and (diag["a_only"], diag["b_only"]) == (a_only, b_only)
    assert diag["rate_a"] == pytest.approx(sum(a for a, _ in truth) / 30)
    assert diag["diff"] == pytest.approx((b_only - a_only) / 30)
    assert diag["diff_lo"] < diag["diff"] < diag["diff_hi"]
    assert diag["mcnemar_p"] == pytest.approx(cmp.mcnemar_exact(a_only, b_only))
    assert cmp.compare(engine, "A", "B", "agent,model", seed=5) == rows  # seeded: the same interval again
    # pass@3 / pass^3 of each side over the three paired seeds of every problem, by hand: a problem
    # passes at 3 when any seed passed, and "hat" when all did.
    per_problem = [truth[3 * p:3 * p + 3] for p in range(10)]
    assert diag["k"] == 3
    for side, i in (("a", 0), ("b", 1)):
        assert diag[f"pass_at_k_{side}"] == pytest.approx(sum(any(t[i] for t in ts) for ts in per_problem) / 10)
        assert diag[f"pass_hat_k_{side}"] == pytest.approx(sum(all(t[i] for t in ts) for ts in per_problem) / 10)
    # Counted in SQL, the same rows as pairing the trials in Python (the bootstrap's clusters in one order).
    a_rows, b_rows = cmp._outcomes(engine, "A", ("agent", "model")), cmp._outcomes(engine, "B", ("agent", "model"))
    pairs = [(a_rows[k], b_rows[k]) for k in sorted(set(a_rows) & set(b_rows), key=str)]
    assert cmp._paired_stats({("react", "m"): pairs}, ("agent", "model"), 5) == rows
    mit = next(r for r in rows if r["metric"] == "mitigation")
    assert (mit["diff"], mit["diff_lo"], mit["diff_hi"], mit["mcnemar_p"]) == (0.0, 0.0, 0.0, 1.0)
    frame = pd.read_csv(cmp.write_csv(rows, "agent,model", tmp_path / "cmp.csv"))
    assert list(frame.columns) == cmp.header("agent,model") and len(frame) == 3
    # The report includes it.
    page = build_report(engine, "B", tmp_path / "rep", compare_with="A", drill_down=False).read_text()
    assert "Paired comparison with A" in page and "McNemar" in page


def test_bootstrap_interval_covers_like_the_index_bootstrap():
    # With one pair per problem, resampling problems is the textbook bootstrap over pair indexes.
    import numpy as np

    from results.stats import cluster_bootstrap

    a_only, b_only, n = 7, 19, 60
    diffs = np.array([1] * b_only + [-1] * a_only + [0] * (n - a_only - b_only))
    lo, hi = cluster_bootstrap([(float(d), 1) for d in diffs], seed=1, samples=cmp.BOOTSTRAP_SAMPLES)
    rng = np.random.default_rng(2)
    boots = diffs[rng.integers(0, n, size=(20_000, n))].mean(axis=1)
    ref_lo, ref_hi = np.percentile(boots, [2.5, 97.5])
    assert lo == pytest.approx(ref_lo, abs=0.02) and hi == pytest.approx(ref_hi, abs=0.02)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_is_read_by_pandas_as_it_is(recorded, tmp_path, fmt):
    engine, results = recorded
    trials_path, attempts_path = ex.export(engine, "sw", fmt, tmp_path)
    read = pd.read_csv if fmt == "csv" else pd.read_parquet
    trials, attempts = read(trials_path), read(attempts_path)
    assert len(trials) == 50 and len(attempts) == 51
    assert set(trials["state"]) == {"finished", "infra_failed"}
    finished = trials[trials["state"] == "finished"].set_index("id")
    for tid, (_, r) in results.items():
        assert int(finished.loc[tid, "tokens_in"]) == r.tokens_in
        assert bool(finished.loc[tid, "diagnosis_passed"]) == r.diagnosis_passed
    recorded_attempts = attempts[attempts["state"] == "recorded"]
    assert json.loads(recorded_attempts.iloc[0]["tool_tokens_json"])
    if fmt == "parquet":
        assert str(trials["seed"].dtype) == "int64" and str(trials["cost_usd"].dtype) == "float64"


def test_parquet_without_pyarrow_is_one_clear_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match=r"pip install 'sre-farm\[parquet\]'"):
        ex.check_format("parquet")
    with pytest.raises(ValueError, match="--format must be one of csv, parquet"):
        ex.check_format("xlsx")


def test_trial_page_escapes_what_the_agent_wrote(db_url, tmp_path):
    from results.artifact_store import LocalArtifactStore

    engine = engine_for(db_url)
    store = LocalArtifactStore(tmp_path / "artifacts")
    _sweep(engine, "x")
    tid = _trial(engine, "x", 0, "p", "react", "m", 0, False)
    uri = store.base_uri("x/attempt-1")
    evil = '<script>alert("pwned")</script><img src=x onerror=alert(1)>'
    store.put_json("x/attempt-1/tool_calls.json", [{"index": 0, "name": "kubectl", "args": {"command": evil},
                                                    "output": evil, "tokens": 9}])
    store.put_json("x/attempt-1/diagnosis.json", {"text": evil})
    store.put_json("x/attempt-1/verdicts.json", {"diagnosis": {"passed": False, "judge": "offline", "offline": True,
                                                               "answers": [
        {"id": "L1", "dimension": "localization", "question": "q", "answer": False, "evidence": evil}]},
        "mitigation": None})
    store.put_json("x/attempt-1/trajectory.atif.json", {"schema_version": "ATIF-v1.4", "session_id": "s", "steps": [
        {"step_id": 1, "source": "agent", "message": evil, "tool_calls": [
            {"tool_call_id": "c", "function_name": "kubectl", "arguments": {"command": evil}}],
         "observation": {"results": [{"source_call_id": "c", "content": evil}]}}]})
    _record(engine, tid, AttemptResult(diagnosis_passed=False, mitigation_passed=False, artifacts_uri=uri))
    build_report(engine, "x", tmp_path / "rep")
    page = (tmp_path / "rep" / "trials" / f"{tid}.html").read_text()
    assert "<script>" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;" in page
    assert "tool_calls</a>" in page  # the raw JSON of a local folder is linked where it is


def test_artifacts_of_the_first_record_shapes_read_and_a_foreign_one_is_named(db_url, tmp_path):
    """Artifacts written before records carried a version (verdicts without threshold, pass rule
    or quotes, as the first judge wrote them) read as typed records; a document that is not the
    record its name says is reported as unreadable on the page, not dropped."""
    from results.artifact_store import LocalArtifactStore

    engine = engine_for(db_url)
    store = LocalArtifactStore(tmp_path / "artifacts")
    _sweep(engine, "old")
    first = _trial(engine, "old", 0, "p", "react", "m", 0, False)
    store.put_json("old/a/attempt-1/diagnosis.json", {"text": "geo cannot reach mongodb-geo",
                                                      "submitted_at": 12.5, "mitigation_submitted_at": None})
    store.put_json("old/a/attempt-1/verdicts.json", {
        "diagnosis": {"judge": "offline", "offline": True, "composite": 0.8, "passed": True, "submitted": True,
                      "scores": {"localization": 1.0}, "tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0,
                      "answers": [{"id": "L1", "dimension": "localization", "question": "right service?",
                                   "answer": True, "evidence": "mongodb-geo"}]},
        "mitigation": {"passed": False, "success_rate": 0.4, "checks": {"geo ready": False}, "detail": "still down"}})
    store.put_json("old/a/attempt-1/tool_calls.json", [{"index": 0, "name": "kubectl", "args": {"command": "get pods"},
                                                        "output": "NAME READY", "tokens": 3}])
    _record(engine, first, AttemptResult(diagnosis_passed=True, mitigation_passed=False,
                                         artifacts_uri=store.base_uri("old/a/attempt-1")))
    foreign = _trial(engine, "old", 1, "p", "react", "m", 1, False)
    store.put_json("old/b/attempt-1/verdicts.json", {"diagnosis": {"passed": "perhaps"}, "version": 7})
    _record(engine, foreign, AttemptResult(diagnosis_passed=False, mitigation_passed=False,
                                           artifacts_uri=store.base_uri("old/b/attempt-1")))
    build_report(engine, "old", tmp_path / "rep")
    page = (tmp_path / "rep" / "trials" / f"{first}.html").read_text()
    assert "geo cannot reach mongodb-geo" in page and "right service?" in page and "still down" in page
    assert "pass rule not recorded" in page  # the first verdicts named no rule
    assert "get pods" in page and "NAME READY" in page
    page = (tmp_path / "rep" / "trials" / f"{foreign}.html").read_text()
    assert "The verdicts recorded cannot be read: not a Verdicts" in page


def test_s3_artifacts_are_read_into_the_report_folder(db_url, tmp_path, s3_env, monkeypatch):
    from results.artifact_store import S3ArtifactStore
    from results.report import trials as report_trials

    # The report copies raw JSON from S3 only up to its budget (a 2,000-trial report would otherwise
    # hold every ~0.5 MB cluster snapshot): here the small documents fit, the snapshot does not.
    monkeypatch.setattr(report_trials, "RAW_COPY_BUDGET", 4096)

    engine = engine_for(db_url)
    store = S3ArtifactStore("report-test", "runs")
    store.ensure_bucket()
    _sweep(engine, "s")
    tid = _trial(engine, "s", 0, "p", "react", "m", 0, False)
    store.put_json("s/t/attempt-1/diagnosis.json", {"text": "the geo deployment pulls a tag that does not exist"})
    store.put_json("s/t/attempt-1/verdicts.json", {"diagnosis": {"passed": True, "judge": "offline", "offline": True,
                                                                  "pass_rule": "composite>=0.7 and L1", "answers": [
        {"id": "C2", "dimension": "characterization", "question": "mutated detail?", "answer": True,
         "evidence": "tag v2.0.1-rc"}]}})
    store.put_json("s/t/attempt-1/cluster_snapshot.json", {"pods": ["geo-7c9d8b6f4-x" * 40] * 20})
    _record(engine, tid, AttemptResult(diagnosis_passed=True, mitigation_passed=False,
                                       artifacts_uri=store.base_uri("s/t/attempt-1")))
    index = build_report(engine, "s", tmp_path / "rep").read_text()
    # A pass rule the verdicts record is named in the header (read defensively: older ones have none).
    assert "composite&gt;=0.7 and L1: 1" in index and "not recorded</span> (the rows" not in index
    page = (tmp_path / "rep" / "trials" / f"{tid}.html").read_text()
    assert "pulls a tag that does not exist" in page and "tag v2.0.1-rc" in page
    copied = tmp_path / "rep" / "trials" / tid / "attempt-1" / "verdicts.json"
    assert json.loads(copied.read_text())["diagnosis"]["passed"] is True
    assert f'href="{tid}/attempt-1/verdicts.json"' in page
    assert not Path(tmp_path / "rep" / "trials" / tid / "attempt-1" / "tool_calls.json").exists()
    assert not (tmp_path / "rep" / "trials" / tid / "attempt-1" / "cluster_snapshot.json").exists()
    assert "cluster_snapshot (" in page and f"{store.base_uri('s/t/attempt-1')}/cluster_snapshot.json" in page


def test_noise_effect_pairs_quiet_and_noisy_trials_of_one_sweep(recorded, tmp_path):
    engine, results = recorded
    rows = cmp.noise_effect(engine, "sw")
    assert {(r["agent"], r["model"]) for r in rows} == {("baseline", "-"), ("react", "openai/a"), ("react", "openai/b")}
    # Recompute one group's counts by hand: pair each quiet trial with its noisy twin.
    quiet, noisy = {}, {}
    with Session(engine) as s:
        for t in s.query(Trial).filter(Trial.sweep_id == "sw", Trial.agent == "react", Trial.model == "openai/a",
                                       Trial.state == TrialState.FINISHED):
            (noisy if t.noise else quiet)[(t.problem_id, t.seed)] = t.diagnosis_passed
    shared = set(quiet) & set(noisy)
    row = next(r for r in rows if (r["agent"], r["model"], r["metric"]) == ("react", "openai/a", "diagnosis"))
    assert row["pairs"] == len(shared) == 8  # the extra seed-9 trial ran without noise only: no pair
    assert row["a_only"] == sum(1 for k in shared if quiet[k] and not noisy[k])
    assert row["b_only"] == sum(1 for k in shared if noisy[k] and not quiet[k])
    page = build_report(engine, "sw", tmp_path / "rep", drill_down=False).read_text()
    assert "A without noise, B with" in page


def test_a_diagnosis_only_problem_leaves_its_heatmap_cell_blank(db_url, tmp_path):
    """A diagnosis-only problem's mitigation is not scored (NULL), so its E2E is None: the report
    still renders, and that problem takes no rank from a rate it does not have."""
    engine = engine_for(db_url)
    rng = random.Random(3)
    _sweep(engine, "dx")
    for i, (problem, m) in enumerate((("p-scored", True), ("p-scored", False), ("p-dx-only", None))):
        tid = _trial(engine, "dx", i, problem, "baseline", "-", i, False)
        r = _result(rng, "-", True, bool(m))
        r.mitigation_passed = m
        _record(engine, tid, r)
    rows = {r["problem_id"]: r for r in queries.rates(engine, "dx", "problem,agent,model")}
    assert rows["p-dx-only"]["e2e_rate"] is None and rows["p-scored"]["e2e_rate"] == 0.5
    from results.report.build import _heatmap

    assert "2 problems" in _heatmap(engine, "dx")
    assert build_report(engine, "dx", tmp_path / "rep", drill_down=False).is_file()


def test_the_report_prints_sregym_ids_beside_problems_and_false_alarms_per_agent(db_url, tmp_path):
    """The per-problem table names each problem's SREGym ids (as the caller reads them from the
    catalog); the agent × model table gains the false-alarm rate of the no-fault controls."""
    engine = engine_for(db_url)
    rng = random.Random(5)
    _sweep(engine, "sg")
    runs = [("hr-geo-sidecar-port-conflict", "single", True), ("nf-hotel-reservation", "none", False),
            ("nf-hotel-reservation", "none", True), ("nf-social-network", "none", False)]
    for i, (problem, comp, d) in enumerate(runs):
        _record(engine, _trial(engine, "sg", i, problem, "react", "openai/a", i, False, composition=comp),
                _result(rng, "openai/a", d, True))
    page = build_report(engine, "sg", tmp_path / "rep", drill_down=False,
                        sregym_ids={"hr-geo-sidecar-port-conflict": ["sidecar_port_conflict_hotel_reservation"]}
                        ).read_text()
    per_problem = page.split(">Per problem</h2>", 1)[1]
    assert re.search(r"<td>hr-geo-sidecar-port-conflict</td><td>sidecar_port_conflict_hotel_reservation</td>",
                     per_problem)
    assert re.search(r"<td>nf-hotel-reservation</td><td>–</td>", per_problem)
    rates = page.split(">Rates by agent × model</h2>", 1)[1].split("<h2", 1)[0]
    assert "false alarms" in rates
    # 2 of the 3 controls were diagnosed wrongly (blamed something): 66.7%
    assert re.search(r'<td class="num">3</td><td class="num">66.7%</td>', rates)


def test_report_views_per_agent_and_model_in_numbers_for_reading(recorded, tmp_path):
    engine, results = recorded
    by_agent = {(u["agent"], u["model"]): u for u in queries.token_usage(engine, "sw", per_agent=True)}
    assert set(by_agent) == {("react", "openai/a"), ("react", "openai/b")}
    assert by_agent[("react", "openai/b")]["prompt_tokens"] == sum(
        r.tokens_in for meta, r in results.values() if meta["model"] == "openai/b")
    tools = {(t["agent"], t["model"]): t for t in queries.tool_tokens(engine, "sw")["per_agent_model"]}
    for (agent, model), t in tools.items():
        mine = [r for meta, r in results.values() if (meta["agent"], meta["model"]) == (agent, model)]
        assert t["tool_calls"] == sum(r.tool_calls for r in mine)
        assert t["tokens"] == sum(r.tool_output_tokens for r in mine)

    page = build_report(engine, "sw", tmp_path / "rep", drill_down=False).read_text()
    text = re.sub(r'<img [^>]+>', "", page)
    for section in ("By layer per agent × model", "Noise per agent × model", "Tool output tokens per agent × model"):
        assert section in text, section
    # one row per agent × model × layer that ran: react / openai/a ran both layers
    assert re.search(r"<td>react</td><td>openai/a</td><td>os</td>", text)
    assert re.search(r"<td>react</td><td>openai/a</td><td>application</td>", text)
    # no float noise anywhere (dollars to 4 significant digits: $0.03870), costs in dollars, rates in percent
    assert not re.search(r"\d\.\d{6,}", text), re.search(r".{40}\d\.\d{6,}.{20}", text)
    assert re.search(r"\$\d+\.\d{2,4}<", text) and re.search(r">\d{1,3}\.\d%<", text)
    # the judge stated as recorded: its threshold, never "threshold not recorded"
    assert "composite threshold 0.7" in text and "threshold not recorded" not in text


def _long_session(store, prefix: str, steps: int = 80) -> str:
    calls, traj = [], []
    for i in range(steps):
        output = f"line {i} of a long kubectl listing\n" * 60
        traj.append({"step_id": i, "source": "agent", "message": f"step {i}", "tool_calls": [
            {"tool_call_id": f"c{i}", "function_name": "kubectl", "arguments": {"command": f"get pods #{i}"}}],
            "observation": {"results": [{"source_call_id": f"c{i}", "content": output}]}})
        calls.append({"index": i, "name": "kubectl", "args": {"command": f"get pods #{i}"}, "output": output,
                      "tokens": 300})
    store.put_json(f"{prefix}/trajectory.atif.json", {"schema_version": "ATIF-v1.4", "session_id": "s", "steps": traj})
    store.put_json(f"{prefix}/tool_calls.json", calls)
    store.put_json(f"{prefix}/diagnosis.json", {"text": "geo cannot authenticate to mongodb-geo"})
    store.put_json(f"{prefix}/verdicts.json", {"diagnosis": {
        "passed": True, "judge": "offline", "offline": True, "composite": 0.9, "threshold": None,
        "pass_rule": "rule-v2", "pass_rule_text": "every localization answer is yes", "answers": [
            {"id": "L1", "dimension": "localization", "question": "right service?", "answer": True,
             "quote": "geo", "evidence": "names geo"}]}})
    return store.base_uri(prefix)


def test_trial_pages_are_bounded_and_show_the_ground_truth_beside_the_diagnosis(db_url, tmp_path):
    from results.artifact_store import LocalArtifactStore

    engine = engine_for(db_url)
    store = LocalArtifactStore(tmp_path / "artifacts")
    _sweep(engine, "long")
    tids = [_trial(engine, "long", i, "geo-auth", "react", "m", i, False) for i in range(2)]
    for i, tid in enumerate(tids):
        uri = _long_session(store, f"long/{i}/attempt-1")
        _record(engine, tid, AttemptResult(diagnosis_passed=True, mitigation_passed=False, diagnosis_threshold=None,
                                           diagnosis_pass_rule="rule-v2", judge="offline", judge_offline=True,
                                           cost_usd=0.11483750000000001, artifacts_uri=uri))
    truth = {"component": "geo", "fault_type": "auth_failure", "mechanism": "the password was rotated"}
    index = build_report(engine, "long", tmp_path / "rep", ground_truths={"geo-auth": truth}).read_text()
    # The header states the rule the rows record, in words, and that it sets no composite floor.
    assert "rule-v2: 2 — every localization answer is yes" in index
    assert "no composite threshold (the pass rule decides)" in index
    header = re.search(r"<table class='meta'>.*?</table>", index, re.S)[0]
    assert "not recorded" not in header
    assert "$0.1148" in index and "0.11483750000000001" not in index
    trials = tmp_path / "rep" / "trials"
    assert (trials / "style.css").is_file()
    for tid in tids:
        page = (trials / f"{tid}.html").read_text()
        raw = sum(len((tmp_path / "artifacts" / f"long/{tids.index(tid)}/attempt-1" / f).read_text())
                  for f in ("trajectory.atif.json", "tool_calls.json"))
        assert raw > 300_000 and len(page) < 25_000  # 80 outputs of 2 KB, twice over, in a page of < 25 KB
        assert "<style>" not in page and "href='style.css'" in page
        assert "more step(s) not shown here" in page and "more call(s) not shown here" in page
        assert 'trajectory.atif</a>' in page  # where the rest is
        assert "$0.1148" in page
        beside = re.search(r'<div class="beside"><div><h3>Diagnosis submitted</h3>(.*?)</div><div><h3>Ground truth'
                           r'</h3>(.*?)</div></div>', page)
        assert beside and "geo cannot authenticate" in beside[1] and "the password was rotated" in beside[2]
