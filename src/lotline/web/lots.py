"""The lot grid of a job or dataset, and one lot's panel: its status rows, runs, manifests, events
and the buttons that invalidate, hold, release or backfill it (through the REST API)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from lotline.domain.coordination import Role
from lotline.domain.grid import URGENCY, Cell, Grid, Resolution
from lotline.domain.lots import MINUTES_PER_DAY, IntervalLot, parse_lot
from lotline.services import Lineage
from lotline.web.pages import DATASET, JOB
from lotline.web.params import text
from lotline.web.render import page

router = APIRouter(include_in_schema=False)

LOT = DATASET + "/lots/{lot:seg}"
#: The range a grid shows when none is asked for: the dataset's lots, at most this far back from the last.
DEFAULT_SPAN = datetime.timedelta(days=366)
#: The finer resolution a click on an aggregated cell zooms into.
_FINER = {Resolution.DAY: Resolution.HOUR, Resolution.HOUR: Resolution.LOT}


@dataclass(frozen=True)
class Row:
    """One line of the grid: a month of day cells, a day of hour or lot cells, or an hour of lots."""

    label: str
    cells: list[Cell]


def rows(grid: Grid) -> list[Row]:
    minutes = grid.lots_per_cell * grid.interval.minutes
    if minutes >= MINUTES_PER_DAY:
        label = "%Y-%m"
    elif MINUTES_PER_DAY // minutes <= 288:
        label = "%Y-%m-%d"
    else:
        label = "%Y-%m-%d %H:00"
    found: list[Row] = []
    for cell in grid.cells:
        key = cell.start.strftime(label)
        if not found or found[-1].label != key:
            found.append(Row(key, []))
        found[-1].cells.append(cell)
    return found


def _grid(lineage: Lineage, request: Request, namespace: str, **target: str) -> dict[str, Any]:
    params = request.query_params
    start, end = text(params, "from"), text(params, "to")
    context: dict[str, Any] = {"ns": namespace, "target": target, "states": URGENCY}
    if start is None or end is None:
        span = lineage.gaps.span(namespace, **target)
        if span is None:
            return {**context, "grid": None}
        first, last = span
        start = start or max(first, last - DEFAULT_SPAN).isoformat()
        end = end or last.isoformat()
    grid = lineage.gaps.grid(namespace, start=start, end=end, resolution=text(params, "res"), **target)
    length = grid.report.end - grid.report.start
    cell_span = datetime.timedelta(minutes=grid.lots_per_cell * grid.interval.minutes)
    return {
        **context,
        "grid": grid,
        "rows": rows(grid),
        "totals": grid.totals(),
        "start": grid.report.start,
        "end": grid.report.end,
        "earlier": (grid.report.start - length, grid.report.start),
        "later": (grid.report.end, grid.report.end + length),
        "cell_span": cell_span,
        "finer": _FINER.get(grid.resolution),
        "resolutions": list(Resolution),
    }


@router.get(JOB + "/lots", response_class=HTMLResponse)
async def job_grid(request: Request, namespace: str, job: str) -> HTMLResponse:
    """The job's output lots: what it has done, is doing, and what stands in its way."""
    return await page(request, "grid.html", lambda lineage: _grid(lineage, request, namespace, job=job))


@router.get(DATASET + "/lots", response_class=HTMLResponse)
async def dataset_grid(request: Request, namespace: str, dataset: str) -> HTMLResponse:
    return await page(
        request, "grid.html", lambda lineage: _grid(lineage, request, namespace, dataset=dataset)
    )


@router.get(LOT, response_class=HTMLResponse)
async def lot_page(request: Request, namespace: str, dataset: str, lot: str) -> HTMLResponse:
    """Everything about one lot; the grid swaps it in beside itself, a link shows it as a page."""

    def build(lineage: Lineage) -> dict[str, Any]:
        lineage.catalog.get_dataset(namespace, dataset)
        parsed = parse_lot(lot)
        statuses = lineage.lots.status_page(
            namespace, dataset=dataset, role=None, lot_from=lot, lot_to=lot, limit=100
        ).items
        producer = next((s.job for s in statuses if s.role is Role.OUTPUT), None)
        runs = [] if producer is None else lineage.runs.list_runs(namespace, producer, 20, lot=lot).items
        return {
            "ns": namespace,
            "dataset": dataset,
            "lot": lot,
            "window": (parsed.start, parsed.end) if isinstance(parsed, IntervalLot) else None,
            "statuses": statuses,
            "producer": producer,
            "runs": runs,
            "current": lineage.versions.current_version(namespace, dataset, lot),
            "manifests": lineage.manifests.history(namespace, dataset, lot),
            "events": lineage.lot_events.of_lot(namespace, dataset, lot, limit=50),
        }

    return await page(request, "lot.html", build, fresh=False)
