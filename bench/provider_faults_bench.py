"""Provider failures are infrastructure: a 30-trial sweep of the react agent against the faulty
provider (farm.llm.faulty, real HTTP on loopback, through litellm), one model per failure kind,
run by `farm run` on emulated clusters; then the same command once the provider is mended. Prints,
from the recorded rows, per model (= failure kind): each trial's state, attempts and their phases
after each run; then how many trials the provider failed, how many of those n counts (must be 0),
the agent errors, and the exit codes.

    .venv/bin/python bench/provider_faults_bench.py [--workers 2] [--seeds 2] [--out DIR] [--models a,b,...]

`--models` runs some of the models below only (tests/bench/test_provider_faults_bench.py runs a
tiny sweep of five, one seed, so that the bench cannot rot).

The models (15 x 2 seeds = 30 trials); the fault is every request's unless a list is given:
    steady                        no fault
    flaky-call                    429 then 503, then answers: the client's one retry (the bench's
                                  max_backoff_retries) absorbs the 429, the 503 fails the attempt,
                                  the sweep's own retry answers
    flaky-attempt                 503 x 2: fails one attempt, the sweep's own retry answers
    rate-limit, server-error, unavailable, overloaded (529), auth (401), unknown-model (404),
    slow (a timeout), drop (connection closed mid-answer), malformed-body (200, not JSON)
                                  the provider's failures: infra_failed, phase provider
    context-length                the agent's own failure: finished, end reason context_length
    truncated-tool-call, malformed-tool-call (first request)
                                  answered; the agent is told its arguments were not JSON

Reproduce (export LITELLM_LOCAL_MODEL_COST_MAP=True PYTHONHASHSEED=0; offline judge):

    .venv/bin/python bench/provider_faults_bench.py --workers 2

Result (2026-12-07 22:30 UTC, a 2-core machine shared with other jobs at load about 11; workers 2,
offline judge; the agents in their sandboxed processes behind the worker's model proxy). Run 1, the
faulty provider (`farm run --no-preflight`): exit code 3 in 290 s; 46 attempts, 34 of them
infrastructure errors with phase provider (68 faults served); per model:

    auth, unknown-model            infra_failed   1 attempt  (provider; given up at once)
    rate-limit, server-error, unavailable, overloaded, slow, drop, malformed-body
                                   infra_failed   2 attempts (provider; max_infra_attempts 2)
    flaky-call, flaky-attempt      finished       one trial of each after 1 provider attempt
    context-length                 finished       end reason context_length (the agent's)
    steady, truncated-tool-call, malformed-tool-call   finished, submitted

    trials 30, finished 12, infra_failed 18, provider_failed 18, n 12, agent_errors 2
    (context_length 2), trials of a provider-fault model counted against the agent 0

Run 2, the provider mended, the same command with pre-flight: exit code 0 in 165 s; the 18
provider-failed trials ran again and recorded (64 attempts in all; the failed ones stay on record):

    trials 30, finished 30, infra_failed 0, provider_failed 0, n 30, agent_errors 2
    (context_length 2), counted against the agent 0

(Before the agent's side of the model proxy waited as long as the session, the same command at
the same load counted 3 provider failures against the agent: slow and overloaded answers, and a
worker's first call, which imports litellm, outlasted the agent's own 5 s wait.)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROBLEM = "hr-frontend-service-targetport-wrong"
# model -> fault plan (farm.llm.faulty.FaultyProvider's schedule)
BROKEN = {
    "flaky-call": ["rate_limit", "unavailable"],
    "flaky-attempt": ["unavailable", "unavailable"],
    "rate-limit": "rate_limit", "server-error": "server_error", "unavailable": "unavailable",
    "overloaded": "overloaded", "auth": "auth", "unknown-model": "unknown_model", "slow": "slow", "drop": "drop",
    "malformed-body": "malformed_body",
    "context-length": "context_length",
    "truncated-tool-call": ["truncated_tool_call"], "malformed-tool-call": ["malformed_tool_call"],
}
MODELS = ["steady", *BROKEN]
SLOW_S, TIMEOUT_S = 8.0, 5.0  # the react loop gives a call at least 5 s


def farm_run(spec: Path, out: Path, workers: int, *extra: str) -> tuple[int, float, str]:
    env = {k: v for k, v in os.environ.items() if k != "FARM_DATABASE_URL"}
    t0 = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "farm.cli", "run", str(spec), "--workers", str(workers), "--out",
                          str(out), *extra], cwd=ROOT, capture_output=True, text=True, env=env)
    return run.returncode, time.monotonic() - t0, run.stdout + run.stderr


def summarise(out: Path, label: str) -> dict[str, int]:
    from sqlmodel import Session, select

    from core.states import END_AGENT_ERROR, END_CONTEXT_LENGTH, TrialState
    from results import leaderboard
    from results.db import engine_for
    from results.models import Attempt, Trial

    engine = engine_for(f"sqlite:///{out / 'farm.sqlite'}")
    with Session(engine) as s:
        trials = list(s.exec(select(Trial).order_by(Trial.model, Trial.seed)))
        attempts = list(s.exec(select(Attempt).order_by(Attempt.id)))
    print(f"\n{label}")
    print(f"  {'model (fault)':<22} {'seed':>4}  {'state':<13} {'end reason':<15} attempts (state/phase)")
    for t in trials:
        mine = [f"{a.state}/{a.error_phase}" if a.error_phase else a.state for a in attempts if a.trial_id == t.id]
        print(f"  {t.model.removeprefix('openai/'):<22} {t.seed:>4}  {t.state:<13} {str(t.end_reason or '-'):<15} "
              + ", ".join(mine))
    failed = leaderboard.failure_counts(engine, trials[0].sweep_id)
    rows = leaderboard.compute(engine, trials[0].sweep_id, "agent")
    states = Counter(t.state for t in trials)
    provider_models = {f"openai/{m}" for m, plan in BROKEN.items() if isinstance(plan, str) and plan != "context_length"}
    # A trial of a provider-fault model counted in n with an agent error is exactly what must not happen.
    counted_against_agent = sum(1 for t in trials if t.model in provider_models and t.state == TrialState.FINISHED
                                and t.end_reason in (END_AGENT_ERROR, END_CONTEXT_LENGTH))
    figures = {"trials": len(trials), "finished": states[TrialState.FINISHED],
               "infra_failed": states[TrialState.INFRA_FAILED], "provider_failed": failed["provider_failed"],
               "n": sum(r["n"] for r in rows), "agent_errors": failed["agent_errors"],
               "context_length": failed["context_length"], "provider_counted_against_agent": counted_against_agent,
               "attempts": len(attempts),
               "provider_attempts": sum(1 for a in attempts if a.error_phase == "provider")}
    print("  " + ", ".join(f"{k} {v}" for k, v in figures.items()))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--models", default=",".join(MODELS),
                        help=f"comma-separated, some of: {', '.join(MODELS)} (default: all)")
    args = parser.parse_args()
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = sorted(set(models) - set(MODELS))
    if unknown or not models:
        parser.error(f"--models: unknown {', '.join(unknown) or '(none given)'} (known: {', '.join(MODELS)})")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from farm.llm.faulty import FaultyProvider
    from farm.llm.scripted import tool_plan

    plan = tool_plan([("kubectl", {"command": "get svc -n hotel-reservation"}),
                      ("submit_diagnosis", {"text": "The frontend Service's targetPort does not match the container "
                                                    "port, so frontend receives no traffic."})],
                     finish="Diagnosed.")
    work = args.out or Path(tempfile.mkdtemp(prefix="provider-faults-"))
    out = work / "out"
    if out.exists():
        parser.error(f"{out} exists: the bench needs a fresh folder (its second run resumes the first)")
    work.mkdir(parents=True, exist_ok=True)
    with FaultyProvider(BROKEN, answer=plan, slow_s=SLOW_S, retry_after_s=0.2) as fp:
        agent = {"name": "react", "options": {"api_base": fp.url, "max_backoff_retries": 1, "max_backoff_s": 0.5,
                                              "request_timeout_s": TIMEOUT_S}}
        spec = work / "spec.yaml"
        spec.write_text(yaml.safe_dump({
            "name": "provider-faults", "problems": {"ids": [PROBLEM]}, "agents": [agent],
            "models": [f"openai/{m}" for m in models], "seeds": args.seeds, "max_infra_attempts": 2,
            "limits": {"max_steps": 12, "wall_time_s": 300}}))
        print(f"{len(models) * args.seeds} trials ({len(models)} models x {args.seeds} seeds), {args.workers} workers; "
              f"folder {work}")
        # The provider breaks after the sweep started: pre-flight would (rightly) refuse it.
        code1, took1, said1 = farm_run(spec, out, args.workers, "--no-preflight")
        first = summarise(out, f"run 1 (faulty provider): exit code {code1}, {took1:.0f} s")
        served1 = sum(n for (_, fault), n in fp.served.items() if fault != "ok")
        # Mended. (The context-length model is mended too: pre-flight rightly refuses a model that
        # answers even its tiny request with a context-length error; its trials are finished, so
        # the re-run does not call it but for pre-flight.)
        fp.set_schedule({})
        code2, took2, said2 = farm_run(spec, out, args.workers)
        second = summarise(out, f"run 2 (provider mended, same command with pre-flight): exit code {code2}, "
                                f"{took2:.0f} s")
    print(f"\nfaults served in run 1: {served1}")
    print(f"run 1: {first['provider_failed']} trials infra_failed on the provider, "
          f"{first['provider_counted_against_agent']} counted against the agent, n {first['n']}, "
          f"agent errors {first['agent_errors']} (context length {first['context_length']}), exit {code1}")
    print(f"run 2: {second['finished']}/{second['trials']} finished, provider failures left "
          f"{second['provider_failed']}, counted against the agent {second['provider_counted_against_agent']}, "
          f"n {second['n']}, exit {code2}")
    ok = (code1 == 3 and code2 == 0 and first["provider_counted_against_agent"] == 0
          and second["provider_failed"] == 0 and second["finished"] == second["trials"])
    if not ok:
        print("\nUNEXPECTED; the runs said:\n" + said1[-3000:] + "\n" + said2[-3000:])
        sys.exit(1)


if __name__ == "__main__":
    main()
