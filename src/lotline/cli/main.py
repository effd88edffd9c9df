"""The ``lotline`` command. Thin: parse arguments, call a service, print, map errors to exit codes."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from importlib import metadata
from typing import ParamSpec, TypeVar

import typer

from lotline.cli import (
    cleanup,
    context,
    db,
    delete,
    demo,
    events,
    files,
    gaps,
    ingest,
    logs,
    lots,
    overdue,
    project,
    run,
    serve,
    webhooks,
    worker,
)
from lotline.domain.errors import DatabaseError, LotlineError
from lotline.services.config import load_settings
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


#: Every command: the group it belongs to, its name, its function (in its own module); each one
#: behind the one-line error handling.
COMMANDS: tuple[tuple[typer.Typer, str, Callable[..., None]], ...] = (
    (app, "status", lots.status),
    (app, "invalidate", lots.invalidate),
    (app, "hold", lots.hold),
    (app, "release", lots.release),
    (app, "retry", lots.retry),
    (app, "run", run.run),
    (app, "demo", demo.demo),
    (app, "ingest", ingest.ingest),
    (app, "events", events.events),
    (app, "overdue", overdue.overdue),
    (app, "logs", logs.logs),
    (app, "worker", worker.worker),
    (app, "cleanup", cleanup.cleanup),
    (app, "webhooks", webhooks.webhooks),
    (app, "config", context.config),
    (app, "files", files.files),
    (app, "delete", delete.delete),
    (app, "gaps", gaps.gaps),
    (app, "backfill", gaps.backfill),
    (db_app, "upgrade", db.upgrade),
    (app, "project", project.project),
    (app, "serve", serve.serve),
)
for group, name, command in COMMANDS:
    group.command(name)(one_line_errors(command))


if __name__ == "__main__":
    app()
