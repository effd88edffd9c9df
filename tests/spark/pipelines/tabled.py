"""``pipelines/weblogs.py`` with catalog tables: hits and hourly_hits kept by the runner as
``weblogs.hits`` and ``weblogs.hourly_hits`` (tests/spark/test_catalog_tables.py)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lotline.spark.pipeline import Lot, Pipeline

p = Pipeline("weblogs")
raw = p.dataset("raw_logs", format="text", interval="PT30M")
hits = p.dataset("hits", format="parquet", interval="PT30M", table="weblogs.hits")
hourly = p.dataset("hourly_hits", format="parquet", interval="PT1H", table="weblogs.hourly_hits")


@p.job(inputs=[raw], output=hits)
def parse(raw_logs: DataFrame, lot: Lot) -> DataFrame:
    parts = F.split("value", " ")
    return raw_logs.select(
        F.to_timestamp(parts[0]).alias("ts"), parts[1].alias("url"), parts[2].cast("int").alias("status")
    )


@p.job(inputs=[hits], output=hourly)
def hourly_counts(hits: DataFrame, lot: Lot) -> DataFrame:
    counted = hits.where(F.col("status") < 400).groupBy("url").agg(F.count("*").alias("hits"))
    return counted.withColumn("hour", F.lit(lot.start).cast("timestamp"))
