"""``lotline run``: a broken pipeline gets one line and claims nothing; a run prints its summary and
exits non-zero when a lot is left failed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from lotline.cli.main import app
from lotline.domain.runs import RunState
from lotline.services import Lineage
from lotline.spark.pipeline import load_pipeline
from lotline.spark.registration import register
from lotline.storage.objects import Storage
from lotline.store.engine import Store
from support.polling import wait_until
from support.spark import PIPELINES, ingest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture
def cli(backend_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> CliRunner:
    monkeypatch.setenv("LOTLINE_DB_URL", backend_url)
    monkeypatch.setenv("LOTLINE_WAREHOUSE", str(tmp_path / "warehouse"))
    monkeypatch.chdir(tmp_path)
    return CliRunner()


def _lineage(backend_url: str, tmp_path: Path) -> Lineage:
    return Lineage.over(Store(backend_url), Storage(str(tmp_path / "warehouse")))


def test_a_broken_pipeline_is_one_line_and_claims_nothing(
    cli: CliRunner, backend_url: str, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.py"
    source = (PIPELINES / "weblogs.py").read_text()
    broken.write_text(source.replace("def hourly_counts(hits:", "def hourly_counts(hitz:"))
    result = cli.invoke(app, ["run", str(broken)])
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"lotline: error: pipeline {broken}: job hourly_counts: transform parameter hitz")
    with _lineage(backend_url, tmp_path) as lineage:
        assert lineage.lots.status(role=None) == []
        assert lineage.catalog.list_namespaces().items == []


def test_bad_options_are_one_line(cli: CliRunner) -> None:
    pipeline = str(PIPELINES / "weblogs.py")
    result = cli.invoke(app, ["run", pipeline, "--job", "nope"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "lotline: error: pipeline weblogs has no job nope; jobs: hourly_counts, parse."
    )
    result = cli.invoke(app, ["run", pipeline, "--from", "2023-01-01T00:00:00"])
    assert (result.exit_code, result.stderr.strip()) == (2, "lotline: error: --from and --to go together.")


def test_dry_run_lists_the_jobs_in_order(cli: CliRunner) -> None:
    result = cli.invoke(app, ["run", str(PIPELINES / "weblogs.py"), "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert [(j["job"], j["lotMapping"]) for j in plan["jobs"]] == [
        ("parse", None),
        ("hourly_counts", "PT30M->PT1H"),
    ]


@pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)
def test_run_prints_a_summary_and_fails_on_a_failed_lot(
    cli: CliRunner, backend_url: str, tmp_path: Path, spark: SparkSession
) -> None:
    pipeline = tmp_path / "weblogs.py"
    shutil.copyfile(PIPELINES / "weblogs.py", pipeline)
    with _lineage(backend_url, tmp_path) as lineage:
        # Nothing ingested yet: refused before anything is registered, saying what to run.
        refused = cli.invoke(app, ["run", str(pipeline), "--json"])
        assert refused.exit_code == 2 and "lotline ingest -n weblogs -d raw_logs" in refused.stderr
        lineage.catalog.upsert_namespace("weblogs")
        lineage.catalog.upsert_dataset("weblogs", "raw_logs")
        ingest(lineage, "weblogs", "raw_logs", "20230101PT30M000", [["2023-01-01T00:01:00 /a 200"]])
        ingest(lineage, "weblogs", "raw_logs", "20230101PT30M001", [["2023-01-01T00:31:00 /a 599"]])
        result = cli.invoke(app, ["run", str(pipeline), "--json"])
        assert result.exit_code == 1, result.output
        summary = json.loads(result.stdout)
        jobs = {j["job"]: (j["done"], j["failed"], j["skipped"]) for j in summary["jobs"]}
        assert jobs == {"parse": (1, 1, 0), "hourly_counts": (0, 0, 1)}
        [error] = summary["errors"]
        assert error.startswith("job parse lot 20230101PT30M001 (attempt 1): ")
        # The next run takes the failed lot again (attempt 2 passes) and then the hour it completes.
        result = cli.invoke(app, ["run", str(pipeline), "--json"])
        assert result.exit_code == 0, result.output
        jobs = {j["job"]: j["done"] for j in json.loads(result.stdout)["jobs"]}
        assert jobs == {"parse": 1, "hourly_counts": 1}


@pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)
def test_a_master_spark_cannot_use_is_one_line(backend_url: str, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "LOTLINE_DB_URL": backend_url,
        "LOTLINE_WAREHOUSE": str(tmp_path / "warehouse"),
        "LOTLINE_SPARK_MASTER": "nowhere://spark",
    }
    command = [sys.executable, "-m", "lotline", "run", str(PIPELINES / "weblogs.py")]
    done = subprocess.run(
        command, check=False, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("lotline: error: LOTLINE_SPARK_MASTER 'nowhere://spark' is not a Spark master")
    with _lineage(backend_url, tmp_path) as lineage:
        assert lineage.catalog.list_namespaces().items == []  # checked before anything was registered


def test_a_dataset_another_job_produces_is_one_line_and_claims_nothing(
    cli: CliRunner, backend_url: str, tmp_path: Path
) -> None:
    with _lineage(backend_url, tmp_path) as lineage:
        lineage.catalog.upsert_namespace("weblogs")
        for dataset in ("raw_logs", "hits"):
            lineage.catalog.upsert_dataset("weblogs", dataset)
        lineage.lots.register_job("weblogs", "legacy_parse", inputs=["raw_logs"], output="hits")
        ingest(lineage, "weblogs", "raw_logs", "20230101PT30M000", [["2023-01-01T00:01:00 /a 200"]])
        result = cli.invoke(app, ["run", str(PIPELINES / "weblogs.py")])
        assert result.exit_code == 2
        [line] = result.stderr.splitlines()
        assert line.startswith("lotline: error: ")
        assert "legacy_parse" in line
        assert [r.job for r in lineage.lots.status("weblogs")] == ["ingest_raw_logs"]


def test_lotline_logs_prints_what_a_lot_logged(
    cli: CliRunner, backend_url: str, tmp_path: Path, spark: SparkSession
) -> None:
    from lotline.spark.pipeline import load_pipeline
    from lotline.spark.registration import register
    from lotline.spark.run import run_pipeline
    from lotline.spark.runner import LotRunner
    from support.spark import ingest_files

    with _lineage(backend_url, tmp_path) as lineage:
        pipeline = load_pipeline(str(PIPELINES / "failing.py"))
        register(lineage, pipeline)
        ingest_files(lineage, "failing", "rows", "20230101PT1H000", {"rows.csv": ["1,2"]})
        run_pipeline(LotRunner(lineage, pipeline, spark), pipeline.select(["parse"]), worker="test")
        [row] = lineage.lots.status("failing", job="parse")
    result = cli.invoke(app, ["logs", str(row.run_id)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "… 6 earlier lines not kept"
    assert lines[1].endswith(" INFO step 6 of lot 20230101PT1H000")
    assert lines[-1].endswith(" WARNING about to write")
    assert len(lines) == 1001
    # Bad input: one line, exit 2.
    by_lot = cli.invoke(app, ["logs", "-n", "failing", "parse", "20230101PT1H000"])  # issue 39.9
    assert by_lot.exit_code == 0 and by_lot.stdout == result.stdout, by_lot.output
    bad = cli.invoke(app, ["logs", "not-a-run"])
    assert bad.exit_code == 2
    assert bad.stderr.strip().startswith(
        "lotline: error: 'not-a-run' is not a run id (a UUID); to name a lot"
    )
    no_run = cli.invoke(app, ["logs", "-n", "failing", "parse", "20230101PT1H009"])
    assert (no_run.exit_code, no_run.stderr.strip()) == (
        2,
        "lotline: error: job failing:parse has no run on lot 20230101PT1H009.",
    )
    unknown = cli.invoke(app, ["logs", "00000000-0000-0000-0000-000000000000"])
    assert unknown.exit_code == 2
    assert unknown.stderr.startswith("lotline: error: ")


@pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)
def test_a_failed_lot_is_one_line_on_stderr_and_verbose_brings_spark_s_log_back(
    backend_url: str, tmp_path: Path
) -> None:
    with _lineage(backend_url, tmp_path) as lineage:
        from lotline.spark.pipeline import load_pipeline
        from lotline.spark.registration import register

        register(lineage, load_pipeline(str(PIPELINES / "weblogs.py")))
        ingest(lineage, "weblogs", "raw_logs", "20230101PT30M000", [["2023-01-01T00:03:00 /x 599"]])
    env = {
        **os.environ,
        "LOTLINE_DB_URL": backend_url,
        "LOTLINE_WAREHOUSE": str(tmp_path / "warehouse"),
        "LOTLINE_SPARK_MASTER": "local[1]",
    }
    command = [sys.executable, "-m", "lotline", "run", str(PIPELINES / "weblogs.py")]
    done = subprocess.run(
        command, check=False, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 1, done.stderr
    # Spark's own lines are gone (the JVM's own module warning aside): the failure is said once.
    said = [line for line in done.stderr.splitlines() if line.strip() and "incubator modules" not in line]
    assert said == ["failed: job parse lot 20230101PT30M000 (attempt 1): unparseable line"], done.stderr
    assert "left failed: job parse lot 20230101PT30M000 (attempt 1): unparseable line" in done.stdout
    # --verbose: Spark's log from WARN up is back (the retry, attempt 2, passes).
    verbose = subprocess.run(
        [*command, "--verbose"], check=False, env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert verbose.returncode == 0, verbose.stderr
    assert " WARN " in verbose.stderr


#: A worker that claims two lots and is killed: one claim's lease runs out in a second, the other's
#: in an hour.
_KILLED_WORKER = """
import os, signal, sys
from datetime import timedelta
from lotline.services import Lineage
from lotline.store.engine import Store
lineage = Lineage.over(Store(sys.argv[1]))
for worker, lot, seconds in (("killed-worker", sys.argv[2], 1), ("other-worker", sys.argv[3], 3600)):
    assert lineage.lots.claim(worker, "weblogs", "parse", lot=lot, lease=timedelta(seconds=seconds))
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_run_reaps_a_killed_run_s_claims_and_reports_lots_another_worker_holds(
    cli: CliRunner, backend_url: str, tmp_path: Path, spark: SparkSession
) -> None:
    """Issue 29.3: the lot of a killed run (its lease ran out) is reaped and run; a lot that another
    worker's live claim holds is reported, not counted as nothing."""
    pipeline = str(PIPELINES / "weblogs.py")
    lots = ["20230101PT30M000", "20230101PT30M001"]
    with _lineage(backend_url, tmp_path) as lineage:
        lineage.catalog.upsert_namespace("weblogs")  # a run with nothing ingested is refused (issue 27 §3)
        lineage.catalog.upsert_dataset("weblogs", "raw_logs")
        for lot in lots:
            ingest(lineage, "weblogs", "raw_logs", lot, [["2023-01-01T00:01:00 /a 200"]])
        register(lineage, load_pipeline(pipeline))
        killed = subprocess.run(
            [sys.executable, "-c", _KILLED_WORKER, backend_url, *lots], check=False, capture_output=True
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        [expiring] = [s for s in lineage.lots.status("weblogs", job="parse") if s.owner == "killed-worker"]
        assert expiring.lease_expires_at is not None
        expires = expiring.lease_expires_at
        wait_until(
            lambda: datetime.now(UTC) > expires, timeout=60, what="the killed worker's lease to expire"
        )

        result = cli.invoke(app, ["run", pipeline, "--json"])
        assert result.exit_code == 0, result.output
        summary = json.loads(result.stdout)
        jobs = {j["job"]: (j["done"], j["failed"], j["held"]) for j in summary["jobs"]}
        assert jobs == {"parse": (1, 0, 1), "hourly_counts": (0, 0, 0)}
        [held] = summary["held"]
        assert held.startswith("job parse: 1 lot held by a live claim of worker other-worker (lease until ")
        runs = sorted(
            lineage.runs.list_runs("weblogs", "parse", lot=lots[0]).items, key=lambda r: r.created_at
        )
        assert [r.state for r in runs] == [RunState.FAILED, RunState.COMPLETED]
        assert (
            runs[0].facets["errorMessage"]["message"].startswith("the lease expired: worker killed-worker ")
        )

        result = cli.invoke(app, ["run", pipeline])  # the table says so too
        assert result.exit_code == 0, result.output
        assert "not taken: job parse: 1 lot held by a live claim of worker other-worker" in result.stdout
