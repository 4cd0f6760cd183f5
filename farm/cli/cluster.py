"""`farm cluster`: which worker owns which cluster and whether it is healthy (from the workers'
registrations and heartbeats in SQL), and creating or deleting kind and EKS clusters by name."""

from __future__ import annotations

import json
import os
import time
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from clusters.handle import parse_cluster_ref
from core.errors import FarmError

app = typer.Typer(help="Clusters owned by workers: list, create, delete.", no_args_is_help=True)
console = Console()
err = Console(stderr=True)


def _fail(message: str, code: int = 1) -> None:
    err.print(f"[red]{message}[/red]")
    raise typer.Exit(code)


def worker_rows(db_url: str, stale_after: float, now: float | None = None) -> list[dict[str, Any]]:
    """One dict per registered worker, with `status`: healthy, unhealthy, stale (no heartbeat
    within `stale_after` seconds) or stopped."""
    from sqlmodel import Session, select

    from results.db import engine_for
    from results.models import Worker

    now = time.time() if now is None else now
    with Session(engine_for(db_url)) as session:
        workers = session.exec(select(Worker).order_by(Worker.cluster, Worker.name)).all()
    rows = []
    for w in workers:
        age = now - w.heartbeat_at
        if w.state == "stopped":
            status = "stopped"
        elif age > stale_after:
            status = "stale"
        else:
            status = "healthy" if w.cluster_healthy else "unhealthy"
        rows.append({"worker": w.name, "cluster": w.cluster, "host": w.hostname, "pid": w.pid, "state": w.state,
                     "trial": w.current_trial, "heartbeat_age_s": round(age, 1), "status": status,
                     "detail": w.detail})
    return rows


@app.command("list")
def list_clusters(
    db: Annotated[str | None, typer.Option("--db", help="Database URL (default FARM_DATABASE_URL).")] = None,
    stale_after: Annotated[float, typer.Option(help="Seconds without a heartbeat before a worker is stale.")] = 180.0,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per worker, for scripts.")] = False,
) -> None:
    """Which worker owns which cluster, and whether it is healthy."""
    from results.db import default_url, redact_url

    url = db or default_url()
    try:
        rows = worker_rows(url, stale_after)
    except Exception as exc:  # sqlalchemy's errors: say which database could not be read
        _fail(f"cannot read workers from {redact_url(url)}: {exc}")
    if as_json:
        for row in rows:
            typer.echo(json.dumps(row))
        return
    if not rows:
        console.print(f"no workers registered in {redact_url(url)}")
        return
    table = Table("worker", "cluster", "host", "state", "trial", "heartbeat", "health")
    # The terminal's width as the shell says it now (a console made at import may have guessed 80).
    columns = os.environ.get("COLUMNS", "")
    out = Console(width=int(columns)) if columns.isdigit() else console
    colour = {"healthy": "green", "unhealthy": "red", "stale": "yellow", "stopped": "dim"}
    for row in rows:
        status = row["status"] + (f" ({row['detail']})" if row["detail"] and row["status"] != "healthy" else "")
        table.add_row(row["worker"], row["cluster"], f"{row['host']}:{row['pid']}", row["state"], row["trial"] or "-",
                      f"{row['heartbeat_age_s']:.0f} s ago", f"[{colour[row['status']]}]{status}[/]")
    out.print(table)


def _provider(ref: str) -> tuple[str, str, Any]:
    kind, name = parse_cluster_ref(ref)
    if kind == "kind":
        from clusters.kind import KindProvider

        return kind, name, KindProvider()
    if kind == "eks":
        from clusters.eks import EksProvider

        return kind, name, EksProvider(progress=lambda message: err.print(f"[dim]{message}[/dim]"))
    _fail(f"'{ref}': only kind:NAME and eks:NAME clusters are created or deleted here "
          "(emulated clusters start and stop with their worker)", 2)
    raise AssertionError("unreachable")


@app.command()
def create(
    ref: Annotated[str, typer.Argument(help="kind:NAME or eks:NAME")],
    workers: Annotated[int, typer.Option(help="kind: worker nodes besides the control plane.")] = 2,
    nodes: Annotated[int, typer.Option(help="eks: nodes in the node group.")] = 3,
    stack: Annotated[bool, typer.Option(help="Install the observability and chaos stack.")] = True,
    preload: Annotated[list[str] | None, typer.Option(
        help="kind: load this application's images into the nodes (repeatable; images the local Docker "
             "daemon lacks are pulled first).")] = None,
) -> None:
    """Create a cluster (or attach to an existing one of that name) and install the stack."""
    try:
        kind, name, provider = _provider(ref)
        if kind == "kind":
            from clusters.kind import images_of

            images = images_of(preload) if preload else None
            handle = provider.open(name, workers=workers, install_stack=stack, preload_images=images)
        else:
            provider.nodes = nodes
            handle = provider.open(name, create=True, install_stack=stack)
        with handle:
            health = handle.health()
            console.print(f"{handle.ref}: {'healthy' if health.ok else 'NOT healthy'} ({health.detail}); "
                          f"kubeconfig {handle.kubeconfig}")
    except FarmError as exc:
        _fail(str(exc))


@app.command()
def delete(
    ref: Annotated[str, typer.Argument(help="kind:NAME or eks:NAME")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Tear a cluster down (EKS: node group, cluster, then the nodes' launch template). Asks first unless --yes."""
    try:
        kind, name, provider = _provider(ref)
        if not yes and not typer.confirm(f"Delete {kind} cluster '{name}' and everything on it?", default=False):
            err.print("not deleted")
            raise typer.Exit(1)
        provider.delete(name)
        console.print(f"{kind}:{name} deleted")
    except FarmError as exc:
        _fail(str(exc))
