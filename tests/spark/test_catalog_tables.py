"""Catalog tables kept by the runner (docs/lots.md "A Spark catalog table"), on SQLite and
PostgreSQL: ``spark.table`` and Spark SQL read exactly the READY lots' current attempts, after a lot
is corrected and re-published twice and after another is reopened.

Spark's Hive support is a static setting of a session: the suite's one shared session (conftest)
has none and cannot get it, so the scenario runs in a process of its own with a Hive-enabled
session and an embedded Derby metastore in the test's folder (``support/hive_tables.py``)."""

from __future__ import annotations

import dataclasses
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from lotline.domain.errors import InvalidInput
from lotline.services import Lineage
from lotline.spark.pipeline import Pipeline, PipelineError
from lotline.spark.tables import declared_tables
from support import hive_tables
from support.hive_tables import HALF
from support.processes import separate_processes
from support.spark import PIPELINES, ingest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _partitions(lots: list[str]) -> list[str]:
    return [f"lot={lot}" for lot in lots]


# A Spark process with its own Hive metastore: its tables follow the lots, which the store's reads
# (contract-tested on both databases) give it; once, on SQLite (issue 43).
@pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)
@pytest.mark.slow
def test_the_table_reads_exactly_the_published_lots(backend_url: str, tmp_path: Path) -> None:
    with separate_processes().Pool(1) as pool:
        steps: dict[str, Any] = pool.apply(hive_tables.scenario, (backend_url, str(tmp_path)))
    assert steps["catalog"] == "hive"
    for step in ("published", "corrected", "reopened"):
        for dataset in ("hits", "hourly_hits"):
            answer = steps[step][dataset]
            assert answer["table"] == answer["read"], (step, dataset)
            assert answer["partitions"] == _partitions(answer["lots"]), (step, dataset)
    hits = steps["published"]["hits"]
    assert hits["lots"] == [HALF[0], HALF[1], HALF[3]]  # HALF[2] is empty: no partition
    assert len(hits["table"]) == 6 and steps["published"]["sql_a"] == 3
    corrected = steps["corrected"]["hits"]
    assert corrected["attempts"][HALF[0]] == 3
    assert [row[1] for row in corrected["table"] if row[-1] == HALF[0]] == ["/z"]  # only the third version
    assert steps["corrected"]["sql_a"] == 1
    hourly = steps["corrected"]["hourly_hits"]
    assert sorted((row[0], row[1]) for row in hourly["table"] if row[-1] == "20230101PT1H000") == [
        ("/a", 1),
        ("/z", 1),
    ]
    assert steps["raw_sync"] == {"added": 3, "moved": 0, "dropped": 0}  # the empty lot has none
    assert steps["raw"]["table"] == steps["raw"]["read"]
    assert [line for line, lot in steps["raw"]["table"] if lot == HALF[0]] == ["2023-01-01T00:05:00 /z 200"]
    # Reopened while no runner ran: still listed until a run starts and reconciles the table.
    assert steps["reopened_before_sync"] == _partitions([HALF[0], HALF[1], HALF[3]])
    # Its cascade reopened hour 001 of hourly_hits too; nothing else moved.
    dropped = {"added": 0, "moved": 0, "dropped": 1}
    assert steps["sync"] == {"hits": dropped, "hourly_hits": dropped}
    assert steps["reopened"]["hits"]["lots"] == [HALF[0], HALF[1]]
    assert steps["reopened"]["hourly_hits"]["lots"] == ["20230101PT1H000"]


def test_tables_only_on_datasets_the_pipeline_writes_whole() -> None:
    p = Pipeline("shop")
    with pytest.raises(PipelineError, match=re.escape("dataset raw: table 'a.b.c' is not a table name")):
        p.dataset("raw", format="text", interval="PT1H", table="a.b.c")
    raw = p.dataset("raw", format="text", interval="PT1H", table="shop.raw")
    parts = p.dataset("parts", format="parquet", interval="PT1H", table="parts")

    @p.job(inputs=[raw], output=parts, partition_by=["day"])
    def split(raw: Any) -> Any:
        return raw

    with pytest.raises(
        InvalidInput, match=re.escape("dataset raw: table shop.raw: only a dataset a job of the pipeline")
    ):
        declared_tables(p)
    p.datasets["raw"] = dataclasses.replace(p.datasets["raw"], table=None)  # the source without one
    with pytest.raises(InvalidInput, match="job split computes its lots in parts"):
        declared_tables(p)


# Once, on SQLite: the lot event log the worker follows is contract-tested on both databases
# (tests/api/test_lot_events_api.py).
@pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)
def test_a_worker_follows_the_lots_others_reopen(lineage: Lineage, spark: SparkSession) -> None:
    """On the suite's session (its in-memory catalog): an operator's invalidation, made while a
    worker runs, leaves the tables at its next round (``follow_tables``: the lot event log), and the
    worker's recomputation puts the lots back at their new attempts."""
    import lotline
    from lotline.spark.pipeline import load_pipeline
    from lotline.spark.registration import register
    from lotline.spark.run import run_pipeline
    from lotline.spark.runner import LotRunner
    from lotline.spark.worker import Worker

    tables = ("weblogs.hits", "weblogs.hourly_hits")
    for table in tables:
        spark.sql(f"DROP TABLE IF EXISTS {table}")
    try:
        pipeline = load_pipeline(str(PIPELINES / "tabled.py"))
        register(lineage, pipeline)
        runner = LotRunner(lineage, pipeline, spark)
        for lot, files in hive_tables.LOTS.items():
            ingest(lineage, "weblogs", "raw_logs", lot, files)
        run_pipeline(runner, pipeline.ordered_jobs(), worker="test")  # synced (nothing yet), then published

        def partitions(table: str) -> list[str]:
            return sorted(r[0] for r in spark.sql(f"SHOW PARTITIONS {table}").collect())

        def agrees(dataset: str) -> bool:
            read = lotline.read(spark, dataset, namespace="weblogs", lot_column="lot", lineage=lineage)
            table = spark.table(f"weblogs.{dataset}")
            return sorted(map(tuple, table.collect())) == sorted(
                map(tuple, read.select(*table.columns).collect())
            )

        assert partitions("weblogs.hits") == _partitions([HALF[0], HALF[1], HALF[3]])
        lineage.lots.invalidate("weblogs", "hits", HALF[3])  # its cascade: hour 001 of hourly_hits
        assert partitions("weblogs.hits") == _partitions([HALF[0], HALF[1], HALF[3]])  # not yet
        # The log since the run's start: the six lots it published (their partitions already right)
        # and the two reopened, which are among them.
        assert runner.follow_tables() == 6
        assert partitions("weblogs.hits") == _partitions([HALF[0], HALF[1]])
        assert partitions("weblogs.hourly_hits") == _partitions(["20230101PT1H000"])
        assert agrees("hits") and agrees("hourly_hits")
        assert runner.follow_tables() == 0  # nothing new in the log
        done = Worker(runner, pipeline.ordered_jobs(), name="w", poll=0.1).run(
            threading.Event(), idle_exit=0.5
        )
        assert done.done == 2  # the reopened lots, computed again
        assert partitions("weblogs.hits") == _partitions([HALF[0], HALF[1], HALF[3]])
        assert agrees("hits") and agrees("hourly_hits")
    finally:
        for table in tables:
            spark.sql(f"DROP TABLE IF EXISTS {table}")
