"""``lotline.read`` (Spark) and ``lotline.read_arrow`` on the demo's pipeline (``spark/examples/
weblogs.py``: raw_logs -> parse -> hits -> hourly_counts -> hourly_hits -> daily_report -> daily_report),
run on the suite's one Spark session, on SQLite: an hour of sample logs with an
empty window and a broken line (failed, then fixed, as ``lotline demo`` does), and one lot corrected
by its sender and re-published twice. Every reader returns exactly the rows of the objects the
current manifests list. The warehouse's path has a space and a ``+`` (Spark reports paths
percent-encoded; the lot column must still find each row's lot)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import lotline
from lotline.domain.ingress import TimeRule
from lotline.domain.lots import Interval
from lotline.services import Lineage
from lotline.services.ingest import IngestRequest
from lotline.spark.examples import sample_logs
from lotline.spark.pipeline import load_pipeline
from lotline.spark.registration import register
from lotline.spark.run import run_pipeline
from lotline.spark.runner import LotRunner
from lotline.storage.objects import Storage
from lotline.store.engine import Store

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.slow  # the demo pipeline run whole

NS = "weblogs"
DAY = datetime(2026, 1, 5, tzinfo=UTC)
START = DAY + timedelta(hours=9)
EMPTY, BROKEN, CORRECTED = 5, 7, 2  # windows of the hour: 09:25 has no file, 09:35 a broken line
TIME_PATTERN = r"(?P<year>\d{4})/(?P<month>\d\d)/(?P<day>\d\d)/(?P<hour>\d\d)(?P<minute>\d\d)\.log$"
DATASETS = {"raw_logs": "text", "hits": "parquet", "hourly_hits": "parquet", "daily_report": "parquet"}


def five_minutes(index: int) -> str:
    return f"{START + timedelta(minutes=5 * index):%Y%m%d}PT5M{(9 * 12 + index):03d}"


@dataclass
class Demo:
    lineage: Lineage
    spark: SparkSession


def _ingest(lineage: Lineage, landing: Path) -> None:
    request = IngestRequest(
        NS,
        "raw_logs",
        str(landing),
        Interval.parse("PT5M"),
        time_rule=TimeRule.parse("path:" + TIME_PATTERN),
        start=DAY,
        end=DAY + timedelta(days=1),
    )
    lineage.ingest.ingest(request)


@pytest.fixture
def demo(backend_url: str, tmp_path: Path, spark: SparkSession) -> Iterator[Demo]:
    """The demo's day, an hour of it with logs: run, broken lot fixed and run again, then window
    09:10 corrected by its sender twice (each time ingested and run: three versions of its lots)."""
    lineage = Lineage.over(Store(backend_url), Storage(str(tmp_path / "ware house+1")))
    pipeline = load_pipeline(sample_logs.__file__.replace("sample_logs.py", "weblogs.py"))
    landing = tmp_path / "landing"
    files = sample_logs.write_access_logs(
        landing, START, 12, empty=frozenset({EMPTY}), malformed=frozenset({BROKEN}), lines_per_file=20
    )
    register(lineage, pipeline)
    runner = LotRunner(lineage, pipeline, spark)

    def run() -> None:
        run_pipeline(runner, pipeline.ordered_jobs(), worker="test")

    _ingest(lineage, landing)
    run()
    sample_logs.repair(next(f for f in files if f.window_start == START + timedelta(minutes=5 * BROKEN)))
    corrected = next(f for f in files if f.window_start == START + timedelta(minutes=5 * CORRECTED))
    for keep in (None, 15, 10):
        if keep is not None:  # the sender sends the window again, shorter
            lines = corrected.path.read_text().splitlines()[:keep]
            corrected.path.write_text("\n".join(lines) + "\n")
        _ingest(lineage, landing)
        run()
    try:
        yield Demo(lineage, spark)
    finally:
        lineage.close()


def _expected(demo: Demo, dataset: str, start: datetime, end: datetime) -> DataFrame:
    """Each READY lot of the range read on its own from the objects its current manifest lists
    (``ManifestService.current``), with its lot id: the union is what a reader must return."""
    from pyspark.sql import functions as F

    frames = []
    for status in demo.lineage.lots.status(NS, dataset=dataset):
        manifest = demo.lineage.manifests.current(NS, dataset, status.lot)
        if manifest is None or not manifest.objects or not start <= _window_start(status.lot) < end:
            continue
        read = demo.spark.read.format(DATASETS[dataset])
        if DATASETS[dataset] == "text":
            read = read.schema("value string")
        frames.append(read.load([o.uri for o in manifest.objects]).withColumn("lot", F.lit(status.lot)))
    return reduce(lambda a, b: a.unionByName(b), frames)


def _window_start(lot: str) -> datetime:
    from lotline.domain.lots import IntervalLot, parse_lot

    parsed = parse_lot(lot)
    assert isinstance(parsed, IntervalLot)
    return parsed.start


# On SQLite only: the store's reads behind the readers run on both in tests/lots/test_readers.py.
@pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)
def test_readers_return_exactly_the_current_versions_rows(demo: Demo) -> None:
    from pyspark.testing import assertDataFrameEqual

    lineage, spark = demo.lineage, demo.spark
    corrected = five_minutes(CORRECTED)
    history = lineage.manifests.history(NS, "hits", corrected)
    assert [(m.attempt, m.state.value) for m in history] == [(a, "complete") for a in (1, 2, 3)]
    assert lineage.manifests.current(NS, "hits", corrected) == history[-1]
    day = {"from_": DAY, "to": DAY + timedelta(days=1)}
    for dataset in DATASETS:
        read = lotline.read(spark, dataset, namespace=NS, lot_column="lot", lineage=lineage, **day)
        assertDataFrameEqual(read, _expected(demo, dataset, DAY, DAY + timedelta(days=1)))
    # The corrected lot: its third version's 10 lines, parsed; nothing of the first two.
    hits = lotline.read(spark, "hits", namespace=NS, lot_column="lot", lineage=lineage, **day)
    assert hits.where(f"lot = '{corrected}'").count() == 10
    assert hits.count() == sum(m.row_count or 0 for m in lineage.reading.published(NS, "hits").manifests)
    [report] = (
        lotline.read(spark, "daily_report", namespace=NS, lineage=lineage).agg({"hits": "sum"}).collect()
    )
    # 12 windows: one empty, ten of 20 lines (the fixed one among them), the corrected one's 10.
    assert report[0] == hits.count() == 10 * 20 + 10
    # The folder holds the superseded versions too: a reader of it would count them.
    folder = lineage.storage.local_path(lineage.storage.dataset_uri(NS, "hits"))
    assert spark.read.parquet(folder).count() == hits.count() + 20 + 15
    # Arrow reads the same rows.
    table = lotline.read_arrow("daily_report", namespace=NS, lot_column="lot", lineage=lineage)
    expected = lotline.read(spark, "daily_report", namespace=NS, lot_column="lot", lineage=lineage)
    assert sorted(table.to_pylist(), key=str) == sorted((r.asDict() for r in expected.collect()), key=str)
