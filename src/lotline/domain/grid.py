"""The lot grid: a gap report drawn as cells, one per lot or one per hour or day of lots.

A year of five-minute lots is 105,120 lots. The grid is built from the report's runs of lots that
are not complete (``domain.gaps``), never from one object per lot, and a page never draws more
than ``MAX_CELLS`` cells: a coarser resolution aggregates lots into hours or days, each cell
carrying its counts by state and coloured by the most urgent state among them.
"""

from __future__ import annotations

import bisect
import datetime
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from lotline.domain.errors import InvalidInput
from lotline.domain.gaps import GapReport, GapState, TimeRange, index_of
from lotline.domain.lots import MINUTES_PER_DAY, Interval, lot_from_index

#: The most cells one grid holds (a year of hours is 8,760): beyond, choose a coarser resolution.
MAX_CELLS = 10_000
#: What an automatic resolution aims under: a week of five-minute lots is 2,016 cells.
AUTO_CELLS = 2_500


class CellState(StrEnum):
    """A lot's state as the grid colours it: the gap report's states (a failed lot is failed,
    whether or not its attempt's data is removed), with an empty lot told apart from a complete one."""

    FAILED = "failed"
    BLOCKED = "blocked"
    MISSING = "missing"
    HELD = "held"
    RUNNING = "running"
    EMPTY = "empty"
    COMPLETE = "complete"


#: Most urgent first: an aggregated cell takes the colour of the first state it holds.
URGENCY = tuple(CellState)

_FROM_GAP = {
    GapState.COMPLETE: CellState.COMPLETE,
    GapState.RUNNING: CellState.RUNNING,
    GapState.FAILED: CellState.FAILED,
    GapState.MISSING: CellState.MISSING,
    GapState.HELD: CellState.HELD,
    GapState.BLOCKED: CellState.BLOCKED,
}


class Resolution(StrEnum):
    LOT = "lot"
    HOUR = "hour"
    DAY = "day"


_MINUTES = {Resolution.HOUR: 60, Resolution.DAY: MINUTES_PER_DAY}


@dataclass(frozen=True)
class Cell:
    """Lots ``[first, stop)`` (lot indexes) starting at ``start``; ``lot`` is set when the cell is
    one lot. ``counts`` holds only the states present."""

    start: datetime.datetime
    first: int
    stop: int
    counts: dict[CellState, int]
    lot: str | None

    @property
    def state(self) -> CellState:
        return next(s for s in URGENCY if self.counts.get(s))


@dataclass(frozen=True)
class Grid:
    report: GapReport
    interval: Interval
    resolution: Resolution
    lots_per_cell: int
    cells: list[Cell]

    def totals(self) -> dict[CellState, int]:
        found = dict.fromkeys(URGENCY, 0)
        for cell in self.cells:
            for state, count in cell.counts.items():
                found[state] += count
        return found


def lots_per_cell(interval: Interval, resolution: Resolution) -> int:
    if resolution is Resolution.LOT:
        return 1
    minutes = _MINUTES[resolution]
    if minutes % interval.minutes:  # longer lots, or lots that straddle the hour (PT8M, PT45M)
        raise InvalidInput(f"{interval} lots cannot be shown per {resolution.value}: choose a coarser one.")
    return minutes // interval.minutes


def choose_resolution(interval: Interval, lots: int, wanted: Resolution | None) -> Resolution:
    """``wanted`` if it fits in ``MAX_CELLS``; else the finest that fits in ``AUTO_CELLS``."""
    if wanted is not None:
        cells = -(-lots // lots_per_cell(interval, wanted))
        if cells > MAX_CELLS:
            raise InvalidInput(
                f"{cells} cells per {wanted.value} is more than the grid's {MAX_CELLS}: "
                "choose a coarser resolution or a shorter range."
            )
        return wanted
    for resolution in Resolution:
        if resolution is not Resolution.LOT and _MINUTES[resolution] % interval.minutes:
            continue
        if -(-lots // lots_per_cell(interval, resolution)) <= AUTO_CELLS:
            return resolution
    return Resolution.DAY


def build(report: GapReport, empty_lots: Iterable[str], resolution: Resolution | None = None) -> Grid:
    """The grid of an interval report, ``empty_lots`` (READY lots whose manifest is empty) told apart."""
    interval = report.interval
    if interval is None:
        raise InvalidInput(
            f"Dataset {report.namespace}:{report.dataset} has named lots, which have no place in "
            "a time grid; its lots are listed instead."
        )
    first, stop = TimeRange(report.start, report.end).indexes(interval)
    chosen = choose_resolution(interval, report.total, resolution)
    per = lots_per_cell(interval, chosen)
    # Cells align on UTC hours and days: lot indexes count from a midnight, and ``per`` divides a day.
    base = first - first % per
    count = -(-(stop - base) // per)
    tallies: list[dict[CellState, int]] = [{} for _ in range(count)]

    def add(state: CellState, lo: int, hi: int) -> None:
        lo, hi = max(lo, first), min(hi, stop)
        while lo < hi:
            cell = (lo - base) // per
            upto = min(hi, base + (cell + 1) * per)
            tallies[cell][state] = tallies[cell].get(state, 0) + (upto - lo)
            lo = upto

    not_complete = []
    for run in report.runs:
        lo = index_of(run.first, interval)
        add(_FROM_GAP[run.state], lo, lo + run.count)
        not_complete.append((lo, lo + run.count))
    not_complete.sort()
    empties = sorted(i for i in (index_of(lot, interval) for lot in empty_lots) if first <= i < stop)
    for index in empties:
        if not _inside(not_complete, index):
            add(CellState.EMPTY, index, index + 1)
    cells = []
    for number, tally in enumerate(tallies):
        lo, hi = max(base + number * per, first), min(base + (number + 1) * per, stop)
        taken = sum(tally.values())
        if taken < hi - lo:
            tally[CellState.COMPLETE] = tally.get(CellState.COMPLETE, 0) + (hi - lo - taken)
        start = lot_from_index(base + number * per, interval)
        cells.append(
            Cell(start.start, lo, hi, tally, str(lot_from_index(lo, interval)) if per == 1 else None)
        )
    return Grid(report, interval, chosen, per, cells)


def _inside(runs: Sequence[tuple[int, int]], index: int) -> bool:
    at = bisect.bisect_right(runs, (index, 2**63)) - 1
    return at >= 0 and runs[at][0] <= index < runs[at][1]
