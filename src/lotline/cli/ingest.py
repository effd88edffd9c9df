"""``lotline ingest``: register the files of a landing location into interval lots (docs/lots.md)."""

from __future__ import annotations

import json
import signal
import threading
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer

from lotline.domain.errors import InvalidInput
from lotline.domain.ingress import TimeRule
from lotline.domain.lots import Interval
from lotline.services import open_configured
from lotline.services.config import load_settings
from lotline.services.ingest import DEFAULT_LATENESS, IngestReport, IngestRequest

LATE_CHOICES = ("reprocess", "reject")


def ingest(
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="Dataset the lots belong to.")],
    landing: Annotated[str, typer.Option(help="Landing folder or s3://bucket/prefix to scan.")],
    interval: Annotated[str, typer.Option(help="Lot interval: PT5M, PT1H, P1D …")],
    namespace: Annotated[
        str, typer.Option("--namespace", "-n", help="Namespace of the dataset.")
    ] = "default",
    time: Annotated[
        str, typer.Option("--time", help="A file's time: 'mtime', or 'path:REGEX' with named groups.")
    ] = "mtime",
    file_format: Annotated[str, typer.Option("--format", help="How readers read the files.")] = "text",
    copy: Annotated[
        bool, typer.Option("--copy", help="Copy files into the warehouse instead of referencing them.")
    ] = False,
    start: Annotated[
        datetime | None, typer.Option("--from", help="Also close lots from this time (UTC) as empty.")
    ] = None,
    end: Annotated[datetime | None, typer.Option("--to", help="… up to this time (UTC).")] = None,
    lateness: Annotated[
        str, typer.Option(help="Wait this long after an interval ends before closing its lot.")
    ] = str(Interval(int(DEFAULT_LATENESS.total_seconds()) // 60)),
    late: Annotated[
        str, typer.Option(help="A file for a lot already READY: 'reprocess' (new version) or 'reject'.")
    ] = "reprocess",
    watch: Annotated[bool, typer.Option(help="Keep scanning until stopped (SIGINT/SIGTERM).")] = False,
    every: Annotated[float, typer.Option(min=0.1, help="Seconds between scans with --watch.")] = 30.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print each scan's report as JSON.")] = False,
) -> None:
    """Register arriving files into interval lots: complete manifests listing them, empty lots for
    intervals that closed with no file, new versions for late or corrected files. Idempotent."""
    if late not in LATE_CHOICES:
        raise InvalidInput(f"--late must be one of {', '.join(LATE_CHOICES)}, got {late!r}.")
    request = IngestRequest(
        namespace=namespace,
        dataset=dataset,
        landing=landing,
        interval=Interval.parse(interval),
        time_rule=TimeRule.parse(time),
        format=file_format,
        copy=copy,
        start=_utc(start),
        end=_utc(end),
        lateness=_duration(lateness),
        reject_late=late == "reject",
    )
    lineage = open_configured(load_settings())
    stop = threading.Event()
    if watch:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda _n, _f: stop.set())
    try:
        while True:
            _print(lineage.ingest.ingest(request), as_json)
            if not watch or stop.wait(every):
                return
    finally:
        lineage.close()


def _utc(value: datetime | None) -> datetime | None:
    """Times without an offset are UTC, like lot windows."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def _duration(text: str) -> timedelta:
    """An ISO duration as lot intervals are written (PT5M, PT1H, P1D), or 0."""
    if text == "0":
        return timedelta(0)
    return Interval.parse(text).timedelta


def _print(report: IngestReport, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report.to_json()), flush=True)
        return
    print(
        f"{report.files} files: {len(report.registered)} lots registered, {len(report.empty)} empty, "
        f"{len(report.reversioned)} new versions (late or corrected), {report.unchanged} unchanged"
        + (f", {len(report.waiting)} waiting for their interval to close" if report.waiting else "")
        + (f", {len(report.rejected)} late lots rejected" if report.rejected else "")
        + (f", {len(report.busy)} busy" if report.busy else ""),
        flush=True,
    )
    for lot in report.reversioned:
        print(f"  new version: {lot} (late or corrected files; what was computed from it is reopened)")
    for lot in report.rejected:
        print(f"  rejected: {lot} changed after it was registered (--late reject)")
    for reason in report.skipped:
        print(f"  skipped: {reason}")
