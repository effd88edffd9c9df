"""The lot grid: a gap report drawn as cells, one per lot or one per hour or day of lots.

A year of five-minute lots is 105,120 lots. The grid is built from the report's runs of lots that
are not complete (``domain.gaps``), never from one object per lot, and a page never draws more
than ``MAX_CELLS`` cells: a coarser resolution aggregates lots into hours or days, each cell
carrying its counts by state. An aggregated cell shows three things at once: how much of it is done
(``Cell.done_share``: complete and empty lots), what most of the rest is (``Cell.dominant``, its
body) and the most urgent state of the rest (``Cell.mark``, its corner), so a day with one failed
lot in 288 reads as mostly done *and* flagged, and a day of 287 missing lots and 1 failed reads missing.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from lotline.domain.coordination import gave_up_line
from lotline.domain.errors import InvalidInput, TooManyCells
from lotline.domain.gaps import GapReport, GapState, TimeRange, index_of, indexes_of, parse_time, report_json
from lotline.domain.lots import MINUTES_PER_DAY, Interval, lot_from_index

#: The most cells one grid holds (a year of hours is 8,760): beyond, choose a coarser resolution.
MAX_CELLS = 10_000
#: What an automatic resolution aims under: a week of five-minute lots is 2,016 cells.
AUTO_CELLS = 2_500


class CellState(StrEnum):
    """A lot's state as every page names it: the gap report's states, with an empty lot (present,
    but its manifest lists no object) told apart from a complete one. A failed lot
    is failed whether or not its attempt's data is removed."""

    FAILED = "failed"
    BLOCKED = "blocked"
    MISSING = "missing"
    HELD = "held"
    RUNNING = "running"
    PENDING = "pending"
    #: Complete and readable, made by an older version of its job: to recompute.
    STALE = "stale"
    EMPTY = "empty"
    COMPLETE = "complete"


#: Most urgent first: an aggregated cell is marked with the first state it holds that is not done.
URGENCY = tuple(CellState)
#: The states of lots that are present: what a cell's fill measures.
DONE = frozenset({CellState.EMPTY, CellState.COMPLETE})
#: What sorts a job among others, most urgent first: not done, and due (pending lots are no trouble;
#: stale ones, readable, come last).
TROUBLE = tuple(s for s in URGENCY if s not in DONE and s is not CellState.PENDING)

#: The order of a health bar: done first, then what is under way, then trouble.
HEALTH_ORDER = (
    CellState.COMPLETE,
    CellState.EMPTY,
    CellState.STALE,
    CellState.RUNNING,
    CellState.PENDING,
    CellState.FAILED,
    CellState.BLOCKED,
    CellState.MISSING,
    CellState.HELD,
)
#: The range shown when none is asked for: the lots due, at most this far back from the last.
DEFAULT_SPAN = datetime.timedelta(days=366)

#: A gap report's state as the grid names it.
FROM_GAP = {
    GapState.COMPLETE: CellState.COMPLETE,
    GapState.STALE: CellState.STALE,
    GapState.RUNNING: CellState.RUNNING,
    GapState.FAILED: CellState.FAILED,
    GapState.MISSING: CellState.MISSING,
    GapState.HELD: CellState.HELD,
    GapState.BLOCKED: CellState.BLOCKED,
    GapState.PENDING: CellState.PENDING,
}


class Resolution(StrEnum):
    LOT = "lot"
    HOUR = "hour"
    DAY = "day"


_MINUTES = {Resolution.HOUR: 60, Resolution.DAY: MINUTES_PER_DAY}


@dataclass(frozen=True)
class Cell:
    """Lots ``[first, stop)`` (lot indexes) from ``start`` to ``end`` (UTC); ``lot`` is set when the
    cell is one lot. ``counts`` holds only the states present."""

    start: datetime.datetime
    end: datetime.datetime
    first: int
    stop: int
    counts: dict[CellState, int]
    lot: str | None
    #: Lots of the cell published although a ``warn`` check did not hold on them.
    warned: int = 0
    #: Failed lots of the cell given up on (too many failed attempts in a row).
    gave_up: int = 0
    #: A one-lot cell given up on: ``gave up after 3 attempts`` (None: it was not).
    gave_up_text: str | None = None

    @property
    def mark(self) -> CellState | None:
        """The most urgent state among the lots that are not done (None: every lot is done)."""
        return next((s for s in URGENCY if s not in DONE and self.counts.get(s)), None)

    @property
    def dominant(self) -> CellState | None:
        """The state most of the lots that are not done are in, the more urgent among equals
        (None: every lot is done): what an aggregated cell's body is tinted, while its corner
        shows the ``mark`` — a day of 287 reopened lots and 1 failed one reads missing, flagged failed."""
        found = [(self.counts.get(s, 0), -n, s) for n, s in enumerate(URGENCY) if s not in DONE]
        count, _, state = max(found)
        return state if count else None

    @property
    def state(self) -> CellState:
        """The mark; a cell whose lots are all done is complete, or empty if none has data."""
        mark = self.mark
        if mark is not None:
            return mark
        return CellState.COMPLETE if self.counts.get(CellState.COMPLETE) else CellState.EMPTY

    @property
    def done_share(self) -> int:
        """Percent of the cell's lots that are done, rounded down: 100 only when all are."""
        done = sum(self.counts.get(s, 0) for s in DONE)
        return done * 100 // (self.stop - self.first)


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
            raise TooManyCells(
                f"{cells} cells per {wanted.value} is more than the grid's {MAX_CELLS}: "
                "choose a coarser resolution or a shorter range."
            )
        return wanted
    for resolution in Resolution:
        if resolution is not Resolution.LOT and _MINUTES[resolution] % interval.minutes:
            continue
        if -(-lots // lots_per_cell(interval, resolution)) <= AUTO_CELLS:
            return resolution
    return day_resolution(interval)


def day_resolution(interval: Interval) -> Resolution:
    """A day or the lot, whichever is longer: the coarsest a grid of ``interval`` lots can always be
    drawn at (a day, a week, a month or a year per cell; lots shorter than a day, per day)."""
    return Resolution.LOT if interval.minutes >= MINUTES_PER_DAY else Resolution.DAY


def build(
    report: GapReport,
    empty_lots: Iterable[str],
    resolution: Resolution | None = None,
    warned_lots: Iterable[str] = (),
) -> Grid:
    """The grid of an interval report, ``empty_lots`` (READY lots whose manifest is empty) told
    apart, ``warned_lots`` (published with a failing ``warn`` check) marked."""
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
    gave_up = [0] * count
    gave_up_after: dict[int, int] = {}
    for run in report.runs:
        lo = index_of(run.first, interval)
        add(FROM_GAP[run.state], lo, lo + run.count)
        not_complete.append((lo, lo + run.count))
        if run.failure is not None and run.failure.gave_up_after is not None:
            for index in range(max(lo, first), min(lo + run.count, stop)):
                gave_up[(index - base) // per] += 1
                gave_up_after[index] = run.failure.gave_up_after
    not_complete.sort()
    for index in _outside(not_complete, indexes_of(empty_lots, interval), first, stop):
        tally = tallies[(index - base) // per]  # a lot is in one cell
        tally[CellState.EMPTY] = tally.get(CellState.EMPTY, 0) + 1
    warned = [0] * count
    for index in _outside(not_complete, indexes_of(warned_lots, interval), first, stop):
        warned[(index - base) // per] += 1
    cells = []
    for number, tally in enumerate(tallies):
        lo, hi = max(base + number * per, first), min(base + (number + 1) * per, stop)
        taken = sum(tally.values())
        if taken < hi - lo:
            tally[CellState.COMPLETE] = tally.get(CellState.COMPLETE, 0) + (hi - lo - taken)
        start = lot_from_index(base + number * per, interval).start
        if interval.fixed:
            end = start + datetime.timedelta(minutes=per * interval.minutes)
        else:  # a calendar or zoned cell is one lot (or a day of days), as long as the calendar says
            end = lot_from_index(base + (number + 1) * per, interval).start
        lot = str(lot_from_index(lo, interval)) if per == 1 else None
        after = gave_up_after.get(lo) if per == 1 else None
        cells.append(
            Cell(
                start,
                end,
                lo,
                hi,
                tally,
                lot,
                warned[number],
                gave_up[number],
                None if after is None else gave_up_line(after),
            )
        )
    return Grid(report, interval, chosen, per, cells)


def _outside(runs: Sequence[tuple[int, int]], indexes: list[int], first: int, stop: int) -> list[int]:
    """The ``indexes`` in ``[first, stop)`` and in none of ``runs`` (sorted, disjoint), in order:
    one walk of both, not a search per index."""
    found, at = [], 0
    for index in sorted(indexes):
        if not first <= index < stop:
            continue
        while at < len(runs) and runs[at][1] <= index:
            at += 1
        if at == len(runs) or index < runs[at][0]:
            found.append(index)
    return found


@dataclass(frozen=True)
class DueRange:
    """The range a grid or a health bar covers: what was asked, cut to where lots are due, and
    notes saying where it was cut."""

    start: datetime.datetime
    end: datetime.datetime
    notes: tuple[str, ...] = ()
    #: The range ends now: what it counts is every lot up to now.
    to_now: bool = False

    @property
    def empty(self) -> bool:
        return self.end <= self.start

    @property
    def label(self) -> str:
        """``2026-11-27 09:00 to now, 2026-11-28 07:00 UTC``: how every page and command says it."""
        start, end = (f"{t.astimezone(datetime.UTC):%Y-%m-%d %H:%M}" for t in (self.start, self.end))
        return f"{start} to {'now, ' if self.to_now else ''}{end} UTC"


def due_range(
    asked_from: str | None,
    asked_to: str | None,
    span: tuple[datetime.datetime, datetime.datetime] | None,
    now: datetime.datetime,
) -> DueRange:
    """``[from, to)`` without what is not due: before the first lot (of the dataset or its
    producer's inputs: ``span``) and after ``now`` — such lots are not late, and drawn they would
    all read missing or blocked. Without ``from``/``to``: from the first lot to the last one or now,
    at most ``DEFAULT_SPAN`` (a recent window; older lots are reachable with ``from``)."""
    if span is None:
        if asked_from is None or asked_to is None:
            raise InvalidInput("Name both from and to: there are no lots to start from.")
        asked = TimeRange.parse(asked_from, asked_to)
        return DueRange(asked.start, min(asked.end, now), to_now=asked.end >= now)
    first, _ = span
    default_end = now  # every lot up to now is due or pending: a stopped source shows its gap
    start = parse_time("from", asked_from) if asked_from else max(first, default_end - DEFAULT_SPAN)
    end = parse_time("to", asked_to) if asked_to else default_end
    if asked_from is None and asked_to is None and end <= start:  # lots only after now: none due
        return DueRange(start, start, to_now=True)
    if end <= start:
        shown = [f"{t.astimezone(datetime.UTC):%Y-%m-%d %H:%M:%S}" for t in (start, end)]
        raise InvalidInput(f"from {shown[0]} must be before to {shown[1]} (UTC).")
    notes = []
    if start < first:
        notes.append(f"The first lot starts at {first:%Y-%m-%d %H:%M:%S} UTC: nothing before it is drawn.")
        start = first
    if end > now:
        notes.append("Nothing after now is drawn.")
        end = now
    if end > start:  # the length, as a report checks it
        TimeRange.parse(start.isoformat(), end.isoformat())
    return DueRange(start, end, tuple(notes), to_now=end == now)


def covered(ranges: Iterable[DueRange | None]) -> DueRange | None:
    """The range several healths' counts cover together (their empty ranges aside): from the
    earliest start to the latest end, to now when each is; None when none counts a lot."""
    counted = [r for r in ranges if r is not None and not r.empty]
    if not counted:
        return None
    start, end = min(r.start for r in counted), max(r.end for r in counted)
    return DueRange(start, end, to_now=all(r.to_now for r in counted))


@dataclass(frozen=True)
class OutputHealth:
    """One output of a job with several, over the job's range: its lots by state (each output has
    its own: one may be reopened alone) and those published with warnings (a check is an output's)."""

    dataset: str
    totals: dict[CellState, int]
    warned: int = 0

    @property
    def not_done(self) -> dict[CellState, int]:
        """Its lots that are not done, by state, most urgent first."""
        return {s: self.totals[s] for s in URGENCY if s not in DONE and self.totals.get(s)}


@dataclass(frozen=True)
class Health:
    """A job's (or dataset's) lots over the range due, by state: a health bar. ``totals`` are the
    grid's over the same range, so every page counts the same lots the same way."""

    namespace: str
    job: str | None
    dataset: str
    held: bool
    range: DueRange | None
    totals: dict[CellState, int]
    #: Of the lots counted, those published although a ``warn`` check did not hold on them.
    warned: int = 0
    #: The newest complete (or empty) lot and when it ends (None: none yet, or named lots).
    newest: str | None = None
    newest_end: datetime.datetime | None = None
    #: A job with several outputs: each one's lots (the totals above are its first output's, which
    #: carries the claim, so a lot counts once); empty for one output.
    outputs: tuple[OutputHealth, ...] = ()

    @property
    def total(self) -> int:
        return sum(self.totals.values())

    @property
    def due(self) -> int:
        """Lots counted that are due: all but the pending ones."""
        return self.total - self.totals.get(CellState.PENDING, 0)

    @property
    def overdue(self) -> int:
        """Due lots that are not there and not under way: missing, failed, blocked or held."""
        trouble = (CellState.MISSING, CellState.FAILED, CellState.BLOCKED, CellState.HELD)
        return sum(self.totals.get(s, 0) for s in trouble)

    def lag(self, now: datetime.datetime) -> datetime.timedelta | None:
        """How far the newest complete lot's end lies behind now (None: no complete lot)."""
        return None if self.newest_end is None else max(now - self.newest_end, datetime.timedelta(0))

    def freshness_json(self, now: datetime.datetime) -> dict[str, object]:
        """Freshness as the REST API and ``lotline status --json`` give it."""
        lag = self.lag(now)
        return {
            "newestLot": self.newest,
            "newestLotEnd": None
            if self.newest_end is None
            else self.newest_end.isoformat().replace("+00:00", "Z"),
            "lagSeconds": None if lag is None else int(lag.total_seconds()),
            "due": self.due,
            "missing": self.totals.get(CellState.MISSING, 0),
            "overdue": self.overdue,
            "to": None if self.range is None else self.range.end.isoformat().replace("+00:00", "Z"),
        }

    def freshness_line(self, now: datetime.datetime) -> str:
        """``last lot 3 h ago · 36 missing · 2 failed``: beside every health bar, and in ``lotline
        status``: how fresh, and the due lots that are not there, by state."""
        lag = self.lag(now)
        parts = ["no complete lot yet" if lag is None else f"last lot {ago(lag)}"]
        for state in (
            CellState.MISSING,
            CellState.FAILED,
            CellState.BLOCKED,
            CellState.HELD,
            CellState.STALE,
        ):
            if self.totals.get(state):
                parts.append(f"{self.totals[state]} {state.value}")
        return " · ".join(parts)

    @property
    def trouble(self) -> tuple[int, ...]:
        """Sorts jobs most troubled first: failed lots, then blocked, missing, held, running,
        stale (pending lots are no trouble: they are not due)."""
        return tuple(-self.totals.get(s, 0) for s in TROUBLE)


def ago(lag: datetime.timedelta) -> str:
    """``4 min ago``, ``3 h ago``, ``2 d ago``: how old, in the unit that reads best."""
    seconds = int(lag.total_seconds())
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    if seconds < 2 * 86_400:
        return f"{seconds // 3600} h ago"
    return f"{seconds // 86_400} d ago"


def run_trouble(state: str | None) -> tuple[int, ...]:
    """A job without lots (lineage only) sorted with the others by its latest run, in
    ``Health.trouble``'s terms: a failed or aborted run counts as a failed lot, a running one as a
    running lot, anything else as nothing wrong."""
    counts = {"FAILED": CellState.FAILED, "ABORTED": CellState.FAILED, "RUNNING": CellState.RUNNING}
    as_lot = counts.get(state or "")
    return tuple(-1 if s is as_lot else 0 for s in TROUBLE)


def counted_json(report: GapReport, health: Health) -> dict[str, object]:
    """``lotline gaps --json``: the report (its ``counts`` by the report's states, where complete
    lots include empty ones) and ``lots``, the same lots as every page counts them."""
    return {
        **report_json(report),
        "lots": {s.value: health.totals.get(s, 0) for s in HEALTH_ORDER},
        "publishedWithWarnings": health.warned,
    }


def dependency_order(produces: Mapping[str, tuple[str, Sequence[str]]]) -> list[str]:
    """Jobs (name → (output, inputs)) so that a job comes after the producers of its inputs; by
    name among equals, and a cycle (which registration refuses) broken by name."""
    producer = {output: job for job, (output, _) in produces.items()}
    depth: dict[str, int] = {}

    def level(job: str, seen: frozenset[str]) -> int:
        if job not in depth:
            ups = [producer[i] for i in produces[job][1] if i in producer and producer[i] not in seen]
            depth[job] = 1 + max((level(up, seen | {job}) for up in ups), default=-1)
        return depth[job]

    return sorted(produces, key=lambda job: (level(job, frozenset({job})), job))


@dataclass(frozen=True)
class Matrix:
    """A namespace's lots by jobs: one grid per job (rows in dependency order), all over ``range``
    on one time axis of ``column_minutes`` columns (``resolution``: per lot, hour or day). Each row
    keeps its own lots' resolution: a row of lots finer than a column aggregates them per column,
    a row of lots as long as several columns draws each lot across them (a daily job's day spans 24
    hour columns); a job with no lots yet (nor its inputs) has no grid. No range: no job has lots
    yet."""

    namespace: str
    range: DueRange | None
    resolution: Resolution | None
    rows: list[tuple[Health, Grid | None]]
    column_minutes: int = 0


#: The most columns the matrix aims under when no resolution is asked for (a year of days).
MATRIX_COLUMNS = 400


def column_minutes(intervals: Sequence[Interval], resolution: Resolution) -> int:
    """One column's length: an hour, a day, or (per lot) the finest of the rows' lots (a day for
    calendar lots, whose length varies: a month spans its 28 to 31 day columns)."""
    if resolution is Resolution.LOT:
        return min((MINUTES_PER_DAY if i.calendar else i.minutes for i in intervals), default=60)
    return _MINUTES[resolution]


def row_resolution(interval: Interval, columns: int) -> Resolution:
    """How a row of ``interval`` lots is drawn in columns of ``columns`` minutes: per lot when its
    lots are as long as a column or longer (each spans a whole number of columns), else aggregated
    per column (which must hold a whole number of its lots)."""
    if interval.minutes >= columns:
        if interval.minutes % columns:
            raise InvalidInput(
                f"{interval} lots do not fill whole columns of {columns} minutes: choose another."
            )
        return Resolution.LOT
    if columns % interval.minutes:
        raise InvalidInput(
            f"{interval} lots do not fit whole in columns of {columns} minutes: choose another."
        )
    return Resolution.HOUR if columns == 60 else Resolution.DAY


def matrix_resolution(
    intervals: Sequence[Interval], shown: TimeRange, wanted: Resolution | None
) -> Resolution:
    """The columns of a matrix: ``wanted`` if every row can be drawn in them and the whole matrix
    stays under ``MAX_CELLS``; else the finest that every row can be drawn in and that keeps it
    under ``MATRIX_COLUMNS`` columns (rows of different intervals side by side: a daily row spans
    the hourly columns of its day)."""
    minutes = (shown.end - shown.start).total_seconds() / 60

    def columns(resolution: Resolution) -> float | None:
        width = column_minutes(intervals, resolution)
        try:
            for interval in intervals:
                row_resolution(interval, width)
        except InvalidInput:
            return None
        return minutes / width

    if wanted is not None:
        width = column_minutes(intervals, wanted)
        for interval in intervals:  # refused with the row's reason
            row_resolution(interval, width)
        cells = minutes / width
        if cells * max(len(intervals), 1) > MAX_CELLS:
            raise TooManyCells(
                f"{int(cells) * len(intervals)} cells per {wanted.value} is more than the matrix's "
                f"{MAX_CELLS}: choose a coarser resolution or a shorter range."
            )
        return wanted
    for resolution in Resolution:
        found = columns(resolution)
        if found is not None and found <= MATRIX_COLUMNS:
            return resolution
    return Resolution.DAY
