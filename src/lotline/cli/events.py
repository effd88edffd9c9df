"""``lotline events``: the lot availability log, once or followed (docs/lots.md "Lot events")."""

from __future__ import annotations

import json
import signal
from types import FrameType
from typing import Annotated

import typer

from lotline.cli.context import load_settings, namespace_in, open_existing
from lotline.domain.manifests import LotEvent, LotEventKind


def events(
    after: Annotated[int, typer.Option(min=0, help="Start after this position (0: the beginning).")] = 0,
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace",
            "-n",
            help="Only this namespace's events (default: `namespace` in lotline.toml; with --dataset, "
            "else the only namespace in the database; otherwise every namespace).",
        ),
    ] = None,
    dataset: Annotated[
        list[str] | None, typer.Option("--dataset", "-d", help="Only this dataset (repeatable).")
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new events until stopped.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """Print lot events (READY, REOPENED, FAILED, OVERDUE) in order; with --follow, wait for new
    ones (woken by LISTEN/NOTIFY on PostgreSQL, polling on SQLite) until SIGINT or SIGTERM."""
    with open_existing() as lineage:
        signal.signal(signal.SIGTERM, _stop)
        try:
            datasets = dataset or ()
            if namespace is not None or datasets or load_settings().namespace is not None:
                namespace = namespace_in(lineage, namespace)
            if follow:
                for event in lineage.lot_events.follow(after, namespace=namespace, datasets=datasets):
                    _print(event, as_json)
            else:
                events = lineage.lot_events
                while page := events.after(after, namespace=namespace, datasets=datasets, limit=1000):
                    for event in page:
                        _print(event, as_json)
                    after = page[-1].position
        except KeyboardInterrupt:
            pass  # stopped: a clean end for a follower


def _stop(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _print(event: LotEvent, as_json: bool) -> None:
    if as_json:
        print(json.dumps(event.to_json()), flush=True)
        return
    if event.kind is LotEventKind.FAILED:
        detail = f"job {event.job} attempt {event.attempt}: {event.reason or 'no reason recorded'}"
    elif event.kind is LotEventKind.OVERDUE:
        detail = "due, nothing delivered (its next READY closes it)"
    else:
        detail = f"manifest {event.manifest_id}" if event.manifest_id else ""
    print(
        f"{event.position:>8}  {event.created_at:%Y-%m-%d %H:%M:%S}  {event.kind.value:<8}  "
        f"{event.namespace}:{event.dataset}  {event.lot}  {detail}".rstrip(),
        flush=True,
    )
