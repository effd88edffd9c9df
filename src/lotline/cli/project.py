"""``lotline project``: apply the journaled OpenLineage events, then exit."""

from __future__ import annotations

import json
import sys

import typer

from lotline.cli.progress import Progress
from lotline.services import open_lineage
from lotline.services.config import load_settings


def project(
    max_events: int = typer.Option(0, help="Stop after this many events (0: until none is pending)."),
    json_output: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Apply the journaled OpenLineage events to the lineage model, then exit.

    Waits for the projector lock if a server's projector holds it, so that it drains for real.
    Progress goes to stderr: the backlog at the start, then a line a second.
    """
    settings = load_settings()
    with open_lineage(settings.db_url, create=False) as lineage:
        progress = Progress(lineage.projection.backlog())
        drained = lineage.projection.drain(wait=True, max_events=max_events or None, on_group=progress.group)
        status = lineage.projection.status()
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
