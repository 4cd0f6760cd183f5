"""Does noise confound? The baseline agent and a scripted LLM agent (react against
farm.llm.scripted playing a simple triage policy) on a sample of hotel-reservation application
problems, run by `farm run` on emulated clusters with noise off, with each noise kind alone and
with all of them, at the intensities given. Prints, per noise kind and intensity, each agent's
diagnosis rate with noise off and on, how many outcomes the noise lost and won, and the exact
McNemar p-value of that paired difference; then, per agent, how many mitigation verdicts the
noise changed (noise stops before the oracles: a change is the agent fixing something else, or
noise that touched the fault's state, which the confounders must never do).

    .venv/bin/python bench/noise_bench.py [--problems 3] [--ids ID,...] [--intensities high]
                                          [--kinds each,all,pod-kill,...] [--agents baseline,scripted]
                                          [--apps hotel-reservation,...] [--workers 2] [--out DIR]

Reproduce (export LITELLM_LOCAL_MODEL_COST_MAP=True PYTHONHASHSEED=0; emulated clusters, offline
judge; about 10 and 6 minutes on a shared 2-core machine):

    # every confounder together, 24 problems (the seeded sample), at each intensity
    .venv/bin/python bench/noise_bench.py --problems 24 --kinds all --intensities low,medium,high --workers 2
    # each kind alone, on the 5 problems of that sample either agent diagnoses without noise
    # (noise can only lose what an agent gets right: the others say little about a kind)
    IDS=hr-frontend-latent-bug-flag,hr-mongodb-rate-image-tag-wrong,hr-reservation-liveness-probe-wrong-port
    IDS=$IDS,hr-search-rate-partition,hr-user-scaled-to-zero
    .venv/bin/python bench/noise_bench.py --ids $IDS --kinds each --intensities low,medium,high --workers 2

Results of those two commands (2026-12-06, commit of this docstring). Every confounder together:

    noise kind  intensity  baseline off  baseline on lost/won McNemar p  scripted off  scripted on lost/won McNemar p
    all         low           3/24  12%    1/24   4%      2/0     0.500     4/24  17%    2/24   8%      2/0     0.500
    all         medium        3/24  12%    0/24   0%      3/0     0.250     4/24  17%    2/24   8%      2/0     0.500
    all         high          3/24  12%    0/24   0%      3/0     0.250     4/24  17%    1/24   4%      3/0     0.250

(5 of the baseline's 72 noisy mitigation verdicts changed, each from pass to fail: misled, it rolled
back the red herring instead of the faulty workload and the fault stayed). Each kind alone:

    noise kind         intensity  baseline off  baseline on  lost/won  scripted off  scripted on  lost/won
    pod-kill           low/med/hi    3/5           3, 3, 3    0, 0, 0      4/5         4, 4, 4    0, 0, 0
    rolling-update     low/med/hi    3/5           2, 1, 1    1, 2, 2      4/5         4, 4, 4    0, 0, 0
    container-restart  low/med/hi    3/5           3, 3, 1    0, 0, 2      4/5         3, 2, 1    1, 2, 3
    error-burst        low/med/hi    3/5           3, 3, 3    0, 0, 0      4/5         4, 4, 4    0, 0, 0
    alert-burst        low/med/hi    3/5           3, 3, 3    0, 0, 0      4/5         3, 3, 4    1, 1, 0
    warning-events     low/med/hi    3/5           2, 0, 3    1, 3, 0      4/5         4, 4, 2    0, 0, 2

(no outcome won by noise anywhere; 0 of 90 mitigation verdicts per agent changed). The scripted
policy blames the component with the most failing-pod, restart, alert and warning evidence: it is
misled by a neighbour that crash-loops or fires alerts when it looks; the baseline, which reads
rollout history and events, by a neighbour that was just rolled out or warns.

The whole hotel-reservation application sample (54 problems, 216 trials, 563 s on an unshared
2-core machine but for a test run beside it):

    .venv/bin/python bench/noise_bench.py --problems 66 --kinds all --intensities high --workers 2

    noise kind  intensity  baseline off  baseline on lost/won McNemar p  scripted off  scripted on lost/won McNemar p
    all         high         12/54  22%    1/54   2%     11/0     0.001    12/54  22%    4/54   7%      8/0     0.008

(8 of the baseline's 54 noisy mitigation verdicts changed, each because it rolled back the red
herring instead of the faulty workload; none of the scripted agent's.)
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

NS = "hotel-reservation"
_POD = re.compile(r"^(\S+?)-(?:[a-z0-9]{8,10}-[a-z0-9]{5}|\d+)\s+(\d+)/(\d+)\s+(\S+)\s+(\d+)", re.M)
_BAD = ("CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "Error", "OOMKilled", "Pending",
        "CreateContainerConfigError", "Init:", "ContainerCreating")


def triage(request: dict[str, Any]) -> dict[str, Any]:
    """The scripted LLM's diagnosis: the component an on-call engineer skimming the pods, the
    firing alerts, the warning events and the error logs would blame first (a failing pod counts
    most, then restarts, alerts, warnings and error lines), with what those said about it."""
    import json

    from farm.llm.scripted import tool_results

    seen = tool_results(request)
    score: Counter[str] = Counter()
    why: dict[str, list[str]] = defaultdict(list)

    def note(comp: str, weight: float, text: str) -> None:
        if comp and not any(w in comp for w in ("wrk2", "locust", "load")):
            score[comp] += weight
            if text not in why[comp]:
                why[comp].append(text)

    names: set[str] = set()
    for tool, content in seen:
        if tool == "kubectl" and content.startswith("NAME "):  # get pods
            for comp, ready, want, status, restarts in (m.groups() for m in _POD.finditer(content)):
                names.add(comp)
                if any(status.startswith(b) for b in _BAD) or ready != want:
                    note(comp, 10, f"its pod is {status} with {ready}/{want} containers ready")
                if int(restarts):
                    note(comp, min(int(restarts), 5), f"its pod restarted {restarts} times")
        elif tool == "get_alerts" and content.startswith("["):
            for alert in json.loads(content):
                labels = alert.get("labels") or {}
                if labels.get("alertname") in ("Watchdog", "InfoInhibitor", "HighRequestRate"):
                    continue
                comp = labels.get("service_name") or _component(labels.get("pod", ""))
                note(comp, 2, f"{labels.get('alertname')} is firing ({(alert.get('annotations') or {}).get('description', '')})")
        elif tool == "kubectl":  # warning events
            for line in content.splitlines():
                m = re.search(r"Warning\s+(\S+)\s+pod/(\S+)\s+(.*)", line)
                if m:
                    note(_component(m.group(2)), 1, f"{m.group(1)}: {m.group(3)[:160]}")
        elif tool == "loki_query":
            for line in content.splitlines():
                m = re.search(r"\bapp=([\w-]+).*?\]\s(.*)$", line)
                if m:
                    note(m.group(1), 0.5 if score[m.group(1)] < 3 else 0, f"it logs: {m.group(2)[:200]}")
    if not score:
        return {"text": "No clear root cause: every pod runs and nothing reports errors."}
    top = max(score, key=lambda c: (score[c], c))
    return {"text": f"The root cause is the {top} deployment: " + "; ".join(why[top][:5]) + "."}


def _component(pod: str) -> str:
    m = _POD.match(pod + " 1/1 Running 0")
    return m.group(1) if m else pod


def triage_plan() -> list[Any]:
    # Paged at the first alert, it lets the incident show itself for two minutes, as the baseline does.
    return [
        ("wait", {"seconds": 120}),
        ("kubectl", {"command": f"get pods -n {NS}"}),
        ("get_alerts", {}),
        ("kubectl", {"command": f"get events -n {NS} --field-selector type=Warning"}),
        ("loki_query", {"query": f'{{namespace="{NS}"}} |~ "(?i)(error|fail|refused|timeout|panic)"', "minutes": 10}),
        ("submit_diagnosis", triage),
        ("submit_mitigation", {}),
    ]


def sample(count: int, seed: int, apps: list[str] | None = None) -> list[str]:
    """A seeded random sample of `count` single-fault application problems of `apps` (default
    hotel-reservation), as even across the apps as their sizes allow (the catalog groups similar
    faults together, so every n-th would not be a fair mix)."""
    import random

    from farm.problems.catalog import load_catalog

    rng = random.Random(seed)
    pools = []
    for app in apps or [NS]:
        ids = [p.id for p in load_catalog().problems if p.app == app and p.layer == "application"
               and p.composition == "single"]
        if not ids:
            raise SystemExit(f"noise_bench: --apps: no single-fault application problems for app '{app}'")
        pools.append(rng.sample(ids, len(ids)))
    out: list[str] = []
    while len(out) < count and any(pools):
        for pool in pools:
            if pool and len(out) < count:
                out.append(pool.pop())
    return out


def mcnemar(off: dict[str, bool], on: dict[str, bool]) -> tuple[int, int, float]:
    """Paired outcomes: how many passed only without noise, only with it, and the exact
    two-sided McNemar p-value (binomial on the discordant pairs)."""
    from math import comb

    lost = sum(1 for p in off if off[p] and p in on and not on[p])
    gained = sum(1 for p in off if not off[p] and on.get(p))
    n, k = lost + gained, min(lost, gained)
    p = min(1.0, 2 * sum(comb(n, i) for i in range(k + 1)) / 2 ** n) if n else 1.0
    return lost, gained, p


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", type=int, default=3)
    ap.add_argument("--intensities", default="high", help="comma-separated: low, medium, high or numbers")
    ap.add_argument("--kinds", default="each,all", help="comma-separated noise kinds, 'all' for every one together, "
                                                   "'each' for every confounder alone")
    ap.add_argument("--agents", default="baseline,scripted")
    ap.add_argument("--apps", default=NS, help="comma-separated applications to sample from (the scripted "
                                               "agent's plan reads hotel-reservation only)")
    ap.add_argument("--ids", default="", help="comma-separated problem ids to run instead of a sample")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0, help="the trials' seed")
    ap.add_argument("--sample-seed", type=int, default=0, help="which problems the sample takes")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    from farm.llm.scripted import ScriptedLLM, tool_plan
    from injectors.noise import CONFOUNDERS

    kinds = [k for k in args.kinds.split(",") if k]
    if "each" in kinds:
        kinds = [k for k in kinds if k != "each"] + list(CONFOUNDERS)
    intensities = [i for i in args.intensities.split(",") if i]
    settings: list[Any] = [False]
    labels: dict[str, tuple[str, str]] = {}
    for intensity in intensities:
        for kind in kinds:
            level: dict[str, Any] = {"intensity": float(intensity) if re.match(r"^[\d.]+$", intensity) else intensity}
            if kind != "all":
                level["kinds"] = [kind]
            settings.append(level)
            labels[str(level["intensity"]) + (f":{kind}" if kind != "all" else "")] = (kind, intensity)
    apps = [a for a in args.apps.split(",") if a]
    agents = args.agents.split(",")
    if "scripted" in agents and apps != [NS]:
        ap.error(f"--apps other than {NS} need --agents baseline (the scripted plan reads {NS})")
    problems = [i for i in args.ids.split(",") if i] or sample(args.problems, args.sample_seed, apps)
    out = args.out or Path(tempfile.mkdtemp(prefix="noise-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    with ScriptedLLM(tool_plan(triage_plan())) as llm:
        entries: list[Any] = []
        if "baseline" in agents:
            entries.append("baseline")
        if "scripted" in agents:
            entries.append({"name": "react", "options": {"api_base": llm.url}})
        import yaml

        spec = {"name": f"noise-bench-{int(time.time())}", "problems": {"ids": problems}, "agents": entries,
                "models": ["openai/scripted-model"] if "scripted" in agents else [], "seeds": [args.seed],
                "noise": settings, "limits": {"max_steps": 30, "wall_time_s": 600}}
        spec_path = out / "spec.yaml"
        spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
        trials = len(problems) * len(settings) * len(entries)
        print(f"{len(problems)} problems ({', '.join(problems)}) x {len(settings)} noise settings x "
              f"{len(entries)} agents = {trials} trials on {args.workers} workers; output in {out}", flush=True)
        t0 = time.monotonic()
        run = subprocess.run([sys.executable, "-m", "farm.cli", "run", str(spec_path), "--workers", str(args.workers),
                              "--out", str(out / "run")], cwd=ROOT, capture_output=True, text=True)
        if run.returncode != 0:
            print(run.stdout[-3000:], run.stderr[-3000:], file=sys.stderr)
            return 1
        wall = time.monotonic() - t0
    db = sqlite3.connect(out / "run" / "farm.sqlite")
    rows = db.execute("select problem_id, agent, noise, noise_level, diagnosis_passed, mitigation_passed, state "
                      "from trial").fetchall()
    passed: dict[tuple[str, str], dict[str, bool]] = defaultdict(dict)
    mitigated: dict[tuple[str, str], dict[str, bool]] = defaultdict(dict)
    unfinished = Counter(state for *_, state in rows if state != "finished")
    for problem, agent, noise, level, ok, fixed, state in rows:
        if state != "finished":  # an infrastructure failure is no outcome, not a miss
            continue
        name = "scripted" if agent == "react" else agent
        passed[(name, level or ("on" if noise else "off"))][problem] = bool(ok)
        mitigated[(name, level or ("on" if noise else "off"))][problem] = bool(fixed)
    print(f"\n{'noise kind':18} {'intensity':9} " + " ".join(
        f"{a + ' off':>13} {a + ' on':>12} {'lost/won':>8} {'McNemar p':>9}" for a in agents))
    for label, (kind, intensity) in labels.items():
        cells = []
        for agent in agents:
            off, on = passed[(agent, "off")], passed[(agent, label)]
            lost, gained, p = mcnemar(off, on)
            cells.append(f"{_rate(off):>13} {_rate(on):>12} {f'{lost}/{gained}':>8} {p:>9.3f}")
        print(f"{kind:18} {intensity:9} " + " ".join(cells))
    # Noise stops before the oracles run: it must never turn a fix that passes quietly into a fail.
    for agent in agents:
        off = mitigated[(agent, "off")]
        flips = [(p, label) for label in labels for p, fixed in mitigated[(agent, label)].items()
                 if p in off and fixed != off[p]]
        print(f"{agent}: mitigation verdicts passing without noise {sum(off.values())}/{len(off)}; "
              f"changed by noise in {len(flips)} of {sum(len(mitigated[(agent, label)]) for label in labels)} trials"
              + (f" ({', '.join(f'{p} at {label}' for p, label in flips[:6])})" if flips else ""))
    if unfinished:
        print("not finished (left out): " + ", ".join(f"{n} {state}" for state, n in unfinished.items()))
    print(f"\n{len(rows)} trials in {wall:.0f} s wall ({wall / max(1, len(rows)):.1f} s per trial on {args.workers} workers)")
    return 0


def _rate(results: dict[str, bool]) -> str:
    if not results:
        return "-"
    return f"{sum(results.values())}/{len(results)} {100 * sum(results.values()) / len(results):3.0f}%"


if __name__ == "__main__":
    sys.exit(main())
