"""The query listener's report of a write: files read and column lineage from ``WriteFacts.java``
(the plan's facts gathered in the JVM in one py4j call, compiled by Spark's Janino) and
``spark.plans`` (the walk over them), for the plan node kinds the walk treats apart: file and
in-memory leaves, a union by position, a window, a generator, a semi join, a plain read written
back, and an aggregate; with Spark's row counts and the written columns. The expected sources are
what the former walker (one py4j round trip per node and attribute) gave on the same plans. Real
Spark (the session's ``local[1]``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from lotline.domain.errors import InvalidInput
from lotline.spark.capture import WriteCapture, _compile_write_facts
from lotline.spark.plans import ColumnSource, FileRead, Transformation

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

IDENTITY, TRANSFORMATION, AGGREGATION = (
    Transformation.IDENTITY,
    Transformation.TRANSFORMATION,
    Transformation.AGGREGATION,
)


def test_the_listener_reports_reads_column_lineage_and_rows_of_each_plan_kind(
    spark: SparkSession, tmp_path: Path
) -> None:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    (tmp_path / "l.txt").write_text("2023 /a 200\n2023 /b 404\n")
    (tmp_path / "s.csv").write_text("status,label\n200,ok\n404,missing\n")
    text = FileRead((f"file:{tmp_path}/l.txt",), "text", (("value", "string"),))
    csv = FileRead((f"file:{tmp_path}/s.csv",), "csv", (("status", "string"), ("label", "string")))
    raw = spark.read.text(str(tmp_path / "l.txt"))
    statuses = spark.read.option("header", "true").csv(str(tmp_path / "s.csv"))
    parts = F.split("value", " ")
    hits = raw.select(parts[1].alias("url"), parts[2].alias("status"))
    memory = spark.createDataFrame([("200", "x")], "status string, extra string")
    capture = WriteCapture.for_session(spark)

    Columns = dict[str, set[tuple[int, str, Transformation]]]

    def report(name: str, frame: DataFrame) -> tuple[tuple[FileRead, ...], Columns, int]:
        location = (tmp_path / "out" / name).as_uri()
        frame.write.parquet(location)
        written = capture.written(location)
        assert written is not None and written.plan is not None and written.rows is not None
        columns = {
            column: {(s.read, s.field, s.transformation) for s in sources}
            for column, sources in written.plan.columns.items()
        }
        assert all(isinstance(s, ColumnSource) for sources in written.plan.columns.values() for s in sources)
        # The written columns come with the report, as the DataFrame's schema has them.
        assert written.fields == tuple((f.name, f.dataType.simpleString()) for f in frame.schema.fields)
        return written.plan.reads, columns, written.rows

    labelled = hits.join(statuses, "status").select("url", F.col("label").alias("outcome"), "status")
    counted = labelled.groupBy(F.upper("outcome").alias("kind")).agg(F.count("url").alias("hits"))
    assert report("aggregate", counted) == (
        (text, csv),
        {"kind": {(1, "label", TRANSFORMATION)}, "hits": {(0, "value", AGGREGATION)}},
        2,
    )
    # A union's columns come from every branch, matched by position.
    union = hits.union(statuses.select(F.col("label").alias("url"), "status"))
    assert report("union", union) == (
        (text, csv),
        {
            "url": {(0, "value", TRANSFORMATION), (1, "label", IDENTITY)},
            "status": {(0, "value", TRANSFORMATION), (1, "status", IDENTITY)},
        },
        4,
    )
    windowed = hits.withColumn("n", F.row_number().over(Window.partitionBy("status").orderBy("url")))
    windowed = windowed.withColumn("longest", F.max(F.length("url")).over(Window.partitionBy("status")))
    assert report("window", windowed)[1] == {
        "url": {(0, "value", TRANSFORMATION)},
        "status": {(0, "value", TRANSFORMATION)},
        "n": {(0, "value", TRANSFORMATION)},
        "longest": {(0, "value", AGGREGATION)},
    }
    # A generator's columns have no sources (as before); the column kept beside it has.
    exploded = raw.select(F.explode(F.split("value", " ")).alias("word"), "value")
    assert report("explode", exploded) == ((text,), {"word": set(), "value": {(0, "value", IDENTITY)}}, 6)
    # An in-memory leaf is no read; a semi join outputs its left side only.
    assert report("memory", hits.join(memory, "status", "left")) == (
        (text,),
        {"status": {(0, "value", TRANSFORMATION)}, "url": {(0, "value", TRANSFORMATION)}, "extra": set()},
        2,
    )
    assert report("semi", hits.join(memory, "status", "left_semi"))[1:] == (
        {"status": {(0, "value", TRANSFORMATION)}, "url": {(0, "value", TRANSFORMATION)}},
        1,
    )
    # A read written back as it is: the relation is the whole plan.
    assert report("raw", raw) == ((text,), {"value": {(0, "value", IDENTITY)}}, 2)


def test_a_helper_that_does_not_compile_is_refused_in_one_line(spark: SparkSession) -> None:
    with pytest.raises(InvalidInput) as refused:
        _compile_write_facts(spark, "public class LotlineWriteFacts { int broken( }")
    assert "WriteFacts.java did not compile" in refused.value.message
    assert "\n" not in refused.value.message
