"""The lot grid (domain/grid.py) from hand-built gap reports: cells per lot, hour and day, their
states and counts, alignment on UTC hours and days, and the resolutions it refuses."""

from __future__ import annotations

import datetime
from collections.abc import Sequence

import pytest

from lotline.domain.errors import InvalidInput
from lotline.domain.gaps import STATES, GapReport, GapState, LotRun, Segment, TimeRange, index_of, states_at
from lotline.domain.grid import (
    AUTO_CELLS,
    MAX_CELLS,
    URGENCY,
    Cell,
    CellState,
    Grid,
    Resolution,
    build,
    choose_resolution,
    column_minutes,
    dependency_order,
    lots_per_cell,
    matrix_resolution,
    row_resolution,
)
from lotline.domain.lots import Interval, lot_from_index

UTC = datetime.UTC
PT5M, PT1H, P1D = Interval(5), Interval(60), Interval(1440)
PT30M, PT45M = Interval(30), Interval(45)
JAN1 = datetime.datetime(2023, 1, 1, tzinfo=UTC)


def at(hours: float = 0, days: int = 0) -> datetime.datetime:
    return JAN1 + datetime.timedelta(days=days, hours=hours)


def lot(interval: Interval, n: int, day: int = 1) -> str:
    """The ``n``-th lot of 2023-01-``day`` (``n`` may run past the day's last lot)."""
    return str(
        lot_from_index(
            index_of(f"202301{day:02d}{interval}{0:0{interval.ordinal_width}d}", interval) + n, interval
        )
    )


def run(state: GapState, interval: Interval, first: int, count: int = 1) -> LotRun:
    return LotRun(state, lot(interval, first), lot(interval, first + count - 1), count)


def report(
    interval: Interval | None,
    start: datetime.datetime,
    end: datetime.datetime,
    runs: Sequence[LotRun] = (),
) -> GapReport:
    total = 0
    if interval is not None:
        first, stop = TimeRange(start, end).indexes(interval)
        total = stop - first
    counts = dict.fromkeys(STATES, 0)
    for r in runs:
        counts[r.state] += r.count
    counts[GapState.COMPLETE] = total - sum(counts.values())
    return GapReport("ns", "data", "job", interval, start, end, total, counts, list(runs))


def states(grid: Grid) -> list[str]:
    return [cell.state.value for cell in grid.cells]


def counts(grid: Grid) -> list[dict[str, int]]:
    return [{s.value: n for s, n in cell.counts.items()} for cell in grid.cells]


def test_urgency_runs_from_failed_to_complete() -> None:
    assert [s.value for s in URGENCY] == [
        "failed",
        "blocked",
        "missing",
        "held",
        "running",
        "pending",
        "stale",
        "empty",
        "complete",
    ]


def test_one_cell_per_lot_in_each_state_and_empty_told_apart_from_complete() -> None:
    """A day of hour lots: every report state, two empty lots, and an empty lot inside a missing run
    (its manifest is of an older version: the lot is missing now, not empty)."""
    found = report(
        PT1H,
        at(0),
        at(days=1),
        [
            run(GapState.FAILED, PT1H, 1),
            run(GapState.BLOCKED, PT1H, 2),
            run(GapState.MISSING, PT1H, 3, 2),
            run(GapState.HELD, PT1H, 5),
            run(GapState.RUNNING, PT1H, 6),
        ],
    )
    grid = build(found, [lot(PT1H, 0), lot(PT1H, 4), lot(PT1H, 7), lot(PT1H, 0, day=2)])
    assert (grid.resolution, grid.lots_per_cell, grid.interval, len(grid.cells)) == (
        Resolution.LOT,
        1,
        PT1H,
        24,
    )
    assert states(grid) == [
        "empty",
        "failed",
        "blocked",
        "missing",
        "missing",  # listed empty, but inside the missing run
        "held",
        "running",
        "empty",
        *["complete"] * 16,
    ]
    assert [cell.lot for cell in grid.cells] == [f"20230101PT1H{n:03d}" for n in range(24)]
    assert [cell.start for cell in grid.cells] == [at(n) for n in range(24)]
    first = index_of("20230101PT1H000", PT1H)
    assert [(cell.first, cell.stop) for cell in grid.cells] == [(first + n, first + n + 1) for n in range(24)]
    assert all(sum(cell.counts.values()) == 1 for cell in grid.cells)
    assert {s.value: n for s, n in grid.totals().items()} == {
        "failed": 1,
        "blocked": 1,
        "missing": 2,
        "held": 1,
        "running": 1,
        "pending": 0,
        "stale": 0,
        "empty": 2,
        "complete": 16,
    }


def test_hour_cells_take_the_most_urgent_state_and_count_every_lot() -> None:
    """A day of five-minute lots, 12 to an hour; a failed run straddles hours 2 and 3."""
    found = report(
        PT5M,
        at(0),
        at(days=1),
        [
            run(GapState.MISSING, PT5M, 0, 3),
            run(GapState.RUNNING, PT5M, 5),
            run(GapState.HELD, PT5M, 12, 2),
            run(GapState.BLOCKED, PT5M, 20),
            run(GapState.FAILED, PT5M, 30, 10),
        ],
    )
    grid = build(found, [lot(PT5M, 7), lot(PT5M, 8), lot(PT5M, 40)], Resolution.HOUR)
    assert (grid.resolution, grid.lots_per_cell, len(grid.cells)) == (Resolution.HOUR, 12, 24)
    assert counts(grid)[:5] == [
        {"missing": 3, "running": 1, "empty": 2, "complete": 6},
        {"held": 2, "blocked": 1, "complete": 9},
        {"failed": 6, "complete": 6},
        {"failed": 4, "empty": 1, "complete": 7},
        {"complete": 12},
    ]
    assert states(grid)[:5] == ["missing", "blocked", "failed", "failed", "complete"]
    assert states(grid)[5:] == ["complete"] * 19
    assert [cell.start for cell in grid.cells] == [at(n) for n in range(24)]
    assert all(cell.lot is None for cell in grid.cells)
    assert sum(sum(cell.counts.values()) for cell in grid.cells) == 288
    assert {s.value: n for s, n in grid.totals().items()} == {
        "failed": 10,
        "blocked": 1,
        "missing": 3,
        "held": 2,
        "running": 1,
        "pending": 0,
        "stale": 0,
        "empty": 3,
        "complete": 268,
    }


def test_day_cells_of_hour_lots() -> None:
    found = report(
        PT1H,
        at(0),
        at(days=3),
        [run(GapState.HELD, PT1H, 23, 2), run(GapState.RUNNING, PT1H, 47), run(GapState.MISSING, PT1H, 48)],
    )
    grid = build(found, [lot(PT1H, 30)], Resolution.DAY)
    assert (grid.resolution, grid.lots_per_cell) == (Resolution.DAY, 24)
    assert counts(grid) == [
        {"held": 1, "complete": 23},
        {"held": 1, "running": 1, "empty": 1, "complete": 21},
        {"missing": 1, "complete": 23},
    ]
    assert states(grid) == ["held", "held", "missing"]
    assert [cell.start for cell in grid.cells] == [at(days=n) for n in range(3)]


def test_cells_align_on_utc_hours_when_the_range_starts_mid_hour() -> None:
    """00:32 to 02:30: lots 6 (00:30-00:35, touched) to 29; the first and last hours are part-cells."""
    found = report(
        PT5M, at(0) + datetime.timedelta(minutes=32), at(2.5), [run(GapState.MISSING, PT5M, 10, 4)]
    )
    assert found.total == 24
    grid = build(found, [], Resolution.HOUR)
    base = index_of("20230101PT5M000", PT5M)
    assert [(c.start, c.first - base, c.stop - base) for c in grid.cells] == [
        (at(0), 6, 12),
        (at(1), 12, 24),
        (at(2), 24, 30),
    ]
    assert counts(grid) == [{"missing": 2, "complete": 4}, {"missing": 2, "complete": 10}, {"complete": 6}]
    assert sum(grid.totals().values()) == 24


def test_cells_align_on_utc_days_when_the_range_starts_mid_day() -> None:
    found = report(PT1H, at(5), at(5, days=2), [run(GapState.MISSING, PT1H, 20, 10)])
    grid = build(found, [], Resolution.DAY)
    base = index_of("20230101PT1H000", PT1H)
    assert [(c.start, c.first - base, c.stop - base) for c in grid.cells] == [
        (at(days=0), 5, 24),
        (at(days=1), 24, 48),
        (at(days=2), 48, 53),
    ]
    assert counts(grid) == [{"missing": 4, "complete": 15}, {"missing": 6, "complete": 18}, {"complete": 5}]


@pytest.mark.parametrize(
    ("interval", "resolution"),
    [
        (P1D, Resolution.HOUR),
        (Interval(120), Resolution.HOUR),
        (Interval(90), Resolution.HOUR),
        (Interval(8), Resolution.HOUR),  # 60 is not a multiple of 8: a cell would not be an hour
        (Interval(45), Resolution.HOUR),
    ],
)
def test_a_resolution_finer_than_the_lots_is_refused(interval: Interval, resolution: Resolution) -> None:
    with pytest.raises(InvalidInput, match=f"{interval} lots cannot be shown per hour"):
        lots_per_cell(interval, resolution)
    with pytest.raises(InvalidInput, match="cannot be shown per hour"):
        build(report(interval, at(0), at(days=2)), [], resolution)


@pytest.mark.parametrize(
    ("interval", "resolution", "per"),
    [
        (PT5M, Resolution.LOT, 1),
        (PT5M, Resolution.HOUR, 12),
        (PT5M, Resolution.DAY, 288),
        (PT1H, Resolution.HOUR, 1),
        (PT1H, Resolution.DAY, 24),
        (Interval(1), Resolution.HOUR, 60),
        (Interval(20), Resolution.HOUR, 3),
        (Interval(8), Resolution.DAY, 180),
        (P1D, Resolution.DAY, 1),
    ],
)
def test_lots_per_cell(interval: Interval, resolution: Resolution, per: int) -> None:
    assert lots_per_cell(interval, resolution) == per


ALL_DURATIONS = [m for m in range(1, 1441) if 1440 % m == 0 and (m <= 720 or m == 1440)]


@pytest.mark.parametrize("minutes", ALL_DURATIONS)
def test_every_hour_and_day_cell_starts_on_an_hour_or_a_day(minutes: int) -> None:
    interval = Interval(minutes)
    found = report(interval, at(0.5), at(0.5, days=3))
    for resolution, step in ((Resolution.HOUR, 3600), (Resolution.DAY, 86400)):
        try:
            grid = build(found, [], resolution)
        except InvalidInput:
            assert resolution is Resolution.HOUR and 60 % minutes != 0
            continue
        assert all(cell.start.timestamp() % step == 0 for cell in grid.cells)
        widths = [cell.stop - cell.first for cell in grid.cells]
        assert widths[1:-1] == [step // 60 // minutes] * (len(widths) - 2)
        assert sum(widths) == found.total


def test_too_many_cells_are_refused() -> None:
    year = report(PT5M, at(0), at(days=365))
    assert year.total == 105_120
    with pytest.raises(InvalidInput, match=f"105120 cells per lot is more than the grid's {MAX_CELLS}"):
        build(year, [], Resolution.LOT)
    assert len(build(year, [], Resolution.HOUR).cells) == 8760
    assert choose_resolution(PT5M, MAX_CELLS, Resolution.LOT) is Resolution.LOT
    with pytest.raises(InvalidInput, match="10001 cells per lot"):
        choose_resolution(PT5M, MAX_CELLS + 1, Resolution.LOT)
    with pytest.raises(InvalidInput, match="17520 cells per hour"):
        choose_resolution(Interval(1), 2 * 525_600, Resolution.HOUR)


@pytest.mark.parametrize(
    ("interval", "lots", "chosen"),
    [
        (PT5M, 288, Resolution.LOT),  # a day
        (PT5M, 2016, Resolution.LOT),  # a week
        (PT5M, AUTO_CELLS, Resolution.LOT),
        (PT5M, AUTO_CELLS + 1, Resolution.HOUR),
        (PT5M, 31 * 288, Resolution.HOUR),  # a month: 744 hours
        (PT5M, 105_120, Resolution.DAY),  # a year: 8,760 hours is too many
        (PT1H, 8760, Resolution.DAY),
        (P1D, 365, Resolution.LOT),
        (Interval(8), 31 * 180, Resolution.DAY),  # no hour cells of 8-minute lots
        (Interval(720), 7306, Resolution.DAY),  # ten years of 12-hour lots: more than AUTO_CELLS days
    ],
)
def test_the_automatic_resolution(interval: Interval, lots: int, chosen: Resolution) -> None:
    assert choose_resolution(interval, lots, None) is chosen


def test_an_automatic_grid_of_a_day_is_per_lot_and_of_a_year_per_day() -> None:
    day = build(report(PT5M, at(0), at(days=1), [run(GapState.MISSING, PT5M, 3)]), [])
    assert (day.resolution, len(day.cells), day.cells[3].state) == (Resolution.LOT, 288, CellState.MISSING)
    assert day.cells[3].lot == "20230101PT5M003"
    year = build(report(PT5M, at(0), at(days=365), [run(GapState.MISSING, PT5M, 288 * 364, 2)]), [])
    assert (year.resolution, year.lots_per_cell, len(year.cells)) == (Resolution.DAY, 288, 365)
    assert year.cells[-1].start == at(days=364)
    assert counts(year)[-1] == {"missing": 2, "complete": 286}
    assert set(states(year)[:-1]) == {"complete"}


def test_a_report_of_named_lots_has_no_grid() -> None:
    named = report(None, at(0), at(days=1), [LotRun(GapState.FAILED, "2023-01-01", "2023-01-01", 1)])
    with pytest.raises(InvalidInput, match="named lots"):
        build(named, [])
    with pytest.raises(InvalidInput, match="named lots"):
        build(named, [], Resolution.DAY)


def test_a_cell_shows_its_done_share_and_marks_the_most_urgent_state_not_done() -> None:
    """Empty ranks below complete: a day of complete and empty lots is done, not 'empty'; a day with
    one failed lot in 288 is 99 % done and marked failed; a day of only empty lots is empty."""
    failing = [run(GapState.FAILED, PT5M, 288 + 7), run(GapState.MISSING, PT5M, 288 + 9, 2)]
    found = report(PT5M, at(0), at(days=3), failing)
    empty = [lot(PT5M, n) for n in range(0, 288, 20)] + [lot(PT5M, n, day=3) for n in range(288)]
    grid = build(found, empty, Resolution.DAY)
    first, second, third = grid.cells
    assert (first.done_share, first.mark, first.state) == (100, None, CellState.COMPLETE)
    assert (second.done_share, second.mark, second.state) == (98, CellState.FAILED, CellState.FAILED)
    assert (third.done_share, third.mark, third.state) == (100, None, CellState.EMPTY)


def test_dependency_order_puts_producers_before_consumers_by_name_among_equals() -> None:
    produces = {
        "report": ("daily", ["clean", "lookup"]),
        "clean": ("clean", ["raw"]),
        "land": ("raw", []),
        "aside": ("other", []),
        "lookup": ("lookup", ["raw"]),
    }
    assert dependency_order(produces) == ["aside", "land", "clean", "lookup", "report"]
    assert dependency_order({"a": ("x", ["y"]), "b": ("y", ["x"])}) in (["a", "b"], ["b", "a"])  # a cycle


def test_a_matrix_keeps_each_rows_own_resolution() -> None:
    day, three_hours = TimeRange(at(0), at(days=1)), TimeRange(at(0), at(0) + datetime.timedelta(hours=3))
    assert matrix_resolution([PT5M, PT5M], day, None) is Resolution.LOT
    assert matrix_resolution([PT5M, PT1H], day, None) is Resolution.LOT  # columns of 5 min
    assert matrix_resolution([PT5M], TimeRange(at(0), at(days=365)), None) is Resolution.DAY
    # a daily job no longer forces a 3-hour range to one cell per day: its day spans the columns
    assert matrix_resolution([PT1H, P1D], three_hours, None) is Resolution.LOT
    assert matrix_resolution([PT1H, P1D], three_hours, Resolution.HOUR) is Resolution.HOUR
    assert row_resolution(P1D, column_minutes([PT1H, P1D], Resolution.HOUR)) is Resolution.LOT
    assert row_resolution(PT5M, 60) is Resolution.HOUR
    with pytest.raises(InvalidInput, match="PT45M lots do not fill whole columns of 30 minutes"):
        matrix_resolution([PT30M, PT45M], day, Resolution.LOT)


def test_an_aggregated_cells_body_is_what_most_of_it_is_and_its_corner_the_most_urgent() -> None:
    cell = Cell(at(0), at(1), 0, 288, {CellState.MISSING: 287, CellState.FAILED: 1}, None)
    assert (cell.dominant, cell.mark, cell.state) == (CellState.MISSING, CellState.FAILED, CellState.FAILED)
    tie = Cell(at(0), at(1), 0, 4, {CellState.MISSING: 1, CellState.BLOCKED: 1, CellState.COMPLETE: 2}, None)
    assert tie.dominant is CellState.BLOCKED  # the more urgent among equals
    assert Cell(at(0), at(1), 0, 2, {CellState.COMPLETE: 2}, None).dominant is None


def test_states_at_finds_each_index_in_its_segment_and_leaves_the_others_complete() -> None:
    found = [
        Segment(10, 12, GapState.FAILED),
        Segment(0, 3, GapState.MISSING),
        Segment(5, 6, GapState.HELD),
    ]
    held = states_at(found, [0, 2, 3, 4, 5, 6, 9, 10, 11, 12])
    assert held == {
        0: GapState.MISSING,
        2: GapState.MISSING,
        5: GapState.HELD,
        10: GapState.FAILED,
        11: GapState.FAILED,
    }
    assert states_at([], [1, 2]) == {}
