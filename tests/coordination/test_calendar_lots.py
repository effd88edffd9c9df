"""Calendar intervals and zoned days through claims, gap reports and the grid (issue 40), on both
databases: a month consumes exactly its days, a week its seven across a year's end, a New York day
exactly the UTC hours pandas puts in it."""

from __future__ import annotations

import datetime

import pytest

from lotline.cli.gaps import _summary
from lotline.domain.errors import Conflict, InvalidInput, NotFound
from lotline.domain.gaps import report_json
from lotline.domain.grid import Resolution
from lotline.domain.lots import Interval, lots_between
from support.lots import LotWorld

UTC = datetime.UTC
P1D, PT1H = Interval.parse("P1D"), Interval.parse("PT1H")


def _days(start: datetime.date, stop: datetime.date) -> list[str]:
    moment = datetime.datetime.combine(start, datetime.time(), UTC)
    return [str(d) for d in lots_between(moment, datetime.datetime.combine(stop, datetime.time(), UTC), P1D)]


def test_a_monthly_lot_consumes_exactly_its_days(world: LotWorld) -> None:
    world.job("ingest", output="days")
    world.job("monthly", inputs=["days"], output="months", mapping="P1D->P1M")
    leap = _days(datetime.date(2024, 2, 1), datetime.date(2024, 5, 1))  # 29 + 31 + 30 days
    world.produce("ingest", *leap[:-1], *_days(datetime.date(2026, 2, 1), datetime.date(2026, 3, 1)))
    made = {}
    while (claim := world.claim("monthly")) is not None:
        made[claim.lot] = [lot for _, lot in claim.input_lots]
        world.lots.complete(claim)
    assert {lot: len(days) for lot, days in made.items()} == {
        "20240201P1M000": 29,
        "20240301P1M000": 31,
        "20260201P1M000": 28,
    }
    assert made["20240201P1M000"] == leap[:29]
    # April lacks its last day: blocked on it, in the report and for a named claim.
    with pytest.raises(Conflict, match="20240430P1D000 is not produced"):
        world.claim("monthly", "20240401P1M000")
    report = world.lineage.gaps.report(world.ns, job="monthly", start="2024-01-01", end="2025-01-01")
    assert report.total == 12  # a year of months is 12 lots
    runs = [(r.state.value, r.first, r.count, r.cause and (r.cause.first, r.cause.last)) for r in report.runs]
    assert runs == [
        ("blocked", "20240101P1M000", 1, ("20240101P1D000", "20240131P1D000")),
        ("blocked", "20240401P1M000", 9, ("20240430P1D000", "20241231P1D000")),  # one run of missing days
    ]
    world.produce("ingest", leap[-1])
    claim = world.claim("monthly")
    assert claim is not None
    assert (claim.lot, len(claim.input_lots)) == ("20240401P1M000", 30)
    world.lots.complete(claim)
    grid = world.lineage.gaps.grid(world.ns, job="monthly", start="2024-01-01", end="2025-01-01")
    assert (grid.resolution, len(grid.cells)) == (Resolution.LOT, 12)
    assert [c.lot for c in grid.cells if c.state.value == "complete"] == [
        "20240201P1M000",
        "20240301P1M000",
        "20240401P1M000",
    ]
    assert grid.cells[1].end - grid.cells[1].start == datetime.timedelta(days=29)
    done = world.lineage.gaps.backfill(
        world.ns, "monthly", start="2024-01-01", end="2025-01-01", dry_run=True
    )
    assert [(r.first, r.last, r.count) for r in done.reopened] == [("20240201P1M000", "20240401P1M000", 3)]
    assert [(r.state.value, r.first, r.count) for r in done.left] == [
        ("blocked", "20240101P1M000", 1),
        ("blocked", "20240501P1M000", 8),
    ]
    # The start page's health bars: months counted from the job's first (February), not a refusal
    # to draw months per day.
    now = datetime.datetime(2026, 6, 1, tzinfo=UTC)
    health = {
        h.job: h.totals
        for h in world.lineage.gaps.namespace_health(world.ns, start="2024-01-01", end="2025-01-01", now=now)
    }
    assert {s.value: n for s, n in health["monthly"].items()} == {"complete": 3, "blocked": 8}


def test_a_weekly_lot_takes_its_seven_days_across_a_year_boundary(world: LotWorld) -> None:
    world.job("ingest", output="days")
    world.job("weekly", inputs=["days"], output="weeks", mapping="P1D->P1W")
    days = _days(datetime.date(2025, 12, 29), datetime.date(2026, 1, 5))
    world.produce("ingest", *days)
    claim = world.claim("weekly")
    assert claim is not None
    assert claim.lot == "20251229P1W000"
    assert [lot for _, lot in claim.input_lots] == days
    assert world.claim("weekly", worker="w2") is None
    world.lots.complete(claim)
    now = datetime.datetime(
        2026, 1, 13, tzinfo=UTC
    )  # the next week is due (its days missing), the one after not yet
    [health] = [h for h in world.lineage.gaps.namespace_health(world.ns, now=now) if h.job == "weekly"]
    assert {s.value: n for s, n in health.totals.items()} == {"complete": 1, "blocked": 1, "pending": 1}


def test_hours_make_new_york_days_of_23_and_25_hours_as_pandas_counts_them(world: LotWorld) -> None:
    pandas = pytest.importorskip("pandas")
    world.job("ingest", output="hours")
    world.job("daily", inputs=["hours"], output="ny_days", mapping="PT1H->P1D[America/New_York]")
    for day in ("2026-03-08", "2026-11-01"):  # the two DST changes of 2026
        start = pandas.Timestamp(day, tz="America/New_York")
        expected = pandas.date_range(start, start + pandas.DateOffset(days=1), freq="h", inclusive="left")
        hours = [
            str(lot) for lot in lots_between(expected[0], expected[-1] + pandas.Timedelta(hours=1), PT1H)
        ]
        world.produce("ingest", *hours)
        claim = world.claim("daily")
        assert claim is not None
        assert claim.lot == f"{day.replace('-', '')}P1D.America.New_York.000"
        assert len(claim.input_lots) == len(expected) == {"2026-03-08": 23, "2026-11-01": 25}[day]
        assert [lot for _, lot in claim.input_lots] == [
            f"{t.tz_convert('UTC'):%Y%m%d}PT1H{t.tz_convert('UTC').hour:03d}" for t in expected
        ]
        world.lots.complete(claim)
    report = world.lineage.gaps.report(world.ns, job="daily", start="2026-03-07T12:00:00Z", end="2026-03-10")
    shown = report_json(report)
    assert (shown["zone"], shown["totalLots"], shown["counts"]["complete"]) == ("America/New_York", 3, 1)
    first, last = shown["runs"]  # type: ignore[misc]
    assert (first["from"], first["state"]) == ("20260307P1D.America.New_York.000", "blocked")
    assert (first["start"], first["end"]) == ("2026-03-07T00:00:00-05:00", "2026-03-08T00:00:00-05:00")
    assert (first["startUtc"], first["endUtc"]) == ("2026-03-07T05:00:00Z", "2026-03-08T05:00:00Z")
    assert (last["from"], last["count"]) == ("20260309P1D.America.New_York.000", 1)
    assert (last["start"], last["end"]) == ("2026-03-09T00:00:00-04:00", "2026-03-10T00:00:00-04:00")
    # lotline gaps names the range in the zone, and in UTC beside it.
    assert _summary(report).splitlines()[0] == (
        "ny_days (job daily): 3 P1D[America/New_York] lots, 2026-03-07 07:00:00 .. 2026-03-09 20:00:00 "
        "America/New_York (2026-03-07 12:00:00 .. 2026-03-10 00:00:00 UTC)"
    )


@pytest.mark.parametrize(
    ("mapping", "fragment"),
    [
        ("P1W->P1M", "a week may straddle months"),
        ("P1D[America/New_York]->P1D", "days in America/New_York are not days in UTC"),
        ("P1D->P1D[America/New_York]", "days in UTC are not days in America/New_York"),
        ("P1D->P1D[Nowhere/Atlantis]", "is not a time zone zoneinfo knows"),
        ("P1D->P2W", "calendar intervals are P1W, P1M and P1Y"),
    ],
)
def test_a_mapping_that_does_not_tile_registers_nothing(world: LotWorld, mapping: str, fragment: str) -> None:
    world.job("ingest", output="days")
    world.lineage.catalog.upsert_dataset(world.ns, "rollup")
    with pytest.raises(InvalidInput, match=fragment):
        world.lots.register_job(world.ns, "rollup_job", output="rollup", inputs=["days"], lot_mapping=mapping)
    with pytest.raises(NotFound):
        world.lineage.catalog.get_job(world.ns, "rollup_job")
