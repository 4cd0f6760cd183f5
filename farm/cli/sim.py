"""`farm sim up`: one emulated cluster in the foreground, for a person to explore with kubectl
and curl, optionally with an application deployed and a problem injected."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

app = typer.Typer(help="The emulated cluster, by hand.", no_args_is_help=True)
console = Console()


@app.command()
def up(
    app_name: Annotated[str | None, typer.Option("--app", help="Deploy this application.")] = None,
    problem: Annotated[str | None, typer.Option("--problem", help="Deploy its application and inject it.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the cluster's random source.")] = 0,
    speed: Annotated[float, typer.Option(help="Cluster seconds per wall second.")] = 1.0,
    kubeconfig: Annotated[Path, typer.Option(help="Where to write the admin kubeconfig.")] = Path("farm-sim.kubeconfig"),
) -> None:
    """Start an emulated cluster (live clock) and keep it up until Ctrl-C."""
    from apps import load_application
    from clusters.handle import open_cluster
    from farm.deploy import deploy

    handle = open_cluster("sim", seed=seed, live=True, speed=speed)
    try:
        shutil.copyfile(getattr(handle, "kind_kubeconfig", handle.kubeconfig), kubeconfig)
        prob = None
        if problem:
            from farm.problems.catalog import load_catalog

            prob = load_catalog().get(problem)
            app_name = prob.app
        if app_name:
            application = load_application(app_name)
            console.print(f"deploying {app_name} into namespace {application.namespace} ...")
            deploy(handle, application, application.namespace)
            if prob is not None:
                from injectors.compose import ProblemInjection

                ProblemInjection(prob).inject(handle, application.namespace)
                console.print(f"injected {prob.id} (see `farm problems show {prob.id} --answer`)")
        e = handle.endpoints
        console.print(f"kubeconfig  {kubeconfig.resolve()}  (kubectl --kubeconfig {kubeconfig} get pods -A)")
        console.print(f"kubernetes  {e.kubernetes}")
        console.print(f"prometheus  {e.prometheus}/api/v1/query?query=up")
        console.print(f"loki        {e.loki}/loki/api/v1/labels")
        console.print(f"jaeger      {e.jaeger}/api/services")
        console.print(f"control     {e.control}/sim/now   (POST /sim/advance {{\"seconds\": 60}})")
        console.print("Ctrl-C stops the cluster.")
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        handle.close()
