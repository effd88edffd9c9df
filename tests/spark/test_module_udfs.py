"""Issue 29, point 11: a Python UDF defined at module level of a pipeline file failed every lot
with ``ModuleNotFoundError: lotline_pipeline_<stem>`` on the executors, which cannot import the
module lotline loads the file as. On the session's ``local[1]`` (its Python workers are processes
of their own), SQLite and PostgreSQL; ``test_cluster.py`` runs such a UDF on a standalone cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lotline.domain.coordination import Status
from lotline.services import Lineage
from lotline.spark.pipeline import load_pipeline
from lotline.spark.run import run_pipeline
from lotline.spark.runner import LotRunner, register
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
