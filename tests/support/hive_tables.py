"""The catalog-table scenario in a process of its own (``support.processes.separate_processes``):
Spark's Hive support is a static setting of a session, and the suite's one session has none, so
this process starts its session as ``lotline run`` does (``spark_session``), with
``LOTLINE_SPARK_CONF`` asking for Hive's catalog and an embedded Derby metastore in the test's
folder.
It runs ``pipelines/tabled.py`` with the real runner, corrects a lot twice, reopens another, and
returns what ``spark.table`` / Spark SQL and ``lotline.read`` answered at each step; the test
(tests/spark/test_catalog_tables.py) asserts on them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import lotline
from lotline.services import Lineage
from lotline.services.config import Settings, parse_spark_conf
from lotline.spark.pipeline import load_pipeline
from lotline.spark.registration import register
from lotline.spark.run import run_pipeline
from lotline.spark.runner import LotRunner
from lotline.spark.session import spark_session
from lotline.spark.tables import sync_table
from lotline.storage.objects import Storage
from lotline.store.engine import Store
from support.spark import PIPELINES, ingest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NS = "weblogs"
HALF = ["20230101PT30M000", "20230101PT30M001", "20230101PT30M002", "20230101PT30M003"]
LOTS = {
    HALF[0]: [["2023-01-01T00:01:00 /a 200", "2023-01-01T00:02:00 /b 200"], ["2023-01-01T00:20:00 /a 404"]],
    HALF[1]: [["2023-01-01T00:40:00 /a 200", "2023-01-01T00:50:00 /c 500"]],
    HALF[2]: [],  # empty: no partition
    HALF[3]: [["2023-01-01T01:45:00 /b 200"]],
}
#: What the sender sends again for HALF[0], twice.
CORRECTIONS = [
    [["2023-01-01T00:01:00 /a 200", "2023-01-01T00:02:00 /b 200"]],
    [["2023-01-01T00:05:00 /z 200"]],
]


def hive_conf(folder: Path) -> str:
    """``LOTLINE_SPARK_CONF`` for a Hive catalog with an embedded Derby metastore in ``folder``: what
    docs/lots.md tells a ``lotline run`` user to set (with a shared metastore's settings instead)."""
    return ",".join(
        [
            "spark.sql.catalogImplementation=hive",
            f"spark.sql.warehouse.dir={folder / 'spark-warehouse'}",
            "spark.hadoop.javax.jdo.option.ConnectionURL="
            f"jdbc:derby:;databaseName={folder / 'metastore_db'};create=true",
            f"spark.driver.extraJavaOptions=-Dderby.system.home={folder} "
            "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
            "spark.sql.shuffle.partitions=1",
            "spark.default.parallelism=1",
            "spark.ui.enabled=false",
        ]
    )


def _answers(spark: SparkSession, lineage: Lineage) -> dict[str, Any]:
    """Each table as Spark reads it, beside ``lotline.read`` (with the lot) and the lots the
    manifests list, for the test to compare."""
    found: dict[str, Any] = {}
    for dataset in ("hits", "hourly_hits"):
        table = spark.table(f"weblogs.{dataset}")
        read = lotline.read(spark, dataset, namespace=NS, lot_column="lot", lineage=lineage)
        published = lineage.reading.published(NS, dataset)
        found[dataset] = {
            "table": sorted(tuple(r) for r in table.collect()),
            "read": sorted(tuple(r) for r in read.select(*table.columns).collect()),
            "lots": sorted(m.lot for m in published.manifests if m.objects),
            "partitions": sorted(r[0] for r in spark.sql(f"SHOW PARTITIONS weblogs.{dataset}").collect()),
            "attempts": {m.lot: m.attempt for m in published.manifests},
        }
    [(count,)] = spark.sql("SELECT count(*) FROM weblogs.hits WHERE url = '/a'").collect()
    found["sql_a"] = count
    return found


def scenario(backend_url: str, folder: str) -> dict[str, Any]:
    root = Path(folder)
    settings = Settings(
        db_url=backend_url,
        warehouse=str(root / "ware house+1"),
        api_token=None,
        spark_master="local[1]",
        spark_conf=parse_spark_conf(hive_conf(root)),
    )
    lineage = Lineage.over(Store(backend_url), Storage(settings.warehouse))
    with spark_session(settings, "lotline-tests-hive") as spark:
        return _steps(spark, lineage)


def _steps(spark: SparkSession, lineage: Lineage) -> dict[str, Any]:
    try:
        pipeline = load_pipeline(str(PIPELINES / "tabled.py"))
        register(lineage, pipeline)
        runner = LotRunner(lineage, pipeline, spark)
        for lot, files in LOTS.items():
            ingest(lineage, NS, "raw_logs", lot, files)
        steps: dict[str, Any] = {"catalog": spark.conf.get("spark.sql.catalogImplementation")}
        run_pipeline(runner, pipeline.ordered_jobs(), worker="test")
        steps["published"] = _answers(spark, lineage)
        for files in CORRECTIONS:  # the sender corrects HALF[0]: a new version, reopened downstream
            lineage.lots.invalidate(NS, "raw_logs", HALF[0])
            ingest(lineage, NS, "raw_logs", HALF[0], files)
            run_pipeline(runner, pipeline.ordered_jobs(), worker="test")
        steps["corrected"] = _answers(spark, lineage)
        # A source whose lots are copied into attempt folders (ingest --copy; this stand-in too):
        # a table from any session with sync_table, here of text lots.
        steps["raw_sync"] = vars(sync_table(spark, lineage, NS, "raw_logs", "weblogs.raw_logs"))
        raw = lotline.read(spark, "raw_logs", namespace=NS, lot_column="lot", lineage=lineage)
        steps["raw"] = {
            "table": sorted(tuple(r) for r in spark.table("weblogs.raw_logs").collect()),
            "read": sorted(tuple(r) for r in raw.collect()),
        }
        # An operator reopens HALF[3] while no runner runs: the table lags until a run starts.
        lineage.lots.invalidate(NS, "hits", HALF[3])
        steps["reopened_before_sync"] = sorted(
            r[0] for r in spark.sql("SHOW PARTITIONS weblogs.hits").collect()
        )
        steps["sync"] = {d: vars(s) for d, s in runner.sync_tables().items()}
        steps["reopened"] = _answers(spark, lineage)
        return steps
    finally:
        lineage.close()
