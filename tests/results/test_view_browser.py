"""`farm view` in a real browser: Debian's Chromium driven by Playwright (launched from
/usr/bin/chromium, never a downloaded build). A person's path: the sweep list, a sweep followed
live while its last trials are recorded, a leaderboard number to its trials, a trial and back, a
heatmap cell, a filter, a search, a search in a transcript; no console error on any page;
screenshots kept under test-artifacts/view/ (or $FARM_TEST_ARTIFACTS)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from farm.testing.view_rows import ROOT, farm_view, record_one, record_sweep
from results.artifact_store import LocalArtifactStore
from results.db import engine_for

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]


@pytest.fixture()
def shots() -> Path:
    folder = Path(os.environ.get("FARM_TEST_ARTIFACTS") or ROOT / "test-artifacts") / "view"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed (scripts/setup.sh --dev installs it)")
def test_a_person_follows_a_live_sweep_and_drills_down(sqlite_url, tmp_path, shots):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is a dev dependency")
    expect = sync_api.expect
    engine = engine_for(sqlite_url)
    store = LocalArtifactStore(tmp_path / "artifacts")
    alpha = record_sweep(engine, store, "alpha", leave_pending=4)
    record_sweep(engine, store, "beta", seed=9)
    problems: list[str] = []
    with farm_view(sqlite_url) as url, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        # a navigation cancels what the page was still loading (the icon, a live poll): not a failure
        page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url} {r.failure}")
                if "ERR_ABORTED" not in str(r.failure) else None)
        page.on("response", lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)

        page.goto(url)
        page.screenshot(path=shots / "sweeps.png", full_page=True)
        page.click("#sweeps >> text=alpha")
        page.wait_for_url(re.compile(r"/sweeps/alpha$"))
        progress = page.locator("#progress")
        assert "32 / 36" in progress.inner_text()
        # the sweep runs on: its last trials are recorded while the page is open
        for tid in alpha.pending:
            record_one(engine, store, "alpha", tid, True, True, 0.25, "The geo deployment runs a wrong image tag.")
        # (expect polls from outside the page: the view's CSP forbids evaluating strings in it)
        expect(progress).to_contain_text("36 / 36", timeout=30_000)
        assert "(finished)" in progress.inner_text()
        refreshed = int(progress.get_attribute("data-refreshed") or 0)
        page.wait_for_timeout(5000)  # settled: the page stops polling
        assert int(progress.get_attribute("data-refreshed") or 0) == refreshed
        page.screenshot(path=shots / "sweep.png", full_page=True)

        # a leaderboard number to the trials behind it
        react = page.locator("#leaderboard tr", has_text="react")
        n = int(react.locator("td").nth(2).inner_text())
        react.locator("td").nth(2).locator("a").click()
        page.wait_for_url(re.compile(r"/sweeps/alpha/trials\?"))
        assert page.locator("#count b").inner_text() == str(n)
        assert page.locator("#trials tr").count() == n + 1
        page.screenshot(path=shots / "trials.png", full_page=True)

        # a trial, its transcript searched, next, and back to the list
        page.locator("#trials tr").nth(1).locator("a").first.click()
        page.wait_for_url(re.compile(r"/trials/"))
        key = page.locator("#trial-key").inner_text()
        assert "|react|" in key
        page.fill("#find", "get_alerts")
        page.click("#find-form button")
        page.wait_for_selector(".matches")
        assert "1 of 4 steps contain" in page.locator(".matches").first.inner_text()
        page.screenshot(path=shots / "trial.png", full_page=True)
        page.click("#next")
        expect(page.locator("#trial-key")).not_to_have_text(key)
        assert "|react|" in page.locator("#trial-key").inner_text()
        page.go_back()
        page.go_back()
        page.go_back()
        page.wait_for_url(re.compile(r"/sweeps/alpha/trials\?"))
        assert page.locator("#count b").inner_text() == str(n)

        # filter and search on the list
        page.goto(url + "sweeps/alpha/trials")
        page.select_option("#trial-filters select[name=agent]", "baseline")
        page.select_option("#trial-filters select[name=diagnosis]", "pass")
        page.click("#trial-filters button")
        page.wait_for_url(re.compile(r"agent=baseline"))
        expected = sum(1 for t in alpha.trials.values() if t["agent"] == "baseline" and t["d"]) + sum(
            1 for tid in alpha.pending if "|baseline|" in _key(engine, tid))
        assert page.locator("#count b").inner_text() == str(expected)
        page.fill("#search", "scaled-to-zero")
        page.click("#trial-filters button")
        page.wait_for_url(re.compile(r"q=scaled-to-zero"))
        rows = page.locator("#trials tr")
        assert rows.count() > 1
        assert all("scaled-to-zero|baseline" in rows.nth(i).locator("td").first.inner_text() for i in range(1, rows.count()))

        # a heatmap cell to its trials
        page.goto(url + "sweeps/alpha")
        cell = page.locator("#heatmap td.cell a").first
        cell_n = int(re.search(r"n=(\d+)", cell.inner_text()).group(1))
        cell.click()
        page.wait_for_url(re.compile(r"problem="))
        assert page.locator("#count b").inner_text() == str(cell_n)

        # errors and a comparison
        page.goto(url + "sweeps/alpha/errors")
        assert "cluster sim-3 down" in page.locator("#failed-attempts").inner_text()
        page.screenshot(path=shots / "errors.png", full_page=True)
        page.goto(url + "compare")
        page.select_option("#compare-form select[name=a]", "alpha")
        page.select_option("#compare-form select[name=b]", "beta")
        page.click("#compare-form button")
        page.wait_for_selector("#comparison")
        page.screenshot(path=shots / "compare.png", full_page=True)
        browser.close()
    assert problems == []


def _key(engine, tid: str) -> str:
    from sqlalchemy import text

    with engine.connect() as c:
        return c.execute(text("SELECT key FROM trial WHERE id = :t"), {"t": tid}).scalar_one()
