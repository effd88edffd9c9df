"""The ``lotline`` command. Thin: parse arguments, call a service, print, map errors to exit codes."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from functools import wraps
from importlib import metadata
from typing import ParamSpec, TypeVar

import typer

from lotline.cli import (
    cleanup,
    context,
    delete,
    demo,
    events,
    files,
    gaps,
    ingest,
    logs,
    lots,
    overdue,
    run,
    webhooks,
    worker,
)
from lotline.cli.progress import Progress
from lotline.domain.errors import DatabaseError, LotlineError
from lotline.services import open_lineage
from lotline.services.admin import upgrade_database
from lotline.services.config import LOOPBACK_HOSTS, load_settings
from lotline.store.engine import shown_url

app = typer.Typer(
    name="lotline",
    help="Run PySpark pipelines lot by lot, with Marquez/OpenLineage-compatible lineage.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # A docstring's lines are one paragraph: in the default mode each line was cut at the terminal's
    # width on its own, so an 80-column `lotline --help` lost the middle of most commands' help.
    rich_markup_mode="markdown",
)
db_app = typer.Typer(help="Manage the lotline database (LOTLINE_DB_URL).", no_args_is_help=True)
app.add_typer(db_app, name="db")


def _version(value: bool) -> None:
    if value:
        print(f"lotline {metadata.version('lotline')}")
        raise typer.Exit


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print lotline's version and exit."
    ),
) -> None:
    """Run PySpark pipelines lot by lot, with Marquez/OpenLineage-compatible lineage."""


#: Addresses that listen on every interface: clients reach them by names the server cannot guess.
WILDCARD_ADDRESSES = frozenset({"0.0.0.0", "::", "[::]"})

P = ParamSpec("P")
R = TypeVar("R")


def one_line_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Bad input and unreachable databases end in one line on stderr and exit code 2, no traceback."""

    @wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except DatabaseError as error:
            print(f"lotline: error: cannot use the database{_url()}: {error.detail}", file=sys.stderr)
        except LotlineError as error:
            print(f"lotline: error: {error.message}", file=sys.stderr)
        raise typer.Exit(code=2)

    return run


def _url() -> str:
    """`` at URL`` (password masked) for errors of the configured database."""
    try:
        return f" at {shown_url(load_settings().db_url)}"
    except LotlineError:
        return ""


lots.register(app, one_line_errors)
app.command("run")(one_line_errors(run.run))
app.command("demo")(one_line_errors(demo.demo))
app.command("ingest")(one_line_errors(ingest.ingest))
app.command("events")(one_line_errors(events.events))
app.command("overdue")(one_line_errors(overdue.overdue))
app.command("logs")(one_line_errors(logs.logs))
app.command("worker")(one_line_errors(worker.worker))
app.command("cleanup")(one_line_errors(cleanup.cleanup))
app.command("webhooks")(one_line_errors(webhooks.webhooks))
app.command("config")(one_line_errors(context.config))
app.command("files")(one_line_errors(files.files))
app.command("delete")(one_line_errors(delete.delete))
gaps.register(app, one_line_errors)


@db_app.command("upgrade")
@one_line_errors
def db_upgrade() -> None:
    """Create or migrate the database schema to this version of lotline."""
    settings = load_settings()
    revision = upgrade_database(settings.db_url)
    print(f"database is at schema revision {revision}")


@app.command("project")
@one_line_errors
def project(
    max_events: int = typer.Option(0, help="Stop after this many events (0: until none is pending)."),
    json_output: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Apply the journaled OpenLineage events to the lineage model, then exit.

    Waits for the projector lock if a server's projector holds it, so that it drains for real.
    Progress goes to stderr: the backlog at the start, then a line a second.
    """
    settings = load_settings()
    lineage = open_lineage(settings.db_url, create=False)
    try:
        progress = Progress(lineage.projection.backlog())
        drained = lineage.projection.drain(wait=True, max_events=max_events or None, on_group=progress.group)
        status = lineage.projection.status()
    finally:
        lineage.close()
    if drained.stalled:
        print("lotline: error: the database failed while projecting; run it again", file=sys.stderr)
        raise typer.Exit(code=1)
    result = {
        "applied": len(drained.applied),
        "failed": len(drained.failed),
        "pending": status.pending,
        "failedTotal": status.failed,
        "lastAppliedId": status.last_applied_id,
    }
    if json_output:
        print(json.dumps(result))
    else:
        print(
            f"applied {result['applied']} events, {result['failed']} failed; "
            f"{status.pending} pending, {status.failed} failed in all"
        )


@app.command("serve")
@one_line_errors
def serve(
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(5000, help="Port to listen on."),
    workers: int = typer.Option(
        1, min=1, help="Server processes (each also runs a projector; one projects at a time)."
    ),
    access_log: bool = typer.Option(
        False,
        help="Log every request (uvicorn's access log). Off by default: event producers send "
        "thousands of requests a second, and /metrics counts them by route and status.",
    ),
) -> None:
    """Serve the Marquez-compatible REST API and the OpenLineage endpoint over LOTLINE_DB_URL."""
    import uvicorn

    from lotline.api.app import create_app
    from lotline.api.protocol import LotlineHttpProtocol

    settings = load_settings().serving_on(host)
    if host in WILDCARD_ADDRESSES and len(settings.allowed_hosts) == len(LOOPBACK_HOSTS) + 1:
        names = ", ".join(settings.allowed_hosts)
        print(
            f"lotline: note: listening on {host}, but answering only requests for {names} (Host header);"
            " set LOTLINE_ALLOWED_HOSTS to the names clients use",
            file=sys.stderr,
        )
    # The worker processes read their settings again: they get the same allow-list this way.
    os.environ["LOTLINE_ALLOWED_HOSTS"] = ",".join(settings.allowed_hosts)
    # lotline's HTTP protocol: JSON answers to malformed requests, the header limit, the read
    # timeout (LOTLINE_READ_TIMEOUT, read by each worker process from the same settings).
    protocol = "lotline.api.protocol:LotlineHttpProtocol"
    if workers == 1:
        uvicorn.run(
            create_app(settings),
            host=host,
            port=port,
            http=LotlineHttpProtocol,
            log_level="info",
            access_log=access_log,
        )
    else:
        # Each worker process builds its own app (and store) from the same settings.
        uvicorn.run(
            "lotline.api.app:app_from_settings",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            http=protocol,
            log_level="info",
            access_log=access_log,
        )


if __name__ == "__main__":
    app()
