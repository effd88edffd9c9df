"""``lotline overdue``: the arrival pass once, for a scheduler (cron, a Kubernetes CronJob) where no
``lotline worker`` or ``lotline serve`` runs it (docs/lots.md "Absence and freshness")."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from lotline.cli.context import open_existing


def overdue(
    as_json: Annotated[bool, typer.Option("--json", help="Print what the pass did as JSON.")] = False,
) -> None:
    """Notice the source lots that became due: each one nothing was delivered for gets one OVERDUE
    lot event (absent=missing), or is declared empty by its policy (absent=empty). A running
    `lotline worker` or `lotline serve` does this every minute."""
    with open_existing() as lineage:
        done = lineage.arrival_pass.notice()
    if as_json:
        print(json.dumps(done.to_json()))
        return
    print(
        f"{_count(done.watched, 'source')} watched: {_count(len(done.overdue), 'lot')} overdue "
        f"(OVERDUE pushed), {len(done.declared_empty)} declared empty by their policy"
    )
    for namespace, dataset, lot in done.overdue[:20]:
        print(f"  overdue: {namespace}:{dataset} {lot}")
    if len(done.overdue) > 20:
        print(f"  … and {len(done.overdue) - 20} more (lotline events lists them)")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
