"""`farm view` as a person reaches it: a real server process on a loopback port over rows recorded
through the ledger (SQLite and PostgreSQL) and artifacts in a local folder. Every figure a page
shows is recomputed here from what was recorded, and every link followed leads to the trials it
counts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from farm.testing.view_rows import ODD_COST, ROOT, farm_view, record_one, record_sweep
from results import leaderboard
from results.artifact_store import LocalArtifactStore
from results.db import engine_for
from results.report.compare import compare

pytestmark = pytest.mark.slow


class Tables(HTMLParser):
    """Every <table id=...> of a page: rows of cells, each cell its text and the links in it."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tables: dict[str, list[list[dict]]] = {}
        self._table: str | None = None
        self._cell: dict | None = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and a.get("id"):
            self._table = a["id"]
            self.tables[self._table] = []
        elif self._table and tag == "tr":
            self.tables[self._table].append([])
        elif self._table and tag in ("td", "th"):
            self._cell = {"text": "", "links": []}
            self.tables[self._table][-1].append(self._cell)
        elif self._cell is not None and tag == "a":
            self._cell["links"].append(a.get("href"))

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = None
        elif tag in ("td", "th"):
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell["text"] += data


def rows_of(html: str, table: str) -> list[dict[str, dict]]:
    """A table as dicts keyed by the header's text."""
    t = Tables(html).tables[table]
    head = [c["text"].strip() for c in t[0]]
    return [dict(zip(head, r, strict=False)) for r in t[1:] if len(r) == len(head)]


def count_of(html: str) -> int:
    return int(re.search(r'<p id="count"><b>([\d,]+)</b>', html).group(1).replace(",", ""))


@pytest.fixture()
def served(db_url, tmp_path):
    engine = engine_for(db_url)
    store = LocalArtifactStore(tmp_path / "artifacts")
    alpha = record_sweep(engine, store, "alpha", seed=3, leave_pending=3)
    beta = record_sweep(engine, store, "beta", seed=4)
    with farm_view(db_url) as url:
        yield {"url": url, "engine": engine, "store": store, "alpha": alpha, "beta": beta,
               "http": httpx.Client(base_url=url, timeout=60)}


def test_pages_show_the_recorded_figures_and_link_to_their_trials(served):
    http, alpha = served["http"], served["alpha"]
    home = http.get("/")
    assert home.status_code == 200
    sweeps = {r["sweep"]["text"].strip(): r for r in rows_of(home.text, "sweeps")}
    assert set(sweeps) == {"alpha", "beta"}
    total = 36  # 3 problems x 2 agents x 3 seeds x 2 noise
    assert sweeps["alpha"]["done"]["text"].strip() == f"{total - 3} / {total}"

    page = http.get("/sweeps/alpha")
    assert page.status_code == 200
    assert "none (the pass rule has no composite floor)" in page.text and "not recorded" not in page.text
    board = rows_of(page.text, "leaderboard")
    assert len(board) == 2
    for row in board:
        agent = row["agent"]["text"]
        mine = [t for t in alpha.trials.values() if t["agent"] == agent]
        assert int(row["n"]["text"]) == len(mine)
        passed = sum(t["d"] for t in mine)
        assert f"{100 * passed / len(mine):.1f}%" in row["diagnosis"]["text"]
        assert f"{passed}/{len(mine)}" in row["diagnosis"]["text"].replace(" ", "")
        # n links to exactly the trials it counts, the diagnosed count to the diagnosed ones
        listed = http.get(row["n"]["links"][0])
        assert count_of(listed.text) == len(mine)
        keys = {r["trial (problem|agent|model|seed|noise)"]["text"] for r in rows_of(listed.text, "trials")}
        assert all(f"|{agent}|" in k for k in keys) and len(keys) == len(mine)
        diagnosed = http.get(row["diagnosis"]["links"][1])
        assert count_of(diagnosed.text) == passed
        assert int(row["infra"]["text"]) == len(alpha.infra_failed) * (agent == "baseline")  # the first trial's
        spent = sum(t["cost"] for t in mine)
        assert row["total cost"]["text"].strip() == _usd(spent)

    # the heatmap: each cell's link lists the trials of its problem x agent/model
    heat = Tables(page.text).tables["heatmap"]
    cells = [c for r in heat[1:] for c in r[1:] if c["links"]]
    assert cells
    for cell in cells:
        q = parse_qs(urlsplit(cell["links"][0]).query)
        mine = [t for t in alpha.trials.values() if t["problem"] == q["problem"][0] and t["agent"] == q["agent"][0]]
        assert f"n={len(mine)}" in cell["text"]
        assert count_of(http.get(cell["links"][0]).text) == len(mine)

    # any grouping, filtered: react by problem and noise
    grouped = rows_of(http.get("/sweeps/alpha", params={"by": "problem,noise", "agent": "react"}).text, "leaderboard")
    react = [t for t in alpha.trials.values() if t["agent"] == "react"]
    assert sum(int(r["n"]["text"]) for r in grouped) == len(react)
    expect = {(r["problem_id"], r["noise"]): r["n"] for r in leaderboard.compute(
        served["engine"], "alpha", "problem,noise", where={"agent": "react"})}
    assert {(r["problem"]["text"], r["noise"]["text"] == "noise"): int(r["n"]["text"]) for r in grouped} == expect


def _usd(v: float) -> str:
    from results.view.format import usd

    return usd(v)


def test_trial_lists_filter_search_sort_and_walk(served):
    http, alpha = served["http"], served["alpha"]
    by_cost = http.get("/sweeps/alpha/trials", params={"state": "finished", "sort": "cost_usd", "desc": "1"})
    first = rows_of(by_cost.text, "trials")[0]
    assert first["cost"]["text"] == _usd(max(t["cost"] for t in alpha.trials.values()))
    found = http.get("/sweeps/alpha/trials", params={"q": "scaled-to-zero|react"})
    assert count_of(found.text) == sum(1 for tid in _all_ids(served, "alpha") if "scaled-to-zero|react" in tid[1])
    assert count_of(http.get("/sweeps/alpha/trials", params={"e2e": "pass"}).text) == sum(
        t["d"] and t["m"] for t in alpha.trials.values())
    bad = http.get("/sweeps/alpha/trials", params={"sort": "nope"})
    assert bad.status_code == 400 and "sort must be one of" in bad.text
    assert http.get("/sweeps/nope").status_code == 404
    assert http.post("/").status_code == 405  # read-only

    # previous/next walk the filtered list in key order, and nothing else
    listed = http.get("/sweeps/alpha/trials", params={"agent": "react", "state": "finished", "per_page": 1000})
    expected = [r["trial (problem|agent|model|seed|noise)"]["links"][0] for r in rows_of(listed.text, "trials")]
    seen, href = [], expected[0]
    while href:
        seen.append(href)
        page = http.get(href).text
        nxt = re.search(r'<a href="([^"]+)" id="next">', page)
        href = unescape(nxt.group(1)) if nxt else None
    assert [urlsplit(s).path for s in seen] == [urlsplit(unescape(e)).path for e in expected]


def _all_ids(served, sweep: str) -> list[tuple[str, str]]:
    from sqlalchemy import text

    with served["engine"].connect() as c:
        return [tuple(r) for r in c.execute(text("SELECT id, key FROM trial WHERE sweep_id = :s"), {"s": sweep})]


def test_trial_page_transcript_verdicts_ground_truth_and_raw_artifacts(served):
    http, alpha, engine = served["http"], served["alpha"], served["engine"]
    odd = next(tid for tid, t in alpha.trials.items() if t["cost"] == ODD_COST)
    page = http.get(f"/trials/{odd}").text
    assert "$0.1148" in page and "0.11483750000000001" not in page
    assert "<script>alert(" not in page and "&lt;script&gt;alert(" in page  # a transcript is escaped
    assert "ground truth" in page and "ImagePullBackOff" in page
    truth = re.search(r'<div class="beside">.*?</div></div>', page, re.S).group(0)
    assert "component" in truth and "geo" in truth  # the catalog's ground truth, beside the answers
    # the judge's quote sits beside the ground truth when it answered yes, and only then
    assert ("<q>the geo deployment</q>" in truth) == alpha.trials[odd]["d"]
    assert "pods_ready" in page  # the mitigation checks
    found = http.get(f"/trials/{odd}", params={"find": "get_alerts"}).text
    assert "1 of 4 steps contain" in found
    from sqlalchemy import text

    with engine.connect() as c:
        token, uri = c.execute(text("SELECT token, artifacts_uri FROM attempt WHERE trial_id = :t AND state = 'recorded'"),
                               {"t": odd}).one()
    raw = http.get(f"/trials/{odd}/attempts/{token}/verdicts.json")
    assert raw.status_code == 200 and raw.json() == json.loads((Path(uri.removeprefix("file://")) / "verdicts.json").read_text())
    assert http.get(f"/trials/{odd}/attempts/{token}/secrets.json").status_code == 404
    # The cluster snapshot, stored compressed, is summarized on the page and served for the browser to inflate.
    snap = http.get(f"/trials/{odd}/attempts/{token}/cluster_snapshot.json")
    assert snap.status_code == 200 and snap.headers["content-encoding"] == "gzip"
    assert snap.json()["pods"]["items"][0]["metadata"]["name"] == "geo-7d9"
    assert "geo-7d9 (" in page
    # the lost attempt of another trial is listed before the one that recorded
    lost = alpha.lost
    shown = http.get(f"/trials/{lost}").text
    assert shown.index("attempt 1 · lost") < shown.index("attempt 2 · recorded")


def test_errors_and_comparison(served):
    http, engine = served["http"], served["engine"]
    errors = http.get("/sweeps/alpha/errors").text
    failed = rows_of(errors, "failed-attempts")
    assert {r["state"]["text"] for r in failed} == {"infra_error", "lost"}
    assert any("cluster sim-3 down" in r["error"]["text"] for r in failed)
    deploy = http.get("/sweeps/alpha/errors", params={"phase": "deploy"}).text
    assert [r["error phase"]["text"] for r in rows_of(deploy, "failed-attempts")] == ["deploy"]

    cmp = rows_of(http.get("/compare", params={"a": "alpha", "b": "beta"}).text, "comparison")
    expect = compare(engine, "alpha", "beta", "agent,model")
    assert len(cmp) == len(expect)
    for shown, row in zip(cmp, expect, strict=True):
        assert shown["metric"]["text"] == row["metric"] and int(shown["pairs"]["text"]) == row["pairs"]
        assert shown["McNemar p"]["text"] == f"{row['mcnemar_p']:.4g}"


def test_progress_follows_a_running_sweep(served):
    http, alpha, engine, store = served["http"], served["alpha"], served["engine"], served["store"]
    live = http.get("/sweeps/alpha/live")
    assert live.headers["x-live"] == "running" and "33 / 36" in live.text
    for tid in alpha.pending:
        record_one(engine, store, "alpha", tid, True, True, 0.5, "geo")
    live = http.get("/sweeps/alpha/live")
    assert live.headers["x-live"] == "settled" and "36 / 36" in live.text
    home = rows_of(http.get("/").text, "sweeps")
    assert {r["sweep"]["text"].strip(): r["done"]["text"].strip() for r in home}["alpha"] == "36 / 36"


def test_a_token_guards_the_view_and_loopback_refuses_other_host_names(sqlite_url, tmp_path):
    engine = engine_for(sqlite_url)
    record_sweep(engine, LocalArtifactStore(tmp_path / "a"), "alpha", seeds=1)
    with farm_view(sqlite_url, "--token", "s3cret-token") as url:
        base = url.split("?")[0]
        assert url.endswith("?token=s3cret-token")
        assert httpx.get(base).status_code == 401
        assert httpx.get(base + "?token=wrong").status_code == 401
        first = httpx.get(base + "sweeps/alpha?token=s3cret-token&by=layer")
        assert first.status_code == 303 and first.headers["location"] == "/sweeps/alpha?by=layer"
        assert "httponly" in first.headers["set-cookie"].lower()
        with httpx.Client(base_url=base) as browser:
            assert browser.get("/?token=s3cret-token", follow_redirects=True).status_code == 200
            assert browser.get("/sweeps/alpha").status_code == 200  # the cookie carries it on
        ok = httpx.get(base, headers={"Authorization": "Bearer s3cret-token"})
        assert ok.status_code == 200 and "script-src 'self'" in ok.headers["content-security-policy"]
        assert httpx.get(base, headers={"Host": "evil.example", "Authorization": "Bearer s3cret-token"}).status_code == 400


def test_cli_says_in_one_line_what_is_wrong(tmp_path):
    def view(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "farm.cli", "view", *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)

    missing = view("--db", f"sqlite:///{tmp_path / 'none.sqlite'}")
    assert missing.returncode == 2 and "no farm database" in missing.stderr
    down = view("--db", "postgresql://postgres@127.0.0.1:1/farm")
    assert down.returncode == 1 and "cannot be reached" in down.stderr and "Traceback" not in down.stderr
    assert "127.0.0.1:1" in down.stderr


def test_the_view_reads_through_a_session_that_cannot_write(db_url, tmp_path):
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    from results.db import read_only_engine

    engine = engine_for(db_url)
    record_sweep(engine, LocalArtifactStore(tmp_path / "a"), "alpha", seeds=1)
    reader = read_only_engine(db_url)
    with reader.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM trial")).scalar_one() == 12
    with pytest.raises(DBAPIError, match="read-only|readonly"), reader.begin() as conn:
        conn.execute(text("UPDATE sweep SET cancelled = true"))
    with engine.connect() as conn:
        assert conn.execute(text("SELECT cancelled FROM sweep")).scalar_one() in (False, 0)
    reader.dispose()


def test_a_trial_page_reads_its_artifacts_from_s3(sqlite_url, s3_env):
    """Artifacts in an S3-compatible server (moto, over HTTP): the page renders them and serves
    the raw JSON, as for a local folder."""
    import os

    from results.artifact_store import S3ArtifactStore

    store = S3ArtifactStore("farm-view-artifacts", "runs")
    store.ensure_bucket()
    engine = engine_for(sqlite_url)
    alpha = record_sweep(engine, store, "alpha", seeds=1)
    tid = next(t for t in alpha.trials if t != alpha.lost)  # recorded by its first attempt
    aws = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    with farm_view(sqlite_url, env=aws) as url, httpx.Client(base_url=url, timeout=60) as http:
        page = http.get(f"/trials/{tid}").text
        assert "s3://farm-view-artifacts/runs/alpha/" in page
        assert "image tag that does not exist" in page and "ImagePullBackOff" in page and "pods_ready" in page
        raw = http.get(f"/trials/{tid}/attempts/1/diagnosis.json")
        assert raw.status_code == 200 and "image tag that does not exist" in raw.json()["text"]
