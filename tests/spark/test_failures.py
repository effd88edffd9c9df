"""What a failed lot says: one line naming the cause, not py4j's ``An error occurred while calling
o3128.save.`` nor Spark's ``SQLSTATE``; the same line in the run summary, ``runs.error`` (status) and
the run's ``errorMessage`` facet, whose stack trace keeps the Java stack. Real Spark, on SQLite and
PostgreSQL (``lineage``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from lotline.services import Lineage
from lotline.spark.pipeline import Pipeline, load_pipeline
from lotline.spark.registration import register
from lotline.spark.run import RunSummary, run_pipeline
from lotline.spark.runner import LotRunner
from support.spark import PIPELINES, ingest, ingest_files

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NS = "failing"
LOT = "20230101PT1H000"


@pytest.fixture
def runner(lineage: Lineage, spark: SparkSession) -> Iterator[LotRunner]:
    pipeline: Pipeline = load_pipeline(str(PIPELINES / "failing.py"))
    register(lineage, pipeline)
    yield LotRunner(lineage, pipeline, spark)


def _run(runner: LotRunner) -> RunSummary:
    return run_pipeline(runner, runner.pipeline.ordered_jobs(), worker="test")


def _recorded(lineage: Lineage, job: str) -> str:
    """The reason the status view shows for the job's failed lot, checked against the run's facet."""
    [row] = [r for r in lineage.lots.status(NS, job=job) if r.lot == LOT]
    assert row.status.value == "ERROR"
    assert row.run_id is not None
    facet = lineage.runs.get_run(row.run_id).facets["errorMessage"]
    assert facet["message"] == row.error
    assert "org.apache.spark" in facet["stackTrace"]  # the whole Java stack is kept
    assert row.error is not None
    return row.error


def _clean(line: str) -> None:
    for noise in ("Py4J", "An error occurred while calling", "SQLSTATE", "\n"):
        assert noise not in line


def test_a_malformed_file_names_spark_s_error_class_the_cause_and_the_file(
    lineage: Lineage, runner: LotRunner
) -> None:
    ingest_files(lineage, NS, "rows", LOT, {"good.csv": ["1,2"], "rows_malformed.csv": ["3,x"]})
    summary = _run(runner)
    [error] = summary.errors
    prefix = f"job parse lot {LOT} (attempt 1): "
    assert error.startswith(prefix + "[MALFORMED_RECORD_IN_PARSING"), error
    line = error.removeprefix(prefix)
    assert 'NumberFormatException: For input string: "x"' in line
    assert "rows_malformed.csv" in line
    _clean(line)
    assert _recorded(lineage, "parse") == line
    # What the transform logged is kept with its run: the last 1,000 lines.
    [row] = lineage.lots.status(NS, job="parse")
    assert row.run_id is not None
    kept = lineage.runs.get_run(row.run_id).facets["lotline_log"]
    assert (len(kept["lines"]), kept["dropped"]) == (1000, 6)
    assert kept["lines"][0].endswith(f" INFO step 6 of lot {LOT}")
    assert kept["lines"][-1].endswith(" WARNING about to write")


def test_a_python_udf_s_exception_reads_as_the_user_s_message(lineage: Lineage, runner: LotRunner) -> None:
    ingest_files(lineage, NS, "rows", LOT, {"rows.csv": ["1,2", "-1,3"]})
    summary = _run(runner)
    [error] = summary.errors
    prefix = f"job check lot {LOT} (attempt 1): "
    assert error.startswith(prefix + "ValueError: negative value -1 (failing.py line "), error
    assert error.endswith(", in positive)")
    line = error.removeprefix(prefix)
    _clean(line)
    assert _recorded(lineage, "check") == line


def test_raise_error_reads_as_its_message(lineage: Lineage, spark: SparkSession) -> None:
    weblogs = load_pipeline(str(PIPELINES / "weblogs.py"))
    register(lineage, weblogs)
    ingest(lineage, "weblogs", "raw_logs", "20230101PT30M000", [["2023-01-01T00:03:00 /x 599"]])
    summary = run_pipeline(LotRunner(lineage, weblogs, spark), weblogs.ordered_jobs(), worker="test")
    assert summary.errors == ["job parse lot 20230101PT30M000 (attempt 1): unparseable line"]
    [row] = lineage.lots.status("weblogs", job="parse")
    assert row.error == "unparseable line"
