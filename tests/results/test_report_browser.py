"""The report as a person looks at it: a small sweep run for real (`farm run`: the baseline agent
and the react agent on the scripted OpenAI-compatible server, emulated clusters, with and without
noise), watched with `farm sweep status --watch` while it runs, reported with `farm report`, and
the page opened in headless Chromium: no console error, every figure loaded and non-empty, a
full-page screenshot; a trial's drill-down page too."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from farm.llm.scripted import ScriptedLLM
from tests.results.browser import Browser, chromium

ROOT = Path(__file__).resolve().parents[2]
SWEEP = "report-e2e"
PRICE = {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}
PLAN = [
    {"content": "Checking the pods.", "tool_calls": [{"name": "kubectl", "arguments": {"command": "get pods"}}]},
    {"tool_calls": [{"name": "kubectl", "arguments": {"command": "get deployments -o wide"}},
                    {"name": "get_alerts", "arguments": {}}]},
    {"tool_calls": [{"name": "submit_diagnosis", "arguments": {"text": (
        "The geo deployment runs an image tag that does not exist, so its pods cannot pull the image "
        "(ImagePullBackOff) and requests that need geo fail.")}}]},
    {"tool_calls": [{"name": "submit_mitigation", "arguments": {}}]},
    {"content": "Done."},
]

pytestmark = [pytest.mark.slow, pytest.mark.kubectl]


def respond(request: dict) -> dict:
    done = sum(1 for m in request.get("messages", []) if m.get("role") == "assistant")
    return PLAN[min(done, len(PLAN) - 1)]


def farm(*args: str, env: dict[str, str] | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "farm.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """The sweep run and watched; yields its folder and the watcher's output."""
    tmp = tmp_path_factory.mktemp("report-e2e")
    out = tmp / "out"
    db = f"sqlite:///{out / 'farm.sqlite'}"
    with ScriptedLLM(respond) as llm:
        spec = {"name": SWEEP, "problems": {"ids": ["hr-geo-image-tag-wrong", "hr-geo-scaled-to-zero"]},
                "agents": ["baseline", {"name": "react", "options": {"api_base": llm.url, "price": PRICE}}],
                "models": ["openai/scripted-model"], "seeds": 1, "noise": [False, True],
                "limits": {"max_steps": 40, "wall_time_s": 300}, "cost_cap_usd": 5}
        (tmp / "spec.yaml").write_text(yaml.safe_dump(spec))
        run = subprocess.Popen([sys.executable, "-m", "farm.cli", "run", str(tmp / "spec.yaml"), "--workers", "2",
                                "--out", str(out)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.time() + 120
            while not _sweep_exists(out / "farm.sqlite"):
                assert run.poll() is None, run.communicate()
                assert time.time() < deadline, "the sweep never appeared in the database"
                time.sleep(0.2)
            watch = farm("sweep", "status", SWEEP, "--watch", "--interval", "0.5", env={"FARM_DATABASE_URL": db})
            stdout, stderr = run.communicate(timeout=900)
        finally:
            if run.poll() is None:
                run.kill()
        assert run.returncode == 0, stdout[-3000:] + stderr[-3000:]
        assert llm.requests, "the react agent never called the scripted model"
    yield {"tmp": tmp, "out": out, "db": db, "watch": watch}


def _sweep_exists(path: Path) -> bool:
    import sqlite3

    if not path.is_file():
        return False
    try:
        with sqlite3.connect(path, timeout=5) as conn:
            return conn.execute("SELECT count(*) FROM sweep WHERE id = ?", (SWEEP,)).fetchone()[0] == 1
    except sqlite3.Error:
        return False


def test_watch_refreshes_until_the_sweep_is_finished(sweep):
    watch = sweep["watch"]
    assert watch.returncode == 0, watch.stderr[-2000:]
    blocks = re.findall(r"sweep report-e2e: (\d+)/(\d+) done", watch.stdout)
    assert len(blocks) >= 2, watch.stdout[-2000:]  # it refreshed while trials ran
    assert blocks[-1] == ("8", "8")
    assert int(blocks[0][0]) < 8 or len(blocks) == 1
    last = watch.stdout.strip().splitlines()[-1]
    assert "of a $5.0000 cap" in last and last.endswith("finished")
    assert "so far over 8 finished" in watch.stdout


def test_the_report_loads_in_chromium_with_every_figure(sweep):
    if not chromium():
        pytest.skip("chromium is not installed (scripts/setup.sh --dev installs it)")
    rep = sweep["tmp"] / "report"
    made = farm("report", "--sweep", SWEEP, "--out", str(rep), "--db", sweep["db"])
    assert made.returncode == 0, made.stderr[-3000:]
    page = (rep / "index.html").read_text()
    with Browser() as browser:
        browser.load((rep / "index.html").as_uri())
        assert browser.errors() == []
        images = browser.evaluate(
            "[...document.images].map(i => ({alt: i.alt, ok: i.complete, w: i.naturalWidth, h: i.naturalHeight}))")
        shot = browser.screenshot(sweep["tmp"] / "report.png")
        assert len(images) == page.count("<img") and len(images) >= 12, images
        assert all(i["ok"] and i["w"] > 100 and i["h"] > 100 for i in images), images
        # The figures that need model tokens and per-tool counts are drawn, not "not recorded".
        alts = {i["alt"] for i in images}
        assert {"prompt / cached / completion tokens per agent × model", "tool output tokens per tool",
                "problem × agent/model E2E", "Pareto: cost and tokens vs E2E"} <= alts
        assert shot.stat().st_size > 50_000
        text = browser.evaluate("document.body.innerText")
        assert "offline" in text and "pass rule" in text and "code version" in text
        assert "openai/scripted-model" in text and "kubectl" in text

        # A react trial's drill-down page: the trajectory, the tool calls, the judge's evidence.
        link = next(m for m in re.findall(r'href="(trials/[0-9a-f]+\.html)">([^<]+)</a>', page)
                    if "|react|" in m[1])[0]
        browser.load((rep / link).as_uri())
        assert browser.errors() == []
        trial = browser.evaluate("document.body.innerText")
        for needed in ("Trajectory (ATIF)", "submit_diagnosis", "get pods", "quote from the diagnosis", "judge's evidence",
                       "Cluster snapshot", "deployments", "Ground truth"):
            assert needed in trial, needed
        # The one shared stylesheet is found and applied.
        assert browser.evaluate("getComputedStyle(document.querySelector('pre')).whiteSpace") == "pre-wrap"
    print(f"screenshot: {shot}")


def test_by_is_checked_before_any_trial_runs(sweep, tmp_path):
    out = tmp_path / "never"
    bad = farm("run", str(sweep["tmp"] / "spec.yaml"), "--by", "agent,colour", "--out", str(out))
    assert bad.returncode == 2
    assert "--by must be one of" in bad.stderr and "'colour' is not a grouping column" in bad.stderr
    assert not out.exists()  # nothing written, nothing run
    report = farm("report", "--sweep", SWEEP, "--compare-by", "nope", "--out", str(out), "--db", sweep["db"])
    assert report.returncode == 2 and "--compare-by must be one of" in report.stderr and not out.exists()
    # Any combination of grouping columns groups.
    ok = farm("leaderboard", "--sweep", SWEEP, "--by", "agent,noise", "--csv", str(tmp_path / "lb.csv"),
              "--db", sweep["db"])
    assert ok.returncode == 0, ok.stderr
    import pandas as pd

    frame = pd.read_csv(tmp_path / "lb.csv")
    assert list(frame.columns[:3]) == ["sweep", "agent", "noise"] and int(frame["n"].sum()) == 8 and len(frame) == 4
    assert set(frame["sweep"]) == {SWEEP}
    same = farm("compare", SWEEP, SWEEP, "--by", "agent,noise", "--csv", str(tmp_path / "paired.csv"), "--db", sweep["db"])
    assert same.returncode == 0, same.stderr
    paired = pd.read_csv(tmp_path / "paired.csv")
    assert len(paired) == 4 * 3 and (paired["diff"] == 0).all() and (paired["mcnemar_p"] == 1).all()
    wrong = farm("compare", SWEEP, "no-such-sweep", "--db", sweep["db"])
    assert wrong.returncode == 2 and "no sweep 'no-such-sweep'" in wrong.stderr
    exported = farm("export", "--sweep", SWEEP, "--format", "parquet", "--out", str(tmp_path), "--db", sweep["db"])
    assert exported.returncode == 0, exported.stderr
    attempts = pd.read_parquet(tmp_path / "attempts.parquet")
    react = attempts[attempts["tool_mode"].notna() & (attempts["tokens_in"] > 0)]
    assert len(react) == 4 and all(json.loads(t)["kubectl"]["calls"] >= 2 for t in react["tool_tokens_json"])
