"""The ``lotline`` command. Thin: parse arguments, call a service, print, map errors to exit codes."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import ParamSpec, TypeVar

import typer
from sqlalchemy.exc import OperationalError

from lotline.cli import lots
from lotline.domain.errors import LotlineError
from lotline.services.admin import upgrade_database
from lotline.services.config import load_settings
from lotline.store.engine import SchemaNotCurrent

app = typer.Typer(
    name="lotline",
    help="Run PySpark pipelines lot by lot, with Marquez/OpenLineage-compatible lineage.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="Manage the lotline database (LOTLINE_DB_URL).", no_args_is_help=True)
app.add_typer(db_app, name="db")

P = ParamSpec("P")
R = TypeVar("R")


def one_line_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Bad input and unreachable databases end in one line on stderr and exit code 2, no traceback."""

    @wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except (LotlineError, SchemaNotCurrent) as error:
            message = error.message if isinstance(error, LotlineError) else str(error)
            print(f"lotline: error: {message}", file=sys.stderr)
        except OperationalError as error:
            print(f"lotline: error: cannot use the database: {error.orig}".strip(), file=sys.stderr)
        raise typer.Exit(code=2)

    return run


lots.register(app, one_line_errors)


@db_app.command("upgrade")
@one_line_errors
def db_upgrade() -> None:
    """Create or migrate the database schema to this version of lotline."""
    settings = load_settings()
    revision = upgrade_database(settings.db_url)
    print(f"database is at schema revision {revision}")


@app.command("serve")
@one_line_errors
def serve(
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(5000, help="Port to listen on."),
) -> None:
    """Serve the Marquez-compatible REST API and the OpenLineage endpoint over LOTLINE_DB_URL."""
    import uvicorn

    from lotline.api.app import create_app

    settings = load_settings()
    uvicorn.run(create_app(settings), host=host, port=port, log_level="info")


if __name__ == "__main__":
    app()
