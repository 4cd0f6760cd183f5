"""`farm view`: serve the live web view of the farm's sweeps (results.view) until Ctrl-C."""

from __future__ import annotations

import ipaddress
import secrets
from functools import cache
from typing import Annotated, Any

import typer
from rich.console import Console

app = typer.Typer(help="A live web view of sweeps.")
console = Console()
err = Console(stderr=True)


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@cache
def _catalog() -> Any:
    from farm.problems.catalog import load_catalog

    return load_catalog()


def _ground_truth(problem_id: str) -> dict[str, Any] | None:
    """The problem's ground truth as the catalog has it (the judge sees it with injection's
    placeholders filled; the view shows the catalog's)."""
    return _catalog().get(problem_id).ground_truth.model_dump()


@app.callback(invoke_without_command=True)
def view(
    host: Annotated[str, typer.Option(help="Address to listen on; anything but loopback needs a token.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free one).")] = 8765,
    token: Annotated[str | None, typer.Option(help="Token every request must carry (default: none on loopback, "
                                                   "a random one otherwise). Also FARM_VIEW_TOKEN.",
                                              envvar="FARM_VIEW_TOKEN")] = None,
    db: Annotated[str | None, typer.Option("--db", help="Database URL (default FARM_DATABASE_URL, else "
                                                        "farm-out/farm.sqlite).")] = None,
) -> None:
    """Serve sweeps, leaderboards, trials and errors from the database, live while sweeps run;
    read-only."""
    import socket

    import uvicorn
    from sqlalchemy.exc import OperationalError

    from core.errors import ConfigurationError
    from results.db import existing_url, read_only_engine, redact_url
    from results.view import create_app

    url = db or existing_url()
    if url is None:
        err.print("[red]error:[/red] no farm database: set FARM_DATABASE_URL (or pass --db), or run `farm run` here "
                  "first (it writes farm-out/farm.sqlite)")
        raise typer.Exit(2)
    try:
        engine = read_only_engine(url)
    except ConfigurationError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    except OperationalError as exc:
        err.print(f"[red]error:[/red] the database {redact_url(url)} cannot be reached: "
                  f"{str(exc.orig).strip().splitlines()[0] if exc.orig else exc}; start it, or point --db at one "
                  "that is up")
        raise typer.Exit(1) from None
    local = loopback(host)
    if not local and not token:
        token = secrets.token_urlsafe(24)
    allowed = ["127.0.0.1", "localhost"] if local and host != "::1" else None
    _catalog()  # read once before serving, so no visitor waits for it
    web = create_app(engine, token=token, ground_truth=_ground_truth, allowed_hosts=allowed)
    # Bind first, so a port in use is one line and port 0 reports the port it got.
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        err.print(f"[red]error:[/red] cannot listen on {host}:{port}: {exc.strerror}; pick another --port")
        raise typer.Exit(1) from None
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    address = f"http://{shown}:{bound}/" + (f"?token={token}" if token else "")
    console.print(f"farm view of {redact_url(url)} on {address}  (read-only; Ctrl-C stops it)", soft_wrap=True)
    config = uvicorn.Config(web, log_level="warning", access_log=False)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass
