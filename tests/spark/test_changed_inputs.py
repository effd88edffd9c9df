"""A landing file replaced after an in-place ingest (issue 29 §10): the runner compared nothing at
read time and computed the lot from the new bytes. Now each input object is checked against its
manifest (size and modified time, one stat each): the lot fails saying which file changed and what
to do; the next ingest makes the new version, and the lot then runs on it. Real Spark, real files,
on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from lotline.domain.ingress import TimeRule
from lotline.domain.lots import Interval
from lotline.domain.manifests import ManifestObject, object_change
from lotline.services import Lineage
from lotline.services.ingest import IngestRequest
from lotline.spark.pipeline import load_pipeline
from lotline.spark.registration import register
from lotline.spark.run import RunSummary, run_pipeline
from lotline.spark.runner import LotRunner
from support.spark import PIPELINES

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NS = "weblogs"
LOT = "20230101PT30M000"
PATTERN = r"path:(?P<year>\d{4})(?P<month>\d\d)(?P<day>\d\d)T(?P<hour>\d\d)(?P<minute>\d\d)"
NOW = datetime(2023, 1, 3, tzinfo=UTC)
FIRST = "2023-01-01T00:01:00 /a 200\n2023-01-01T00:02:00 /b 200\n"
FIXED = FIRST + "2023-01-01T00:03:00 /c 200\n"


def _parse(runner: LotRunner) -> RunSummary:
    jobs = [j for j in runner.pipeline.ordered_jobs() if j.name == "parse"]
    return run_pipeline(runner, jobs, worker="test")


def _rows(spark: SparkSession, lineage: Lineage) -> int:
    manifest = lineage.manifests.current(NS, "hits", LOT)
    assert manifest is not None
    return spark.read.parquet(*[o.uri for o in manifest.objects]).count()


def test_a_landing_file_replaced_after_an_in_place_ingest_fails_its_lot_until_ingested_again(
    lineage: Lineage, spark: SparkSession, tmp_path: Path
) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    log = landing / "20230101T0001.log"
    log.write_text(FIRST)
    pipeline = load_pipeline(str(PIPELINES / "weblogs.py"))
    register(lineage, pipeline)
    request = IngestRequest(
        NS,
        "raw_logs",
        str(landing),
        Interval.parse("PT30M"),
        TimeRule.parse(PATTERN),
        start=datetime(2023, 1, 1, tzinfo=UTC),
        end=datetime(2023, 1, 1, 0, 30, tzinfo=UTC),
    )
    assert lineage.ingest.ingest(request, now=NOW).registered == [LOT]
    runner = LotRunner(lineage, pipeline, spark)

    log.write_text(FIXED)  # the sender replaces the file after it was registered in place
    failed = _parse(runner)
    assert failed.failed and failed.tallies["parse"].failed == 1
    [error] = failed.errors
    assert f"input raw_logs lot {LOT}: {log} changed since it was registered" in error, error
    assert f"(size {len(FIRST)} → {len(FIXED)}, modified" in error, error
    assert "run `lotline ingest` to register the new version" in error, error
    assert lineage.manifests.current(NS, "hits", LOT) is None

    again = lineage.ingest.ingest(request, now=NOW)
    assert again.reversioned == [LOT]
    done = _parse(runner)
    assert not done.failed and done.tallies["parse"].done == 1, done.errors
    assert _rows(spark, lineage) == 3  # the new file's lines, read as the new version


def test_what_counts_as_a_change() -> None:
    at = datetime(2023, 1, 1, 0, 0, 1, 250_000, tzinfo=UTC)
    recorded = ManifestObject("file:///l/a.log", 10, at, "text")
    assert object_change(recorded, 10, at) is None
    assert object_change(recorded, 11, at) == "size 10 → 11"
    later = at + timedelta(seconds=2)
    assert object_change(recorded, 10, later) == f"modified {at.isoformat()} → {later.isoformat()}"
    assert object_change(recorded, None, None) == "it is gone"
    # S3 lists times in milliseconds but gives one object's in whole seconds: the same instant.
    assert object_change(recorded, 10, at.replace(microsecond=0)) is None
