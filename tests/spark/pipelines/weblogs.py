"""Web logs: lines ``<time> <url> <status>`` every half hour -> parsed hits -> good hits per url and hour."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lotline.spark.pipeline import Lot, Pipeline

p = Pipeline("weblogs")
raw = p.dataset("raw_logs", format="text", interval="PT30M")
hits = p.dataset("hits", format="parquet", interval="PT30M")
hourly = p.dataset("hourly_hits", format="parquet", interval="PT1H")


@p.job(inputs=[raw], output=hits)
def parse(raw_logs: DataFrame, lot: Lot) -> DataFrame:
    parts = F.split("value", " ")
    status = parts[2].cast("int")
    # A status of 599 marks a line that fails the first attempt of its lot (the failure tests).
    failing = (status == 599) & F.lit(lot.attempt == 1)
    return raw_logs.select(
        F.to_timestamp(parts[0]).alias("ts"),
        parts[1].alias("url"),
        F.when(failing, F.raise_error(F.lit("unparseable line"))).otherwise(status).alias("status"),
    )


@p.job(inputs=[hits], output=hourly)
def hourly_counts(hits: DataFrame, lot: Lot) -> DataFrame:
    good = hits.where(F.col("status") < 400)
    counted = good.groupBy("url").agg(F.count("*").alias("hits"))
    return counted.withColumn("hour", F.lit(lot.start).cast("timestamp"))
