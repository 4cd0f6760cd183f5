"""`farm problems`: list, show, validate and mutate catalog problems."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
import yaml

from core.errors import FarmError, InputError

app = typer.Typer(help="The problem catalog: list, show, validate and mutate problems.", no_args_is_help=True)


def _catalog():  # type: ignore[no-untyped-def]
    from farm.problems.catalog import load_catalog

    catalog = load_catalog()
    for err in catalog.errors:
        typer.echo(f"warning: {err}", err=True)
    return catalog


def _fail(message: str, code: int = 2) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


@app.command("list")
def list_problems(
    layer: list[str] = typer.Option(None, "--layer", "-l", help="application, operator, os or hardware"),
    app_name: list[str] = typer.Option(None, "--app", "-a", help="application name"),
    tag: list[str] = typer.Option(None, "--tag", "-t", help="any of these tags"),
    composition: list[str] = typer.Option(None, "--composition", "-c", help="single, concurrent, correlated, metastable, none (no-fault controls)"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object per problem"),
    sregym: bool = typer.Option(False, "--sregym", help="instead: every SREGym problem id, the catalog problems "
                                                         "that carry it or why none does, and the totals"),
) -> None:
    """The problems of the catalog (never their ground truth)."""
    catalog = _catalog()
    if sregym:
        _list_sregym(catalog, as_json)
        return
    problems = catalog.select(tags=tag or None, layers=layer or None, apps=app_name or None,
                              compositions=composition or None)
    if as_json:
        for p in problems:
            typer.echo(json.dumps({"id": p.id, "app": p.app, "layer": p.layer, "composition": p.composition,
                                   "tags": p.tags, "needs_real_cluster": p.needs_real_cluster,
                                   "sregym_ids": p.sregym_ids}))
        return
    width = max((len(p.id) for p in problems), default=2)
    typer.echo(f"{'ID':<{width}}  {'APP':<17}  {'LAYER':<11}  {'COMPOSITION':<11}  TAGS")
    for p in problems:
        flag = " (real cluster)" if p.needs_real_cluster else ""
        typer.echo(f"{p.id:<{width}}  {p.app:<17}  {p.layer:<11}  {p.composition:<11}  {','.join(p.tags)}{flag}")
    typer.echo(f"{len(problems)} problems", err=True)


def _list_sregym(catalog, as_json: bool) -> None:  # type: ignore[no-untyped-def]
    from farm.problems.sregym import cross_reference

    entries = cross_reference(catalog.problems)
    if as_json:
        for e in entries:
            typer.echo(json.dumps({"sregym_id": e.sregym.id, "app": e.sregym.app, "lite": e.sregym.lite,
                                   "status": e.status, "problems": e.problems,
                                   "reason": "" if e.problems else e.sregym.note}))
        return
    width = max(len(e.sregym.id) for e in entries)
    typer.echo(f"{'SREGYM ID':<{width}}  {'APP':<17}  LITE  {'STATUS':<9}  CATALOG PROBLEMS / REASON")
    for e in entries:
        what = ", ".join(e.problems) if e.problems else e.sregym.note
        typer.echo(f"{e.sregym.id:<{width}}  {e.sregym.app:<17}  {'yes' if e.sregym.lite else 'no':<4}  "
                   f"{e.status:<9}  {what}")
    same = [e for e in entries if e.status == "same-app"]
    lite = [e for e in entries if e.sregym.lite]
    counts = {s: sum(e.status == s for e in entries) for s in ("other-app", "partial", "missing")}
    typer.echo(f"same-app {len(same)}/{len(entries)}, SREGym-Lite {sum(e.sregym.lite for e in same)}/{len(lite)}; "
               + ", ".join(f"{k} {v}" for k, v in counts.items()))


@app.command("show")
def show(
    problem_id: str = typer.Argument(..., help="problem id"),
    answer: bool = typer.Option(False, "--answer", help="also print the ground truth and the reference mitigation"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """One problem. Its faults, ground truth and reference mitigation only with --answer."""
    try:
        problem = _catalog().get(problem_id)
    except InputError as exc:
        _fail(str(exc))
    data = problem.model_dump(exclude_defaults=False)
    if not answer:
        # The faults and their description give the answer away as surely as the ground truth.
        for secret in ("ground_truth", "mitigation", "description"):
            data.pop(secret)
        data["faults"] = f"{len(problem.faults)} fault(s), hidden"
        data["noises"] = [n.kind for n in problem.noises]
    if as_json:
        typer.echo(json.dumps(data, indent=2))
    else:
        typer.echo(yaml.safe_dump(data, sort_keys=False, width=110).rstrip())
        if not answer:
            typer.echo("# faults, ground truth and reference mitigation hidden; add --answer to show them")


@app.command("validate")
def validate(
    problem_id: str = typer.Argument(None, help="problem id (or use --all)"),
    all_: bool = typer.Option(False, "--all", help="every problem (filtered by --app/--layer/--tag)"),
    app_name: list[str] = typer.Option(None, "--app", "-a"),
    layer: list[str] = typer.Option(None, "--layer", "-l"),
    tag: list[str] = typer.Option(None, "--tag", "-t"),
    cluster_ref: str = typer.Option("sim", "--cluster", help="cluster reference: sim, kind:NAME, eks:NAME"),
    seed: int = typer.Option(1, "--seed"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object per problem with each step's outcome"),
    noise: str = typer.Option("", "--noise", help="run the checks under ambient noise at this intensity "
                                                  "(low, medium, high, 0..1; a sweep's {intensity: ...})"),
    kubectl: Path = typer.Option(None, "--kubectl", exists=True, dir_okay=False, resolve_path=True,
                                 help="the kubectl binary the agent's commands and the reference mitigation "
                                      "run with (default: FARM_KUBECTL, else the first on PATH)"),
) -> None:
    """Run deploy → healthy → inject → symptom → leak check → oracle fails → mitigation →
    oracle passes → clean recovery for each problem, on a cluster (with --noise: under ambient
    noise from the injection on, and the fault must stay in place through it)."""
    from clusters.handle import open_cluster
    from farm.problems.validate import Validator

    catalog = _catalog()
    if problem_id and all_:
        _fail("give a problem id or --all, not both")
    if problem_id:
        try:
            problems = [catalog.get(problem_id)]
        except InputError as exc:
            _fail(str(exc))
    elif all_:
        problems = catalog.select(tags=tag or None, layers=layer or None, apps=app_name or None)
    else:
        _fail("give a problem id or --all")
    options = {"seed": seed} if cluster_ref.split(":")[0] == "sim" else {}
    failed = 0
    try:
        with open_cluster(cluster_ref, **options) as cluster:
            with Validator(cluster, noise=noise, kubectl=str(kubectl) if kubectl else None) as validator:
                for problem in sorted(problems, key=lambda p: (p.app, p.id)):
                    result = validator.validate(problem)
                    failed += not result.passed
                    if as_json:
                        typer.echo(json.dumps({
                            "id": result.id, "app": result.app, "layer": result.layer, "tags": result.tags,
                            "composition": result.composition, "passed": result.passed,
                            "steps": {s.name: ("skipped" if s.skipped else "ok" if s.ok else "failed") for s in result.steps},
                            "details": {s.name: s.detail for s in result.steps if s.detail},
                            "cpu_seconds": round(result.cpu_seconds, 3),
                        }))
                    else:
                        mark = "PASS" if result.passed else ("SKIP" if any(s.skipped for s in result.steps) else "FAIL")
                        last = next((s for s in result.steps if not s.ok), None)
                        why = f"  {last.name}: {last.detail}" if last else ""
                        typer.echo(f"{mark}  {result.id}{why}")
                    sys.stdout.flush()
    except FarmError as exc:
        _fail(str(exc), 1)
    if failed:
        raise typer.Exit(1)


@app.command("mutate")
def mutate_cmd(
    problem_id: str = typer.Argument(...),
    target: str = typer.Option(None, "--target", help="the workload the fault should hit instead"),
    settings: list[str] = typer.Option(None, "--set", help="key=value (or N.key=value for fault N), repeatable"),
    new_id: str = typer.Option(None, "--id", help="the new problem's id"),
    out: Path = typer.Option(None, "--out", help="write the new problem to this YAML file"),
    validate_it: bool = typer.Option(False, "--validate", help="validate it on the emulated cluster first; "
                                                               "write nothing when a step fails"),
    seed: int = typer.Option(1, "--seed", help="seed of the emulated cluster --validate uses"),
) -> None:
    """A new problem from an existing one, validated like any catalog entry (and, with
    --validate, on the emulated cluster: deploy → ... → clean recovery)."""
    from farm.problems.mutate import failed_step, mutate, validate_mutation

    try:
        problem = mutate(_catalog().get(problem_id), target=target, settings=settings or [], new_id=new_id)
    except InputError as exc:
        _fail(str(exc))
    if validate_it:
        try:
            result = validate_mutation(problem, seed=seed)
        except FarmError as exc:
            _fail(f"could not validate {problem.id}: {exc}", 1)
        if not result.passed:
            _fail(f"{problem.id} fails validation at {failed_step(result)}; nothing written", 1)
        passed = ", ".join(s.name for s in result.steps)
        typer.echo(f"validated {problem.id} on the emulated cluster: {passed}", err=True)
    text = yaml.safe_dump({"app": problem.app, "problems": [problem.model_dump(exclude_defaults=True)]},
                          sort_keys=False, width=110)
    if out:
        out.write_text(text)
        typer.echo(f"wrote {problem.id} to {out}", err=True)
    else:
        typer.echo(text.rstrip())


def main() -> None:
    app()


if __name__ == "__main__":
    main()
