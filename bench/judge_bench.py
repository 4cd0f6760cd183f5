"""How far the offline diagnosis judge can be trusted (targets: Cohen's kappa >= 0.9 against the
human labels, and every attack family fools at most 1% of the catalog).

Prints the offline judge's agreement with the labelled diagnoses (accuracy, kappa, per-question
kappa), for the main set and, separately, for a second set written after the judge had been tuned
on the main one. The second set is no longer independent: its first run scored kappa 0.74 (5 of 41
lines disagreed, all correct diagnoses the judge failed) and the judge was then fixed from those 5
lines. A third, fresh set (diagnosis_labels_fresh.jsonl, 30 lines) was written after the last change
to the judge and never tuned on: it is the figure to quote for agreement on unseen wording (on its
first and only run: accuracy 0.967, kappa 0.933). Then, for each attack family
of farm.oracles.attacks (stuffed lists, hedges, bare component naming) generated over every problem
of the catalog, how many problems it fools (any of the family's texts passes) and which.

    .venv/bin/python bench/judge_bench.py [--labels FILE ...] [--json]
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
          ROOT / "tests/farm/oracles/diagnosis_labels_fresh.jsonl"]
KAPPA_TARGET, FOOLED_TARGET = 0.9, 0.01


def attack_results() -> dict[str, list[str]]:
    from farm.oracles.attacks import ATTACK_NODE, FAMILIES, attacks
    from farm.oracles.claims import app_object_names
    from farm.oracles.diagnosis import judge_diagnosis
    from farm.problems.catalog import load_catalog

    fooled: dict[str, list[str]] = {f: [] for f in FAMILIES}
    for problem in load_catalog().problems:
        truth = problem.ground_truth.filled(node=ATTACK_NODE)
        names = app_object_names(problem.app)
        for family, texts in attacks(problem, truth).items():
            if any(judge_diagnosis(t, truth, None, components=names).passed for t in texts):
                fooled[family].append(problem.id)
    return fooled


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", action="append", type=Path, help="labelled JSONL (repeatable); default: the "
                                                                     "shipped set and its held-out part")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()

    from farm.cli.judge import agreement
    from farm.oracles.diagnosis import PASS_RULE
    from farm.problems.catalog import load_catalog

    started = time.process_time()
    out: dict[str, object] = {"pass_rule": PASS_RULE.id, "labels": {}, "attacks": {}}
    for path in args.labels or [p for p in LABELS if p.exists()]:
        result = agreement(path, None)
        out["labels"][path.name] = {k: result[k] for k in ("n", "accuracy", "kappa")} | {  # type: ignore[index]
            "questions": {q: r["kappa"] for q, r in result["questions"].items()},
            "disagreements": [line["id"] for line in result["lines"] if line["label"] != line["judge"]]}
    n_problems = len(load_catalog().problems)
    for family, ids in attack_results().items():
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
        print("    per question: " + "  ".join(f"{q} {k:.2f}" for q, k in r["questions"].items()))
        if r["disagreements"]:
            print(f"    disagrees on: {', '.join(r['disagreements'])}")
    print(f"attacks over the whole catalog ({n_problems} problems):")
    for family, r in out["attacks"].items():  # type: ignore[attr-defined]
        ok = "meets" if r["share"] <= FOOLED_TARGET else "MISSES"
        print(f"  {family:8} fools {r['fooled']:3} problems ({100 * r['share']:.1f}%, {ok} the <= "
              f"{100 * FOOLED_TARGET:.0f}% target){': ' + ', '.join(r['problems']) if r['problems'] else ''}")
    print(f"CPU {out['cpu_s']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
