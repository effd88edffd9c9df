"""``lotline gaps | backfill``: which lots of a time range are not complete, and making them eligible."""

from __future__ import annotations

import datetime
import json
from typing import Annotated

import typer

from lotline.cli.context import Namespace, namespace_in, open_existing
from lotline.cli.lots import table
from lotline.domain.gaps import STATES, Backfill, GapReport, LotRun, backfill_json
from lotline.domain.grid import HEALTH_ORDER, Health, counted_json

From = Annotated[str, typer.Option("--from", help="Start: an RFC 3339 instant or a date (midnight UTC).")]
To = Annotated[str, typer.Option("--to", help="End, exclusive: an RFC 3339 instant or a date.")]
OptionalFrom = Annotated[
    str | None,
    typer.Option("--from", help="Start (default: the first lot, at most a year back): an instant or a date."),
]
OptionalTo = Annotated[str | None, typer.Option("--to", help="End, exclusive (default: now).")]
IntervalOption = Annotated[
    str | None,
    typer.Option("--interval", help="Lot interval (e.g. PT5M) when the registration does not tell it."),
]


def _runs(runs: list[LotRun]) -> str:
    rows = [[r.state.value, r.first, r.last, str(r.count), r.why] for r in runs]
    return table(["STATE", "FROM", "TO", "COUNT", "WAITING ON / REASON"], rows)


def _summary(report: GapReport, health: Health | None = None) -> str:
    """The report's first lines; with ``health``, its lots in the web UI's words and totals."""
    owner = f" (job {report.job})" if report.job else ""
    lots = f"{report.interval} lots" if report.interval else "named lots (the rows that exist)"
    if health is None:
        counts = "  ".join(f"{s.value} {report.counts[s]}" for s in STATES)
    else:
        counts = "  ".join(f"{s.value} {health.totals.get(s, 0)}" for s in HEALTH_ORDER)
        if health.warned:
            counts += f"  (published with warnings: {health.warned})"
    if report.failed_by_check:
        counts += f"  (failed by a check: {report.failed_by_check})"
    to_now = health is not None and health.range is not None and health.range.to_now
    span = _span(report.start, report.end, "UTC", to_now)
    if report.interval is not None and report.interval.zone:  # local days: their bounds in the zone too
        tz, zone = report.interval.tzinfo, report.interval.zone
        local = _span(report.start.astimezone(tz), report.end.astimezone(tz), zone, to_now)
        span = f"{local} ({span})"
    return f"{report.dataset}{owner}: {report.total} {lots}, {span}\n{counts}"


def _span(start: datetime.datetime, end: datetime.datetime, zone: str, to_now: bool) -> str:
    now = "now, " if to_now else ""
    return f"{start:%Y-%m-%d %H:%M:%S} .. {now}{end:%Y-%m-%d %H:%M:%S} {zone}"


def gaps(
    start: OptionalFrom = None,
    end: OptionalTo = None,
    job: Annotated[str | None, typer.Option(help="Report the lots this job produces.")] = None,
    dataset: Annotated[str | None, typer.Option(help="Report the lots of this dataset.")] = None,
    interval: IntervalOption = None,
    namespace: Namespace = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (counts and every run).")] = False,
) -> None:
    """Lots of a time range (by default up to now) by state, and the runs of lots missing, failed,
    running, held, blocked, pending (not due yet) or stale (made by an older job version)."""
    with open_existing() as lineage:
        namespace = namespace_in(lineage, namespace)
        report, health = lineage.gaps.counted(
            namespace, job=job, dataset=dataset, start=start, end=end, interval=interval
        )
    if as_json:
        print(json.dumps(counted_json(report, health), indent=2))
        return
    print(_summary(report, health))
    if report.runs:
        print()
        print(_runs(report.runs))


def _done(done: Backfill) -> str:
    verb = "would" if done.dry_run else ""
    lines = [_summary(done.report), ""]
    reopened = sum(r.count for r in done.reopened)
    hinted = sum(r.count for r in done.hinted)
    if done.dry_run:
        lines.append(
            f"dry run, nothing changed: would reopen {reopened} lots ({done.cascaded} more downstream) "
            f"and hint {hinted}"
        )
    else:
        lines.append(f"reopened {reopened} lots ({done.cascaded} more downstream), hinted {hinted}")
    for title, runs in (
        (f"{verb} reopen".strip(), done.reopened),
        (f"{verb} hint".strip(), done.hinted),
        ("not hinted (a job without inputs: claim these lots by name)", done.unhinted),
        ("left as they are", done.left),
    ):
        if runs:
            lines += ["", title + ":", _runs(runs)]
    return "\n".join(lines)


def backfill(
    job: Annotated[str, typer.Option(help="The job whose lots to make eligible.")],
    start: From,
    end: To,
    only: Annotated[
        str | None, typer.Option(help="Only these lots: complete, stale, missing, failed (comma-separated).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print what would change; change nothing.")
    ] = False,
    interval: IntervalOption = None,
    namespace: Namespace = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Reopen the job's READY lots of the range (downstream too) and hint its missing and failed ones;
    ``--only stale``: remake the lots an older version of the job made."""
    with open_existing() as lineage:
        namespace = namespace_in(lineage, namespace)
        done = lineage.gaps.backfill(
            namespace,
            job,
            start=start,
            end=end,
            only=None if only is None else [only],
            dry_run=dry_run,
            interval=interval,
        )
    print(json.dumps(backfill_json(done), indent=2) if as_json else _done(done))
