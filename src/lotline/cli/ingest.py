"""``lotline ingest``: register the files of a landing location into interval lots (docs/lots.md)."""

from __future__ import annotations

import getpass
import json
import signal
import socket
import sys
import threading
from collections import Counter
from dataclasses import replace
from typing import Annotated

import typer

from lotline.cli.context import Namespace, load_settings, namespace_in
from lotline.domain.arrival import ArrivalPolicy
from lotline.domain.errors import InvalidInput
from lotline.domain.gaps import TimeRange
from lotline.domain.ingress import TimeRule
from lotline.domain.lots import Interval, lots_between
from lotline.services import Lineage, open_configured
from lotline.services.config import dataset_policies
from lotline.services.ingest import IngestReport, IngestRequest

LATE_CHOICES = ("reprocess", "reject")


def ingest(
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="Dataset the lots belong to.")],
    landing: Annotated[
        str | None, typer.Option(help="Landing folder or s3://bucket/prefix to scan (not with --empty).")
    ] = None,
    interval: Annotated[
        str | None,
        typer.Option(
            help="Lot interval: PT5M, PT1H, P1D, P1W, P1M, P1Y; a zoned one: P1D[America/New_York] "
            "(a scan needs it)."
        ),
    ] = None,
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
        str | None,
        typer.Option(
            "--from", help="Look at the intervals from this time (UTC); with --empty, declare them."
        ),
    ] = None,
    end: Annotated[str | None, typer.Option("--to", help="… up to this time (UTC).")] = None,
    late_after: Annotated[
        str | None,
        typer.Option(
            help="The arrival policy's lateness window (ISO-8601, e.g. PT15M): how long after an interval "
            "ends its data may still arrive. Stored with the dataset (default: stored, else PT5M)."
        ),
    ] = None,
    absent: Annotated[
        str | None,
        typer.Option(
            help="What a due interval with nothing delivered is: 'missing' (the default) or 'empty' (a "
            "source that sends nothing in quiet intervals). Stored with the dataset."
        ),
    ] = None,
    empty: Annotated[
        bool,
        typer.Option(
            "--empty",
            help="Declare lots empty instead of scanning: those of --lot, or every interval of --from/--to.",
        ),
    ] = False,
    lots: Annotated[list[str] | None, typer.Option("--lot", help="A lot to declare empty (repeat).")] = None,
    force: Annotated[
        bool,
        typer.Option(
            help="With --empty: give a lot that holds data a new, empty version (reopens downstream)."
        ),
    ] = False,
    late: Annotated[
        str, typer.Option(help="A file for a lot already READY: 'reprocess' (new version) or 'reject'.")
    ] = "reprocess",
    create: Annotated[
        bool,
        typer.Option(
            "--create", help="Create the namespace and dataset if they do not exist (else: refused)."
        ),
    ] = False,
    watch: Annotated[bool, typer.Option(help="Keep scanning until stopped (SIGINT/SIGTERM).")] = False,
    every: Annotated[float, typer.Option(min=0.1, help="Seconds between scans with --watch.")] = 30.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print each scan's report as JSON.")] = False,
) -> None:
    """Register arriving files into interval lots: complete manifests listing them, new versions for
    late or corrected files; an interval with nothing delivered is missing, unless declared empty (an
    `_EMPTY.<lot id>` marker in the landing, `--empty`, or the arrival policy `--absent empty`).
    Idempotent."""
    if late not in LATE_CHOICES:
        raise InvalidInput(f"--late must be one of {', '.join(LATE_CHOICES)}, got {late!r}.")
    declared = dataset_policies().get(dataset, (None, None))
    policy_source = "lotline ingest" if late_after is not None or absent is not None else "lotline.toml"
    late_text, absent_text = late_after or declared[0], absent or declared[1]
    given = ArrivalPolicy.parse(late_text, absent_text)  # refused before anything is opened
    span = None if start is None and end is None else _range(start, end)
    if empty:
        _declare_empty(namespace, dataset, lots or [], span, interval, force, as_json)
        return
    if lots or force:
        raise InvalidInput("--lot and --force go with --empty.")
    if landing is None or interval is None:
        raise InvalidInput("a scan needs --landing and --interval (or --empty to declare lots empty).")
    request = IngestRequest(
        namespace=namespace or "",  # resolved below, once the database is open
        dataset=dataset,
        landing=landing,
        interval=Interval.parse(interval),
        time_rule=TimeRule.parse(time),
        format=file_format,
        copy=copy,
        start=None if span is None else span.start,
        end=None if span is None else span.end,
        late_after=None if late_text is None else given.late_after,
        absent=None if absent_text is None else given.absent,
        policy_source=policy_source,
        reject_late=late == "reject",
        create=create,
    )
    settings = load_settings()
    # Without a namespace to name, there must be a database to take it from: none is created.
    with open_configured(settings, create=namespace is not None or settings.namespace is not None) as lineage:
        _scan(lineage, replace(request, namespace=namespace_in(lineage, namespace)), watch, every, as_json)


def _range(start: str | None, end: str | None) -> TimeRange:
    if start is None or end is None:
        raise InvalidInput("--from and --to go together.")
    return TimeRange.parse(start, end)


def _declare_empty(
    namespace: str | None,
    dataset: str,
    lots: list[str],
    span: TimeRange | None,
    interval: str | None,
    force: bool,
    as_json: bool,
) -> None:
    """``--empty``: the lots named, or every interval of the range, declared empty by the operator."""
    if bool(lots) == (span is not None):
        raise InvalidInput("--empty needs either --lot (repeat it) or --from/--to, not both.")
    with open_configured(load_settings(), create=False) as lineage:
        chosen = namespace_in(lineage, namespace)
        if span is not None:
            kind = interval or lineage.sources.lot_kind(chosen, dataset)
            if kind is None:
                raise InvalidInput(f"{chosen}:{dataset} has no lots yet: name its --interval.")
            lots = [str(lot) for lot in lots_between(span.start, span.end, Interval.parse(kind))]
        who = f"an operator ({getpass.getuser()}@{socket.gethostname()}, lotline ingest --empty)"
        done = lineage.ingest.declare_empty(chosen, dataset, lots, who, force=force)
    if as_json:
        print(json.dumps(done.to_json()), flush=True)
        return
    print(
        f"{len(done.declared)} lots declared empty, {len(done.reversioned)} given a new, empty version "
        f"(what was computed from them is reopened), {len(done.unchanged)} already empty"
        + (f", {len(done.busy)} busy (held or being worked on)" if done.busy else ""),
        flush=True,
    )


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


def _print(report: IngestReport, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report.to_json()), flush=True)
        return
    print(
        f"{report.files} files: {len(report.registered)} lots registered, {len(report.empty)} empty, "
        f"{len(report.missing)} missing (due, nothing delivered), "
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
    for by, count in Counter(report.empty.values()).items():
        print(f"  empty: {count} declared by {by}")
    if report.missing:
        shown = ", ".join(report.missing[:5]) + (
            f" and {len(report.missing) - 5} more" if len(report.missing) > 5 else ""
        )
        print(f"  missing: {shown} (lotline gaps lists them; --empty declares them empty)")
    for reason in report.skipped:
        print(f"  skipped: {reason}")
