"""The lot grid of a job or dataset, and one lot's panel: its status rows, runs, manifests, events
and the buttons that invalidate, hold, release or backfill it (through the REST API)."""

from __future__ import annotations

import calendar
import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.concurrency import run_in_threadpool

from lotline.domain import backfills
from lotline.domain.coordination import Role, Status
from lotline.domain.errors import InvalidInput, NotFound, TooManyCells
from lotline.domain.gaps import READ_WORDS, STATES, GapState
from lotline.domain.grid import URGENCY, Cell, CellState, Grid, Health, OutputHealth, Resolution, due_range
from lotline.domain.lots import MINUTES_PER_DAY, IntervalLot, NamedLot, lot_at, lot_index, parse_lot
from lotline.services import Lineage
from lotline.web.pages import DATASET, JOB
from lotline.web.params import text, utc_time
from lotline.web.render import TIME_FORMAT, lineage_of, page, templates

router = APIRouter(include_in_schema=False)

LOT = DATASET + "/lots/{lot:seg}"
#: The finer resolution a click on an aggregated cell zooms into.
_FINER = {Resolution.DAY: Resolution.HOUR, Resolution.HOUR: Resolution.LOT}


#: What each state means, as the grid's legend says it (the glossary: docs/ui.md).
MEANINGS = {
    CellState.FAILED: "its last attempt failed",
    CellState.BLOCKED: "an input lot is not ready",
    CellState.MISSING: "due and not there: never delivered or made, or reopened",
    CellState.HELD: "on hold: nothing runs on it",
    CellState.RUNNING: "being made",
    CellState.PENDING: "not due yet (or waiting for its policy to declare it empty)",
    CellState.STALE: "done, but made by an older version of its job: backfill stale lots to remake it",
    CellState.EMPTY: "done, no data (declared empty)",
    CellState.COMPLETE: "done",
}


def cell_counts(cell: Cell) -> str:
    """A cell's lots by state, most urgent first (its tooltip)."""
    return ", ".join(f"{state.value} {cell.counts[state]}" for state in URGENCY if cell.counts.get(state))


templates.env.globals.update(cell_counts=cell_counts)


@dataclass(frozen=True)
class Row:
    """One line of the grid: a month of day cells, a day of hour cells, or an hour of lots.
    ``slots`` follow the time axis; None where the range has no lot (before its first, after now)."""

    label: str
    slots: list[Cell | None]


@dataclass(frozen=True)
class Layout:
    """The grid's rows and its time axis (one label per column, ``""`` between labels)."""

    axis: list[str]
    rows: list[Row]


def layout(grid: Grid) -> Layout:
    """Rows of natural length, so a day of five-minute lots is 24 rows of 12 and columns line up
    on the time axis: an hour of lots finer than an hour, a day of hour cells, a month of days, a
    year of weeks or of months, a decade of years. Days and longer are placed by their local
    start in the interval's zone."""
    minutes = grid.lots_per_cell * grid.interval.minutes
    if grid.interval.calendar:
        return _calendar_layout(grid)
    if minutes < 60 and 60 % minutes == 0:
        label, width, every = "%Y-%m-%d %H:00", 60 // minutes, 3 if 60 // minutes <= 24 else 5
        axis = [f":{c * minutes:02d}" for c in range(width)]

        def column(cell: Cell) -> int:
            return cell.start.minute // minutes
    elif minutes < MINUTES_PER_DAY:
        width = MINUTES_PER_DAY // minutes
        label, every = "%Y-%m-%d", 3 if width <= 24 else 5
        hours = minutes % 60 == 0
        starts = range(0, MINUTES_PER_DAY, minutes)
        axis = [f"{m // 60:02d}" + ("" if hours else f":{m % 60:02d}") for m in starts]

        def column(cell: Cell) -> int:
            return (cell.start.hour * 60 + cell.start.minute) // minutes
    else:
        label, width, every = "%Y-%m", 31, 7
        axis = [str(day) for day in range(1, 32)]

        def column(cell: Cell) -> int:
            return cell.start.astimezone(grid.interval.tzinfo).day - 1

    found: list[Row] = []
    for cell in grid.cells:
        key = cell.start.astimezone(grid.interval.tzinfo).strftime(label)
        if not found or found[-1].label != key:
            found.append(Row(key, [None] * width))
        found[-1].slots[column(cell)] = cell
    return Layout([text if c % every == 0 else "" for c, text in enumerate(axis)], found)


#: A calendar grid's rows: (row label, columns, axis, label every n columns, the column of a lot's first day).
_CALENDAR_ROWS: dict[
    str, tuple[Callable[[datetime.date], str], list[str], int, Callable[[datetime.date], int]]
] = {
    "W": (
        lambda d: str(d.isocalendar().year),
        [f"W{w:02d}" for w in range(1, 54)],
        4,
        lambda d: d.isocalendar().week - 1,
    ),
    "M": (lambda d: str(d.year), [calendar.month_abbr[m] for m in range(1, 13)], 1, lambda d: d.month - 1),
    "Y": (lambda d: f"{d.year // 10}0s", [str(y) for y in range(10)], 1, lambda d: d.year % 10),
}


def _calendar_layout(grid: Grid) -> Layout:
    """A row per ISO year of weeks (53 columns), per year of months (12), per decade of years (10)."""
    label, axis, every, column = _CALENDAR_ROWS[grid.interval.calendar]
    found: list[Row] = []
    for cell in grid.cells:
        day = cell.start.astimezone(grid.interval.tzinfo).date()
        if not found or found[-1].label != label(day):
            found.append(Row(label(day), [None] * len(axis)))
        found[-1].slots[column(day)] = cell
    return Layout([text if c % every == 0 else "" for c, text in enumerate(axis)], found)


def _grid(lineage: Lineage, request: Request, namespace: str, **target: str) -> dict[str, Any]:
    params = request.query_params
    context: dict[str, Any] = {"ns": namespace, "target": target, "states": URGENCY, "meanings": MEANINGS}
    span = lineage.gaps.span(namespace, **target)
    asked_from, asked_to = utc_time(params, "from"), utc_time(params, "to")
    if span is None and (asked_from is None or asked_to is None):
        return {**context, "grid": None}
    now = lineage.clock.now()
    try:
        shown = due_range(asked_from, asked_to, span, now)
        if shown.empty:
            return {**context, "grid": None, "notes": shown.notes}
        asked, notes = {"start": shown.start.isoformat(), "end": shown.end.isoformat()}, list(shown.notes)
        outputs = lineage.gaps.outputs(namespace, target["job"], **asked) if "job" in target else ()
        drawn = _drawn(target, outputs, text(params, "output"))
        try:
            grid = lineage.gaps.grid(namespace, **asked, resolution=text(params, "res"), **drawn)
        except TooManyCells as error:  # offer what fits rather than an error page
            notes.append(error.message + " Shown with the automatic resolution.")
            grid = lineage.gaps.grid(namespace, **asked, **drawn)
    except InvalidInput as error:  # the form stays as typed, with what is wrong
        return {
            **context,
            "grid": None,
            "error": error.message,
            "typed": (text(params, "from") or "", text(params, "to") or ""),
            "http_status": error.http_status,
        }
    start, end = grid.report.start, grid.report.end
    length = end - start
    return {
        **context,
        "grid": grid,
        "outputs": outputs,
        "output": text(params, "output"),
        "lattice": layout(grid),
        "notes": notes,
        "totals": grid.totals(),
        "start": start,
        "end": end,
        "to_now": shown.to_now,
        "earlier": None if span and start <= span[0] else (start - length, start),
        "later": None if end >= now else (end, end + length),
        "finer": _FINER.get(grid.resolution),
        "resolutions": list(Resolution),
    }


def _drawn(target: dict[str, str], outputs: tuple[OutputHealth, ...], output: str | None) -> dict[str, str]:
    """What the grid draws: the job's first output (its lots, as every page counts them), or the
    output asked for (``?output=``) of a job with several, as that dataset's grid."""
    if output is None:
        return target
    names = [o.dataset for o in outputs]
    if output not in names:
        subject = target.get("job") or target.get("dataset")
        choice = f"its outputs are {', '.join(names)}" if names else "only a job with several has a choice"
        raise InvalidInput(f"{subject} has no output {output!r}: {choice}.")
    return target if output == names[0] else {"dataset": output}


@router.get(JOB + "/lots", response_class=HTMLResponse)
async def job_grid(request: Request, namespace: str, job: str) -> HTMLResponse:
    """The job's output lots: what it has done, is doing, and what stands in its way."""
    return await page(request, "grid.html", lambda lineage: _grid(lineage, request, namespace, job=job))


@router.get(DATASET + "/lots", response_class=HTMLResponse)
async def dataset_grid(request: Request, namespace: str, dataset: str) -> HTMLResponse:
    return await page(
        request, "grid.html", lambda lineage: _grid(lineage, request, namespace, dataset=dataset)
    )


@router.get(JOB + "/backfill", response_class=HTMLResponse)
async def backfill_progress(request: Request, namespace: str, job: str) -> HTMLResponse:
    """A backfill's progress: its runs of lots (``?lots=FIRST~LAST``, as the backfill answered
    them; none: every lot of the range) by the state each lot is in now. The page and the grid's
    panel follow the lot event log, so it fills in as workers make the lots."""
    params = request.query_params

    def build(lineage: Lineage) -> dict[str, Any]:
        start, end = utc_time(params, "from"), utc_time(params, "to")
        if start is None or end is None:
            raise InvalidInput("from and to are required: the backfill's range.")
        report = lineage.gaps.report(namespace, job=job, start=start, end=end)
        asked = [v for v in params.getlist("lots") if v.strip()]
        if report.interval is None:
            raise InvalidInput(f"Dataset {report.dataset} has named lots: a backfill takes time lots only.")
        whole = [
            (lot_index(lot_at(report.start, report.interval)), lot_index(lot_at(report.end, report.interval)))
        ]
        runs = backfills.progress(report, backfills.parse_runs(asked, report) if asked else whole)
        totals = {state: sum(r.counts[state] for r in runs) for state in STATES}
        health = Health(
            namespace,
            job,
            report.dataset,
            False,
            None,
            {CellState(s.value): n for s, n in totals.items() if n},
        )
        return {
            "ns": namespace,
            "job": job,
            "report": report,
            "runs": runs,
            "health": health,
            "done": totals[GapState.COMPLETE],
            "total": sum(totals.values()),
        }

    return await page(request, "backfill.html", build)


def _local_window(lot: IntervalLot | NamedLot) -> tuple[str, str, str] | None:
    """A zoned lot's bounds in its zone (a New York day is 23, 24 or 25 hours), named beside UTC's."""
    if not isinstance(lot, IntervalLot) or not lot.interval.zone:
        return None
    return lot.local_start.strftime(TIME_FORMAT), lot.local_end.strftime(TIME_FORMAT), lot.interval.zone


def _due(lineage: Lineage, namespace: str, dataset: str, lot: IntervalLot | NamedLot) -> bool:
    """A lot that nothing has touched yet still has a page (a missing cell opens it) if it is due:
    a window of the dataset's interval inside where its lots are. Any other id is no lot of it."""
    span = lineage.gaps.span(namespace, dataset=dataset)
    if span is None or not isinstance(lot, IntervalLot):
        return False
    grid = lineage.gaps.grid(
        namespace, dataset=dataset, start=lot.start.isoformat(), end=lot.end.isoformat(), resolution="lot"
    )
    return grid.interval == lot.interval and span[0] <= lot.start < span[1]


@router.get(LOT, response_class=HTMLResponse)
async def lot_page(request: Request, namespace: str, dataset: str, lot: str) -> HTMLResponse:
    """Everything about one lot; the grid swaps it in beside itself, a link shows it as a page."""

    def build(lineage: Lineage) -> dict[str, Any]:
        lineage.catalog.get_dataset(namespace, dataset)
        try:
            parsed = parse_lot(lot)
        except InvalidInput:
            raise NotFound("Lot", f"{namespace}:{dataset}/{lot[:80]}") from None
        statuses = lineage.lots.status_page(
            namespace, dataset=dataset, role=None, lot_from=lot, lot_to=lot, limit=100
        ).items
        producer = next((s.job for s in statuses if s.role is Role.OUTPUT), None)
        runs = [] if producer is None else lineage.runs.list_runs(namespace, producer, 20, lot=lot).items
        found = {
            "statuses": statuses,
            "current": lineage.versions.current_version(namespace, dataset, lot),
            "manifests": lineage.manifests.history(namespace, dataset, lot),
            "events": lineage.lot_events.of_lot(namespace, dataset, lot, limit=50),
        }
        if not any(found.values()) and not _due(lineage, namespace, dataset, parsed):
            raise NotFound("Lot", f"{namespace}:{dataset}/{lot[:80]}")
        told = lineage.gaps.lot_state(namespace, dataset, parsed) if isinstance(parsed, IntervalLot) else None
        word = told.state if told is not None else None
        if word is None and producer is not None:
            word = lineage.gaps.lot_states(namespace, dataset, [lot])[lot]
        return {
            "told": told,
            "word": word,
            "read_words": READ_WORDS,
            "ns": namespace,
            "dataset": dataset,
            "lot": lot,
            "window": (parsed.start, parsed.end) if isinstance(parsed, IntervalLot) else None,
            "local_window": _local_window(parsed),
            "producer": producer,
            # what its hold and release buttons can do: hold a lot that is not held, release a held one
            "held": any(s.role is Role.OUTPUT and s.status is Status.HOLD for s in statuses),
            "runs": runs,
            **found,
        }

    return await page(request, "lot.html", build, fresh=False)


def _axis_labels(column: datetime.timedelta) -> tuple[int, str]:
    """Every how many columns the matrix's axis is labelled, and how: dates for columns of a day
    or more, hours for hours, times for finer ones."""
    if column >= datetime.timedelta(days=1):
        return 7, "%m-%d"
    if column >= datetime.timedelta(hours=1):
        return 6, "%m-%d %H:00"
    return 12, "%H:%M"


@dataclass(frozen=True)
class Placed:
    """A matrix cell on the time axis: ``gap`` blank columns before it, ``span`` columns wide."""

    cell: Cell
    gap: int
    span: int


def place(
    grid: Grid, base: datetime.datetime, column: datetime.timedelta, end: datetime.datetime
) -> list[Placed]:
    """A row's cells on the matrix's columns (from ``base``, each ``column`` long, up to ``end``):
    a cell of lots longer than a column spans the columns its lots cover, cut to the range. A lot
    whose bounds are not column bounds (a New York day in UTC day columns) takes the columns most
    of it lies in, so that a row's cells follow one another as its lots do; one mostly outside the
    range is left out."""
    limit = -(-(end - base) // column)

    def nearest(moment: datetime.datetime) -> int:
        return min(max(int((moment - base) / column + 0.5), 0), limit)

    found, at = [], 0
    for cell in grid.cells:
        first = max(nearest(cell.start), at)
        span = (limit if cell.end >= end else nearest(cell.end)) - first  # the last column may be cut
        if span <= 0:  # most of it lies outside the range's columns (a zoned day at either end)
            continue
        found.append(Placed(cell, first - at, span))
        at = first + span
    return found


@router.get("/lots", response_class=HTMLResponse)
async def matrix_page(request: Request) -> HTMLResponse:
    """A namespace's lots by jobs: a row of cells per job, producers above their consumers, so a
    blocked chain reads down a column; each row at its own lots' resolution on one time axis."""
    params = request.query_params

    def build(lineage: Lineage) -> dict[str, Any]:
        namespace = text(params, "ns")
        if namespace is None:
            raise InvalidInput("ns is required: the namespace whose lots to show.")
        start, end, now = utc_time(params, "from"), utc_time(params, "to"), lineage.clock.now()
        resolution = text(params, "res")
        notes: list[str] = []
        context: dict[str, Any] = {
            "ns": namespace,
            "notes": notes,
            "resolutions": list(Resolution),
            "states": URGENCY,
            "meanings": MEANINGS,
        }
        try:
            try:
                found = lineage.gaps.matrix(namespace, start=start, end=end, now=now, resolution=resolution)
            except TooManyCells as error:
                notes.append(error.message + " Shown with the automatic resolution.")
                found = lineage.gaps.matrix(namespace, start=start, end=end, now=now)
        except InvalidInput as error:  # the form stays as typed, with the reason
            return {
                **context,
                "matrix": None,
                "error": error.message,
                "typed": (text(params, "from") or "", text(params, "to") or ""),
                "http_status": error.http_status,
            }
        context["matrix"] = found
        if found.range is not None:
            notes.extend(found.range.notes)
        if not found.rows or found.resolution is None or found.range is None:
            return context
        column = datetime.timedelta(minutes=found.column_minutes)
        midnight = found.range.start.replace(hour=0, minute=0, second=0, microsecond=0)
        base = midnight + (found.range.start - midnight) // column * column
        count = -(-(found.range.end - base) // column)
        every, pattern = _axis_labels(column)
        starts = [base + n * column for n in range(count)]
        return {
            **context,
            "axis": [s.strftime(pattern) if n % every == 0 else "" for n, s in enumerate(starts)],
            "placed": [
                [] if grid is None else place(grid, base, column, found.range.end) for _, grid in found.rows
            ],
            "finers": _FINER,
        }

    return await page(request, "matrix.html", build)


@router.get("/lots/holds")
async def holds(request: Request) -> JSONResponse:
    """The namespace's held jobs (``?ns=``): a hold or a release is no lot event, so a live page
    asks for these each time it polls, and refreshes its parts when they differ from its own."""
    namespace = text(request.query_params, "ns") or ""
    return JSONResponse({"held": await run_in_threadpool(lineage_of(request).lots.held_jobs, namespace)})
