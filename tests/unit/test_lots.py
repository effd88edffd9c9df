"""Lot ids, windows and the fine-to-coarse lot mapping."""

from __future__ import annotations

import datetime
import itertools
import random
import re
import zoneinfo

import pytest

from lotline.domain.coordination import LotMapping
from lotline.domain.errors import InvalidInput
from lotline.domain.lots import (
    Interval,
    IntervalLot,
    NamedLot,
    input_lots_for,
    lot_at,
    lots_between,
    output_lot_for,
    parse_lot,
    validate_lot_id,
)

UTC = datetime.UTC
ALL_DURATIONS = [
    "PT1M", "PT2M", "PT3M", "PT4M", "PT5M", "PT6M", "PT8M", "PT9M", "PT10M", "PT12M", "PT15M", "PT16M",
    "PT18M", "PT20M", "PT24M", "PT30M", "PT32M", "PT36M", "PT40M", "PT45M", "PT48M", "PT1H", "PT72M",
    "PT80M", "PT90M", "PT96M", "PT2H", "PT144M", "PT160M", "PT3H", "PT4H", "PT288M", "PT6H", "PT8H",
    "PT12H", "P1D",
]  # fmt: skip


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime.datetime:
    return datetime.datetime(year, month, day, hour, minute, tzinfo=UTC)


def interval_lot(text: str) -> IntervalLot:
    lot = parse_lot(text)
    assert isinstance(lot, IntervalLot)
    return lot


def test_spec_example() -> None:
    lot = interval_lot("20230101PT5M050")
    assert lot == IntervalLot(datetime.date(2023, 1, 1), Interval(5), 50)
    assert lot.start == utc(2023, 1, 1, 4, 10)
    assert lot.end == utc(2023, 1, 1, 4, 15)
    assert str(lot) == "20230101PT5M050"


def test_all_durations_are_exactly_the_divisors_of_a_day() -> None:
    assert [str(Interval(m)) for m in range(1, 1441) if 1440 % m == 0] == ALL_DURATIONS


@pytest.mark.parametrize("duration", ALL_DURATIONS)
def test_round_trip_every_duration(duration: str) -> None:
    interval = Interval.parse(duration)
    assert str(interval) == duration
    assert interval.windows_per_day * interval.minutes == 1440
    assert interval.timedelta * interval.windows_per_day == datetime.timedelta(days=1)
    width = interval.ordinal_width
    for ordinal in {0, interval.windows_per_day // 2, interval.windows_per_day - 1}:
        text = f"20240229{duration}{ordinal:0{width}d}"
        lot = interval_lot(text)
        assert str(lot) == text
        assert validate_lot_id(text) == text
        assert lot_at(lot.start, interval) == lot
        assert lot_at(lot.end - datetime.timedelta(microseconds=1), interval) == lot


def test_pt1m_uses_four_digit_ordinals() -> None:
    interval = Interval.parse("PT1M")
    assert interval.windows_per_day == 1440 and interval.ordinal_width == 4
    assert interval_lot("20230101PT1M0000").start == utc(2023, 1, 1, 0, 0)
    assert interval_lot("20230101PT1M1439").start == utc(2023, 1, 1, 23, 59)
    assert str(lot_at(utc(2023, 1, 1, 0, 7), interval)) == "20230101PT1M0007"
    for text in ("20230101PT1M007", "20230101PT1M01440"):
        with pytest.raises(InvalidInput, match="4 digits"):
            parse_lot(text)
    with pytest.raises(InvalidInput, match="out of range"):
        parse_lot("20230101PT1M1440")
    assert Interval.parse("PT2M").ordinal_width == 3


@pytest.mark.parametrize("duration", ["PT1M", "PT5M", "PT1H", "P1D"])
def test_string_order_is_time_order(duration: str) -> None:
    interval = Interval.parse(duration)
    rng = random.Random(duration)
    base = utc(2022, 12, 25)
    lots = [lot_at(base + datetime.timedelta(minutes=rng.randrange(20 * 1440)), interval) for _ in range(300)]
    assert sorted(lots, key=str) == sorted(lots, key=lambda lot: lot.start) == sorted(lots)


def test_ordering_across_durations_is_by_start_then_length() -> None:
    texts = ("20230101P1D000", "20230101PT5M000", "20230101PT1H000", "20221231PT1M1439")
    lots = [interval_lot(t) for t in texts]
    assert [str(lot) for lot in sorted(lots)] == [
        "20221231PT1M1439",
        "20230101PT5M000",
        "20230101PT1H000",
        "20230101P1D000",
    ]


def test_p1d_has_only_ordinal_000() -> None:
    lot = interval_lot("20230101P1D000")
    assert (lot.start, lot.end) == (utc(2023, 1, 1), utc(2023, 1, 2))
    with pytest.raises(InvalidInput, match="out of range"):
        parse_lot("20230101P1D001")
    with pytest.raises(InvalidInput, match="3 digits"):
        parse_lot("20230101P1D0")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("20230230PT5M000", "invalid date '20230230'"),
        ("00000101PT5M000", "invalid date '00000101'"),
        ("20230101PT1H024", r"ordinal 24 is out of range for PT1H \(000\.\.023\)"),
        ("20230101PT5M50", "exactly 3 digits"),
        ("20230101PT7M000", "'PT7M' does not divide a day"),
        ("20230101PT60M000", "write 'PT1H'"),
        ("20230101PT24H000", "write 'P1D'"),
        ("20230101PT05M000", "write 'PT5M'"),
        ("20230101PT0M000", "'PT0M' is not positive"),
        ("20230101PT13H000", "'PT13H' does not divide a day"),
        ("20230101P2D000", "'P2D' does not divide a day"),
        ("20230101pt5m050", "upper case"),
        ("20230101PT1H30M000", "'PT1H30M' is not of the form"),
        ("", "must not be empty"),
        ("a" * 129, "129 characters long; the limit is 128"),
        (".", "reserved"),
        ("..", "reserved"),
        ("a/b", "contains '/' at position 1"),
        ("../etc", "contains '/'"),
        ("a b", "contains ' '"),
        ("a\x00b", r"contains '\\x00'"),
        ("a\nb", r"contains '\\n'"),
        ("a\tb", r"contains '\\t'"),
        ("lot\n", r"contains '\\n'"),
        ("café", "contains 'é'"),
        ("a:b", "contains ':'"),
    ],
)
def test_rejected_lot_ids(text: str, fragment: str) -> None:
    with pytest.raises(InvalidInput, match=fragment):
        parse_lot(text)
    with pytest.raises(InvalidInput, match=fragment):
        validate_lot_id(text)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("PT60M", "write 'PT1H'"),
        ("PT1440M", "write 'P1D'"),
        ("PT7M", "does not divide a day"),
        ("PT13H", "does not divide a day"),
        ("PT0H", "not positive"),
        ("pt5m", "'pt5m' is not of the form"),
        ("P1Q", "is not of the form PTnM, PTnH, P1D, P1W, P1M or P1Y"),
        ("P2W", "calendar intervals are P1W, P1M and P1Y"),
        ("P1D[Mars/Olympus]", "zone 'Mars/Olympus' is not a time zone zoneinfo knows"),
        ("P1D[../../etc/passwd]", "is not a time zone zoneinfo knows"),
        ("P1D[Etc/GMT+5]", "cannot be named in a lot id"),
        ("PT1H[America/New_York]", "PT1H lots cannot have a zone"),
        ("", "is not of the form"),
        ("PT" + "9" * 5000 + "M", "is not of the form"),
    ],
)
def test_rejected_durations(text: str, fragment: str) -> None:
    with pytest.raises(InvalidInput, match=fragment):
        Interval.parse(text)


def test_bad_constructor_arguments() -> None:
    with pytest.raises(InvalidInput, match="7 minutes does not divide a day"):
        Interval(7)
    with pytest.raises(InvalidInput, match="out of range"):
        IntervalLot(datetime.date(2023, 1, 1), Interval(60), 24)
    with pytest.raises(InvalidInput, match=r"datetime\.date"):
        IntervalLot(datetime.datetime(2023, 1, 1), Interval(60), 0)
    with pytest.raises(InvalidInput, match="interval lot"):
        NamedLot("20230101PT5M050")
    with pytest.raises(InvalidInput, match="reserved"):
        NamedLot("..")


@pytest.mark.parametrize("text", ["2023-01-01", "a=b.c_d-e", "x", "a" * 128, "...", "20230101", "v1.2.3"])
def test_named_lots_accepted(text: str) -> None:
    assert parse_lot(text) == NamedLot(text)
    assert str(NamedLot(text)) == text
    assert validate_lot_id(text) == text


def test_twelve_pt5m_lots_make_one_pt1h_lot() -> None:
    hour = interval_lot("20230101PT1H004")
    inputs = input_lots_for(hour, Interval.parse("PT5M"))
    assert [str(lot) for lot in inputs] == [f"20230101PT5M{n:03d}" for n in range(48, 60)]
    assert inputs[0].start == hour.start and inputs[-1].end == hour.end
    assert {output_lot_for(lot, hour.interval) for lot in inputs} == {hour}


@pytest.mark.parametrize(("fine", "count"), [("PT5M", 288), ("PT1H", 24), ("PT1M", 1440), ("P1D", 1)])
def test_fine_lots_make_one_day(fine: str, count: int) -> None:
    day = interval_lot("20230101P1D000")
    inputs = input_lots_for(day, Interval.parse(fine))
    assert len(inputs) == count
    assert inputs == lots_between(day.start, day.end, Interval.parse(fine))
    assert {output_lot_for(lot, day.interval) for lot in inputs} == {day}


@pytest.mark.parametrize(("fine", "coarse"), [(f, c) for f in ALL_DURATIONS for c in ALL_DURATIONS])
def test_output_lot_for_inverts_input_lots_for(fine: str, coarse: str) -> None:
    fine_interval, coarse_interval = Interval.parse(fine), Interval.parse(coarse)
    output = lot_at(utc(2023, 6, 30, 17, 41), coarse_interval)
    if coarse_interval.minutes % fine_interval.minutes:
        with pytest.raises(InvalidInput, match=f"input interval {fine} "):
            input_lots_for(output, fine_interval)
        return
    inputs = input_lots_for(output, fine_interval)
    assert inputs == lots_between(output.start, output.end, fine_interval)
    assert all(output_lot_for(lot, coarse_interval) == output for lot in inputs)


def test_mapping_rejects_coarser_or_misaligned_inputs() -> None:
    hour = interval_lot("20230101PT1H004")
    with pytest.raises(InvalidInput, match="input interval P1D is coarser than output interval PT1H"):
        input_lots_for(hour, Interval.parse("P1D"))
    with pytest.raises(InvalidInput, match="input interval PT45M does not divide output interval PT1H"):
        input_lots_for(hour, Interval.parse("PT45M"))
    with pytest.raises(InvalidInput, match="input interval PT1H is coarser than output interval PT5M"):
        output_lot_for(hour, Interval.parse("PT5M"))
    with pytest.raises(InvalidInput, match="input interval PT2H does not divide output interval PT3H"):
        output_lot_for(interval_lot("20230101PT2H000"), Interval.parse("PT3H"))


def test_lots_between_window_boundaries() -> None:
    five = Interval.parse("PT5M")

    def names(start: datetime.datetime, end: datetime.datetime) -> list[str]:
        return [str(lot) for lot in lots_between(start, end, five)]

    assert names(utc(2023, 1, 1, 4, 10), utc(2023, 1, 1, 4, 15)) == ["20230101PT5M050"]
    just_after = utc(2023, 1, 1, 4, 15) + datetime.timedelta(microseconds=1)
    assert names(utc(2023, 1, 1, 4, 10), just_after) == ["20230101PT5M050", "20230101PT5M051"]
    assert names(utc(2023, 1, 1, 4, 14) + datetime.timedelta(seconds=59), utc(2023, 1, 1, 4, 15)) == [
        "20230101PT5M050"
    ]
    assert names(utc(2023, 1, 1, 4, 12), utc(2023, 1, 1, 4, 13)) == ["20230101PT5M050"]
    assert names(utc(2022, 12, 31, 23, 55), utc(2023, 1, 1, 0, 5)) == ["20221231PT5M287", "20230101PT5M000"]


def test_lots_between_empty_and_reversed_ranges() -> None:
    five = Interval.parse("PT5M")
    assert lots_between(utc(2023, 1, 1, 4, 10), utc(2023, 1, 1, 4, 10), five) == []
    assert lots_between(utc(2023, 1, 1, 4, 12), utc(2023, 1, 1, 4, 12), five) == []
    with pytest.raises(InvalidInput, match="is before start"):
        lots_between(utc(2023, 1, 1, 4, 15), utc(2023, 1, 1, 4, 10), five)


def test_other_time_zones_are_converted_to_utc() -> None:
    tokyo = datetime.timezone(datetime.timedelta(hours=9))
    instant = datetime.datetime(2023, 1, 1, 8, 30, tzinfo=tokyo)  # 2022-12-31 23:30 UTC
    assert str(lot_at(instant, Interval.parse("PT1H"))) == "20221231PT1H023"
    hour_later = instant + datetime.timedelta(hours=1)
    assert [str(lot) for lot in lots_between(instant, hour_later, Interval(60))] == [
        "20221231PT1H023",
        "20230101PT1H000",
    ]


def test_naive_datetimes_are_rejected() -> None:
    naive = datetime.datetime(2023, 1, 1, 4, 10)
    with pytest.raises(InvalidInput, match="no time zone"):
        lot_at(naive, Interval(5))
    with pytest.raises(InvalidInput, match="no time zone"):
        lots_between(naive, utc(2023, 1, 1, 5), Interval(5))
    with pytest.raises(InvalidInput, match="no time zone"):
        lots_between(utc(2023, 1, 1, 4), naive, Interval(5))


# -- calendar intervals and zones (issue 40) --------------------------------------------------------
P1D, P1W, P1M, P1Y = (Interval.parse(t) for t in ("P1D", "P1W", "P1M", "P1Y"))
NEW_YORK = Interval.parse("P1D", "America/New_York")


@pytest.mark.parametrize(
    ("month", "days"),
    [("20260201P1M000", 28), ("20240201P1M000", 29), ("20260401P1M000", 30), ("20261201P1M000", 31)],
)
def test_a_month_is_made_of_exactly_its_days_and_hours(month: str, days: int) -> None:
    lot = interval_lot(month)
    made = [str(d) for d in input_lots_for(lot, P1D)]
    assert len(made) == days
    assert made[0] == month[:6] + "01P1D000"
    assert interval_lot(made[-1]).end == lot.end
    assert len(input_lots_for(lot, Interval.parse("PT1H"))) == days * 24
    assert {str(output_lot_for(interval_lot(d), P1M)) for d in made} == {month}


def test_a_week_runs_monday_to_monday_across_a_year_boundary() -> None:
    week = lot_at(utc(2026, 1, 1, 12), P1W)
    assert str(week) == "20251229P1W000"
    assert (week.start, week.end) == (utc(2025, 12, 29), utc(2026, 1, 5))
    days = [str(d) for d in input_lots_for(week, P1D)]
    assert days == [f"202512{d}P1D000" for d in (29, 30, 31)] + [f"2026010{d}P1D000" for d in range(1, 5)]
    assert {str(output_lot_for(interval_lot(d), P1W)) for d in days} == {"20251229P1W000"}


def test_calendar_ids_sort_in_time_and_round_trip() -> None:
    for interval in (P1W, P1M, P1Y, NEW_YORK):
        lots = lots_between(utc(2023, 11, 15), utc(2027, 2, 1), interval)
        texts = [str(lot) for lot in lots]
        assert texts == sorted(texts)
        assert [parse_lot(t) for t in texts] == lots
        assert all(a.end == b.start for a, b in itertools.pairwise(lots))
    assert [str(m) for m in lots_between(utc(2026, 1, 1), utc(2027, 1, 1), P1M)][::11] == [
        "20260101P1M000",
        "20261201P1M000",
    ]
    assert len(lots_between(utc(2026, 1, 1), utc(2027, 1, 1), P1M)) == 12
    assert str(lot_at(utc(2026, 7, 4), P1Y)) == "20260101P1Y000"


def test_a_zoned_day_is_23_24_or_25_hours_and_its_id_names_the_zone() -> None:
    spring, fall = interval_lot("20260308P1D.America.New_York.000"), lot_at(utc(2026, 11, 1, 12), NEW_YORK)
    assert str(fall) == "20261101P1D.America.New_York.000"
    assert spring.end - spring.start == datetime.timedelta(hours=23)
    assert fall.end - fall.start == datetime.timedelta(hours=25)
    assert spring.local_start.isoformat() == "2026-03-08T00:00:00-05:00"
    assert spring.local_end.isoformat() == "2026-03-09T00:00:00-04:00"
    assert str(NEW_YORK) == "P1D[America/New_York]"
    assert Interval.parse("P1D[America/New_York]") == NEW_YORK
    assert Interval.parse("P1D", "UTC") == P1D  # UTC is the default, written without a zone


def test_a_range_ending_in_a_repeated_local_hour_ends_where_it_says() -> None:
    # 01:00 EDT on 2026-11-01 is 05:00Z; 01:00 comes twice that night, and Python finds such a
    # time equal to no time of another zone.
    end = datetime.datetime(2026, 11, 1, 1, tzinfo=zoneinfo.ZoneInfo("America/New_York"))
    found = lots_between(utc(2026, 11, 1, 4), end, Interval.parse("PT1H"))
    assert [str(lot) for lot in found] == ["20261101PT1H004"]


def test_hours_into_new_york_days_follow_dst_as_pandas_does() -> None:
    pandas = pytest.importorskip("pandas")
    hour = Interval.parse("PT1H")
    for day in ("2026-03-08", "2026-06-01", "2026-11-01"):
        local = pandas.Timestamp(day, tz="America/New_York")
        expected = pandas.date_range(local, local + pandas.DateOffset(days=1), freq="h", inclusive="left")
        lot = lot_at(local.to_pydatetime(), NEW_YORK)
        made = input_lots_for(lot, hour)
        assert [m.start for m in made] == [t.tz_convert("UTC").to_pydatetime() for t in expected]
        assert {str(output_lot_for(m, NEW_YORK)) for m in made} == {str(lot)}


@pytest.mark.parametrize(
    ("fine", "coarse", "fragment"),
    [
        ("P1W", "P1M", "a week may straddle months"),
        ("P1W", "P1Y", "a week may straddle years"),
        ("P1M", "P1W", "coarser"),
        ("P1D[America/New_York]", "P1D", "days in America/New_York are not days in UTC"),
        ("P1D", "P1M[Europe/Paris]", "days in UTC are not days in Europe/Paris"),
        ("PT1H", "P1D[Asia/Kolkata]", "Asia/Kolkata's local days do not start on a PT1H boundary"),
    ],
)
def test_mappings_that_do_not_tile_are_refused_in_one_line(fine: str, coarse: str, fragment: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(fragment)) as raised:
        LotMapping.parse(f"{fine}->{coarse}")
    assert "\n" not in raised.value.message


def test_mappings_that_tile() -> None:
    for text in ("P1D->P1W", "P1D->P1M", "P1D->P1Y", "P1M->P1Y", "PT5M->P1M", "PT30M->P1D[Asia/Kolkata]"):
        assert str(LotMapping.parse(text)) == text
    mapping = LotMapping.parse("PT1H->P1D[America/New_York]")
    assert len(mapping.input_lots("20260308P1D.America.New_York.000")) == 23
    assert mapping.output_lot("20260308PT1H004") == "20260307P1D.America.New_York.000"
    assert mapping.output_lot("20260308PT1H005") == "20260308P1D.America.New_York.000"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("20260202P1M000", "a P1M lot starts on the first of a month"),
        ("20260101P1W000", "a P1W lot starts on a Monday"),
        ("20260101P1M001", "out of range"),
        ("20260308P1D.Mars.Olympus.000", "not a time zone zoneinfo knows"),
        ("20260308P1D.UTC.000", "not canonical; write '20260308P1D000'"),
        ("20260308PT1H.America.New_York.000", "PT1H lots cannot have a zone"),
    ],
)
def test_bad_calendar_and_zoned_ids(text: str, fragment: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(fragment)):
        parse_lot(text)
