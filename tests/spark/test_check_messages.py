"""A check on a column the data lacks (a typo) fails its lot in lotline's one line, and nothing
else reaches the terminal: PySpark logs each analysis error that has a query context as a JSON
record with its whole stack on stderr (``SQLQueryContextLogger``), which lotline silences at its
default log level (issue 39.9)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from lotline.services import Lineage
from lotline.spark.pipeline import expect, load_pipeline
from lotline.spark.registration import register
from lotline.spark.run import run_pipeline
from lotline.spark.runner import LotRunner
from support.spark import PIPELINES, ingest_files

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NS = "checked"
LOT = "20230101PT1H000"


def test_a_check_on_a_misspelled_column_fails_the_lot_in_one_line_and_prints_no_stack(
    lineage: Lineage, spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    pipeline = load_pipeline(str(PIPELINES / "checked.py"))
    strict = replace(pipeline.jobs["strict"], checks={"strict_flights": (expect("dep_delayy < 100"),)})
    pipeline.jobs["strict"] = strict
    register(lineage, pipeline)
    ingest_files(lineage, NS, "raw_flights", LOT, {"rows.csv": ["f1,5,JFK", "f2,7,JFK"]})
    capsys.readouterr()
    summary = run_pipeline(LotRunner(lineage, pipeline, spark), [strict], worker="t")
    [error] = summary.errors
    assert error.startswith(f"job strict lot {LOT} (attempt 1): ") and "dep_delayy" in error, error
    assert "\n" not in error
    printed = capsys.readouterr()
    assert "QueryContextLogger" not in printed.err + printed.out
    assert '"errorClass"' not in printed.err + printed.out
