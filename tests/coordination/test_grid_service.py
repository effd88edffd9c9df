"""The lot grid through ``GapService.grid`` and ``GapService.span``, on SQLite and PostgreSQL: the
colour of each cell is the state seeded through the services (complete, running, failed, missing,
empty, held, blocked), aggregated cells count them, and bad input is a clear error."""

from __future__ import annotations

import datetime

import pytest

from lotline.domain.errors import InvalidInput, NotFound
from lotline.domain.grid import Grid, Resolution
from lotline.domain.manifests import ManifestDraft
from lotline.services import Lineage
from lotline.services.lots import OutputWritten
from support.lots import LotWorld

DAY, NEXT_DAY = "2023-01-01", "2023-01-02"
UTC = datetime.UTC


def hour(n: int) -> str:
    return f"20230101PT1H{n:03d}"


def _complete(world: LotWorld, job: str, dataset: str, lot: str, *, empty: bool = False) -> None:
    claim = world.claim(job, lot)
    assert claim is not None
    draft = None
    if empty:
        location = world.lineage.storage.attempt_uri(world.ns, dataset, lot, claim.attempt)
        draft = ManifestDraft(location, (), row_count=0)
    world.lots.complete(claim, outputs={claim.dataset: OutputWritten(draft)})


def _fail(world: LotWorld, job: str, lot: str) -> None:
    claim = world.claim(job, lot)
    assert claim is not None
    world.lots.fail(claim, error="ValueError: bad line")


def _expected(states: dict[int, str]) -> list[str]:
    return [states.get(n, "complete") for n in range(24)]


#: raw (job land): 0 and 5 published empty, 3 reopened by invalidation, 22 failed, 23 never made.
EXPECTED_RAW = _expected({0: "empty", 3: "missing", 5: "empty", 22: "failed", 23: "missing"})
#: cleaned (job clean): 1 empty, 3 reopened by the cascade and blocked by raw 3, 10 running,
#: 11 failed, 12 failed then cleaned (failed all the same), 13 held, 14-21 missing, 22 and 23 blocked by raw.
EXPECTED_CLEANED = _expected(
    {
        1: "empty",
        3: "blocked",
        10: "running",
        11: "failed",
        12: "failed",
        13: "held",
        **dict.fromkeys(range(14, 22), "missing"),
        22: "blocked",
        23: "blocked",
    }
)


@pytest.fixture
def day(world: LotWorld) -> LotWorld:
    world.job("land", output="raw")
    world.job("clean", output="cleaned", inputs=["raw"])
    for n in range(22):
        _complete(world, "land", "raw", hour(n), empty=n in (0, 3, 5))
    _fail(world, "land", hour(22))
    for n in range(10):
        _complete(world, "clean", "cleaned", hour(n), empty=n == 1)
    assert world.claim("clean", hour(10), worker="busy") is not None
    _fail(world, "clean", hour(11))
    _fail(world, "clean", hour(12))
    world.lots.clean(world.ns, "clean", hour(12))
    world.lots.hold_lot(world.ns, "cleaned", hour(13))
    world.lots.invalidate(world.ns, "raw", hour(3))  # empty, then reopened: missing, not empty
    return world


def _states(grid: Grid) -> list[str]:
    return [c.state.value for c in grid.cells]


def test_each_lot_cell_has_the_state_seeded(day: LotWorld) -> None:
    gaps = day.lineage.gaps
    raw = gaps.grid(day.ns, job="land", start=DAY, end=NEXT_DAY)
    assert (raw.resolution, raw.lots_per_cell, str(raw.interval)) == (Resolution.LOT, 1, "PT1H")
    assert _states(raw) == EXPECTED_RAW
    assert [c.lot for c in raw.cells] == [hour(n) for n in range(24)]
    assert [c.start for c in raw.cells] == [datetime.datetime(2023, 1, 1, n, tzinfo=UTC) for n in range(24)]
    cleaned = gaps.grid(day.ns, job="clean", start=DAY, end=NEXT_DAY, resolution="lot")
    assert _states(cleaned) == EXPECTED_CLEANED
    by_dataset = gaps.grid(day.ns, dataset="cleaned", start=DAY, end=NEXT_DAY)
    assert _states(by_dataset) == EXPECTED_CLEANED
    assert cleaned.report.counts == gaps.report(day.ns, job="clean", start=DAY, end=NEXT_DAY).counts


def test_a_held_job_shows_its_waiting_lots_held(day: LotWorld) -> None:
    day.lots.hold_job(day.ns, "clean")
    grid = day.lineage.gaps.grid(day.ns, job="clean", start=DAY, end=NEXT_DAY)
    waiting = {3, 11, 12, 13, *range(14, 24)}
    assert _states(grid) == _expected({1: "empty", 10: "running", **dict.fromkeys(waiting, "held")})


def test_a_day_cell_counts_every_state_and_takes_the_most_urgent(day: LotWorld) -> None:
    gaps = day.lineage.gaps
    [cell] = gaps.grid(day.ns, job="clean", start=DAY, end=NEXT_DAY, resolution="day").cells
    assert {s.value: n for s, n in cell.counts.items()} == {
        "blocked": 3,
        "running": 1,
        "failed": 2,
        "missing": 8,
        "held": 1,
        "empty": 1,
        "complete": 8,
    }
    assert (cell.state.value, cell.lot, cell.start) == (
        "failed",
        None,
        datetime.datetime(2023, 1, 1, tzinfo=UTC),
    )
    [raw] = gaps.grid(day.ns, job="land", start=DAY, end=NEXT_DAY, resolution="day").cells
    assert {s.value: n for s, n in raw.counts.items()} == {
        "failed": 1,
        "missing": 2,
        "empty": 2,
        "complete": 19,
    }


def test_hour_cells_of_hour_lots_are_the_lots(day: LotWorld) -> None:
    grid = day.lineage.gaps.grid(
        day.ns, job="clean", start="2023-01-01T09:30:00Z", end="2023-01-01T12:00:00Z", resolution="hour"
    )
    assert (grid.resolution, grid.lots_per_cell) == (Resolution.HOUR, 1)
    assert [(c.lot, c.state.value) for c in grid.cells] == [
        (hour(9), "complete"),
        (hour(10), "running"),
        (hour(11), "failed"),
    ]


def test_five_minute_lots_per_hour_and_auto_resolution(world: LotWorld) -> None:
    world.job("land", output="raw5")
    for n in (*range(0, 7), *range(8, 15)):  # lot 7 never made; 15.. not yet
        _complete(world, "land", "raw5", f"20230101PT5M{n:03d}", empty=n == 2)
    _fail(world, "land", "20230101PT5M020")
    gaps = world.lineage.gaps
    grid = gaps.grid(world.ns, job="land", start=DAY, end="2023-01-01T03:00:00Z", resolution="hour")
    assert [{s.value: n for s, n in c.counts.items()} for c in grid.cells] == [
        {"missing": 1, "empty": 1, "complete": 10},
        {"failed": 1, "missing": 8, "complete": 3},
        {"missing": 12},
    ]
    assert _states(grid) == ["missing", "failed", "missing"]
    auto = gaps.grid(world.ns, job="land", start=DAY, end="2023-01-01T03:00:00Z")
    assert (auto.resolution, len(auto.cells)) == (Resolution.LOT, 36)
    year = gaps.grid(world.ns, job="land", start=DAY, end="2024-01-01")
    assert (year.resolution, year.lots_per_cell, len(year.cells)) == (Resolution.DAY, 288, 365)
    assert {s.value: n for s, n in year.cells[0].counts.items()} == {
        "failed": 1,
        "missing": 273,
        "empty": 1,
        "complete": 13,
    }
    assert {c.state.value for c in year.cells[1:]} == {"missing"}


def test_span_is_the_first_lot_start_to_the_last_lot_end(day: LotWorld) -> None:
    gaps = day.lineage.gaps
    midnight = datetime.datetime(2023, 1, 1, tzinfo=UTC)
    # raw has rows 00..22 (22 failed): the span ends with lot 22's window.
    assert gaps.span(day.ns, job="land") == (midnight, midnight + datetime.timedelta(hours=23))
    assert gaps.span(day.ns, dataset="raw") == (midnight, midnight + datetime.timedelta(hours=23))
    # cleaned has rows 00..13 (13 is a hold row), but its input raw has lots up to 22: those are
    # cleaned's lots too (missing or blocked), so its span is raw's.
    assert gaps.span(day.ns, job="clean") == (midnight, midnight + datetime.timedelta(hours=23))
    assert gaps.span(day.ns, dataset="cleaned") == (midnight, midnight + datetime.timedelta(hours=23))


def test_span_is_none_without_lots_or_with_named_lots(world: LotWorld) -> None:
    world.job("land", output="raw")
    world.job("clean", output="cleaned", inputs=["raw"])
    gaps = world.lineage.gaps
    assert gaps.span(world.ns, job="land") is None  # no lots, no interval
    assert gaps.span(world.ns, job="clean") is None
    _complete(world, "land", "raw", hour(5))
    lot_5 = (datetime.datetime(2023, 1, 1, 5, tzinfo=UTC), datetime.datetime(2023, 1, 1, 6, tzinfo=UTC))
    assert gaps.span(world.ns, job="clean") == lot_5  # no lots of its own yet: its input's are due
    world.job("names", output="named")
    _complete(world, "names", "named", "2023-01-01")
    assert gaps.span(world.ns, job="names") is None


def test_a_dataset_of_named_lots_has_no_grid(world: LotWorld) -> None:
    world.job("names", output="named")
    _complete(world, "names", "named", "2023-01-01")
    with pytest.raises(InvalidInput, match="named lots"):
        world.lineage.gaps.grid(world.ns, dataset="named", start=DAY, end=NEXT_DAY)


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        (
            {"job": "clean", "resolution": "week"},
            InvalidInput,
            "resolution 'week' is not one of lot, hour, day",
        ),
        ({"job": "clean", "resolution": "HOUR"}, InvalidInput, "resolution 'HOUR'"),
        ({"job": "clean", "end": "2033-01-01", "resolution": "lot"}, InvalidInput, "87672 cells per lot"),
        ({"job": "nope"}, NotFound, "nope"),
        ({"dataset": "nope"}, NotFound, "nope"),
        ({"job": "clean", "start": NEXT_DAY}, InvalidInput, "must be before"),
        ({}, InvalidInput, "either a job or a dataset"),
    ],
)
def test_bad_grid_input_is_a_clear_error(
    day: LotWorld, arguments: dict[str, str], error: type[Exception], message: str
) -> None:
    given = {"start": DAY, "end": NEXT_DAY, **arguments}
    with pytest.raises(error, match=message):
        day.lineage.gaps.grid(day.ns, **given)


def test_a_coarse_interval_per_hour_is_refused(world: LotWorld) -> None:
    world.job("daily", output="days")
    _complete(world, "daily", "days", "20230101P1D000")
    with pytest.raises(InvalidInput, match="P1D lots cannot be shown per hour"):
        world.lineage.gaps.grid(world.ns, job="daily", start=DAY, end="2023-01-03", resolution="hour")
    grid = world.lineage.gaps.grid(world.ns, job="daily", start=DAY, end="2023-01-03")
    assert [(c.lot, c.state.value) for c in grid.cells] == [
        ("20230101P1D000", "complete"),
        ("20230102P1D000", "missing"),
    ]


def test_span_and_grid_of_an_unknown_namespace(lineage: Lineage) -> None:
    with pytest.raises(NotFound):
        lineage.gaps.span("nowhere", job="x")
    with pytest.raises(NotFound):
        lineage.gaps.grid("nowhere", job="x", start=DAY, end=NEXT_DAY)
