"""The weblogs pipeline for the cluster test: ``parse`` works in parts (one per raw file, two at a
time), and the first part of the first lot hangs at the first attempt. It reads the status with a
Python UDF defined at module level, which the executors must get without importing this file.

The hang gives the test time to SIGKILL the worker holding the lot; the retry (attempt 2) runs at once.
"""

from __future__ import annotations

import time

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lotline.spark.pipeline import Lot, Pipeline

HANGING_LOT = "20230101PT30M000"
HANGING_PART = "part=00000"

p = Pipeline("cluster")
raw = p.dataset("raw_logs", format="text", interval="PT30M")
hits = p.dataset("hits", format="parquet", interval="PT30M")
hourly = p.dataset("hourly_hits", format="parquet", interval="PT1H")


def http_status(text: str) -> int:
    return int(text)


@p.job(inputs=[raw], output=hits, partition_by=1, parallel_parts=2)
def parse(raw_logs: DataFrame, lot: Lot) -> DataFrame:
    if lot.id == HANGING_LOT and lot.part == HANGING_PART and lot.attempt == 1:
        time.sleep(600)
    parts = F.split("value", " ")
    status = F.udf(http_status, "int")
    return raw_logs.select(parts[1].alias("url"), status(parts[2]).alias("status"))


@p.job(inputs=[hits], output=hourly)
def hourly_counts(hits: DataFrame, lot: Lot) -> DataFrame:
    counted = hits.where(F.col("status") < 400).groupBy("url").agg(F.count("*").alias("hits"))
    return counted.withColumn("hour", F.lit(lot.start).cast("timestamp"))
