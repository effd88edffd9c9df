"""The calendar example of docs/pipelines.md, run as written there (issue 40), on both databases: a
leap February of daily lots makes one monthly lot of its 29 days, and hourly lots make New York days
of 23 and 25 hours whose totals are pandas' own."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from lotline.domain.errors import InvalidInput
from lotline.domain.lots import Interval, lots_between
from lotline.services import Lineage
from lotline.spark.pipeline import PipelineError, load_pipeline
from lotline.spark.registration import register
from lotline.spark.run import run_pipeline
from lotline.spark.runner import LotRunner
from support.spark import ingest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DOCS = Path(__file__).parents[2] / "docs" / "pipelines.md"
HEADING = "### Daily into weekly and monthly rollups, and a zoned day"
UTC = datetime.UTC


def _example() -> str:
    """The example's code block, exactly as docs/pipelines.md shows it."""
    section = DOCS.read_text().split(HEADING, 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def _amount(start: datetime.datetime) -> int:
    return int(start.timestamp()) // 3600 % 97


def test_the_docs_example_rolls_days_into_a_month_and_hours_into_new_york_days(
    lineage: Lineage, spark: SparkSession, tmp_path: Path
) -> None:
    pandas = pytest.importorskip("pandas")
    path = tmp_path / "sales.py"
    path.write_text(_example())
    pipeline = load_pipeline(str(path))
    register(lineage, pipeline)
    day, hour = Interval.parse("P1D"), Interval.parse("PT1H")
    days = lots_between(
        datetime.datetime(2024, 2, 1, tzinfo=UTC), datetime.datetime(2024, 3, 1, tzinfo=UTC), day
    )
    for lot in days:
        ingest(lineage, "sales", "sales_days", str(lot), [[json.dumps({"amount": _amount(lot.start)})]])
    # The New York days of both 2026 DST changes, and the hour before the first (a day left incomplete).
    local = [pandas.Timestamp(d, tz="America/New_York") for d in ("2026-03-08", "2026-11-01")]
    spans = [(t - pandas.Timedelta(hours=1), t + pandas.DateOffset(days=1)) for t in local]
    hours = [lot for start, end in spans for lot in lots_between(start, end, hour)]
    for lot in hours:
        ingest(lineage, "sales", "sales_hours", str(lot), [[json.dumps({"amount": _amount(lot.start)})]])
    jobs = [j for j in pipeline.ordered_jobs() if j.name in ("monthly", "daily_new_york")]
    summary = run_pipeline(LotRunner(lineage, pipeline, spark), jobs, worker="test")
    assert not summary.failed, summary

    def output(dataset: str, lot: str) -> tuple[int, int]:
        manifest = lineage.manifests.current("sales", dataset, lot)
        assert manifest is not None, (dataset, lot)
        [row] = spark.read.parquet(*[o.uri for o in manifest.objects]).collect()
        return row["amount"], row["rows"]

    assert output("sales_months", "20240201P1M000") == (sum(_amount(d.start) for d in days), 29)
    frame = pandas.DataFrame(
        {"start": [lot.start for lot in hours], "amount": [_amount(lot.start) for lot in hours]}
    )
    by_day = frame.groupby(
        pandas.to_datetime(frame["start"], utc=True).dt.tz_convert("America/New_York").dt.date
    )
    expected = by_day["amount"].agg(["sum", "count"])
    for day_id, date in (("20260308", datetime.date(2026, 3, 8)), ("20261101", datetime.date(2026, 11, 1))):
        found = output("sales_days_ny", f"{day_id}P1D.America.New_York.000")
        assert found == (expected.loc[date, "sum"], expected.loc[date, "count"])
    assert [expected.loc[d, "count"] for d in (datetime.date(2026, 3, 8), datetime.date(2026, 11, 1))] == [
        23,
        25,
    ]
    ready = {r.lot for r in lineage.lots.status("sales", dataset="sales_days_ny")}
    assert ready == {"20260308P1D.America.New_York.000", "20261101P1D.America.New_York.000"}


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (
            ('"sales_days", format="json", interval="P1D"', '"sales_days", format="json", interval="P1W"'),
            "a week may straddle months",
        ),
        (
            ('interval="P1D", schema', 'interval="P1D", zone="Europe/Paris", schema'),
            "days in Europe/Paris are not days in UTC",
        ),
        (('zone="America/New_York"', 'zone="America/Nowhere"'), "zone 'America/Nowhere' is not a time zone"),
        (('interval="P1W"', 'interval="P2W"'), "calendar intervals are P1W, P1M and P1Y"),
    ],
)
def test_what_does_not_tile_is_refused_at_load_in_one_line(
    tmp_path: Path, change: tuple[str, str], fragment: str
) -> None:
    """Loading registers nothing (``register`` does, after it): the refusal is the whole effect."""
    source = _example()
    assert change[0] in source
    path = tmp_path / "sales.py"
    path.write_text(source.replace(*change))
    with pytest.raises((PipelineError, InvalidInput), match=fragment) as raised:
        load_pipeline(str(path))
    assert "\n" not in raised.value.message
