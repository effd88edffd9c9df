"""Gap reports and backfill (docs/lots.md), a lotline extension: the lots of a time range that are
not complete, as runs, and the write that makes a job's lots eligible again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Query

from lotline.api.deps import Page, Paging, Services
from lotline.api.dto import Json
from lotline.api.routes.jobs import JOB
from lotline.api.routes.lots import DATASET
from lotline.domain.gaps import backfill_json, report_json
from lotline.services import Lineage

router = APIRouter(tags=["lots"])

From = Annotated[str, Query(alias="from", description="Start: an RFC 3339 instant or a date (midnight UTC).")]
To = Annotated[str, Query(alias="to", description="End, exclusive: an RFC 3339 instant or a date.")]
ReportFrom = Annotated[
    str | None,
    Query(
        alias="from", description="Start (default: the first lot, at most a year back): an instant or a date."
    ),
]
ReportTo = Annotated[str | None, Query(alias="to", description="End, exclusive (default: now).")]
IntervalQuery = Annotated[
    str | None, Query(description="Lot interval (e.g. PT5M) when the registration does not tell it.")
]


@dataclass(frozen=True)
class Span:
    start: str
    end: str
    interval: str | None


@dataclass(frozen=True)
class ReportSpan:
    start: str | None
    end: str | None
    interval: str | None


async def span(start: From, end: To, interval: IntervalQuery = None) -> Span:
    return Span(start, end, interval)


async def report_span(
    start: ReportFrom = None, end: ReportTo = None, interval: IntervalQuery = None
) -> ReportSpan:
    return ReportSpan(start, end, interval)


Range = Annotated[Span, Depends(span)]
#: A report's range: by default from the first lot up to now.
ReportRange = Annotated[ReportSpan, Depends(report_span)]


def _report(lineage: Lineage, namespace: str, page: Paging, within: ReportSpan, **target: str) -> Json:
    """The report, one page of its runs, and the target's freshness over the same range."""
    report, health = lineage.gaps.counted(
        namespace, start=within.start, end=within.end, interval=within.interval, **target
    )
    return {
        **report_json(report, page.offset, page.limit),
        "freshness": health.freshness_json(lineage.clock.now()),
    }


@router.get(JOB + "/gaps")
def job_gaps(namespace: str, job: str, lineage: Services, page: Page, within: ReportRange) -> Json:
    """Counts by state of the job's output lots in the range, and one page of the runs not complete."""
    return _report(lineage, namespace, page, within, job=job)


@router.get(DATASET + "/gaps")
def dataset_gaps(namespace: str, dataset: str, lineage: Services, page: Page, within: ReportRange) -> Json:
    return _report(lineage, namespace, page, within, dataset=dataset)


@router.post(JOB + "/backfill")
def backfill(
    namespace: str,
    job: str,
    lineage: Services,
    within: Range,
    only: Annotated[
        list[str] | None, Query(description="complete, stale, missing, failed (repeat or comma-separate).")
    ] = None,
    dry_run: Annotated[
        bool, Query(alias="dryRun", description="Say what would change; change nothing.")
    ] = False,
    interval: IntervalQuery = None,
) -> Json:
    """Reopen the job's READY lots of the range (downstream too) and hint its missing and failed ones."""
    done = lineage.gaps.backfill(
        namespace,
        job,
        start=within.start,
        end=within.end,
        only=only,
        dry_run=dry_run,
        interval=within.interval,
    )
    return backfill_json(done)
