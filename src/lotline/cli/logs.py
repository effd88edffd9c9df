"""``lotline logs RUN_ID`` or ``lotline logs JOB LOT``: what a lot's transform logged with
``lot.log`` (its run's last 1,000 lines, docs/pipelines.md "A lot's log")."""

from __future__ import annotations

import uuid
from typing import Annotated

import typer

from lotline.cli.context import Namespace, namespace_in, open_existing
from lotline.domain.errors import InvalidInput
from lotline.domain.runs import LOG_FACET


def logs(
    first: Annotated[str, typer.Argument(help="A run id (a UUID), or a job name followed by a lot.")],
    lot: Annotated[str | None, typer.Argument(help="With a job: the lot whose latest run to show.")] = None,
    namespace: Namespace = None,
) -> None:
    """Print the lines a run's transform logged, oldest first, and its one-line error if it failed:
    `lotline logs RUN_ID`, or `lotline logs JOB LOT` for the latest run of that job on that lot."""
    with open_existing() as lineage:
        if lot is None:
            try:
                parsed = uuid.UUID(first)
            except ValueError:
                raise InvalidInput(
                    f"{first!r} is not a run id (a UUID); to name a lot, give the job and the lot: "
                    f"lotline logs {first} LOT."
                ) from None
        else:
            chosen = namespace_in(lineage, namespace)
            found = lineage.runs.list_runs(chosen, first, 1, lot=lot).items
            if not found:
                raise InvalidInput(f"job {chosen}:{first} has no run on lot {lot}.")
            parsed = found[0].id
        run = lineage.runs.get_run(parsed)
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
