"""Retries that end in ``lotline run`` (issue 39.6), on SQLite and PostgreSQL: a lot that fails a
``fail`` check on unchanged inputs is tried ``LOTLINE_MAX_ATTEMPTS`` times (3) whatever
``--retries``, the summary says it was given up on, the next run does not take it, and an operator's
``lotline retry`` brings it back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from lotline.cli.main import app
from lotline.domain.runs import RunState
from lotline.services import Lineage
from lotline.spark.pipeline import load_pipeline
from lotline.spark.registration import register
from lotline.spark.run import run_pipeline
from lotline.spark.runner import LotRunner
from support.spark import PIPELINES, ingest_files

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NS = "checked"
LOT = "20230101PT1H000"
REASON = "check dep_delay < 100 failed: 1 of 2 rows"


def test_lotline_run_gives_up_after_three_attempts(lineage: Lineage, spark: SparkSession) -> None:
    pipeline = load_pipeline(str(PIPELINES / "checked.py"))
    register(lineage, pipeline)
    ingest_files(lineage, NS, "raw_flights", LOT, {"rows.csv": ["f1,5,JFK", "f4,200,JFK"]})
    strict = [pipeline.jobs["strict"]]
    runner = LotRunner(lineage, pipeline, spark)

    summary = run_pipeline(runner, strict, worker="t", retries=5)
    assert summary.errors == [
        f"job strict lot {LOT} (attempt 3): {REASON} — gave up after 3 attempts "
        "(`lotline retry strict` retries it)"
    ]
    assert (summary.tallies["strict"].retried, summary.tallies["strict"].failed) == (2, 1)

    # The next run (which registers the same job version and takes failed lots off their back-off)
    # does not try it again.
    register(lineage, pipeline)
    again = run_pipeline(runner, strict, worker="t", retries=5)
    assert again.errors == [] and again.tallies["strict"].failed == 0
    runs = lineage.runs.list_runs(NS, "strict").items
    assert [r.state for r in runs] == [RunState.FAILED] * 3

    # An operator retries it: one more attempt, its count of failures back to 0 (not given up).
    assert lineage.lots.retry(NS, "strict") == 1
    retried = run_pipeline(runner, strict, worker="t")
    assert retried.errors == [f"job strict lot {LOT} (attempt 4): {REASON}"]


def test_lotline_run_says_a_lot_was_given_up_on_and_does_not_start_spark_for_it(
    lineage: Lineage, spark: SparkSession, backend_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pipeline = load_pipeline(str(PIPELINES / "checked.py"))
    register(lineage, pipeline)
    ingest_files(lineage, NS, "raw_flights", LOT, {"rows.csv": ["f1,5,JFK", "f4,200,JFK"]})
    run_pipeline(LotRunner(lineage, pipeline, spark), [pipeline.jobs["strict"]], worker="t", retries=2)
    monkeypatch.setenv("LOTLINE_DB_URL", backend_url)
    monkeypatch.setenv("LOTLINE_WAREHOUSE", str(tmp_path / "warehouse"))
    monkeypatch.chdir(tmp_path)

    result = CliRunner().invoke(app, ["run", str(PIPELINES / "checked.py"), "--job", "strict", "--json"])
    assert result.exit_code == 0, result.output
    nothing = json.loads(result.stdout)["nothingEligible"]
    assert nothing.startswith("no eligible lots for strict (")  # its lots as lotline status counts them
    assert (
        "1 failed lots of strict given up on (gave up after 3 attempts): `lotline retry strict` retries them"
        in nothing
    )
