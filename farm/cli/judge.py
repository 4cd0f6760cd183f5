"""`farm judge`: how far a diagnosis judge agrees with human labels, and judging a finished sweep
again.

    farm judge agree LABELS.jsonl --judge MODEL|offline [--api-base URL] [--json]
    farm judge rescore --sweep S [--judge MODEL|offline] [--api-base URL] [--db URL]

LABELS.jsonl holds one labelled diagnosis per line, a JSON object with:
    id            a name for the line (optional; defaults to the line number)
    diagnosis     the diagnosis text (null or "" for "nothing submitted")
    ground_truth  the problem's ground truth (core.problem.GroundTruth fields), or instead
    problem       a problem id looked up in the catalog
    fill          with problem: values for the ground truth's placeholders, as injection fills them in
                  a trial ({"node": "sim-worker2"} for `{node}`); required when it has any
    label         true when a human judged the diagnosis correct (pass), false otherwise
    answers       optional human answers to the checklist, {"L1": true, ..., "S3": false}
    tags          optional words that group lines in the report (e.g. adversarial, hedge, terse)
    labeller      optional: who labelled the line (lines of two labellers with the same id give their
                  inter-labeller agreement, bench/judge_bench.py)
Prints the judge's accuracy and Cohen's kappa against `label` (and, where lines carry `answers`,
per-question accuracy and kappa), false passes and fails, the judge's tokens and cost, and the pass
rule the labels are compared under. Lines citing a
problem are judged knowing the application's object names, as a trial's diagnosis is. Example:
tests/farm/oracles/diagnosis_labels.jsonl. The judge itself is the diagnosis oracle,
farm/oracles/judge.py (`judge_diagnosis`).

`rescore` judges every finished trial of a sweep again from its recorded diagnosis (no trial is
run) and keeps each verdict with its judge and pass rule beside the recorded one
(farm/oracles/rescore.py); `farm leaderboard --judge J` then reads those verdicts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from core.errors import InputError
from core.problem import GroundTruth

app = typer.Typer(help="Check the diagnosis judge against labelled diagnoses.", no_args_is_help=True)


@app.callback()
def judge_group() -> None:
    """Check the diagnosis judge against labelled diagnoses."""


class LabelledDiagnosis(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str | None = None
    diagnosis: str | None
    ground_truth: GroundTruth | None = None
    problem: str | None = None
    fill: dict[str, str] = {}
    label: bool
    answers: dict[str, bool] = {}
    tags: list[str] = []
    labeller: str | None = None

    @model_validator(mode="after")
    def _one_truth(self) -> LabelledDiagnosis:
        if (self.ground_truth is None) == (self.problem is None):
            raise ValueError("give exactly one of ground_truth and problem")
        return self


def load_labels(path: Path) -> list[LabelledDiagnosis]:
    """The lines of a labels file; raises InputError naming the file, line, field and reason."""
    if not path.is_file():
        raise InputError(f"{path}: no such labels file")
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: line {n}: not JSON ({exc.msg})") from None
        try:
            row = LabelledDiagnosis.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "line"
            raise InputError(f"{path}: line {n}: field '{field}': {err['msg']}") from None
        row.id = row.id or f"line-{n}"
        rows.append(row)
    if not rows:
        raise InputError(f"{path}: no labelled diagnoses in the file")
    return rows


def _truth(row: LabelledDiagnosis, path: Path, catalog: Any = None) -> tuple[GroundTruth, dict[str, str]]:
    """The ground truth a line is judged against (placeholders filled as a trial fills them) and the
    inventory of its application (none for an inline ground truth)."""
    if row.ground_truth is not None:
        return row.ground_truth.filled(**row.fill), {}
    from farm.oracles.inventory import app_inventory
    from farm.problems.catalog import load_catalog

    try:
        problem = (catalog or load_catalog()).get(str(row.problem))
    except KeyError:
        raise InputError(f"{path}: {row.id}: field 'problem': unknown problem '{row.problem}'") from None
    truth = problem.ground_truth.filled(**row.fill)
    left = truth.placeholders()
    if left:
        raise InputError(f"{path}: {row.id}: field 'fill': problem '{row.problem}' needs a value for "
                         f"{', '.join('{' + p + '}' for p in sorted(left))} (what injection fills in a trial)")
    return truth, app_inventory(problem.app)


def cohen_kappa(a: list[bool], b: list[bool]) -> float:
    """Cohen's kappa of two raters' yes/no labels (1 = perfect agreement, 0 = chance)."""
    if len(a) != len(b) or not a:
        raise ValueError("kappa needs two equally long, non-empty label lists")
    n = len(a)
    po = sum(x == y for x, y in zip(a, b, strict=True)) / n
    pa, pb = sum(a) / n, sum(b) / n
    pe = pa * pb + (1 - pa) * (1 - pb)
    if pe >= 1.0:
        return 1.0 if po == 1.0 else 0.0
    return (po - pe) / (1 - pe)


def agreement(path: Path, judge: str | None, api_base: str | None = None) -> dict[str, Any]:
    from farm.oracles.judge import PASS_RULE, QUESTION_IDS, JudgeError, judge_diagnosis

    rows = load_labels(path)
    catalog = None
    human, machine, per_line = [], [], []
    by_question: dict[str, list[tuple[bool, bool]]] = {q: [] for q in QUESTION_IDS}
    tokens = cost = 0.0
    for row in rows:
        if catalog is None and row.problem is not None:
            from farm.problems.catalog import load_catalog

            catalog = load_catalog()  # once: a labels file cites many problems
        truth, components = _truth(row, path, catalog)
        try:
            verdict = judge_diagnosis(row.diagnosis, truth, judge, api_base=api_base, components=components)
        except JudgeError as exc:
            raise JudgeError(f"{path}: {row.id}: {exc}") from exc
        human.append(row.label)
        machine.append(verdict.passed)
        tokens += verdict.tokens_in + verdict.tokens_out
        cost += verdict.cost_usd
        for ans in verdict.answers:
            if ans.id in row.answers:
                by_question[ans.id].append((row.answers[ans.id], ans.answer))
        per_line.append({"id": row.id, "label": row.label, "judge": verdict.passed, "tags": row.tags,
                         "labeller": row.labeller,
                         "composite": verdict.composite, "judge_name": verdict.judge,
                         "answers": {a.id: a.answer for a in verdict.answers},
                         "evidence": {a.id: a.evidence for a in verdict.answers if a.id in row.answers
                                      and row.answers[a.id] != a.answer}})
    n = len(rows)
    false_pass = sum(m and not h for h, m in zip(human, machine, strict=True))
    false_fail = sum(h and not m for h, m in zip(human, machine, strict=True))
    return {
        "judge": judge or "offline", "n": n, "pass_rule": PASS_RULE.id, "pass_rule_text": PASS_RULE.text,
        "accuracy": round(sum(h == m for h, m in zip(human, machine, strict=True)) / n, 4),
        "kappa": round(cohen_kappa(human, machine), 4),
        # as shares of all lines, and of the lines the humans failed (passed) respectively
        "false_pass": false_pass, "false_fail": false_fail,
        "false_pass_share": round(false_pass / n, 4), "false_fail_share": round(false_fail / n, 4),
        "false_pass_rate": round(false_pass / max(1, n - sum(human)), 4),
        "false_fail_rate": round(false_fail / max(1, sum(human)), 4),
        "questions": {q: {"n": len(p), "accuracy": round(sum(h == m for h, m in p) / len(p), 4),
                          "kappa": round(cohen_kappa([h for h, _ in p], [m for _, m in p]), 4)}
                      for q, p in by_question.items() if p},
        "tokens": int(tokens), "cost_usd": round(cost, 6), "lines": per_line,
    }


def labeller_agreement(rows: list[LabelledDiagnosis]) -> dict[str, Any]:
    """How far the labellers agree with each other: over every line id labelled by two labellers
    (lines without a labeller count as one labeller per file, named by the caller), Cohen's kappa
    on pass/fail and per question, per pair of labellers. Empty when no id is labelled twice."""
    from farm.oracles.judge import QUESTION_IDS

    by_id: dict[str, dict[str, LabelledDiagnosis]] = {}
    for row in rows:
        by_id.setdefault(str(row.id), {})[row.labeller or "?"] = row
    pairs: dict[tuple[str, str], list[tuple[LabelledDiagnosis, LabelledDiagnosis]]] = {}
    for labelled in by_id.values():
        names = sorted(labelled)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                pairs.setdefault((a, b), []).append((labelled[a], labelled[b]))
    out: dict[str, Any] = {}
    for (a, b), both in sorted(pairs.items()):
        questions = {}
        for q in QUESTION_IDS:
            shared = [(x.answers[q], y.answers[q]) for x, y in both if q in x.answers and q in y.answers]
            if shared:
                questions[q] = round(cohen_kappa([x for x, _ in shared], [y for _, y in shared]), 4)
        out[f"{a}~{b}"] = {"n": len(both), "kappa": round(cohen_kappa([x.label for x, _ in both],
                                                                       [y.label for _, y in both]), 4),
                           "agreement": round(sum(x.label == y.label for x, y in both) / len(both), 4),
                           "questions": questions}
    return out


@app.command()
def agree(labels: Path = typer.Argument(..., help="JSONL file of labelled diagnoses (format: see module doc)"),
          judge: str = typer.Option("offline", "--judge", help="a litellm model string, or 'offline'"),
          api_base: str | None = typer.Option(None, "--api-base", help="endpoint of the judge model"),
          as_json: bool = typer.Option(False, "--json", help="print the full result as JSON")) -> None:
    """Accuracy and Cohen's kappa of a judge against human pass/fail labels."""
    from farm.oracles.judge import JudgeError

    try:
        result = agreement(labels, None if judge == "offline" else judge, api_base)
    except InputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except JudgeError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    typer.echo(f"judge {result['judge']}: {result['n']} labelled diagnoses, accuracy {result['accuracy']:.3f}, "
               f"Cohen's kappa {result['kappa']:.3f} (pass rule {result['pass_rule']})")
    typer.echo(f"  false passes {result['false_pass']} ({100 * result['false_pass_rate']:.1f}% of the failing lines), "
               f"false fails {result['false_fail']} ({100 * result['false_fail_rate']:.1f}% of the passing lines)")
    typer.echo(f"  judge spend: {result['tokens']} tokens, ${result['cost_usd']:.4f}")
    for q, r in result["questions"].items():
        typer.echo(f"  {q}: n={r['n']} accuracy {r['accuracy']:.3f} kappa {r['kappa']:.3f}")
    disagreements = [line for line in result["lines"] if line["label"] != line["judge"]]
    for line in disagreements:
        typer.echo(f"  disagrees on {line['id']}: human {'pass' if line['label'] else 'fail'}, judge "
                   f"{'pass' if line['judge'] else 'fail'} (composite {line['composite']:.2f})")


@app.command()
def rescore(sweep: str = typer.Option(..., "--sweep", help="the finished sweep whose diagnoses to judge again"),
            judge: str = typer.Option("offline", "--judge", help="a litellm model string, or 'offline'"),
            api_base: str | None = typer.Option(None, "--api-base", help="endpoint of the judge model"),
            db: str | None = typer.Option(None, "--db", help="database URL (default FARM_DATABASE_URL or "
                                                             "farm-out/farm.sqlite)")) -> None:
    """Judge a finished sweep's diagnoses again, keeping the recorded verdicts."""
    from farm.oracles.judge import JudgeError
    from farm.oracles.rescore import rescore as judge_again
    from results.db import engine_for, existing_url

    url = db or existing_url()
    if url is None:
        typer.echo("error: no farm database: set FARM_DATABASE_URL or pass --db", err=True)
        raise typer.Exit(2)
    try:
        result = judge_again(engine_for(url), sweep, None if judge == "offline" else judge, api_base)
    except InputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except JudgeError as exc:
        typer.echo(f"error: {exc} (the trials judged before it are kept)", err=True)
        raise typer.Exit(1) from None
    judged = result.judged
    passed = sum(j["passed"] for j in judged)
    typer.echo(f"sweep {sweep}: {len(judged)} finished trial(s) judged again by {result.judge} "
               f"(pass rule {result.pass_rule}): {passed} pass; judge spend {result.tokens} tokens, "
               f"${result.cost_usd:.4f}")
    recorded = [j for j in judged if j["recorded"] is not None]
    if recorded:
        before = sum(bool(j["recorded"]) for j in recorded)
        judges = sorted({f"{j['recorded_judge'] or '?'} ({j['recorded_rule'] or 'pre-v2'})" for j in recorded})
        typer.echo(f"  recorded verdicts ({', '.join(judges)}): {before} pass; {len(result.changed)} verdict(s) "
                   f"changed; Cohen's kappa between the two {cohen_kappa([bool(j['recorded']) for j in recorded], [j['passed'] for j in recorded]):.3f}")
    for j in result.changed:
        typer.echo(f"  {j['trial']} ({j['problem']}, {j['agent']}/{j['model']}): recorded "
                   f"{'pass' if j['recorded'] else 'fail'}, now {'pass' if j['passed'] else 'fail'}")
    for trial_id, why in result.skipped:
        typer.echo(f"  skipped {trial_id}: {why}")
