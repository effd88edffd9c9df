"""``lotline logs RUN_ID``: what a lot's transform logged with ``lot.log`` (its run's last 1,000
lines, docs/pipelines.md "A lot's log")."""

from __future__ import annotations

import uuid
from typing import Annotated

import typer

from lotline.domain.errors import InvalidInput
from lotline.domain.runs import LOG_FACET
from lotline.services import open_configured
from lotline.services.config import load_settings


def logs(run_id: Annotated[str, typer.Argument(help="The run's id (lotline status --json: runId).")]) -> None:
    """Print the lines the run's transform logged, oldest first, and its one-line error if it failed."""
    try:
        parsed = uuid.UUID(run_id)
    except ValueError:
        raise InvalidInput(f"{run_id!r} is not a run id (a UUID).") from None
    lineage = open_configured(load_settings())
    try:
        run = lineage.runs.get_run(parsed)
    finally:
        lineage.close()
    kept = run.facets.get(LOG_FACET) or {}
    dropped = kept.get("dropped", 0)
    if dropped:
        print(f"… {dropped} earlier lines not kept")
    for line in kept.get("lines", []):
        print(line)
    if not kept:
        print(f"run {run.id} ({run.job} lot {run.lot}) logged nothing")
    error = run.facets.get("errorMessage")
    if error:
        print(f"{run.state.value}: {error.get('message', '')}")
