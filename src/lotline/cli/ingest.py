"""``lotline ingest``: register the files of a landing location into interval lots (docs/lots.md)."""

from __future__ import annotations

import json
import signal
import sys
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer

from lotline.cli.context import Namespace, load_settings, namespace_in
from lotline.domain.errors import InvalidInput
from lotline.domain.ingress import TimeRule
from lotline.domain.lots import Interval
from lotline.services import Lineage, open_configured
from lotline.services.ingest import DEFAULT_LATENESS, IngestReport, IngestRequest

LATE_CHOICES = ("reprocess", "reject")


def ingest(
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="Dataset the lots belong to.")],
    landing: Annotated[str, typer.Option(help="Landing folder or s3://bucket/prefix to scan.")],
    interval: Annotated[str, typer.Option(help="Lot interval: PT5M, PT1H, P1D …")],
    namespace: Namespace = None,
    time: Annotated[
        str, typer.Option("--time", help="A file's time: 'mtime', or 'path:REGEX' with named groups.")
    ] = "mtime",
    file_format: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="How readers read the files (default: the dataset's registered format, else the "
            "files' extension: .csv csv, .json json, .parquet parquet, else text).",
        ),
    ] = None,
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
        namespace=namespace or "",  # resolved below, once the database is open
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
    settings = load_settings()
    # Without a namespace to name, there must be a database to take it from: none is created.
    lineage = open_configured(settings, create=namespace is not None or settings.namespace is not None)
    try:
        _scan(lineage, replace(request, namespace=namespace_in(lineage, namespace)), watch, every, as_json)
    finally:
        lineage.close()


def _scan(lineage: Lineage, request: IngestRequest, watch: bool, every: float, as_json: bool) -> None:
    """Scan once, or with ``--watch`` until stopped; files that the ``--time`` pattern places
    nowhere (none of them: nothing was registered) are one line and exit code 1."""
    stop = threading.Event()
    if watch:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda _n, _f: stop.set())
    while True:
        report = lineage.ingest.ingest(request)
        if report.unmatched:
            print(
                f"lotline: {report.files} files in {request.landing}, none matched the --time pattern "
                f"(e.g. {report.skipped[0]}); nothing was registered",
                file=sys.stderr,
            )
            raise typer.Exit(code=1)
        _print(report, as_json)
        if not watch or stop.wait(every):
            return


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
