"""The `farm` command line. Names are stable so that people and scripts can rely on them:
run, worker, sweep submit|status|cancel, leaderboard, problems, judge, cluster, sim, flower."""

from __future__ import annotations

import importlib
import os
import shutil
import socket
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# kubectl is a runtime dependency of the agent interface; scripts/setup.sh unpacks Debian's
# into .tools/ only when the machine has none, and then it is used from there.
_PROJECT_KUBECTL = Path(__file__).resolve().parents[2] / ".tools" / "kubectl-root" / "usr" / "bin"
if shutil.which("kubectl") is None and (_PROJECT_KUBECTL / "kubectl").exists():
    os.environ["PATH"] = f"{_PROJECT_KUBECTL}{os.pathsep}{os.environ.get('PATH', '')}"

app = typer.Typer(help="An evaluation farm for AI SRE agents. A service that cannot be reached is one line; "
                       "--debug (with any command) shows its traceback.", no_args_is_help=True, add_completion=False)
sweep_app = typer.Typer(help="Sweeps on the farm (broker + database from the environment).", no_args_is_help=True)
app.add_typer(sweep_app, name="sweep")
# Leaderboards are wide: when output is not a terminal (CI logs, pipes), do not wrap at 80.
console = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True)


def _mount(module: str, name: str, help_text: str) -> None:
    app.add_typer(importlib.import_module(module).app, name=name, help=help_text)


_mount("farm.cli.problems", "problems", "The problem catalog: list, show, validate, mutate.")
_mount("farm.cli.judge", "judge", "The diagnosis judge: agreement with labelled diagnoses.")
_mount("farm.cli.cluster", "cluster", "Clusters owned by workers: list, create, delete.")
_mount("farm.cli.sim", "sim", "The emulated cluster, by hand: sim up.")
_mount("farm.cli.view", "view", "A live web view of sweeps: leaderboards, trials, transcripts, errors.")


# Exit codes of `farm run` and `farm sweep submit` (README "Exit codes"): 0 every trial done and
# none left to the model provider; 1 the farm itself failed; 2 bad input, nothing written (the
# spec, or a model that failed pre-flight); 3 trials the model provider failed are left
# (infra_failed, not counted): run the same command again to retry them.
EXIT_FARM_FAILED, EXIT_BAD_INPUT, EXIT_PROVIDER_FAILURES = 1, 2, 3
PREFLIGHT_HELP = ("Check every model of the spec before anything is written: known to litellm (or given an "
                  "api_base), credentials present, one tiny request answered.")


def _fail(message: str, code: int = 2) -> None:
    err.print(f"[red]error:[/red] {message}", soft_wrap=True, highlight=False)
    raise typer.Exit(code)


def _interrupted() -> None:
    """Ctrl-C in a command: say what was kept and how to go on (click would print "Aborted!")."""
    from farm.cli.errors import interrupted

    err.print(interrupted(sys.argv), highlight=False, soft_wrap=True)
    raise typer.Exit(130)


def _read_engine(db: str | None = None, offers_db: bool = False):  # type: ignore[no-untyped-def]
    """The engine of an existing database, for commands that only read (or change existing rows):
    they must not leave a fresh ./farm-out behind when there is nothing to read. `offers_db`: the
    command has a --db option (the hint names it only then)."""
    from results.db import engine_for, existing_url

    url = db or existing_url()
    if url is None:
        _fail("no farm database: set FARM_DATABASE_URL" + (" (or pass --db)" if offers_db else "")
              + ", or run `farm run` here first (it writes farm-out/farm.sqlite)")
    return engine_for(url)


def _check_by(by: str, option: str = "--by") -> None:
    """Refuse a grouping before any work starts (a sweep must not run to fail at its leaderboard)."""
    from results.leaderboard import group_keys

    try:
        group_keys(by)
    except ValueError as exc:
        _fail(str(exc).replace("--by", option, 1))


def _load_spec(path: Path, preflight: bool = False):  # type: ignore[no-untyped-def]
    """The spec at `path`, and with `preflight` its models checked; one clear error and exit code
    2 otherwise, before anything is written."""
    from core.errors import InputError
    from farm.spec import load_spec

    try:
        spec = load_spec(path)
        _check_local_models([m.name for m in spec.models] + ([spec.judge] if spec.judge else []))
        if preflight:
            from farm.preflight import preflight as check
            from farm.preflight import uses_of

            uses = check(uses_of(spec))
            if uses:
                console.print(f"pre-flight: {len(uses)} model(s) answered: " + ", ".join(sorted({u.model for u in uses})))
        return spec
    except InputError as exc:
        _fail(str(exc), EXIT_BAD_INPUT)


def _check_local_models(models: list[str]) -> None:
    """A model this host must serve (local/<name>) is installed, before anything is written."""
    from core.errors import ConfigurationError
    from farm.llm.local_server import check_installed
    from farm.llm.models import LOCAL_PREFIX, is_local

    for model in models:
        if is_local(model):
            try:
                check_installed(model.removeprefix(LOCAL_PREFIX))
            except ConfigurationError as exc:
                _fail(str(exc))


@app.command()
def run(
    spec: Annotated[Path, typer.Argument(help="Sweep spec (YAML).")],
    workers: Annotated[int, typer.Option("--workers", "-w", min=1, help="Local worker processes.")] = 2,
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the database, artifacts and leaderboard.")] = Path("farm-out"),
    by: Annotated[str, typer.Option(help="Leaderboard grouping: any combination of agent, model, layer, noise, "
                                         "problem, app, composition, seed.")] = "agent,model",
    preflight: Annotated[bool, typer.Option("--preflight/--no-preflight", help=PREFLIGHT_HELP)] = True,
) -> None:
    """Run a sweep on the embedded default: local workers, emulated clusters, SQLite, local artifacts.

    Exit codes: 0 every trial done; 1 the farm failed; 2 bad input or a model failed pre-flight
    (nothing written); 3 trials the model provider failed are left (not counted): run it again."""
    _check_by(by)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from core.states import TRIAL_DONE, TrialState
    from farm import dispatcher
    from farm.runner import run_sweep
    from results import leaderboard, progress
    from results.db import engine_for

    s = _load_spec(spec, preflight)
    out.mkdir(parents=True, exist_ok=True)
    db_url = os.environ.get("FARM_DATABASE_URL") or f"sqlite:///{(out / 'farm.sqlite').resolve()}"
    engine = engine_for(db_url)
    sub = dispatcher.submit(engine, s)
    console.print(f"sweep [bold]{sub.sweep_id}[/bold]: {sub.total} trials, {sub.done} already done, "
                  f"{len(sub.to_run)} to run on {workers} local worker(s)")
    if sub.to_run:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("{task.fields[detail]}"), console=console, transient=False) as bar:
            task = bar.add_task("trials", total=sub.total, detail="")

            def show(counts: dict[str, int]) -> None:
                done = sum(n for st, n in counts.items() if st in TRIAL_DONE)
                failed = leaderboard.failure_counts(engine, sub.sweep_id)
                detail = (f"running {counts.get(TrialState.RUNNING, 0)}, "
                          f"provider-failed {failed['provider_failed']}, "
                          f"infra-failed {failed['infra_failed_other']}, agent errors {failed['agent_errors']}")
                if counts.get(TrialState.SKIPPED_COST_CAP):
                    detail += f", skipped (cost cap) {counts[TrialState.SKIPPED_COST_CAP]}"
                bar.update(task, completed=done, detail=detail)

            try:
                run_sweep(sub.sweep_id, db_url, out, workers, cluster_options=s.cluster.model_dump(), progress=show)
            except RuntimeError as exc:
                _fail(str(exc), code=EXIT_FARM_FAILED)
            except KeyboardInterrupt:
                _interrupted()
    rows = leaderboard.compute(engine, sub.sweep_id, by)
    console.print(leaderboard.render(rows, by))
    # The sweep's own CSV, and the folder's: every sweep run into it, one row group per sweep, so
    # a second sweep run into the same folder adds to it instead of replacing the first.
    path = leaderboard.write_csv(rows, by, out / f"leaderboard-{sub.sweep_id}.csv")
    leaderboard.write_csv(leaderboard.compute(engine, None, by), by, out / "leaderboard.csv")
    console.print(f"leaderboard written to {path} (every sweep in {out}: {out / 'leaderboard.csv'})")
    failed = leaderboard.failure_counts(engine, sub.sweep_id)
    if failed["agent_errors"]:
        console.print(progress.failures_line({**failed, "provider_failed": 0}))
    if failed["provider_failed"]:
        err.print(f"[yellow]{failed['provider_failed']} trial(s) failed on the model provider[/yellow] and are not "
                  "counted in n (see `farm sweep status`): run the same command again to retry them")
        raise typer.Exit(EXIT_PROVIDER_FAILURES)


@app.command()
def worker(
    cluster: Annotated[str, typer.Option("--cluster", "-c", help="sim, sim:NAME, kind:NAME or eks:NAME")] = "sim",
    name: Annotated[str | None, typer.Option(help="Worker name (default: from cluster, host and pid).")] = None,
    loglevel: Annotated[str, typer.Option()] = "INFO",
) -> None:
    """One Celery worker owning one cluster (broker, database and artifacts from the environment)."""
    from clusters.handle import parse_cluster_ref
    from core.errors import ConfigurationError

    try:
        kind, cname = parse_cluster_ref(cluster)
    except ConfigurationError as exc:
        _fail(str(exc))
    wname = name or f"{kind}-{cname}-{socket.gethostname()}-{os.getpid()}".replace(":", "-")
    _schema_or_exit()
    nodename = f"{wname}@{socket.gethostname()}"
    os.environ["FARM_WORKER_NAME"] = wname
    os.environ["FARM_WORKER_CLUSTER"] = cluster
    os.environ["FARM_WORKER_NODENAME"] = nodename
    from tasks import app as celery_app
    from tasks.config import worker_queue

    # Only its own queue at first: the worker process subscribes this node to the shared claim
    # queue once its cluster is open (farm.serving), so a worker without one takes no claim.
    celery_app.worker_main([
        "worker", "-Q", worker_queue(wname), "-c", "1", "--pool", "prefork",
        "-O", "fair", "-n", nodename, "--loglevel", loglevel, "-E",
    ])


def _schema_or_exit() -> None:
    """Create or upgrade the schema once, before any worker process forks; a database that a
    newer farm upgraded, or none reachable, stops the worker here with the reason."""
    import time

    from results.db import SchemaTooNew, default_url, engine_for, redact_url

    url = default_url()
    # A database still starting (or restarting) is waited for a while, with backoff.
    deadline, pause = time.monotonic() + float(os.environ.get("FARM_DB_WAIT_S", "60")), 1.0
    while True:
        try:
            engine = engine_for(url)
            break
        except SchemaTooNew as exc:
            _fail(str(exc), 1)
        except Exception as exc:  # sqlalchemy's connection errors: say which database
            if time.monotonic() >= deadline:
                _fail(f"cannot open the farm database {redact_url(url)}: {exc}", 1)
            err.print(f"waiting for the farm database {redact_url(url)}: {type(exc).__name__}")
            time.sleep(pause)
            pause = min(10.0, pause * 2)
    engine.dispose()  # no pooled connection crosses the fork into the worker process
    engine_for.cache_clear()


@sweep_app.command("submit")
def sweep_submit(
    spec: Annotated[Path, typer.Argument(help="Sweep spec (YAML).")],
    preflight: Annotated[bool, typer.Option("--preflight/--no-preflight", help=PREFLIGHT_HELP + " Skip it when "
                                            "the keys live only on the workers.")] = True,
) -> None:
    """Expand a sweep into trials and queue those not yet done (resubmitting resumes, and runs again
    the trials the model provider or other infrastructure failed).

    Exit codes: 0 queued; 1 the broker cannot be reached; 2 bad input or a model failed pre-flight
    (nothing written)."""
    from farm import dispatcher
    from results.db import default_url, engine_for

    s = _load_spec(spec, preflight)
    engine = engine_for(default_url())
    _reach_broker()
    _queue(engine, dispatcher.submit(engine, s))


def _reach_broker() -> None:
    """Before anything is written: a broker that cannot be reached leaves no sweep whose trials are
    queued in SQL with no message behind them (main() names it in one line)."""
    from tasks import app as celery_app

    with celery_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0.5, timeout=5)


def _queue(engine, sub) -> None:  # type: ignore[no-untyped-def]
    """Send a claim for each trial of the submission `sub` that is to run and not running."""
    from sqlmodel import Session, select

    from core.states import TrialState
    from farm import dispatcher
    from results.models import Trial
    from tasks.trial import send_claims

    with Session(engine) as session:
        keys = dict(session.exec(select(Trial.id, Trial.key).where(Trial.sweep_id == sub.sweep_id)).all())
        running = set(session.exec(select(Trial.id).where(Trial.sweep_id == sub.sweep_id,
                                                           Trial.state == TrialState.RUNNING)).all())
    to_send = [t for t in sub.to_run if t not in running]
    dispatcher.mark_queued(engine, to_send)
    send_claims(to_send, keys)  # a broker that cannot be reached: main() says which, in one line
    console.print(f"sweep {sub.sweep_id}: {sub.total} trials ({sub.created} new), {sub.done} already done, "
                  f"{len(to_send)} queued")


@sweep_app.command("retry")
def sweep_retry(
    sweep_id: str,
    errors: Annotated[bool, typer.Option("--errors", help="Also run again the finished trials whose session ended "
                                                          "in an agent error (agent_error): their result is "
                                                          "withdrawn, their attempts stay on record.")] = False,
    preflight: Annotated[bool, typer.Option("--preflight/--no-preflight", help=PREFLIGHT_HELP)] = True,
) -> None:
    """Queue again the sweep's trials that ended without a result (infra_failed, provider failures
    included; cancelled; skipped by the cost cap), from the spec on record: a resubmission without
    the spec file."""
    from core.errors import InputError
    from farm import dispatcher
    from results import ledger

    engine = _read_engine()
    try:
        s = dispatcher.spec_of(engine, sweep_id)
    except KeyError:
        _fail(f"no sweep '{sweep_id}'")
    if preflight:
        from farm.preflight import preflight as check
        from farm.preflight import uses_of

        try:
            check(uses_of(s))
        except InputError as exc:
            _fail(str(exc), EXIT_BAD_INPUT)
    if errors:
        again = ledger.rerun_agent_errors(engine, sweep_id)
        console.print(f"sweep {sweep_id}: {len(again)} trial(s) that ended in an agent error will run again")
    _reach_broker()
    _queue(engine, dispatcher.submit(engine, s))


@sweep_app.command("status")
def sweep_status(
    sweep_id: str, json_out: Annotated[bool, typer.Option("--json")] = False,
    queued_long_s: Annotated[float, typer.Option(help="A trial queued longer than this is reported.")] = 300.0,
    watch: Annotated[bool, typer.Option("--watch", help="Refresh counts, rates so far, cost and ETA until the "
                                                       "sweep is finished.")] = False,
    interval: Annotated[float, typer.Option("--interval", min=0.2, help="Seconds between refreshes.")] = 5.0,
) -> None:
    """Counts of trials per state, trials queued for long and why, infrastructure errors and
    events, cost against the cap."""
    import json

    if watch:
        return _watch(sweep_id, interval, json_out)

    from farm import dispatcher
    from results import leaderboard, ledger, progress

    engine = _read_engine()
    ledger.reap(engine)  # a status check also requeues trials of lost workers in the ledger
    try:
        counts = progress.status(engine, sweep_id)
        infra = dispatcher.infra_summary(engine, sweep_id)
    except KeyError:
        _fail(f"no sweep '{sweep_id}'")
    waiting = ledger.long_queued(engine, sweep_id, queued_long_s)
    if json_out:
        console.print_json(json.dumps({"sweep": sweep_id, "trials": counts, **infra,
                                       "failures": leaderboard.failure_counts(engine, sweep_id), "queued_long": {
            "count": waiting.count, "oldest_s": waiting.oldest_s, "never_published": waiting.never_published,
            "republished": waiting.republished, "healthy_workers": waiting.healthy_workers,
            "why": waiting.why() if waiting.count else None}}))
        return
    total = sum(counts.values())
    console.print(f"sweep {sweep_id}: {total} trials — " + ", ".join(f"{k} {v}" for k, v in counts.items() if v))
    if waiting.count:
        console.print(f"queued for long: {waiting.count} trial(s), the oldest {waiting.oldest_s:.0f} s: {waiting.why()}")
    failed = leaderboard.failure_counts(engine, sweep_id)
    if failed["provider_failed"] or failed["agent_errors"]:
        console.print(progress.failures_line(failed))
    if infra["infra_errors"]:
        console.print("infrastructure errors (attempts retried or given up): "
                      + ", ".join(f"{phase} {n}" for phase, n in sorted(infra["infra_errors"].items())))
    if infra["infra_events"]:
        console.print("infrastructure events (trial results stand): "
                      + ", ".join(f"{kind} {n}" for kind, n in sorted(infra["infra_events"].items())))
    cap = infra["cost_cap_usd"]
    console.print(f"cost ${infra['cost_usd']:.4f}" + (f" of a ${cap:.4f} cap" if cap is not None else ""))


def _watch(sweep_id: str, interval: float, json_out: bool) -> None:
    import json

    from results import progress

    engine = _read_engine()
    tty = console.is_terminal and not json_out

    def show(snap: dict) -> None:
        if json_out:
            console.print_json(json.dumps(snap))
            return
        if tty:
            console.clear()
        console.print(progress.render(snap), highlight=False)

    try:
        progress.watch(engine, sweep_id, interval, show)
    except KeyError:
        _fail(f"no sweep '{sweep_id}'")
    except KeyboardInterrupt:
        _interrupted()


@sweep_app.command("cancel")
def sweep_cancel(sweep_id: str) -> None:
    """Cancel the trials not yet finished; running attempts stop at their next step."""
    from farm import dispatcher

    try:
        n = dispatcher.cancel(_read_engine(), sweep_id)
    except KeyError:
        _fail(f"no sweep '{sweep_id}'")
    console.print(f"sweep {sweep_id}: {n} trial(s) cancelled")


@app.command()
def leaderboard(
    sweep: Annotated[str | None, typer.Option("--sweep", help="Only this sweep (default: every sweep, "
                                                             "one row group per sweep).")] = None,
    by: Annotated[str, typer.Option("--by", help="Any combination of sweep, agent, model, layer, noise, problem, "
                                                 "app, composition, seed.")] = "agent,model",
    k: Annotated[int | None, typer.Option("--k", min=1, help="k of pass@k and pass^k (default: the seeds "
                                                             "every problem of a group has).")] = None,
    csv: Annotated[Path | None, typer.Option("--csv", help="Write the leaderboard as CSV here.")] = None,
    db: Annotated[str | None, typer.Option("--db", help="Database URL (default FARM_DATABASE_URL).")] = None,
    judge: Annotated[str | None, typer.Option("--judge", help="Diagnoses pass by this judge's verdicts from "
                                                              "`farm judge rescore` (a model, or 'offline') "
                                                              "instead of the recorded ones.")] = None,
) -> None:
    """Success rates with 95% intervals, pass@k, P(M|D), tokens, cost and times, from SQL. Sweeps are
    never pooled: without --sweep every row names its sweep."""
    from results import leaderboard as lb

    _check_by(by)
    engine = _sweep_engine(db, sweep) if sweep else _read_engine(db, offers_db=True)
    from farm.oracles.judge import PASS_RULE

    rows = lb.compute(engine, sweep, by, k=k, judge=judge, pass_rule=PASS_RULE.id)
    if not rows:
        _fail("no trials in the database yet" if sweep is None else f"sweep '{sweep}' has no trials yet", code=1)
    console.print(lb.render(rows, by))
    if csv:
        console.print(f"written to {lb.write_csv(rows, by, csv)}")


def _sweep_engine(db: str | None, *sweeps: str):  # type: ignore[no-untyped-def]
    """The database holding every one of `sweeps`, or a clear error before any work."""
    from results.report.queries import exists

    engine = _read_engine(db, offers_db=True)
    for s in sweeps:
        if not exists(engine, s):
            _fail(f"no sweep '{s}' in the database")
    return engine


@app.command()
def report(
    sweep: Annotated[str, typer.Option("--sweep", help="The sweep to report on.")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Folder for index.html and trials/ "
                                                                 "(default report-SWEEP).")] = None,
    compare_with: Annotated[str | None, typer.Option("--compare", help="Add a paired comparison with this "
                                                                       "sweep (as A; this one is B).")] = None,
    compare_by: Annotated[str, typer.Option("--compare-by", help="Grouping of the comparison.")] = "agent,model",
    trials: Annotated[bool, typer.Option("--trials/--no-trials", help="Write a drill-down page per trial.")] = True,
    db: Annotated[str | None, typer.Option("--db", help="Database URL (default FARM_DATABASE_URL).")] = None,
) -> None:
    """A self-contained HTML report of a sweep: figures and tables from the recorded rows."""
    _check_by(compare_by, "--compare-by")
    engine = _sweep_engine(db, sweep, *([compare_with] if compare_with else []))
    from farm.problems.catalog import load_catalog
    from results.report import build_report

    catalog = load_catalog().problems
    sregym_ids = {p.id: p.sregym_ids for p in catalog if p.sregym_ids}
    # The catalog's ground truth (placeholders as written), beside each trial's diagnosis.
    truths = {p.id: p.ground_truth.model_dump() for p in catalog}
    index = build_report(engine, sweep, out or Path(f"report-{sweep}"), compare_with=compare_with,
                         drill_down=trials, compare_by=compare_by, sregym_ids=sregym_ids, ground_truths=truths)
    console.print(f"report written to {index}")


@app.command()
def compare(
    sweep_a: Annotated[str, typer.Argument(help="Sweep A (the reference).")],
    sweep_b: Annotated[str, typer.Argument(help="Sweep B (compared against A: differences are B − A).")],
    by: Annotated[str, typer.Option("--by", help="Grouping: any combination of agent, model, layer, noise, ...")]
    = "agent,model",
    csv: Annotated[Path | None, typer.Option("--csv", help="Write the comparison as CSV here.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap.")] = 0,
    db: Annotated[str | None, typer.Option("--db", help="Database URL (default FARM_DATABASE_URL).")] = None,
) -> None:
    """Paired comparison on the trials both sweeps finished: rate differences with a bootstrap 95%
    interval and McNemar's exact test."""
    _check_by(by)
    engine = _sweep_engine(db, sweep_a, sweep_b)
    from results.report import compare as cmp

    rows = cmp.compare(engine, sweep_a, sweep_b, by, seed=seed)
    if not rows:
        console.print(f"no finished trial is shared by {sweep_a} and {sweep_b} (same problem, agent, model, seed, noise)")
    else:
        console.print(cmp.render(rows, by, sweep_a, sweep_b))
    if csv:
        console.print(f"written to {cmp.write_csv(rows, by, csv)}")


@app.command()
def export(
    sweep: Annotated[str, typer.Option("--sweep", help="The sweep to export.")],
    fmt: Annotated[str, typer.Option("--format", help="csv or parquet.")] = "csv",
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for trials.FORMAT and attempts.FORMAT.")] = Path("."),
    db: Annotated[str | None, typer.Option("--db", help="Database URL (default FARM_DATABASE_URL).")] = None,
) -> None:
    """The sweep's trial and attempt tables, for notebooks (pandas reads them as they are)."""
    from results.report import export as ex

    try:
        ex.check_format(fmt)
    except (ValueError, ImportError) as exc:
        _fail(str(exc))
    engine = _sweep_engine(db, sweep)
    for path in ex.export(engine, sweep, fmt, out):
        console.print(f"written to {path}")


@app.command()
def flower(
    port: Annotated[int, typer.Option()] = 5555,
    address: Annotated[str, typer.Option(help="Address to listen on; anything but loopback needs FARM_FLOWER_AUTH.")]
        = "127.0.0.1",
    history: Annotated[Path, typer.Option(help="Where Flower keeps its task history across restarts.")]
        = Path("flower-history.db"),
    keep_history: Annotated[bool, typer.Option("--keep-history/--no-history")] = True,
) -> None:
    """Flower on the farm's broker: workers and trial tasks, live, with their history kept.

    Its pages and its HTTP API (/api/workers, /api/tasks) need no login on loopback; elsewhere they
    take HTTP basic auth from FARM_FLOWER_AUTH=user:password (several separated by commas)."""
    from farm.cli.view import loopback
    from tasks import app as celery_app

    auth = [cred.strip() for cred in os.environ.get("FARM_FLOWER_AUTH", "").split(",") if cred.strip()]
    if any(":" not in cred for cred in auth):
        _fail("FARM_FLOWER_AUTH: expected user:password (several separated by commas)")
    if not auth and not loopback(address):
        _fail(f"Flower on {address} would let anyone who reaches it read and revoke the farm's tasks: "
              "set FARM_FLOWER_AUTH=user:password, or keep the default --address 127.0.0.1")
    argv = ["flower", f"--port={port}", f"--address={address}"]
    # The credentials go in this process's own argument list, never a child's command line.
    argv += [f"--basic-auth={cred}" for cred in auth]
    if not auth:
        # Flower 2 answers 401 on its API without auth unless told otherwise; on loopback the pages
        # are open anyway, so the API is too (as `farm view` on loopback).
        os.environ["FLOWER_UNAUTHENTICATED_API"] = "true"
    if keep_history:
        # Flower's persistent mode: its state (tasks, workers) is saved to a shelve file every
        # minute and on exit, and loaded again at start.
        argv += ["--persistent=True", f"--db={history}", "--state_save_interval=60000"]
    celery_app.start(argv)


def main() -> None:
    from farm.cli.errors import debug_requested, explain, interrupted

    debug = debug_requested(sys.argv)
    try:
        app()
    except KeyboardInterrupt:
        err.print(interrupted(sys.argv), highlight=False, soft_wrap=True)
        sys.exit(130)
    except Exception as exc:
        line = None if debug else explain(exc, sys.argv)
        if line is None:
            raise
        from rich.markup import escape

        err.print(f"[red]error:[/red] {escape(line)} (--debug shows the traceback)", highlight=False, soft_wrap=True)
        sys.exit(1)

