"""How far the offline diagnosis judge can be trusted (targets: Cohen's kappa >= 0.9 against the
human labels on pass/fail and >= 0.8 on every question that decides a pass, false passes and false
fails each <= 5%, and every attack family fools at most 1% of the catalog).

Prints, per labels file, the offline judge's accuracy, kappa, per-question kappa, false passes (of
the lines people failed) and false fails (of the lines they passed), and where two labellers
answered the same line their own kappa. The default files: the shipped set, its held-out part and a
fresh set (all written before issue 22 and tuned on, so no longer independent), the failure classes
of issue 22 written by the judge's author (tests of the judge, tuned on), and the blind-labelled
tuning set under tests/farm/oracles/labels/ (two labellers who never saw the judge; tuned on).
Agreement on text the judge was never tuned on is measured with --labels on a held-out file. Then,
for each attack family of farm.oracles.attacks (stuffed lists, hedges, bare component naming)
generated over every problem of the catalog, how many problems it fools (any of the family's texts
passes) and which.

    .venv/bin/python bench/judge_bench.py [--labels FILE ...] [--no-attacks] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LABELS = [ROOT / "tests/farm/oracles/diagnosis_labels.jsonl", ROOT / "tests/farm/oracles/diagnosis_labels_heldout.jsonl",
          ROOT / "tests/farm/oracles/diagnosis_labels_fresh.jsonl",
          ROOT / "tests/farm/oracles/diagnosis_labels_failure_classes.jsonl"]
KAPPA_TARGET, QUESTION_TARGET, ERROR_TARGET, FOOLED_TARGET = 0.9, 0.8, 0.05, 0.01


def default_labels() -> list[Path]:
    """The shipped sets and the blind-labelled tuning sets under tests/farm/oracles/labels/."""
    return [p for p in LABELS if p.exists()] + sorted((ROOT / "tests/farm/oracles/labels").glob("*.jsonl"))


def attack_results() -> dict[str, list[str]]:
    from farm.oracles.attacks import ATTACK_NODE, FAMILIES, attacks
    from farm.oracles.inventory import app_inventory
    from farm.oracles.judge import judge_diagnosis
    from farm.problems.catalog import load_catalog

    fooled: dict[str, list[str]] = {f: [] for f in FAMILIES}
    for problem in load_catalog().problems:
        truth = problem.ground_truth.filled(node=ATTACK_NODE)
        names = app_inventory(problem.app)
        for family, texts in attacks(problem, truth).items():
            if any(judge_diagnosis(t, truth, None, components=names).passed for t in texts):
                fooled[family].append(problem.id)
    return fooled


def label_figures(paths: list[Path]) -> tuple[dict[str, object], dict[str, object]]:
    """Per labels file: the offline judge's agreement (kappa, per-question kappa, false passes and
    fails); and across the files, the labellers' agreement with each other on lines they share."""
    from farm.cli.judge import agreement, labeller_agreement, load_labels

    figures: dict[str, object] = {}
    rows = []
    for path in paths:
        result = agreement(path, None)
        figures[path.name] = {k: result[k] for k in ("n", "accuracy", "kappa", "false_pass", "false_fail",
                                                      "false_pass_rate", "false_fail_rate", "false_pass_share",
                                                      "false_fail_share")} | {
            "questions": {q: r["kappa"] for q, r in result["questions"].items()},
            "disagreements": [line["id"] for line in result["lines"] if line["label"] != line["judge"]]}
        for row in load_labels(path):  # a file's lines without a labeller are the file's
            rows.append(row if row.labeller else row.model_copy(update={"labeller": path.stem}))
    return figures, labeller_agreement(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", action="append", type=Path, help="labelled JSONL (repeatable); default: the "
                                                                     "shipped sets")
    parser.add_argument("--no-attacks", action="store_true", help="skip the attacks over the catalog")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()

    from farm.oracles.judge import PASS_RULE
    from farm.problems.catalog import load_catalog

    started = time.process_time()
    out: dict[str, object] = {"pass_rule": PASS_RULE.id, "labels": {}, "labellers": {}, "attacks": {}}
    out["labels"], out["labellers"] = label_figures(args.labels or default_labels())
    n_problems = len(load_catalog().problems)
    for family, ids in ({} if args.no_attacks else attack_results()).items():
        out["attacks"][family] = {"fooled": len(ids), "of": n_problems, "share": round(len(ids) / n_problems, 4),  # type: ignore[index]
                                  "problems": ids}
    out["cpu_s"] = round(time.process_time() - started, 2)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"offline judge, pass rule {PASS_RULE.id}")
    for name, r in out["labels"].items():  # type: ignore[attr-defined]
        ok = "meets" if r["kappa"] >= KAPPA_TARGET else "MISSES"
        print(f"  {name}: n={r['n']} accuracy {r['accuracy']:.3f} kappa {r['kappa']:.3f} ({ok} the {KAPPA_TARGET} "
              "target)")
        low = [q for q in PASS_RULE.required if r["questions"].get(q, 1.0) < QUESTION_TARGET]
        print("    per question: " + "  ".join(f"{q} {k:.2f}" for q, k in r["questions"].items())
              + (f"  (below {QUESTION_TARGET} on deciding questions: {', '.join(low)})" if low else ""))
        print(f"    false passes {r['false_pass']} ({100 * r['false_pass_rate']:.1f}% of failing lines, "
              f"{100 * r['false_pass_share']:.1f}% of all), false fails {r['false_fail']} "
              f"({100 * r['false_fail_rate']:.1f}% of passing lines, {100 * r['false_fail_share']:.1f}% of all); "
              f"target <= {100 * ERROR_TARGET:.0f}%")
        if r["disagreements"]:
            print(f"    disagrees on: {', '.join(r['disagreements'])}")
    for pair, r in out["labellers"].items():  # type: ignore[attr-defined]
        print(f"  labellers {pair}: {r['n']} shared lines, agreement {r['agreement']:.3f}, kappa {r['kappa']:.3f}; "
              "per question: " + "  ".join(f"{q} {k:.2f}" for q, k in r["questions"].items()))
    if args.no_attacks:
        print(f"CPU {out['cpu_s']} s")
        return 0
    print(f"attacks over the whole catalog ({n_problems} problems):")
    for family, r in out["attacks"].items():  # type: ignore[attr-defined]
        ok = "meets" if r["share"] <= FOOLED_TARGET else "MISSES"
        print(f"  {family:8} fools {r['fooled']:3} problems ({100 * r['share']:.1f}%, {ok} the <= "
              f"{100 * FOOLED_TARGET:.0f}% target){': ' + ', '.join(r['problems']) if r['problems'] else ''}")
    print(f"CPU {out['cpu_s']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
