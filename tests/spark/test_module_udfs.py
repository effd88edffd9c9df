"""Issue 29, point 11: a Python UDF defined at module level of a pipeline file failed every lot
with ``ModuleNotFoundError: lotline_pipeline_<stem>`` on the executors, which cannot import the
module lotline loads the file as. On the session's ``local[1]`` (its Python workers are processes
of their own), SQLite and PostgreSQL (the venv test: SQLite); ``test_cluster.py`` runs such a UDF
on a standalone cluster."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from lotline.domain.coordination import Status
from lotline.services import Lineage
from lotline.spark.pipeline import load_pipeline
from lotline.spark.registration import register
from lotline.spark.run import run_pipeline
from lotline.spark.runner import LotRunner
from support.spark import PIPELINES, ingest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOT = "20230101PT30M000"


def test_module_level_udfs_run_on_the_executors(lineage: Lineage, spark: SparkSession) -> None:
    pipeline = load_pipeline(str(PIPELINES / "udfs.py"))
    register(lineage, pipeline)
    ingest(lineage, "udfs", "raw_logs", LOT, [["2023-01-01T00:01:00 /a 200", "2023-01-01T00:02:00 /b/ 404"]])
    summary = run_pipeline(LotRunner(lineage, pipeline, spark), pipeline.ordered_jobs(), worker="test")
    assert not summary.failed, summary
    (status,) = lineage.lots.status("udfs", job="name_pages")
    assert status.status is Status.READY, status
    manifest = lineage.manifests.current("udfs", "pages", LOT)
    assert manifest is not None
    rows = spark.read.parquet(*[o.uri for o in manifest.objects]).collect()
    assert sorted((r.page, r["class"]) for r in rows) == [("page:A", 2), ("page:B", 4)]


# The PATH Spark's Python workers get does not depend on the database; once, on SQLite (issue 43).
@pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)
@pytest.mark.slow
def test_the_venv_s_lotline_called_by_its_path_runs_udfs_without_the_venv_on_the_path(
    lineage: Lineage, spark: SparkSession, tmp_path: Path
) -> None:
    """The demo prints the venv's ``lotline`` by its full path for a shell that never activated the
    venv; Spark's Python workers then ran ``python3`` from that PATH, which has no pyspark."""
    register(lineage, load_pipeline(str(PIPELINES / "udfs.py")))  # its @udf needs this process's session
    ingest(lineage, "udfs", "raw_logs", LOT, [["2023-01-01T00:01:00 /a 200"]])
    shutil.copy(PIPELINES / "udfs.py", tmp_path / "udfs.py")
    # Without PYSPARK_PYTHON (the point); the suite's JVM options (PYSPARK_SUBMIT_ARGS) stay.
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LOTLINE_", "PYSPARK_")) or k == "PYSPARK_SUBMIT_ARGS"
    }
    environment.update(
        PATH=os.pathsep.join(p for p in ("/usr/bin", "/bin") if Path(p).is_dir()),
        LOTLINE_DB_URL=lineage.store.url,
        LOTLINE_WAREHOUSE=lineage.storage.root,
        LOTLINE_SPARK_MASTER="local[1]",
    )
    done = subprocess.run(
        [str(Path(sys.executable).parent / "lotline"), "run", "udfs.py"],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (status,) = lineage.lots.status("udfs", job="name_pages")
    assert status.status is Status.READY, status


@pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)  # the store is not the point
def test_a_udf_imports_modules_beside_the_pipeline_file(lineage: Lineage, spark: SparkSession) -> None:
    """``shipped/helped.py``'s UDF calls ``pagenames``, a module beside it that imports another,
    ``pathstyle``: installed nowhere, they travel with the UDF (Spark Connect: test_connect_edges.py)."""
    pipeline = load_pipeline(str(PIPELINES / "shipped" / "helped.py"))
    register(lineage, pipeline)
    ingest(
        lineage, "helped", "raw_logs", LOT, [["2023-01-01T00:01:00 /a 200", "2023-01-01T00:02:00 /b/ 404"]]
    )
    summary = run_pipeline(LotRunner(lineage, pipeline, spark), pipeline.ordered_jobs(), worker="test")
    assert not summary.failed, summary
    manifest = lineage.manifests.current("helped", "pages", LOT)
    assert manifest is not None
    rows = spark.read.parquet(*[o.uri for o in manifest.objects]).collect()
    assert sorted(r.page for r in rows) == ["page:A", "page:B"]
