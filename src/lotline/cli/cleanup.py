"""``lotline cleanup``: remove what crashes left in the warehouse, rewrite missing manifest copies."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Annotated

import typer

from lotline.cli.context import open_existing
from lotline.cli.run import DEFAULT_LEASE_S
from lotline.services.config import load_settings, parse_superseded_grace


def cleanup(
    grace: Annotated[
        float, typer.Option(min=0, help="Seconds beyond the longest lease before unlisted objects go.")
    ] = 600.0,
    max_lease: Annotated[
        float, typer.Option(min=1, help="The longest lease any worker uses, in seconds.")
    ] = DEFAULT_LEASE_S,
    superseded_grace: Annotated[
        str | None,
        typer.Option(
            help="How long a superseded version's objects are kept once a newer current version of "
            "its lot replaced it, ISO-8601 (P7D, PT12H, PT0S); default LOTLINE_SUPERSEDED_GRACE or P7D."
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be done; change nothing.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Finish interrupted removals of failed attempts, delete objects no manifest lists (older than
    the longest lease plus the grace, never those of a claim in progress), and rewrite manifest
    copies that are missing or differ from the database; delete the objects of versions superseded
    longer ago than the superseded grace (never the current version's)."""
    settings = load_settings()
    kept_for = (
        settings.superseded_grace
        if superseded_grace is None
        else parse_superseded_grace(superseded_grace, "--superseded-grace")
    )
    with open_existing() as lineage:
        report = lineage.cleanup.cleanup(
            grace=timedelta(seconds=grace),
            max_lease=timedelta(seconds=max_lease),
            superseded_grace=kept_for,
            dry_run=dry_run,
        )
    if as_json:
        print(json.dumps(report.to_json()))
        return
    verb = "would delete" if dry_run else "deleted"
    print(
        f"{verb} {report.unlisted_deleted} unlisted objects ({report.unlisted_bytes} bytes), "
        f"{report.unlisted_kept_young} unlisted kept (younger than lease + grace); "
        f"{len(report.partial_removed)} failed attempts' objects removed; "
        f"{verb} {report.superseded_deleted} objects ({report.superseded_bytes} bytes) of "
        f"{len(report.superseded_removed)} superseded versions; "
        f"{len(report.copies_written)} manifest copies written, {len(report.copies_deleted)} withdrawn"
    )
