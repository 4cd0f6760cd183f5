"""Per-trial drill-down pages: one HTML file per trial under the report's `trials/` folder, with
each attempt's ATIF trajectory (messages, tool calls and their outputs), the tool calls the
interface recorded (tokens, errors), the diagnosis, the verdicts with the judge's quoted evidence,
and a summary of the cluster snapshot.

The artifacts are read through the artifact store and rendered into the page, so the page reads
the same for a local folder and for S3 and keeps working after presigned URLs would have expired.
Raw JSON: a local folder's files are linked where they are; S3's are downloaded beside the page,
up to RAW_COPY_BUDGET per report (then named by their S3 address).
Everything an agent wrote is escaped: a transcript is adversarial input."""

from __future__ import annotations

import json
from collections import Counter
from html import escape
from pathlib import Path
from typing import Any, TypeVar

from core.records import SubmittedDiagnosis, ToolCall, UnreadableArtifact, Verdicts, read_artifact
from results.artifact_store import ArtifactStore, open_store

R = TypeVar("R")

ARTIFACTS = ("attempt", "trajectory.atif", "tool_calls", "diagnosis", "verdicts", "mutations", "events",
             "injections", "noise", "cluster_snapshot", "transcript", "checkpoint")
# How a document is stored: JSON, or JSON compressed (the cluster snapshot, farm/trial/artifacts.py).
DOCUMENT_SUFFIXES = (".json", ".json.gz")
OUTPUT_CHARS = 6000  # per tool output shown inline; the raw JSON keeps all of it


class Budget:
    """How much of an attempt's transcript a page shows: each output cut at `output_chars`, and
    the trajectory's steps shown until `total_chars` is spent (the rest is counted and left to the
    raw JSON). The static report bounds its pages so a 2,000-trial report stays small; `farm view`
    renders one page on demand and shows everything (total None)."""

    def __init__(self, output_chars: int = OUTPUT_CHARS, total_chars: int | None = None,
                 repeat_outputs: bool = True, tool_rows: int | None = None) -> None:
        self.output_chars, self.total_chars, self.repeat_outputs = output_chars, total_chars, repeat_outputs
        self.tool_rows = tool_rows  # rows of the tool-call table shown (None: all)
        self.spent = 0

    def exhausted(self) -> bool:
        return self.total_chars is not None and self.spent >= self.total_chars

    def pre(self, text: Any, limit: int | None = None) -> str:
        out = _pre(text, self.output_chars if limit is None else min(limit, self.output_chars))
        self.spent += len(out)
        return out


# A static report's trial page: about 15 KB whatever the transcript's length (2,000 trials: ~30 MB).
REPORT_BUDGET = {"output_chars": 600, "total_chars": 8_000, "repeat_outputs": False, "tool_rows": 30}

STYLE = """body{font-family:system-ui,sans-serif;margin:1.5em;max-width:80em;color:#222}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top}
th{background:#f3f3f3}pre{white-space:pre-wrap;word-break:break-word;background:#f7f7f7;padding:6px;
font-size:12px;margin:2px 0}.pass{color:#2a7a2a;font-weight:600}.fail{color:#b22;font-weight:600}
.step{border-left:3px solid #ccc;padding-left:8px;margin:8px 0}.agent{border-color:#4c72b0}
.system{border-color:#aaa}.user{border-color:#55a868}details summary{cursor:pointer}
.beside{display:flex;gap:1em;align-items:flex-start}.beside>div{flex:1}q{background:#fff6d5}"""


RAW_COPY_BUDGET = 16 * 2**20  # bytes of raw JSON one report copies from S3


class ArtifactReader:
    """Reads an attempt's artifacts by its artifacts_uri, one store per location."""

    def __init__(self) -> None:
        self._stores: dict[str, ArtifactStore] = {}
        # Pass rules the verdicts name (a judge that records one writes it there), for the header.
        self.pass_rules: Counter[str] = Counter()
        self.pass_rule_texts: dict[str, str] = {}  # each rule in words, as its verdicts state it
        # Raw JSON copied beside a report's pages from S3 (a local folder's is linked in place): a
        # 2,000-trial report holds its cluster snapshots' ~0.5 MB each only up to this budget; past
        # it a document is named by its address in the store, readable with the same credentials.
        self.raw_budget = RAW_COPY_BUDGET

    def _store(self, uri: str) -> ArtifactStore:
        root = uri.split("/", 3)[2] if uri.startswith("s3://") else "file"
        if root not in self._stores:
            self._stores[root] = open_store(f"s3://{root}" if uri.startswith("s3://") else "/")
        return self._stores[root]

    def read(self, uri: str, name: str) -> Any | None:
        """A document as stored (for the formats of others: ATIF, the cluster snapshot), from
        <name>.json or its compressed <name>.json.gz."""
        store = self._store(uri)
        for suffix in DOCUMENT_SUFFIXES:
            try:
                return store.get_json(f"{uri.rstrip('/')}/{name}{suffix}")
            except Exception:  # missing or unreadable: the page says so for that artifact
                continue
        return None

    def record(self, uri: str, name: str, kind: type[R]) -> R | UnreadableArtifact | None:
        """An artifact of the farm's as its typed record (core.records); None when it was not
        written, the reason when what was written is not that record."""
        data = self.read(uri, name)
        if data is None:
            return None
        try:
            return read_artifact(kind, data)
        except UnreadableArtifact as exc:
            return exc

    def raw(self, uri: str, name: str) -> tuple[str, bytes] | None:
        """The stored bytes of a document and its file name (<name>.json or <name>.json.gz)."""
        store = self._store(uri)
        for suffix in DOCUMENT_SUFFIXES:
            try:
                return name + suffix, store.get_bytes(f"{uri.rstrip('/')}/{name}{suffix}")
            except Exception:  # missing: nothing to copy
                continue
        return None


def _verdict(v: Any) -> str:
    if v is None:
        return "<span>–</span>"
    return '<span class="pass">pass</span>' if v else '<span class="fail">fail</span>'


def _pre(text: Any, limit: int | None = None) -> str:
    s = text if isinstance(text, str) else json.dumps(text, indent=1, sort_keys=True, default=str)
    cut = ""
    if limit is not None and len(s) > limit:
        cut = f"\n… ({len(s) - limit} more characters in the raw JSON)"
        s = s[:limit]
    return f"<pre>{escape(s + cut)}</pre>"


def _args(args: dict[str, Any], budget: Budget) -> str:
    """A call's arguments: on one line when the budget does not repeat outputs (a bounded page),
    indented otherwise."""
    if budget.repeat_outputs:
        return _pre(args, budget.output_chars)
    text = json.dumps(args, sort_keys=True, default=str)
    return f"<code>{escape(text if len(text) <= 200 else text[:200] + '…')}</code>"


def _matches(step: dict[str, Any], query: str) -> bool:
    return query.casefold() in json.dumps(step, default=str).casefold()


def trajectory_html(traj: dict[str, Any] | None, query: str = "", budget: Budget | None = None) -> str:
    """The ATIF trajectory, each tool call and its observation collapsible; with `query`, only the
    steps whose text contains it (case-insensitive); within `budget` (the rest is counted)."""
    budget = budget or Budget()
    if not traj:
        return "<p>No ATIF trajectory recorded for this attempt.</p>"
    steps = traj.get("steps") or []
    shown = [s for s in steps if _matches(s, query)] if query else steps
    parts = [f"<p>{escape(str(traj.get('schema_version', '')))} · session {escape(str(traj.get('session_id', '')))}"
             f" · {len(steps)} steps</p>"]
    if query:
        parts.append(f'<p class="matches">{len(shown)} of {len(steps)} steps contain “{escape(query)}”</p>')
    if traj.get("notes"):
        parts.append(f"<p><b>notes:</b> {escape(str(traj['notes']))}</p>")
    for n, step in enumerate(shown):
        if budget.exhausted():
            parts.append(f'<p class="cut">… {len(shown) - n} more step(s) not shown here: the raw '
                         "<code>trajectory.atif</code> JSON linked above has the whole transcript.</p>")
            break
        source = str(step.get("source", ""))
        head = f"#{step.get('step_id')} {escape(source)}"
        if step.get("model_name"):
            head += f" · {escape(str(step['model_name']))}"
        metrics = step.get("metrics") or {}
        if metrics:
            head += (f" · prompt {metrics.get('prompt_tokens', 0)}, completion {metrics.get('completion_tokens', 0)},"
                     f" cached {metrics.get('cached_tokens', 0)}")
        body = [f"<div><b>{head}</b></div>"]
        if step.get("message"):
            body.append(budget.pre(step["message"]))
        if step.get("reasoning_content"):
            body.append(f"<details><summary>reasoning</summary>{budget.pre(step['reasoning_content'])}</details>")
        for call in step.get("tool_calls") or []:
            body.append(f'<details class="call"><summary>→ <code>{escape(str(call.get("function_name")))}</code>'
                        f"</summary>{budget.pre(call.get('arguments'))}</details>")
        for res in (step.get("observation") or {}).get("results") or []:
            content = res.get("content") or ""
            if content:
                body.append(f"<details><summary>observation ({len(str(content))} chars)</summary>"
                            f"{budget.pre(content)}</details>")
        extra = step.get("extra") or {}
        if extra.get("event"):
            body.append(budget.pre(extra["event"], 2000))
        parts.append(f'<div class="step {escape(source)}">{"".join(body)}</div>')
    final = traj.get("final_metrics")
    if final:
        parts.append(f"<h4>final metrics</h4>{_pre(final, budget.output_chars)}")
    return "".join(parts)


def _unreadable(what: str, exc: UnreadableArtifact) -> str:
    return f"<p>The {escape(what)} recorded cannot be read: {escape(str(exc))}</p>"


def tool_calls_html(calls: list[ToolCall] | UnreadableArtifact | None, query: str = "",
                    budget: Budget | None = None) -> str:
    """The tool calls the interface recorded; with `query`, only those whose name, arguments,
    output or error contain it. Under a budget that does not repeat outputs, each output is its
    length only (the trajectory above shows it)."""
    budget = budget or Budget()
    if calls is None:
        return "<p>No tool calls recorded.</p>"
    if isinstance(calls, UnreadableArtifact):
        return _unreadable("tool calls", calls)
    if query:
        calls = [c for c in calls if query.casefold() in c.model_dump_json().casefold()]
    rows = ["<table><tr><th>#</th><th>tool</th><th>arguments</th><th>tokens</th><th>error</th><th>output</th></tr>"]
    shown = calls if budget.tool_rows is None else calls[:budget.tool_rows]
    for c in shown:
        rows.append(
            f"<tr><td>{c.index}</td><td>{escape(c.name)}</td><td>{_args(c.args, budget)}</td>"
            f"<td>{c.tokens:,d}</td><td>{escape(c.error or '')}</td>"
            + (f"<td><details><summary>{len(c.output):,d} chars</summary>{_pre(c.output, budget.output_chars)}"
               "</details></td></tr>" if budget.repeat_outputs else
               f"<td>{len(c.output):,d} chars (in the trajectory above and the raw JSON)</td></tr>"))
    rows.append("</table>")
    if len(shown) < len(calls):
        rows.append(f'<p class="cut">… {len(calls) - len(shown)} more call(s) not shown here: the raw '
                    "<code>tool_calls</code> JSON linked above has them all.</p>")
    return "".join(rows)


def verdicts_html(verdicts: Verdicts | UnreadableArtifact | None, ground_truth: dict[str, Any] | None = None) -> str:
    """The judge's answers with the quotes they rest on, beside the problem's ground truth when
    given, and the mitigation oracle's checks."""
    if verdicts is None or (not isinstance(verdicts, UnreadableArtifact)
                            and verdicts.diagnosis is None and verdicts.mitigation is None):
        return "<p>No verdicts recorded (the attempt did not reach the oracle).</p>"
    if isinstance(verdicts, UnreadableArtifact):
        return _unreadable("verdicts", verdicts)
    parts = []
    d = verdicts.diagnosis
    if d is not None:
        rule = d.pass_rule
        threshold = "none (the pass rule has no composite floor)" if d.threshold is None and rule else d.threshold
        parts.append(f"<p>diagnosis {_verdict(d.passed)} · judge {escape(d.judge)}"
                     f"{' (offline)' if d.offline else ''} · composite {d.composite:.3g}"
                     f" · threshold {escape(str(threshold))} · pass rule "
                     f"{escape(rule if rule is not None else 'not recorded')}</p>")
        answers = ""
        if d.answers:
            answers = ("<table><tr><th>id</th><th>question</th><th>answer</th><th>quote from the diagnosis</th>"
                       "<th>judge's evidence</th></tr>"
                       + "".join(f"<tr><td>{escape(a.id)}</td><td>{escape(a.question)}</td><td>{_verdict(a.answer)}</td>"
                                 f"<td>{'<q>' + escape(a.quote) + '</q>' if a.quote else ''}</td>"
                                 f"<td>{escape(a.evidence)}</td></tr>" for a in d.answers) + "</table>")
        if ground_truth is not None:
            parts.append(f'<div class="beside"><div>{answers}</div><div><h4>ground truth</h4>'
                         f"{ground_truth_html(ground_truth)}</div></div>")
        else:
            parts.append(answers)
    m = verdicts.mitigation
    if m is not None:
        parts.append(f"<p>mitigation {_verdict(m.passed)}{' · ' + escape(m.detail) if m.detail else ''}</p>")
        if m.checks:
            parts.append("<table><tr><th>check</th><th>held</th></tr>"
                         + "".join(f"<tr><td>{escape(k)}</td><td>{_verdict(v)}</td></tr>"
                                   for k, v in sorted(m.checks.items())) + "</table>")
    return "".join(parts)


def ground_truth_html(gt: dict[str, Any]) -> str:
    """A problem's ground truth (core.problem.GroundTruth as a dict) as a two-column table."""
    rows = []
    for name in ("component", "component_kind", "fault_type", "mechanism", "symptom", "affected", "details"):
        value = gt.get(name)
        if value in (None, "", [], {}):
            continue
        if isinstance(value, dict):
            text = "; ".join(f"{k}: {v}" for k, v in value.items())
        elif isinstance(value, list):
            text = ", ".join(map(str, value))
        else:
            text = str(value)
        rows.append(f"<tr><td>{escape(name)}</td><td>{escape(text)}</td></tr>")
    also = "".join(f"<h4>also</h4>{ground_truth_html(a)}" for a in gt.get("also") or [])
    return f'<table class="truth">{"".join(rows)}</table>{also}'


def snapshot_html(snap: Any) -> str:
    """A summary of the cluster snapshot: per kind, how many objects and their names and status."""
    if snap is None:
        return "<p>No cluster snapshot recorded.</p>"
    if isinstance(snap, dict) and "error" in snap and len(snap) == 1:
        return f"<p>The snapshot failed: {escape(str(snap['error']))}</p>"
    if not isinstance(snap, dict):
        return _pre(snap, OUTPUT_CHARS)
    rows = []
    for kind, objs in sorted(snap.items()):
        items = objs.get("items", objs) if isinstance(objs, dict) else objs
        names = []
        if isinstance(items, list):
            for o in items[:60]:
                meta = o.get("metadata", {}) if isinstance(o, dict) else {}
                status = o.get("status", {}) if isinstance(o, dict) else {}
                phase = status.get("phase") or (f"ready {status.get('readyReplicas', 0)}/{status.get('replicas', 0)}"
                                                if "replicas" in status else "")
                names.append(f"{meta.get('name', '?')}{f' ({phase})' if phase else ''}")
        count = len(items) if isinstance(items, list) else "?"
        rows.append(f"<tr><td>{escape(kind)}</td><td>{count}</td><td>{escape(', '.join(names))}</td></tr>")
    return "<table><tr><th>kind</th><th>objects</th><th>names (status)</th></tr>" + "".join(rows) + "</table>"


def trial_page_name(trial_id: str) -> str:
    return f"trials/{trial_id}.html"


STYLESHEET = "trials/style.css"  # written once per report, linked by every trial page


def write_stylesheet(out_dir: Path) -> None:
    path = out_dir / STYLESHEET
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(STYLE + "\n.cut{color:#a60;font-style:italic}\n")


def write_trial_page(out_dir: Path, trial: dict[str, Any], reader: ArtifactReader,
                     ground_truth: dict[str, Any] | None = None) -> Path:
    """Render one trial (every attempt) into out_dir/trials/<id>.html, within the report's budget
    (REPORT_BUDGET) and with the problem's ground truth beside the judge's answers when given;
    links trials/style.css (write_stylesheet). Returns the path."""
    from results.view.format import count, usd

    page = out_dir / trial_page_name(trial["id"])
    page.parent.mkdir(parents=True, exist_ok=True)
    head = (f"<h1>{escape(trial['key'])}</h1><p>state <b>{escape(str(trial['state']))}</b> · diagnosis "
            f"{_verdict(trial['diagnosis_passed'])} · mitigation {_verdict(trial['mitigation_passed'])} · E2E "
            f"{_verdict(trial['e2e_passed'])} · tokens in/out {count(trial['tokens_in'])}/{count(trial['tokens_out'])}"
            f" · cost {usd(trial['cost_usd'])} · end {escape(str(trial['end_reason'] or '–'))}</p>"
            '<p><a href="../index.html">back to the report</a></p>')
    sections = [attempt_html(a, reader, _raw_links(out_dir, trial["id"], a["token"], a["artifacts_uri"], reader)
                             if a.get("artifacts_uri") else "", ground_truth=ground_truth,
                             budget=Budget(**REPORT_BUDGET))  # type: ignore[arg-type]
                for a in trial["attempts"]]
    if not trial["attempts"]:
        sections.append("<p>This trial never started (no attempt).</p>")
    page.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{escape(trial['key'])}</title>"
                    f"<link rel='stylesheet' href='style.css'></head><body>{head}{''.join(sections)}</body></html>")
    return page


def attempt_html(a: dict[str, Any], reader: ArtifactReader, raw_links: str, query: str = "",
                 ground_truth: dict[str, Any] | None = None, budget: Budget | None = None) -> str:
    """One attempt: its error, the diagnosis submitted, the verdicts (beside the ground truth when
    given), the trajectory and tool calls (only what contains `query`, when given; within
    `budget`, whole without one), the cluster snapshot. `raw_links` is the HTML that links the
    raw JSON documents."""
    budget = budget or Budget()
    uri = a.get("artifacts_uri")
    title = (f"attempt {a['token']} · {escape(str(a['state']))} · worker {escape(str(a['worker']))}"
             + (f" · infrastructure error in {escape(str(a['error_phase']))}" if a.get("error_phase") else ""))
    body = [f'<h2 id="attempt-{a["token"]}">{title}</h2>']
    if a.get("error"):
        body.append(f"<p><b>error:</b> {escape(str(a['error']))}</p>")
    if not uri:
        return "".join(body) + "<p>No artifacts recorded.</p>"
    body.append(f"<p>artifacts: {escape(uri)}</p><p>raw JSON: {raw_links or 'none found'}</p>")
    diag = reader.record(uri, "diagnosis", SubmittedDiagnosis)
    if isinstance(diag, UnreadableArtifact):
        submitted = _unreadable("diagnosis", diag)
    else:
        submitted = _pre(diag.text or "(none)") if diag is not None else "<p>not recorded</p>"
    verdicts = reader.record(uri, "verdicts", Verdicts)
    if isinstance(verdicts, Verdicts) and verdicts.diagnosis is not None and verdicts.diagnosis.pass_rule:
        reader.pass_rules[verdicts.diagnosis.pass_rule] += 1
        if verdicts.diagnosis.pass_rule_text:
            reader.pass_rule_texts[verdicts.diagnosis.pass_rule] = verdicts.diagnosis.pass_rule_text
    if ground_truth is not None:
        # The diagnosis beside what was injected: the reader judges the judge at a glance.
        body.append(f'<div class="beside"><div><h3>Diagnosis submitted</h3>{submitted}</div>'
                    f"<div><h3>Ground truth</h3>{ground_truth_html(ground_truth)}</div></div>")
    else:
        body.append("<h3>Diagnosis submitted</h3>" + submitted)
    body.append("<h3>Verdicts</h3>" + verdicts_html(verdicts, ground_truth))
    traj = reader.read(uri, "trajectory.atif")
    body.append("<h3>Trajectory (ATIF)</h3>" + trajectory_html(traj, query, budget))
    if not traj:  # nothing above shows the outputs: the table does, within the same cut
        budget.repeat_outputs = True
    body.append("<h3>Tool calls (as the interface recorded them)</h3>"
                + tool_calls_html(reader.record(uri, "tool_calls", list[ToolCall]), query, budget))
    body.append("<h3>Cluster snapshot</h3>" + snapshot_html(reader.read(uri, "cluster_snapshot")))
    return "".join(body)


def _raw_links(out_dir: Path, trial_id: str, token: int, uri: str, reader: ArtifactReader) -> str:
    links = []
    for name in ARTIFACTS:
        if uri.startswith("file://"):
            for suffix in DOCUMENT_SUFFIXES:
                path = Path(uri.removeprefix("file://")) / f"{name}{suffix}"
                if path.is_file():
                    links.append(f'<a href="{escape(path.as_uri())}">{escape(name)}</a>')
                    break
        else:
            found = reader.raw(uri, name)
            if found is None:
                continue
            file, data = found
            if len(data) > reader.raw_budget:
                links.append(f"{escape(name)} ({len(data) // 1024:,d} KiB, not copied: "
                             f"{escape(uri.rstrip('/'))}/{escape(file)})")
            else:
                reader.raw_budget -= len(data)
                rel = f"{trial_id}/attempt-{token}/{file}"
                dest = out_dir / "trials" / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(data)
                links.append(f'<a href="{escape(rel)}">{escape(name)}</a>')
    return " · ".join(links) or "none found"
