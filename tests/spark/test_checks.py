"""Checks that gate publication, on one run of ``pipelines/checked.py`` (SQLite and PostgreSQL):
``fail`` fails the lot like a transform error (one line, nothing readable, objects removed, a FAILED
lot event, retried), ``warn`` publishes and records, ``drop`` publishes the passing rows and the
quarantine job writes the others to ``flights__quarantine`` (its own lot, manifest and lineage
edge); the results are the version's ``dataQualityAssertions``/``dataQualityMetrics`` facets,
served by ``GET …/datasets/{d}/versions``; the gap report counts the lot failed by a check apart."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from fastapi.testclient import TestClient

from lotline.api.app import create_app
from lotline.domain.clock import ManualClock
from lotline.domain.gaps import GapState
from lotline.services import Lineage
from lotline.services.config import Settings
from lotline.spark.pipeline import PipelineError, expect, load_pipeline
from lotline.spark.registration import register
from lotline.spark.run import run_pipeline
from lotline.spark.runner import LotRunner
from support.spark import PIPELINES, ingest_files

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NS = "checked"
LOT = "20230101PT1H000"
ROWS = ["f1,5,JFK", "f2,,JFK", "f3,7,XXX", "f4,200,JFK"]


def test_fail_warn_and_drop_on_one_run(
    lineage: Lineage, spark: SparkSession, backend_url: str, tmp_path: Path
) -> None:
    pipeline = load_pipeline(str(PIPELINES / "checked.py"))
    assert sorted(pipeline.jobs) == ["clean", "clean__quarantine", "strict"]
    register(lineage, pipeline)
    ingest_files(lineage, NS, "raw_flights", LOT, {"rows.csv": ROWS})
    summary = run_pipeline(
        LotRunner(lineage, pipeline, spark), pipeline.ordered_jobs(), worker="t", retries=1
    )

    # fail: the lot fails with the check's line, is retried once, and nothing of it is readable.
    reason = "check dep_delay < 100 failed: 2 of 4 rows"
    assert summary.errors == [f"job strict lot {LOT} (attempt 2): {reason}"]
    assert summary.tallies["strict"].retried == 1
    [row] = lineage.lots.status(NS, job="strict")
    assert (row.status.value, row.error) == ("ERROR", reason)
    assert lineage.manifests.current(NS, "strict_flights", LOT) is None
    attempts = Path(lineage.storage.local_path(lineage.storage.dataset_uri(NS, "strict_flights")))
    assert not [p for p in attempts.rglob("*") if p.is_file() and not p.name.startswith((".", "_"))]
    failed = [e for e in lineage.lot_events.of_lot(NS, "strict_flights", LOT) if e.kind.value == "FAILED"]
    assert [e.reason for e in failed] == [reason, reason]
    assert lineage.runs.get_run(row.run_id).facets["lotline_checks"]["results"][0]["failed"] == 2

    # drop + warn: three rows published, the one without a delay quarantined, two warnings recorded.
    published = lineage.manifests.current(NS, "flights", LOT)
    assert published is not None and published.row_count == 3
    read = spark.read.parquet(*[o.uri for o in published.objects])
    assert sorted(r.flight for r in read.collect()) == ["f1", "f3", "f4"]
    quarantined = lineage.manifests.current(NS, "flights__quarantine", LOT)
    assert quarantined is not None and quarantined.row_count == 1
    [bad] = spark.read.parquet(*[o.uri for o in quarantined.objects]).collect()
    assert (bad.flight, bad._failed_checks) == ("f2", "dep_delay IS NOT NULL")
    quarantine_job = lineage.catalog.get_job(NS, "clean__quarantine")
    assert [d.name for d in quarantine_job.outputs] == ["flights__quarantine"]
    assert [d.name for d in quarantine_job.inputs] == ["raw_flights"]
    [clean] = lineage.lots.status(NS, job="clean")
    checks = lineage.runs.get_run(clean.run_id).facets["lotline_checks"]
    assert (checks["rows"], checks["dropped"], checks["warnings"]) == (4, 1, ["origin <> 'XXX'", "few_late"])
    [custom] = [r for r in checks["results"] if r["check"] == "few_late"]
    assert custom["metadata"] == {"late": 1, "lot": LOT}

    # The version's facets, as the REST API serves them (the app's routes over this test's services).
    # The pages count lots up to now: "now" is just after the lot's hour, as it is for its data.
    app = create_app(Settings(db_url=backend_url, warehouse=str(tmp_path / "warehouse"), api_token=None))
    app.state.lineage = replace(lineage, clock=ManualClock(datetime(2023, 1, 1, 1, 5, tzinfo=UTC)))
    client = TestClient(app, base_url="http://127.0.0.1")
    answer = client.get(f"/api/v1/namespaces/{NS}/datasets/flights/versions")
    assert answer.status_code == 200, answer.text
    [version] = answer.json()["versions"]
    assertions = {a["assertion"]: a for a in version["facets"]["dataQualityAssertions"]["assertions"]}
    assert assertions["dep_delay IS NOT NULL"]["success"] is False
    assert assertions["dep_delay IS NOT NULL"]["column"] == "dep_delay"
    assert assertions["origin <> 'XXX'"]["success"] is False
    assert assertions["unique(flight)"]["success"] is True
    assert assertions["row_count between 1 and 1000"]["success"] is True
    metrics = version["facets"]["dataQualityMetrics"]
    assert metrics["rowCount"] == 4
    assert metrics["columnMetrics"]["dep_delay"]["nullCount"] == 1

    # The web UI: the checks on the run and lot pages, the warned lot marked on the grid.
    run_page = client.get(f"/runs/{clean.run_id}").text
    assert 'id="checks"' in run_page and "warned" in run_page and "1 of 4 rows dropped" in run_page
    lot_page = client.get(f"/datasets/{NS}/flights/lots/{LOT}").text
    assert 'id="lot-checks"' in lot_page
    grid = client.get(f"/jobs/{NS}/clean/lots?from=2023-01-01&to=2023-01-02").text
    [cell] = re.findall(rf'<a [^>]*data-lot="{LOT}"[^>]*>', grid)
    assert 'data-state="complete"' in cell and 'data-warned="1"' in cell
    # The start page counts it beside the job's lots, and its latest run is that run, linked.
    home = client.get(f"/?ns={NS}").text
    [clean_row] = re.findall(r'<tr data-job="clean".*?</tr>', home, flags=re.S)
    assert 'data-warned="1"' in clean_row and "published with warnings <b>1</b>" in clean_row, clean_row
    assert f'href="/runs/{clean.run_id}" class="latest-run"' in clean_row
    strict_grid = client.get(f"/jobs/{NS}/strict/lots?from=2023-01-01&to=2023-01-02").text
    assert "data-warned" not in strict_grid

    # The gap report counts the lot failed by a check apart.
    report = lineage.gaps.report(NS, job="strict", start="2023-01-01T00:00:00Z", end="2023-01-01T01:00:00Z")
    assert (report.counts[GapState.FAILED], report.failed_by_check) == (1, 1)
    other = lineage.gaps.report(NS, job="clean", start="2023-01-01T00:00:00Z", end="2023-01-01T01:00:00Z")
    assert (other.counts[GapState.COMPLETE], other.failed_by_check) == (1, 0)


def test_warn_and_fail_judge_only_the_rows_the_lot_publishes(lineage: Lineage, spark: SparkSession) -> None:
    """Drop expectations apply first (issue 39.2): a row that is quarantined is not also warned on,
    and the warn expectation counts its failures among the published rows."""
    pipeline = load_pipeline(str(PIPELINES / "checked.py"))
    register(lineage, pipeline)
    # f5 has no delay (dropped) and origin XXX (would warn); f6 is clean, f7 warns once published.
    ingest_files(lineage, NS, "raw_flights", LOT, {"rows.csv": ["f5,,XXX", "f6,8,JFK", "f7,9,XXX"]})
    summary = run_pipeline(LotRunner(lineage, pipeline, spark), [pipeline.jobs["clean"]], worker="t")

    assert summary.warnings == ["job clean: check origin <> 'XXX' warned on 1 lot (1 row)"]
    [clean] = lineage.lots.status(NS, job="clean")
    checks = lineage.runs.get_run(clean.run_id).facets["lotline_checks"]
    by_name = {r["check"]: r for r in checks["results"]}
    assert (checks["rows"], checks["dropped"]) == (3, 1)
    assert (by_name["dep_delay IS NOT NULL"]["failed"], by_name["dep_delay IS NOT NULL"]["rows"]) == (1, 3)
    assert (by_name["origin <> 'XXX'"]["failed"], by_name["origin <> 'XXX'"]["rows"]) == (1, 2)
    assert by_name["row_count between 1 and 1000"]["rows"] == 2


def test_checks_enter_the_job_version() -> None:
    pipeline = load_pipeline(str(PIPELINES / "checked.py"))
    job = pipeline.jobs["strict"]
    out = "strict_flights"
    assert replace(job, checks={out: (expect("dep_delay < 90"),)}).code_digest != job.code_digest
    warned = (expect("dep_delay < 100", on_fail="warn"),)
    assert replace(job, checks={out: warned}).code_digest != job.code_digest
    assert replace(job, checks={out: (expect("dep_delay < 100"),)}).code_digest == job.code_digest


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        (
            'expect("a > 1", on_fail="explode")',
            "check a > 1: on_fail must be one of fail, warn, drop, got 'explode'.",
        ),
        ("row_count(min=5, max=2)", "check row_count: min 5 is greater than max 2."),
        ('expect("(a > 1")', "check (a > 1: invalid Spark SQL condition (unclosed '(')."),
        ('unique("a", on_fail="drop")', "check unique(a): on_fail must be one of fail, warn, got 'drop'."),
    ],
)
def test_a_bad_declaration_is_refused_at_load(tmp_path: Path, declared: str, message: str) -> None:
    path = tmp_path / "bad.py"
    path.write_text(
        "from lotline.spark.pipeline import Pipeline, expect, row_count, unique\n"
        "p = Pipeline('bad')\n"
        "a = p.dataset('a', format='parquet', interval='PT1H')\n"
        "b = p.dataset('b', format='parquet', interval='PT1H')\n"
        f"@p.job(inputs=[a], output=b, checks=[{declared}])\n"
        "def t(a): return a\n"
    )
    with pytest.raises(PipelineError) as refused:
        load_pipeline(str(path))
    assert refused.value.message == f"pipeline {path}: {message}"


def test_a_condition_spark_cannot_parse_is_refused_before_any_claim(
    lineage: Lineage, spark: SparkSession, tmp_path: Path
) -> None:
    pipeline = load_pipeline(str(PIPELINES / "checked.py"))
    pipeline.jobs["strict"] = replace(
        pipeline.jobs["strict"], checks={"strict_flights": (expect("dep_delay IS NOT"),)}
    )
    with pytest.raises(
        PipelineError, match=r"^job strict: check dep_delay IS NOT: invalid Spark SQL condition: "
    ):
        LotRunner(lineage, pipeline, spark)
