"""Arrival policies as pure rules (domain/arrival.py) and as a pipeline declares them."""

from __future__ import annotations

import datetime

import pytest

from lotline.domain.arrival import Absence, ArrivalPolicy, format_duration, marker_lot, parse_duration
from lotline.domain.errors import InvalidInput
from lotline.domain.lots import Interval, parse_lot
from lotline.services import Lineage
from lotline.spark.pipeline import Pipeline, PipelineError
from lotline.spark.registration import register


@pytest.mark.parametrize(
    ("text", "minutes"), [("PT15M", 15), ("PT2H", 120), ("P1D", 1440), ("P1DT2H30M", 1590), ("PT0S", 0)]
)
def test_iso_durations_read_and_written_back(text: str, minutes: int) -> None:
    found = parse_duration("late_after", text)
    assert found == datetime.timedelta(minutes=minutes)
    assert parse_duration("late_after", format_duration(found)) == found


@pytest.mark.parametrize("text", ["-PT5M", "5m", "PT", "P", "PT5", "P1W", "P1M", "", "P400D"])
def test_bad_durations_are_one_clear_line(text: str) -> None:
    with pytest.raises(InvalidInput, match="late_after"):
        parse_duration("late_after", text)


def test_a_lot_is_due_once_its_end_plus_the_window_is_past() -> None:
    policy = ArrivalPolicy.parse("PT15M", "empty")
    lot = parse_lot("20260302PT1H006")  # 06:00-07:00
    at = datetime.datetime(2026, 3, 2, 7, 15, tzinfo=datetime.UTC)
    assert policy.absent is Absence.EMPTY
    assert not policy.due(lot, at - datetime.timedelta(seconds=1)) and policy.due(lot, at)  # type: ignore[arg-type]
    assert policy.declaration == "arrival policy (absent=empty, late_after=PT15M)"
    with pytest.raises(InvalidInput, match="not one of missing, empty"):
        ArrivalPolicy.parse(absent="never")


def test_markers_name_a_lot_of_the_datasets_interval() -> None:
    pt5m = Interval.parse("PT5M")
    assert marker_lot("_EMPTY.20261127PT5M017", pt5m) == "20261127PT5M017"
    for name, words in (
        ("_EMPTY.2026-11-27", "does not name an interval lot"),
        ("_EMPTY.20261127PT1H010", "names a PT1H lot"),
        ("_EMPTY.20261127PT5M999", "out of range"),
    ):
        with pytest.raises(InvalidInput, match=words):
            marker_lot(name, pt5m)


def test_a_pipeline_declares_a_sources_policy_and_bad_ones_are_refused_at_load() -> None:
    p = Pipeline("arrivals")
    raw = p.dataset("raw", format="text", interval="PT5M", late_after="PT15M", absent="empty")
    assert raw.arrival == ArrivalPolicy(datetime.timedelta(minutes=15), Absence.EMPTY)
    with pytest.raises(PipelineError, match="dataset late: late_after '-PT5M'"):
        p.dataset("late", format="text", interval="PT5M", late_after="-PT5M")
    with pytest.raises(PipelineError, match="needs an interval"):
        p.dataset("named", format="text", absent="empty")


def test_a_policy_on_a_dataset_the_pipeline_computes_is_refused_before_anything_is_registered(
    lineage: Lineage,
) -> None:
    p = Pipeline("arrivals")
    raw = p.dataset("raw", format="text", interval="PT5M")
    hits = p.dataset("hits", format="parquet", interval="PT5M", absent="empty")

    @p.job(inputs=[raw], output=hits)
    def parse(raw: object) -> object:
        return raw

    with pytest.raises(PipelineError, match="dataset hits: a job of the pipeline writes it"):
        register(lineage, p)
    assert lineage.catalog.list_namespaces().items == []
